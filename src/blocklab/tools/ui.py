"""`blocklab ui`: MLflow's own UI on blocklab's store, supervised so that nothing outlives the command.

The MLflow server runs in a process group of its own. Stopping the command with SIGTERM, SIGINT (Ctrl-C) or
SIGHUP (sent on as SIGTERM: the server would take SIGHUP for "reload") stops that whole group (the server and
its workers): whatever the server does with the signal, the command has exited, with nothing left running,
within STOP_SECONDS."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from blocklab.tools.processes import stop_within
from blocklab.tools.tracking.store import blocklab_runs, ensure_store, holdings, tracking_uri, ui_addresses

STOP_SECONDS = 10.0  # from a stopping signal to the exit, the server's whole group stopped


def serve(port: int, uri: str | None = None) -> int:
    """Serve until stopped; the exit status (128 + the signal's number when a signal stopped it)."""
    uri = uri or tracking_uri()
    ensure_store(uri)
    mlflow = shutil.which("mlflow") or str(Path(sys.executable).with_name("mlflow"))
    base = f"http://127.0.0.1:{port}"
    runs = blocklab_runs(uri)
    click.echo(f"MLflow UI for {uri}: {base}  (Ctrl-C to stop)")
    click.echo(f"  it holds {holdings(runs)}")
    # MLflow 3 opens an experiment on its GenAI overview: the addresses of what blocklab logged instead
    for label, address in ui_addresses(runs, base):
        click.echo(f"  {label}: {address}")
    server = subprocess.Popen([mlflow, "ui", "--backend-store-uri", uri, "--host", "127.0.0.1", "--port", str(port)],
                              start_new_session=True)
    stopping: list[int] = []

    def forward(signum, _frame) -> None:
        stopping.append(signum)
        try:
            os.killpg(server.pid, signal.SIGTERM if signum == signal.SIGHUP else signum)
        except ProcessLookupError:
            pass

    for stopping_signal in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(stopping_signal, forward)
    try:
        while server.poll() is None and not stopping:
            time.sleep(0.2)
    finally:
        stop_within(server, STOP_SECONDS)
    return 128 + stopping[0] if stopping else server.returncode

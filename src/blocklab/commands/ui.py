"""`blocklab ui`: MLflow's UI on blocklab's runs."""

from __future__ import annotations

from pathlib import Path

import click

from blocklab.options import params_option
from blocklab.params.schema import load_params
from blocklab.schedule.train_stages import RECORDS_DIR, RUNS_DIR


@click.command(short_help="MLflow's UI on blocklab's runs, with where to compare them.")
@click.option("--port", default=5000, show_default=True, help="Port on 127.0.0.1.")
@click.option("--tracking-uri", default=None, help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db).")
@click.option("--no-track", is_flag=True,
              help="Serve the store as it is, without first logging what it lacks of this workspace's runs.")
@params_option
def ui(port: int, tracking_uri: str | None, no_track: bool, params_file: str) -> None:
    """Serve the MLflow UI for blocklab's store on 127.0.0.1, and print what the store holds and, for each
    ablation, the addresses of its training runs and of its variants' parent runs compared side by side.

    In a blocklab workspace it first logs what the store lacks of the workspace's runs, as `blocklab track`
    does (after `make demo`, `dvc repro <one stage>` or on a fresh clone, DVC has not run the track stage), and
    each variant's model whose weights have arrived since it was logged.

    The MLflow server runs in a process group of its own. Stopping this command with SIGTERM, SIGINT
    (Ctrl-C) or SIGHUP (sent on as SIGTERM: the server would take SIGHUP for "reload") stops that whole
    group (the server and its workers): whatever the server does with the signal, the command has
    exited, with nothing left running, within 10 s."""
    from blocklab.tools.ui import serve

    if not no_track and Path(params_file).is_file() and RECORDS_DIR.is_dir():
        from blocklab.tools.tracking.log_runs import track_reported

        click.echo("First, what the store lacks of this workspace's runs (blocklab track):")
        track_reported(load_params(params_file), RECORDS_DIR, Path("reports"), tracking_uri, RUNS_DIR)
    raise SystemExit(serve(port, tracking_uri))

"""How fast `blocklab track` fills a team's MLflow server, against the local SQLite store, in one run: the records of
a project's runs (or of the ablations and maps named) logged into a fresh SQLite store, then into a fresh
`mlflow server` on a fresh PostgreSQL (docs/sharing.md's set-up, on 127.0.0.1) one variant at a time and
`IN_FLIGHT` at once (`--at-once 4`: only that way). It uses the tests' real servers (conftest.py), so it runs
where the tests run.

    python tests/bench_tracking.py PROJECT WORKDIR [--at-once N] [ABLATION_OR_MAP ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import free_port, postgresql_server, started, wait_until_healthy


def main(project: Path, work: Path, names: list[str], ways: list[int] | None = None) -> None:
    from blocklab.params.schema import load_params
    from blocklab.tools.tracking.log_runs import IN_FLIGHT, track

    os.chdir(project)
    params = load_params("params.yaml")
    if names:  # only these ablations and maps
        object.__setattr__(params, "ablations", {k: v for k, v in params.ablations.items() if k in names})
        object.__setattr__(params, "maps", {k: v for k, v in params.maps.items() if k in names})
    baselines = json.loads(Path("reports/metrics.json").read_text())["baselines"]
    seconds = {}

    def timed(name: str, uri: str, at_once: int) -> None:
        started_at = time.perf_counter()
        result = track(params, Path("reports/runs"), baselines, Path("reports/figures"), uri=uri,
                       weights_dir=Path("data/runs"), at_once=at_once)
        seconds[name] = time.perf_counter() - started_at
        print(f"{name}: {len(result['logged'])} runs and {result['variants']} parents logged, "
              f"{len(result['failed'])} failed, {seconds[name]:.1f} s", flush=True)

    timed("SQLite", f"sqlite:///{work / 'local.db'}", 1)
    for at_once in ways or (1, IN_FLIGHT):
        with postgresql_server() as database:
            port, mlflow = free_port(), Path(sys.executable).with_name("mlflow")
            with started([str(mlflow), "server", "--backend-store-uri", database, "--artifacts-destination",
                          str(work / f"artifacts{at_once}"), "--host", "127.0.0.1", "--port", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as server:
                wait_until_healthy(f"http://127.0.0.1:{port}", server)
                timed(f"server, {at_once} at once", f"http://127.0.0.1:{port}", at_once)
    for name, value in seconds.items():
        print(f"{name}: {value:.1f} s, {value / seconds['SQLite']:.2f}x the local store")


if __name__ == "__main__":
    rest = sys.argv[3:]
    ways = [int(rest.pop(rest.index("--at-once") + 1))] if "--at-once" in rest else None
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(), [n for n in rest if n != "--at-once"], ways)

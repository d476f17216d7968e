"""The default plan (or an ablation's stages) from a cold store in fresh clones, both ways: `dvc repro` stage by
stage against `blocklab prefetch` and `dvc repro`, on this machine's workers or a local Dask cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from blocklab.params.schema import load_params
from blocklab.schedule.train_stages import stage_name


# --- the default plan from a cold store: stage by stage against all at once ----------------------------

def make_repro_both_ways(workdir: Path, dask_workers: int = 0, targets: tuple[str, ...] = (), echo=print) -> dict:
    """The default plan (or `targets`, as `dvc repro TARGETS` narrows it) reproduced twice from nothing, in two
    fresh clones of this repository's HEAD under `workdir` (no run store, no DVC cache): `dvc repro` (each train
    stage trains its own runs, stage by stage) and `blocklab prefetch` then `dvc repro` (every run at once,
    longest first; the stages copy them). With `targets`, the corpus is fetched and encoded first in each
    clone, untimed; the whole plan's time includes it. With `dask_workers`, both train on a local Dask cluster
    of that many one-thread workers, started here. Returns the wall times, their ratio, the runs' training
    time as each way measured it, how busy the workers were, and whether both ways wrote the same metrics (each
    run's `metrics.json`, byte for byte). Busy is the plan's work over workers x wall, the work being the runs'
    training time as prefetch measured it, one run per worker: stage by stage on this machine's workers, a
    3-seed stage time-slices its seeds on 2 cores, which stretches each run's own time without doing more."""
    from contextlib import ExitStack

    root = Path.cwd()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1"}
    figures: dict = {"targets": list(targets)}
    metrics: dict[str, dict[str, bytes]] = {}
    with ExitStack() as stack:
        workers = os.cpu_count() or 1
        if dask_workers:
            env["BLOCKLAB_DASK_SCHEDULER"] = stack.enter_context(_local_dask_cluster(dask_workers))
            workers = dask_workers
        for way, commands in (("stage_by_stage", [["dvc", "repro", *targets]]),
                              ("prefetch", [["blocklab", "prefetch", *targets], ["dvc", "repro", *targets]])):
            clone = Path(workdir) / way
            subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
            if targets:
                subprocess.run(["dvc", "repro", "encode"], cwd=clone, env=env, check=True, stdout=subprocess.DEVNULL)
            echo(f"{way}: {' && '.join(' '.join(c) for c in commands)} in {clone}")
            started = time.perf_counter()
            for command in commands:
                subprocess.run(command, cwd=clone, env=env, check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - started
            timings = run_timings(clone / "data/runs")
            training = sum(t["seconds"] for t in timings.values() if "reused_from" not in t)
            metrics[way] = {str(path.relative_to(clone)): path.read_bytes()
                            for path in sorted((clone / "data/runs").glob("**/metrics.json"))}
            figures[way] = {"wall_seconds": round(wall, 1), "training_seconds": round(training, 1),
                            "runs": len(timings), "trained": sum("reused_from" not in t for t in timings.values())}
            echo(f"  {wall:.0f} s wall, {training:.0f} s of training as the runs measured it")
    work = figures["prefetch"]["training_seconds"]
    for way in ("stage_by_stage", "prefetch"):
        figures[way]["busy"] = round(work / (workers * figures[way]["wall_seconds"]), 3)
    figures["workers"] = workers
    figures["ratio"] = round(figures["stage_by_stage"]["wall_seconds"] / figures["prefetch"]["wall_seconds"], 3)
    figures["same_metrics"] = bool(metrics["prefetch"]) and metrics["stage_by_stage"] == metrics["prefetch"]
    return figures


def run_timings(runs_dir: Path) -> dict[str, dict]:
    """Every run's timing.json under a train stages' output folder, by the run's path (<ablation>/.../seed<k>)."""
    return {str(path.parent.relative_to(runs_dir)): json.loads(path.read_text())
            for path in sorted(runs_dir.glob("**/timing.json"))}


def _local_dask_cluster(workers: int):
    """A Dask scheduler and `workers` one-thread worker processes (without nannies) on 127.0.0.1, stopped on
    leaving; yields its address."""
    from contextlib import contextmanager

    from blocklab.tools.processes import stop_group

    @contextmanager
    def cluster():
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        address = f"tcp://127.0.0.1:{port}"
        dask = str(Path(sys.executable).with_name("dask"))
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True}
        started = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                     "--dashboard-address", ":0", "--no-show"], **quiet)]
        # No nanny: a nanny starts its worker with MALLOC_TRIM_THRESHOLD_=65536 (Dask's default pre-spawn
        # environment), with which a run trains 1.6x slower here (docs/performance.md).
        started += [subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--no-nanny", "--host",
                                      "127.0.0.1", "--dashboard-address", ":0"], **quiet) for _ in range(workers)]
        try:
            from distributed import Client

            with Client(address, timeout="60s", set_as_default=False) as client:
                client.wait_for_workers(workers, timeout=120)
            yield address
        finally:
            for process in reversed(started):
                stop_group(process.pid)
                process.wait()

    return cluster()


def shown(targets: tuple[str, ...], dask_workers: int, echo=click.echo) -> dict:
    """Both ways, run in a temporary folder and printed."""


    with tempfile.TemporaryDirectory(prefix="blocklab-both-ways-") as workdir:
        both = make_repro_both_ways(Path(workdir), dask_workers, targets, echo=click.echo)
    echo(f"stage by stage / all at once: {both['ratio']:.2f}x the wall time "
               f"({both['stage_by_stage']['wall_seconds']:.0f} s vs {both['prefetch']['wall_seconds']:.0f} s); "
               f"workers busy {both['stage_by_stage']['busy']:.0%} vs {both['prefetch']['busy']:.0%}; "
               f"metrics {'the same' if both['same_metrics'] else 'NOT the same'} both ways")
    return both


def shown_per_run(ablation: str, params_file: str, dask_workers: int, reference: dict, echo=click.echo) -> dict:
    """The ablation's train stage from a fresh clone both ways, per run against the lesson's loop."""
    load_params(params_file).all_runs_of(ablation)  # an unknown name: params' own error, with "did you mean"
    echo(f"\n{ablation}'s runs through DVC from a fresh clone, both ways")
    both = shown((stage_name(ablation),), dask_workers, echo)
    runs = both["stage_by_stage"]["runs"]
    per_run = {"reference_loop": reference["seconds"] / runs,
               **{way: both[way]["wall_seconds"] / runs for way in ("stage_by_stage", "prefetch")}}
    echo(f"\nseconds a run ({runs} runs): the lesson's loop {per_run['reference_loop']:.2f}, dvc repro stage by "
               f"stage {per_run['stage_by_stage']:.2f} ({per_run['reference_loop'] / per_run['stage_by_stage']:.2f}x), "
               f"prefetch + dvc repro {per_run['prefetch']:.2f} "
               f"({per_run['reference_loop'] / per_run['prefetch']:.2f}x)")
    return {**both, "seconds_per_run": per_run,
            "ratio_to_reference": {way: per_run["reference_loop"] / per_run[way]
                                   for way in ("stage_by_stage", "prefetch")}}

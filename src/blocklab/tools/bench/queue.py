"""A queued sweep's speed-up: `dvc exp run --queue` with `dvc queue start -j 1` against `-j 2`."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUEUE_SWEEP_PARAM = "ablations.residual.train.checkpoint_every"


def queue_sweep_values(count: int = 4) -> list[str]:
    """Values no earlier benchmark used: `dvc exp run` restores a stage from DVC's run cache when the same
    code, data and params ran before, and a restored stage would time nothing."""
    first = 1_000_000 + time.time_ns() // 1_000_000 % 1_000_000_000 * count
    return [str(first + i) for i in range(count)]


def queue_speedup(param: str, values: list[str], echo=print) -> dict:
    """Run the same kind of sweep through DVC's queue with one worker and with two, and compare.

    `values` are split in half: the first half is queued and run with `dvc queue start -j 1`, the second
    with `-j 2`; each value differs from every other and from earlier sweeps' (`queue_sweep_values`), so
    the run cache restores nothing the sweep should train. Runs land in a temporary MLflow store, and the
    experiments are removed afterwards."""
    half = len(values) // 2
    if half < 2:
        raise ValueError("give at least four values: two per queue setting")
    batches = {1: values[:half], 2: values[half:2 * half]}
    seconds: dict[int, float] = {}
    names: list[str] = []
    with tempfile.TemporaryDirectory() as store:
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{Path(store) / 'mlflow.db'}"}
        try:
            for jobs, batch in batches.items():
                for i, value in enumerate(batch):
                    name = f"bench-queue-j{jobs}-{i}"
                    names.append(name)
                    # `++`: set the key, adding it where params.yaml leaves it to the defaults
                    _dvc(env, "exp", "run", "--queue", "--name", name, "--set-param", f"++{param}={value}")
                started = time.perf_counter()
                _dvc(env, "queue", "start", "--jobs", str(jobs))
                _wait_for_queue(env, names[-len(batch):])
                seconds[jobs] = time.perf_counter() - started
                echo(f"  {len(batch)} experiments with -j {jobs}: {seconds[jobs]:.0f} s")
        finally:  # leave the user's queue and experiments as they were
            _dvc(env, "queue", "remove", *names, check=False)
            _dvc(env, "exp", "remove", *names, check=False)
    return {"param": param, "experiments_per_setting": half, "seconds_j1": seconds[1], "seconds_j2": seconds[2],
            "speedup": seconds[1] / seconds[2]}


def _dvc(env: dict, *args: str, check: bool = True) -> str:
    done = subprocess.run([sys.executable, "-m", "dvc", *args], env=env, capture_output=True, text=True)
    if check and done.returncode:
        raise RuntimeError(f"dvc {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


# What `dvc queue status` prints when it reads a task's result file while the worker is still writing it
# (treeverse/dvc#8014): the read, not the queue, failed.
_TORN_READ = ("Expecting value", "Extra data", "Unterminated string")


def queue_status(env: dict, cwd: Path | str | None = None, attempts: int = 5, pause: float = 1.0) -> str:
    """`dvc queue status`'s table. A read that meets a result file half-written is tried again, up to
    `attempts` times; any other failure, or a torn read every time, is an error with DVC's own words."""
    for attempt in range(attempts):
        done = subprocess.run([sys.executable, "-m", "dvc", "queue", "status"], cwd=cwd, env=env,
                              capture_output=True, text=True)
        if done.returncode == 0:
            return done.stdout
        if not any(torn in done.stderr for torn in _TORN_READ):
            break
        time.sleep(pause)
    raise RuntimeError(f"dvc queue status failed ({done.returncode}, attempt {attempt + 1} of {attempts}):\n"
                       f"{done.stdout}{done.stderr}")


def _wait_for_queue(env: dict, names: list[str], poll: float = 2.0) -> None:
    """Until every named experiment has succeeded; a failed one is an error."""
    while True:
        lines = [line for line in queue_status(env).splitlines() if any(n in line for n in names)]
        if any("Failed" in line for line in lines):
            raise RuntimeError("a queued experiment failed:\n" + "\n".join(lines))
        if len(lines) == len(names) and all("Success" in line for line in lines):
            return
        time.sleep(poll)


def shown(echo=print) -> dict:
    """The sweep over QUEUE_SWEEP_PARAM, run and printed."""
    param, values = QUEUE_SWEEP_PARAM, queue_sweep_values()
    echo(f"\nqueued sweep over {param} = {', '.join(values)}")
    sweep = queue_speedup(param, values, echo=echo)
    echo(f"dvc queue start -j 2 vs -j 1: {sweep['speedup']:.2f}x")
    return sweep

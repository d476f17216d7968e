"""What the pinned numeric path costs, pin by pin (`blocklab bench --numerics`).

One run (by default table A's post-norm, seed 0, as the plan trains it) is trained in a fresh process for each
numeric path: the machine's own choice (no pin), each pin alone, blocklab's three pins, and the pins with MKL's
COMPATIBLE branch (the same code on Intel and other CPUs) in place of its AVX2 one. The paths alternate, `repeats` times, so that a machine shared with
other work slows them alike; each prints its training time and whole-process time (start-up and imports
included), their medians' ratio to the unpinned path, and a digest of the final weights (equal digests: that
pin does not change this machine's bits for this run)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import click

from blocklab.run.numerics import PINS, PINS_ENV

# name -> the environment a path's process starts with (on top of this one's, blocklab's pins removed)
PATHS = {
    "unpinned": {PINS_ENV: "none"},
    "ATen avx2": {PINS_ENV: "ATEN_CPU_CAPABILITY"},
    "oneDNN AVX2": {PINS_ENV: "ONEDNN_MAX_CPU_ISA"},
    "MKL AVX2": {PINS_ENV: "MKL_CBWR"},
    "blocklab's pins": {},
    "pins, MKL COMPATIBLE": {PINS_ENV: "ATEN_CPU_CAPABILITY,ONEDNN_MAX_CPU_ISA", "MKL_CBWR": "COMPATIBLE"},
}


def _train_here(ablation: str, variant: str, seed: int, steps: int | None, encoded: str, params_file: str) -> dict:
    """In the child: train the run at one thread on whatever path this process has, and say what it took."""
    started = time.perf_counter()
    import dataclasses
    from pathlib import Path

    from blocklab.run.job import THREADS
    from blocklab.params.schema import load_params
    from blocklab.run.data import load_corpus
    from blocklab.run.numerics import numeric_path
    from blocklab.run.results import weights_digest
    from blocklab.run.threads import torch_threads
    from blocklab.run.training import train_run

    spec = load_params(params_file).spec(ablation, variant)
    train = spec.train if steps is None else dataclasses.replace(spec.train, steps=steps)
    corpus = load_corpus(Path(encoded))
    with torch_threads(THREADS):
        training = time.perf_counter()
        result = train_run(spec.model.canonical(), train, seed, corpus.train, corpus.val, corpus.vocab_size)
        trained = time.perf_counter()
    path = numeric_path()
    return {"train_seconds": trained - training, "process_seconds": trained - started,
            "digest": weights_digest(result.weights), "aten": path["aten"], "mkl": path["mkl"],
            "onednn": path["onednn"], "train_loss_last25": result.metrics["train_loss_last25"]}


def _environment(overrides: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in PINS and k != PINS_ENV}
    return {**env, **overrides}


def measure(ablation: str, variant: str, seed: int, steps: int | None, encoded: str, params_file: str,
            repeats: int = 3, paths: dict = PATHS) -> dict:
    """Every path `repeats` times, alternating; the medians and their ratios to the unpinned path."""
    args = [ablation, variant, str(seed), "" if steps is None else str(steps), encoded, params_file]
    runs: dict[str, list[dict]] = {name: [] for name in paths}
    with click.progressbar(length=repeats * len(paths), label="training in fresh processes", file=sys.stderr) as bar:
        for _ in range(repeats):
            for name, overrides in paths.items():
                started = time.perf_counter()
                out = subprocess.run([sys.executable, "-m", "blocklab.tools.bench.numerics", *args], text=True,
                                     capture_output=True, env=_environment(overrides), check=True)
                runs[name].append({**json.loads(out.stdout.splitlines()[-1]),
                                   "wall_seconds": time.perf_counter() - started})
                bar.update(1)
    base = {k: statistics.median(r[k] for r in runs["unpinned"]) for k in ("train_seconds", "wall_seconds")}
    rows = {}
    for name, measured in runs.items():
        digests = {r["digest"] for r in measured}
        train = statistics.median(r["train_seconds"] for r in measured)
        wall = statistics.median(r["wall_seconds"] for r in measured)
        rows[name] = {"train_seconds": round(train, 2), "wall_seconds": round(wall, 2),
                      "train_ratio": round(train / base["train_seconds"], 3),
                      "wall_ratio": round(wall / base["wall_seconds"], 3),
                      "digest": next(iter(digests))[:16] if len(digests) == 1 else "differs between repeats",
                      "aten": measured[0]["aten"], "mkl": measured[0]["mkl"], "onednn": measured[0]["onednn"],
                      "train_loss_last25": measured[0]["train_loss_last25"]}
    return {"run": f"{ablation}/{variant}/seed{seed}", "steps": steps, "repeats": repeats, "paths": rows}


def shown(ablation: str, variant: str, seed: int, steps: int | None, encoded: str, params_file: str,
          repeats: int, echo=click.echo) -> dict:
    """The measurement, printed as a table."""
    from blocklab.run.numerics import cpu_name

    figures = measure(ablation, variant, seed, steps, encoded, params_file, repeats)
    echo(f"\nthe numeric path's cost: {figures['run']}, {repeats} alternating repeats per path, on {cpu_name()}")
    echo(f"  {'path':<27}{'train s':>8}{'x':>7}{'process s':>10}{'x':>7}  {'ATen':<7}{'MKL':<16}{'oneDNN':<22}weights")
    for name, row in figures["paths"].items():
        echo(f"  {name:<27}{row['train_seconds']:>8.2f}{row['train_ratio']:>7.3f}{row['wall_seconds']:>10.2f}"
             f"{row['wall_ratio']:>7.3f}  {row['aten']:<7}{row['mkl']:<16}{row['onednn'][:21]:<22}{row['digest']}")
    return figures


if __name__ == "__main__":  # the child process of `measure`
    ablation, variant, seed, steps, encoded, params_file = sys.argv[1:]
    print(json.dumps(_train_here(ablation, variant, int(seed), int(steps) if steps else None, encoded, params_file)))

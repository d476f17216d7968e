"""`blocklab demo` (`make demo`): from a fresh clone to a checked finding in about two minutes.

It trains the lesson's own experiments - table A, the 6-layer TinyLM at lr 1e-2 with post-norm, pre-norm and
warmed-up post-norm (`placement`), and with and without residual connections (`residual`), every seed the
default plan has - through the real pipeline (`blocklab prefetch`, then `dvc repro` of those stages), so its
runs are the default plan's own: a later `make repro` copies them instead of training them again. Then it
checks the findings those runs decide, draws their figure, and shows what a collapsed and a healthy model write.
Its figures and verdicts go to data/demo/, beside the pipeline's outputs; reports/ keeps the committed run's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import click

from blocklab.errors import BlocklabError
from blocklab.schedule.train_stages import RUNS_DIR as RUNS, stage_name

ABLATIONS = ("placement", "residual")
STAGES = tuple(stage_name(name) for name in ABLATIONS)
OUT = Path("data/demo")
SAMPLED = {"placement/post": "post-norm at lr 1e-2, collapsed", "placement/pre": "pre-norm at lr 1e-2, healthy"}
SAMPLE_CHARACTERS = 160


def _tool(name: str) -> str:
    """The project environment's own `blocklab` or `dvc`, whatever PATH says."""
    return shutil.which(name, path=str(Path(sys.executable).parent)) or name


def _run(command: list[str], echo: Callable[..., None], quiet: bool = False) -> None:
    """Run a pipeline command, its output shown (or, `quiet`, shown only if it fails)."""
    echo(click.style(f"$ {' '.join(command)}", bold=True))
    done = subprocess.run([_tool(command[0]), *command[1:]], capture_output=quiet, text=True)
    if done.returncode:
        if quiet:
            echo(done.stdout + done.stderr)
        raise BlocklabError(f"`{' '.join(command)}` failed (exit status {done.returncode}): see its output above")


def run_demo(params_file: str = "params.yaml", echo: Callable[..., None] = click.secho) -> dict:
    """Train, check, draw and sample; returns what it found (verdicts, figure, samples, seconds)."""
    from blocklab.analysis.check import show, verdicts_over
    from blocklab.analysis.reference import load_reference
    from blocklab.analysis.runs import collect
    from blocklab.analysis.run_table import read_run_table

    started = time.perf_counter()
    table = read_run_table(params_file)
    runs = sum(len(table.ablations[a].runs()) for a in ABLATIONS)
    echo(f"blocklab demo: the lesson's table A ({', '.join(ABLATIONS)}: {runs} runs), trained through the pipeline, "
         f"then its findings checked\n", bold=True)
    _run(["blocklab", "prefetch", *STAGES, "--params", params_file], echo)
    _run(["dvc", "repro", *STAGES, "baselines"], echo, quiet=True)
    trained = time.perf_counter() - started

    baselines = json.loads(Path("reports/baselines.json").read_text())
    metrics, _ = collect(table, RUNS, baselines, only=set(ABLATIONS))
    checked = verdicts_over("claims.yaml", metrics, None, RUNS, "reference.yaml", table)
    decided = {cid: v for cid, v in checked.verdicts.items() if v["verdict"] != "not run yet"}
    echo(f"\nThe findings these {runs} runs decide ({len(decided)} of {len(checked.verdicts)} claims):\n", bold=True)
    show(checked, echo, not_run_details=False)

    from blocklab.analysis import plots

    OUT.mkdir(parents=True, exist_ok=True)
    figures = plots.ablation_outputs(table, "placement", RUNS, metrics, OUT, load_reference("reference.yaml"),
                                     checked.claims, checked.verdicts)
    figure = OUT / figures["loss"]
    (OUT / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    (OUT / "claims.json").write_text(json.dumps(decided, indent=1) + "\n")

    from blocklab.tools.run_weights import run_directory
    from blocklab.tools.sampling import SampleSettings, sample_run

    settings = SampleSettings(tokens=SAMPLE_CHARACTERS)  # nanoGPT's prompt, temperature, top-k and seed
    samples = {}
    echo(f"\nWhat two of these models write ({SAMPLE_CHARACTERS} characters each, nanoGPT's sampling, seed "
         f"{settings.seed}):", bold=True)
    for run, words in SAMPLED.items():
        directory = run_directory(table, RUNS, run)
        (samples[run],) = sample_run(directory, settings)
        loss = metrics["runs"][f"{run}/{directory.name}"]["val_loss"]
        echo(f"\n--- {run}/{directory.name} ({words}; validation loss {loss:.3f}) ---", fg="cyan")
        echo(samples[run].strip("\n"))

    seconds = time.perf_counter() - started
    echo(f"\nThe figure: {figure} (training loss of each variant; the dashed line is the unigram baseline, where "
         f"a collapsed model sits)", bold=True)
    echo(f"Done in {seconds:.0f} s ({trained:.0f} s of it in the pipeline: the corpus, training, DVC). Next:\n"
         f"  make repro        the whole plan, every finding (these runs are reused: they are in the run store)\n"
         f"  blocklab check    every finding's verdict on what has run here\n"
         f"  dvc exp run -S ablations.placement.train.lr=0.003    change a knob: README.md, "
         f"\"An experiment, step by step\"")
    return {"verdicts": decided, "figure": str(figure), "samples": samples, "seconds": seconds,
            "training_seconds": trained}

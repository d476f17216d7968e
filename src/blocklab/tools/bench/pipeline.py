"""The pipeline's overhead beside its training (a forced full `dvc repro`), and the training time of one plan
against another's."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import click

from blocklab.params.schema import Params, load_params
from blocklab.run.data import Corpus, load_corpus
from blocklab.schedule.train_stages import require_encoded
from blocklab.tools.bench.trainer import trainer_as_the_stage_runs_it


def stage_seconds(timings_file: Path) -> dict[str, float]:
    """Each variant's training time in `timings_file` (reports/timings.json): its seeds train side by side,
    so a stage's time is its slowest seed's."""
    by_variant: dict[str, float] = {}
    for key, timing in json.loads(Path(timings_file).read_text()).items():
        variant = key.rsplit("/", 1)[0]
        by_variant[variant] = max(by_variant.get(variant, 0.0), timing["seconds"])
    return by_variant


def pipeline_overhead(timings_file: Path, echo=print) -> dict:
    """Force a full `dvc repro`, time it, and compare with the training time measured inside the runs.

    A variant's seeds train side by side, so a stage's training time is its slowest seed's. The run store is
    emptied first, so that every run trains rather than being copied."""
    import shutil

    from blocklab.schedule.train_stages import STORE_DIR

    shutil.rmtree(STORE_DIR, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dvc", "repro", "--force", "--quiet"], check=True)
    wall = time.perf_counter() - started
    by_variant = stage_seconds(timings_file)
    training = sum(by_variant.values())
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dvc", "repro", "--quiet"], check=True)
    noop = time.perf_counter() - started
    return {"wall_seconds": wall, "training_seconds": training, "overhead_share": 1 - training / wall,
            "noop_repro_seconds": noop, "stages": len(by_variant)}


def plan_cost(old: Params, new: Params, corpus: Corpus, timings_file: Path, echo=print) -> dict:
    """What a change of plan costs in training time, old plan (every run trained) against new (a run equal to
    one an earlier stage trained is copied from the run store, blocklab.schedule.run_store), in the same run.

    A variant whose resolved settings (seeds included) both plans share, and that the new plan trains whole,
    costs the same under either: its time is read from this checkout's `timings_file` (a stage's time is
    its slowest seed's). Every other variant is trained as its stage trains it, old and new alternating so
    that the machine's drift falls on both; under the new plan only the seeds no earlier stage trained."""
    from dataclasses import replace

    old_specs = {(s.ablation, s.variant): s for s in old.specs()}
    by_variant = stage_seconds(timings_file)
    trained: set[tuple] = set()
    old_seconds = new_seconds = 0.0
    rows = []
    for spec in new.specs():
        before = old_specs.pop((spec.ablation, spec.variant), None)
        remaining = tuple(s for s in spec.seeds if (spec.model, spec.train, s) not in trained)
        trained.update((spec.model, spec.train, s) for s in spec.seeds)
        if before == spec and remaining == spec.seeds:
            old_cost = new_cost = by_variant[f"{spec.ablation}/{spec.variant}"]
        else:
            old_cost = 0.0 if before is None else (by_variant[f"{spec.ablation}/{spec.variant}"] if before == spec
                                                   else trainer_as_the_stage_runs_it(before, corpus)[0])
            new_cost = trainer_as_the_stage_runs_it(replace(spec, seeds=remaining), corpus)[0] if remaining else 0.0
            echo(f"{spec.ablation}/{spec.variant}: seeds {len(before.seeds) if before else 0} -> {len(spec.seeds)} "
                 f"({len(spec.seeds) - len(remaining)} copied): {old_cost:.1f} s -> {new_cost:.1f} s")
        old_seconds += old_cost
        new_seconds += new_cost
        rows.append({"variant": f"{spec.ablation}/{spec.variant}", "old_seconds": old_cost, "new_seconds": new_cost,
                     "seeds_copied": len(spec.seeds) - len(remaining)})
    for before in old_specs.values():  # variants the new plan dropped
        old_seconds += trainer_as_the_stage_runs_it(before, corpus)[0]
    return {"variants": rows, "old_seconds": old_seconds, "new_seconds": new_seconds,
            "ratio": new_seconds / old_seconds}


# A sweep that re-trains two one-seed stages per experiment (the residual ablation, 200 steps each) over a
# knob that changes no result (no run is long enough to checkpoint): every experiment does the same work,
# and all of them pass `blocklab check`, the pipeline's last stage, which a changed table-A setting fails.


TIMINGS = Path("reports/timings.json")


def shown_overhead(echo=click.echo) -> dict:
    """A forced full `dvc repro`, timed and printed beside the runs' training."""
    overhead = pipeline_overhead(TIMINGS)
    echo(f"\nfull dvc repro: {overhead['wall_seconds']:.0f} s wall, {overhead['training_seconds']:.0f} s training "
         f"-> overhead {overhead['overhead_share']:.0%}; no-op dvc repro {overhead['noop_repro_seconds']:.1f} s")
    return overhead


def shown_plan_cost(old_params: str, params_file: str, encoded: str, echo=click.echo) -> dict:
    """The plan in `params_file` against `old_params`: the training time of the variants that differ, printed."""
    echo(f"\ntraining time of the plan in {params_file} against {old_params}")
    require_encoded(encoded, "--plan-against trains on it")
    cost = plan_cost(load_params(old_params), load_params(params_file), load_corpus(encoded), TIMINGS, echo=echo)
    echo(f"training, every train stage one after the other: {cost['old_seconds']:.0f} s -> "
         f"{cost['new_seconds']:.0f} s = {cost['ratio']:.2f}x")
    return cost

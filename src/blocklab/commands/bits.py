"""`blocklab fingerprint` and `audit`: whether this machine computes the committed bits, and committed runs
retrained from nothing, compared bit for bit."""

from __future__ import annotations

from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.options import former_spelling, params_option
from blocklab.params.former import name_today
from blocklab.params.schema import load_params
from blocklab.schedule.train_stages import ENCODED


@click.command(short_help="Whether this machine computes the committed bits (~15 s).")
@click.option("--committed", default="reports/fingerprint.json", show_default=True,
              type=click.Path(dir_okay=False), help="The digests committed with the results.")
@reports_errors
def fingerprint(committed: str) -> None:
    """Print this machine's numeric family (the CPU, what ATen, MKL and oneDNN compute with, the pins, torch's
    and MKL's versions), train four short runs that use every kind of kernel the plan's runs use (on a fixed
    corpus: no download), print each one's weights digest, and compare them with the digests committed with
    the results.

    Exit status: 0 when this machine computes the committed bits; 1 when not, naming the first difference
    (another numeric family - an ARM Mac, a CPU of another vendor than the results' - says so)."""
    from blocklab.tools.fingerprint import reported

    raise SystemExit(reported(Path(committed), click.echo))


@click.command(short_help="Retrain committed runs from nothing; compare bit for bit.")
@click.option("--run", "run_keys", multiple=True, metavar="RUN",
              help="A run to audit, e.g. placement/post/seed1 (repeat the option for more).")
@former_spelling("--runs", "--run", "old_run_keys", multiple=True)
@click.option("--sample", "sample_size", type=int, default=None, metavar="N",
              help="Audit N runs chosen from HEAD's commit: one of every ablation and map first, each one of the "
                   "cheaper of its runs (default without --run: one per ablation and map).")
@click.option("--encoded", default=str(ENCODED), show_default=True, type=click.Path(file_okay=False),
              help="Encoded corpus (`dvc repro encode`).")
@click.option("--other-family", type=click.Choice(["fail", "skip"]), default="fail", show_default=True,
              help="On a machine of another numeric family than the committed results': exit 1, or 0 (CI's gate).")
@params_option
@reports_errors
def audit(run_keys: tuple[str, ...], old_run_keys: tuple[str, ...], sample_size: int | None, encoded: str,
          other_family: str, params_file: str) -> None:
    """Retrain committed runs from scratch (no run store, no checkpoint) and compare each with its committed
    record in reports/runs/<run>/: every file, byte for byte (metrics, loss curve, per-block diagnostics, the
    weights' digest, the text sample) and its settings. Different commits sample different runs.

    \b
    blocklab audit                               one run of every ablation and map (a few minutes)
    blocklab audit --run placement/post/seed1   that run
    blocklab audit --sample 40

    Exit status: 0 when every audited run reproduces; 1 naming each one that differs and how."""
    from blocklab.tools import audit as audits

    params = load_params(params_file)
    run_keys = tuple(name_today(key) for key in run_keys + old_run_keys)
    runs = audits.named(params, list(run_keys)) if run_keys else []
    if sample_size is not None or not run_keys:
        runs += audits.sample(params, sample_size, audits.commit_of())
    raise SystemExit(audits.reported(list(dict.fromkeys(runs)), Path(encoded), other_family, click.echo))

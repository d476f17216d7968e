"""`blocklab demo`: the way in (`make demo`)."""

from __future__ import annotations

import click

from blocklab.errors import reports_errors
from blocklab.options import params_option


@click.command(short_help="The lesson's table A trained, checked, drawn and sampled: ~2 min.")
@params_option
@reports_errors
def demo(params_file: str) -> None:
    """The way in (`make demo`): train the lesson's own experiments - table A's post-norm, pre-norm and
    warmed-up post-norm at lr 1e-2, and pre-norm with and without residuals, the 6-layer TinyLM, every seed
    the default plan has - through the pipeline (`blocklab prefetch`, then `dvc repro` of those stages);
    check the findings those runs decide; draw their figure; print what a collapsed and a healthy model
    write; say what to run next. About two minutes on two cores.

    Its runs are the default plan's own: a later `make repro` copies them instead of training them again.
    Its figure and verdicts go to data/demo/ (reports/ keeps the committed run's)."""
    from blocklab.tools.demo import run_demo

    run_demo(params_file)

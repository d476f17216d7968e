"""`blocklab check`: every claim's verdict on what is here (the DVC stage `check` runs it)."""

from __future__ import annotations

from pathlib import Path

import click

from blocklab.options import former_spelling, params_option
from blocklab.schedule.train_stages import RECORDS_DIR


@click.command(short_help="Every finding's verdict, on what has run here.")
@click.option("--claims", "claims_file", default="claims.yaml", show_default=True, type=click.Path(dir_okay=False),
              help="The claims to verify.")
@click.option("--metrics", "metrics_file", default="reports/metrics.json", show_default=True,
              type=click.Path(dir_okay=False), help="Metrics written by the `evaluate` stage.")
@click.option("--gradients", "gradients_file", default="reports/gradients.json", show_default=True,
              type=click.Path(dir_okay=False), help="Written by the `gradients` stage.")
@click.option("--records", "runs_dir", default=str(RECORDS_DIR), show_default=True, type=click.Path(file_okay=False),
              help="The runs' records (committed; or the train stages' outputs, data/runs), whose curves window(...) "
                   "and at(...) read.")
@former_spelling("--runs", "--records", "old_runs_dir", type=click.Path(file_okay=False))
@click.option("--reference", "reference_file", default="reference.yaml", show_default=True,
              type=click.Path(dir_okay=False), help="The published figures, with the corpus each was published on.")
@params_option
@click.option("--out", default="reports/claims.json", show_default=True, type=click.Path(dir_okay=False),
              help="Where to write the verdicts (when some claims have not run here, only if given).")
@click.option("--count-out", default=None, type=click.Path(dir_okay=False),
              help="Where to write how many findings and invariants hold, a DVC metric  "
                   "[default: claims_count.json beside --out]")
@click.option("--strict", is_flag=True,
              help="Exit 1 when a claim that ran, not marked known_to_fail, fails or is inconclusive, a finding "
                   "read after Holm's correction: it fails after it, or is inconclusive even on its own (CI checks "
                   "the defaults this way).")
@click.pass_context
def check(ctx: click.Context, claims_file: str, metrics_file: str, gradients_file: str, runs_dir: str,
          old_runs_dir: str | None, reference_file: str, params_file: str, out: str, count_out: str | None,
          strict: bool) -> None:
    """Verify every finding and invariant against what is here and record the verdicts.

    A finding depends on training results: over seed means it holds when its whole 95% interval lies on
    the claimed side (paired by seed where variants share their seeds; a tolerance is an equivalence
    test), fails when the interval lies wholly on the other side, and is inconclusive otherwise, with
    about how many seeds would decide it. An invariant is deterministic arithmetic or an untrained probe. A
    claim that reads a figure published on another corpus is not comparable, and counts for nothing.

    It works on what there is: a claim whose runs params.yaml plans but that have no record yet (an ablation
    added to params.yaml and not trained) is listed as "not run yet" with the command that would run them. A
    fresh clone checks every finding from the committed records, training nothing. The verdicts are then only printed, unless --out
    is given: reports/claims.json keeps the whole run's.

    A claim that fails is a finding, not a broken pipeline: it is listed first, in words, and the
    command exits 0 unless --strict. A claim marked `known_to_fail` (it does not reproduce here, and
    the mark says why) is listed apart and never fails --strict; one that holds again is reported.
    --strict reads the verdicts after Holm's correction across every finding a test decides: a finding that
    fails after it counts against the defaults; one decided on its own but not after it does not (among so many
    tests, one decided by chance is what the correction holds at 5%); one inconclusive even on its own counts.
    Exit status: 0 the verdicts are recorded; 1 with --strict, an unmarked claim that ran fails or is
    inconclusive so; 2 the claims file is malformed or names a run params.yaml does not plan (the pipeline
    is broken, which says nothing about the findings)."""
    from blocklab.analysis.check import BrokenPipeline, check_reports, recorded, show
    from blocklab.json_files import write_json

    try:
        checked = check_reports(claims_file, metrics_file, gradients_file, old_runs_dir or runs_dir, reference_file,
                               params_file)
    except BrokenPipeline as err:
        error = click.ClickException(str(err))
        error.exit_code = 2
        raise error from None
    show(checked)
    explicit = ctx.get_parameter_source("out") is not click.core.ParameterSource.DEFAULT
    if checked.not_run and not explicit:
        click.echo(f"not recorded: {out} keeps the whole run's verdicts (--out FILE records these)")
    else:
        write_json(Path(out), recorded(checked.verdicts), sort_keys=False)
        write_json(Path(count_out) if count_out else Path(out).with_name("claims_count.json"), checked.count,
                   sort_keys=False)
        click.echo(f"verdicts in {out}")
    if checked.failing and strict:
        raise SystemExit(1)

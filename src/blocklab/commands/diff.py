"""`blocklab diff`: which findings a change moved, between revisions or experiments."""

from __future__ import annotations

import click



@click.command(short_help="Which findings a change moved, between revisions or experiments.")
@click.argument("a", default="HEAD", required=False)
@click.argument("b", default=None, required=False)
@click.option("--markdown", is_flag=True, help="Print a Markdown report (for $GITHUB_STEP_SUMMARY or a PR comment).")
@click.option("--fail-on-change", is_flag=True, help="Exit 1 when a claim changed verdict (a gate a fork may choose).")
def diff(a: str, b: str | None, markdown: bool, fail_on_change: bool) -> None:
    """Which findings a change moved: the claims whose verdict differs between revision A (default HEAD) and
    B (default the workspace), in words with both verdicts and intervals; then the parameters that differ,
    the variants whose validation loss left A's 95% interval, and the figures that changed. A and B are git
    revisions or DVC experiment names (`dvc exp show` lists them), read through DVC's API.

    \b
    blocklab diff                      HEAD against the workspace (after `dvc repro` or `dvc exp run`)
    blocklab diff main my-experiment   a branch against a DVC experiment
    blocklab diff origin/main HEAD --markdown >> "$GITHUB_STEP_SUMMARY"

    Exit status: 0; 1 with --fail-on-change when a claim changed verdict; 2 when a revision cannot be
    compared (unknown, without reports/claims.json, or a workspace whose reports are out of date)."""
    from blocklab.analysis.diff import DiffError, as_markdown, as_text, compare, read_revision
    from blocklab.tools.pipeline_status import check_reproduced

    try:
        after = read_revision(b)
        if b is None:
            check_reproduced()
        result = compare(read_revision(a), after)
    except DiffError as err:
        click.echo(f"error: {err}", err=True)
        raise SystemExit(2) from None
    click.echo(as_markdown(result) if markdown else as_text(result), nl=not markdown)
    if fail_on_change and result.changed:
        raise SystemExit(1)

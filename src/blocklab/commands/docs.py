"""`blocklab docs`: the README's and docs' generated blocks written from reports/."""

from __future__ import annotations

from pathlib import Path

import click



@click.command(short_help="Write the README's and docs' results from reports/ (--check).")
@click.option("--check", "check_only", is_flag=True, help="Write nothing; exit 1 naming the documents whose generated "
                                                         "blocks differ from what reports/ says.")
@click.option("--walkthrough", is_flag=True, help="First capture the README walk-through's outputs anew: run its "
                                                  "experiment in this workspace (reproduced, committed, clean), "
                                                  "record what its commands print, then restore the workspace.")
def docs(check_only: bool, walkthrough: bool) -> None:
    """The numbers of README.md and docs/*.md that the pipeline produces live in generated blocks
    (`<!-- generated: KIND ARGS -->` ... `<!-- end: KIND -->`), written from the committed reports: the
    findings' verdicts, measured values and intervals, their count, the claims marked known to fail, samples,
    the size of the runs' records (reports/runs), and the walk-through's real outputs (docs/walkthrough/). Run it after `make repro` and commit with the
    reports; CI runs --check."""
    from blocklab.tools.docs import capture_walkthrough, stale, write

    root = Path.cwd()
    if check_only:
        found = stale(root)
        if found:
            click.echo(f"{', '.join(found)}: generated blocks differ from reports/ (run `blocklab docs`)", err=True)
            raise SystemExit(1)
        click.echo("every generated block matches reports/")
        return
    if walkthrough:
        capture_walkthrough(root, echo=click.echo)
    changed = write(root)
    click.echo(f"rewrote {', '.join(changed)}" if changed else "every generated block already matches reports/")

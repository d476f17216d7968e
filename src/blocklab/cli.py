"""The `blocklab` command: what a user runs besides `dvc repro`. Each subcommand lives in blocklab.commands and is
loaded when it is run or listed."""

from __future__ import annotations

import importlib

import click

# How `blocklab --help` groups the commands: what a user runs, then what a developer of blocklab runs.
SECTIONS = {"Try it": ["demo"],
            "Run the plan": ["prefetch", "params", "store"],
            "Look at the results": ["check", "diff", "sample", "track", "ui"],
            "Check the bits": ["fingerprint", "audit"],
            "For blocklab's developers": ["bench", "docs"]}

# Each command's home, `module:function`: a DVC stage that runs one depends on its module alone, so editing another
# command (its help text included) re-runs no stage.
COMMANDS = {"demo": "blocklab.commands.demo:demo",
            "params": "blocklab.commands.plan:show_params",
            "prefetch": "blocklab.commands.plan:prefetch",
            "store": "blocklab.commands.plan:store",
            "check": "blocklab.commands.check:check",
            "diff": "blocklab.commands.diff:diff",
            "sample": "blocklab.commands.sample:sample",
            "track": "blocklab.commands.track:track",
            "ui": "blocklab.commands.ui:ui",
            "fingerprint": "blocklab.commands.bits:fingerprint",
            "audit": "blocklab.commands.bits:audit",
            "bench": "blocklab.commands.bench:bench",
            "docs": "blocklab.commands.docs:docs"}


class SectionedGroup(click.Group):
    """A group whose commands load on use (COMMANDS) and whose help lists them under SECTIONS' headings."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in COMMANDS and name not in self.commands:
            module, attribute = COMMANDS[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return self.commands.get(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        commands = {name: self.get_command(ctx, name) for name in self.list_commands(ctx)}
        names = max(map(len, commands))  # one column width in every section
        sections = {**SECTIONS, "Other commands": sorted(set(commands) - {n for ns in SECTIONS.values() for n in ns})}
        for heading, names_in in sections.items():
            rows = [(name.ljust(names), commands[name].get_short_help_str(formatter.width - 6 - names))
                    for name in names_in if name in commands]
            if rows:
                with formatter.section(heading):
                    formatter.write_dl(rows)


@click.group(cls=SectionedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="blocklab", prog_name="blocklab", message="%(prog)s %(version)s")
def main() -> None:
    """Take a Transformer block apart: train a small character-level Transformer on Tiny Shakespeare with and
    without each ingredient, and check what each does against the published findings.

    \b
    make demo     the lesson's own experiments and their findings, in about two minutes
    make repro    the whole default plan (blocklab prefetch, then dvc repro)
    make repro-extended   and the extended plan (what does not fit the default one's budget)
    See README.md."""


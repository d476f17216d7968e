"""The `blocklab` command: what a user runs besides `dvc repro`."""

from __future__ import annotations

from dataclasses import asdict

import click

from blocklab.config import load_params
from blocklab.errors import reports_errors


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Ablate a character-level Transformer's block: see README.md. The pipeline runs with `dvc repro`."""


@main.command("params")
@click.option("--params", "params_file", default="params.yaml", show_default=True, help="Parameters file.")
@reports_errors
def show_params(params_file: str) -> None:
    """Validate params.yaml and print every run's fully resolved settings."""
    import pandas as pd

    rows = []
    for spec in load_params(params_file).specs():
        rows.append({"ablation": spec.ablation, "variant": spec.variant, "seeds": ",".join(map(str, spec.seeds)),
                     **asdict(spec.model), **asdict(spec.train)})
    click.echo(pd.DataFrame(rows).to_string(index=False))

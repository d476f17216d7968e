"""DVC stage `gradients`: how much gradient reaches the input through stacks of blocks (table B)."""

from pathlib import Path

import click

from blocklab.analysis.gradients import gradient_table
from blocklab.errors import reports_errors
from blocklab.options import params_option
from blocklab.params.schema import load_params
from blocklab.json_files import write_json


@click.command()
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@params_option
@reports_errors
def main(out: Path, params_file: str) -> None:
    params = load_params(params_file)
    g = params.gradients
    table = gradient_table(params.defaults.model, g.depths, g.placements, seed=g.seed)
    write_json(out, table)
    for key, by_depth in table.items():
        click.echo(f"{key:>13}: " + "  ".join(f"{d}: {v:.3g}" for d, v in by_depth.items()))


if __name__ == "__main__":
    main()

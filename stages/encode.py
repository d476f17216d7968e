"""DVC stage `encode`: character vocabulary, train/validation split, ids in compact binary files."""

from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.options import params_option
from blocklab.params.schema import load_params
from blocklab.run.data import encode


@click.command()
@click.argument("text", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@params_option
@reports_errors
def main(text: Path, out_dir: Path, params_file: str) -> None:
    params = load_params(params_file)
    meta = encode(text, out_dir, params.data.val_fraction)
    click.echo(f"{len(meta['chars'])} characters; {meta['n_train']:,} train / {meta['n_val']:,} validation")


if __name__ == "__main__":
    main()

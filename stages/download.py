"""DVC stage `download`: fetch the corpus named in params.yaml, verify its sha256, write it atomically.

Set BLOCKLAB_DATA_MIRROR to a local file or another URL to fetch from there instead."""

from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.options import params_option
from blocklab.params.schema import load_params
from blocklab.run.data import download


@click.command()
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@params_option
@reports_errors
def main(out: Path, params_file: str) -> None:
    params = load_params(params_file)
    source = download(params.data.url, params.data.sha256, out)
    click.echo(f"{source} -> {out} (sha256 verified)")


if __name__ == "__main__":
    main()

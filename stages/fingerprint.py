"""DVC stage `fingerprint`: the fingerprint runs' weights digests as this machine computes them, into
reports/fingerprint.json, committed with the results (`blocklab fingerprint` compares a machine with it)."""

from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.json_files import write_json
from blocklab.tools.fingerprint import digests, recorded


@click.command()
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@reports_errors
def main(out: Path) -> None:
    write_json(out, recorded(digests(echo=click.echo)), sort_keys=False)
    click.echo(f"-> {out}")


if __name__ == "__main__":
    main()

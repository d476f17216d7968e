"""DVC stage `weights`: every run's final weights' digest into reports/weights.json, gathered from the runs'
committed records (reports/runs/<run>/weights.sha256, written when each run trained): one file to compare a
machine's or a commit's weights with, read without the weights themselves."""

from pathlib import Path

import click

from blocklab.errors import BlocklabError, reports_errors
from blocklab.options import params_option
from blocklab.params.schema import load_params
from blocklab.json_files import write_json
from blocklab.run.results import DIGEST_FILE


@click.command()
@click.argument("records", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@params_option
@reports_errors
def main(records: Path, out: Path, params_file: str) -> None:
    params = load_params(params_file)
    digests = {}
    for spec, seed in params.runs():
        digest = records / spec.key(seed) / DIGEST_FILE
        if not digest.is_file():
            raise BlocklabError(f"{digest} does not exist: {spec.key(seed)} has no record yet (`dvc repro` trains it)")
        digests[spec.key(seed)] = digest.read_text().strip()
    write_json(out, digests)
    click.echo(f"{len(digests)} runs' weights digests -> {out}")


if __name__ == "__main__":
    main()

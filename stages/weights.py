"""DVC stage `weights`: a digest of every run's final weights into reports/weights.json, committed with the
results so that `blocklab audit` can tell a retrained run's weights from the committed run's, bit for bit."""

from pathlib import Path

import click
import torch

from blocklab.errors import reports_errors
from blocklab.options import params_option
from blocklab.run.config import load_params
from blocklab.run.results import MODEL_FILE, run_dir, weights_digest, write_json


@click.command()
@click.argument("runs_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@params_option
@reports_errors
def main(runs_dir: Path, out: Path, params_file: str) -> None:
    params = load_params(params_file)
    digests = {}
    for spec, seed in params.runs():
        saved = torch.load(run_dir(spec.directory(runs_dir / spec.ablation / spec.variant), seed) / MODEL_FILE,
                           map_location="cpu", weights_only=True)
        digests[spec.key(seed)] = weights_digest(saved["state_dict"])
    write_json(out, digests)
    click.echo(f"{len(digests)} runs' weights -> {out}")


if __name__ == "__main__":
    main()

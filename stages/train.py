"""DVC stage `train@<variant>` of one ablation: train every seed of that variant."""

from pathlib import Path

import click

from blocklab.config import load_params
from blocklab.data import load_corpus
from blocklab.errors import reports_errors
from blocklab.results import run_dir, write_run
from blocklab.training import train_run


@click.command()
@click.option("--ablation", required=True, help="Ablation name in params.yaml (ablations.<name>).")
@click.option("--variant", required=True, help="Variant name (ablations.<ablation>.variants.<name>).")
@click.argument("encoded", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--params", "params_file", default="params.yaml", show_default=True, help="Parameters file.")
@reports_errors
def main(ablation: str, variant: str, encoded: Path, out_dir: Path, params_file: str) -> None:
    spec = load_params(params_file).spec(ablation, variant)
    corpus = load_corpus(encoded)
    for seed in spec.seeds:
        result = train_run(
            spec.model, spec.train, seed, corpus.train, corpus.val, corpus.vocab_size, progress=spec.key(seed)
        )
        write_run(run_dir(out_dir, seed), result, tokens_per_step=spec.train.batch_size * spec.model.context)
        m = result.metrics
        click.echo(
            f"{spec.key(seed)}: train loss (last 25) {m['train_loss_last25']:.4f}, val loss {m['val_loss']:.4f}, "
            f"{m['steps'] / result.seconds:.1f} steps/s"
        )


if __name__ == "__main__":
    main()

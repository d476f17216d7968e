"""DVC stage `baselines`: the losses of models that ignore context (unigram, uniform)."""

from pathlib import Path

import click

from blocklab.analysis.baselines import unigram_baselines
from blocklab.errors import reports_errors
from blocklab.run.data import load_corpus
from blocklab.json_files import write_json


@click.command()
@click.argument("encoded", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@reports_errors
def main(encoded: Path, out: Path) -> None:
    corpus = load_corpus(encoded, as_tensors=False)  # no torch needed: it takes 2 s to import
    baselines = unigram_baselines(corpus.train, corpus.val, corpus.vocab_size)
    write_json(out, baselines)
    click.echo(", ".join(f"{k} {v:.4f}" for k, v in baselines.items()))


if __name__ == "__main__":
    main()

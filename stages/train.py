"""DVC stage `train_<ablation>@<variant>`: train every seed of that variant, side by side; a run that
another variant with equal settings already trained is copied from the run store instead."""

import json
from pathlib import Path

import click

from blocklab.config import load_params
from blocklab.data import load_corpus
from blocklab.errors import reports_errors
from blocklab.results import run_dir, write_run
from blocklab.run_store import STORE_DIR, RunStore
from blocklab.runner import train_seeds


@click.command()
@click.option("--ablation", required=True, help="Ablation name in params.yaml (ablations.<name>).")
@click.option("--variant", required=True, help="Variant name (ablations.<ablation>.variants.<name>).")
@click.argument("encoded", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--params", "params_file", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--checkpoints", "checkpoint_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where long runs keep checkpoints to resume from (outside DVC's outputs, which DVC "
                   "removes before a stage runs).")
@click.option("--store", "store_dir", type=click.Path(file_okay=False, path_type=Path), default=STORE_DIR,
              show_default=True, help="Runs kept by what determines their results (blocklab.run_store), outside "
                                      "DVC's outputs: a run with equal settings is copied, not trained again.")
@reports_errors
def main(ablation: str, variant: str, encoded: Path, out_dir: Path, params_file: str,
         checkpoint_dir: Path | None, store_dir: Path) -> None:
    spec = load_params(params_file).spec(ablation, variant)
    corpus = load_corpus(encoded)
    store = RunStore(store_dir)
    keys = store.keys(spec, encoded, [Path(__file__)])
    kept = {seed: origin for seed, key in keys.items() if (origin := store.origin(key)) is not None}
    for seed, origin in kept.items():
        directory = run_dir(out_dir, seed)
        store.copy_to(keys[seed], directory)
        timing = json.loads((directory / "timing.json").read_text())
        (directory / "timing.json").write_text(json.dumps({**timing, "reused_from": origin}, indent=2, sort_keys=True)
                                               + "\n")
        click.echo(f"{spec.key(seed)}: the same run as {origin} (equal settings): copied, not trained again")
    results = train_seeds(
        spec.model, spec.train, tuple(s for s in spec.seeds if s not in kept), corpus.train, corpus.val,
        corpus.vocab_size, label=f"{spec.ablation}/{spec.variant}", checkpoint_dir=checkpoint_dir,
    ) if len(kept) < len(spec.seeds) else {}
    for seed, result in results.items():
        write_run(run_dir(out_dir, seed), result, tokens_per_step=spec.train.batch_size * spec.model.context,
                  model=spec.model, chars=corpus.chars)
        store.put(keys[seed], run_dir(out_dir, seed), spec.key(seed))
        m = result.metrics
        click.echo(
            f"{spec.key(seed)}: train loss (last 25) {_loss(m['train_loss_last25'])}, val loss {_loss(m['val_loss'])}, "
            f"{m['steps'] / result.seconds:.1f} steps/s" + (f"; diverged at step {m['diverged_at_step']}"
                                                             if m["diverged"] else "")
        )


def _loss(value: float | None) -> str:
    """A diverged run records no finite loss: None."""
    return "none (not finite)" if value is None else f"{value:.4f}"


if __name__ == "__main__":
    main()

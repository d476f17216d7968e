"""DVC stages `train_<ablation>@<variant>` and `map_<map>@<variant>`: train every seed of an ablation's
variant, side by side, or every cell of a map's variant, every seed, in a pool of long-lived workers (or on
a Dask cluster: `$BLOCKLAB_DASK_SCHEDULER`, blocklab.cluster). A run that another stage with equal settings
already trained is copied from the run store instead."""

import os
import time
from pathlib import Path

import click

from blocklab.cluster import scheduler_address
from blocklab.config import load_params
from blocklab.data import load_corpus
from blocklab.errors import reports_errors
from blocklab.results import read_timing, run_dir, write_json, write_run
from blocklab.run_store import STORE_DIR, RunStore
from blocklab.runner import jobs_of, train_runs


@click.command()
@click.option("--ablation", required=True, help="Ablation or map name in params.yaml (ablations.<name>, maps.<name>).")
@click.option("--variant", required=True, help="Variant name (<ablations|maps>.<name>.variants.<variant>).")
@click.argument("encoded", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--params", "params_file", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--checkpoints", "checkpoint_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where long runs keep checkpoints to resume from (outside DVC's outputs, which DVC "
                   "removes before a stage runs).")
@click.option("--store", "store_dir", type=click.Path(file_okay=False, path_type=Path), default=STORE_DIR,
              show_default=True, help="Runs kept by what determines their results (blocklab.run_store), outside "
                                      "DVC's outputs: a run with equal settings is copied, not trained again.")
@click.option("--workers", type=int, default=None,
              help="Worker processes [default: one per run for an ablation's variant, one per core for a map's].")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A Dask scheduler (tcp://host:8786) to submit the runs to instead of the local workers "
                   "[default: $BLOCKLAB_DASK_SCHEDULER, else the local workers].")
@reports_errors
def main(ablation: str, variant: str, encoded: Path, out_dir: Path, params_file: str,
         checkpoint_dir: Path | None, store_dir: Path, workers: int | None, scheduler: str | None) -> None:
    started = time.time()
    params = load_params(params_file)
    specs = params.runs_of(ablation, variant)
    corpus = load_corpus(encoded)
    store = RunStore(store_dir)
    jobs, where = [], {}
    for spec in specs:
        keys = store.keys(spec, encoded, [Path(__file__)])
        trained = []
        for seed, key in keys.items():
            directory = run_dir(spec.directory(out_dir), seed)
            where[spec.key(seed)] = (directory, key, spec)
            origin = store.origin(key)
            if origin is None:
                trained.append(seed)
                continue
            store.copy_to(key, directory)
            write_json(directory / "timing.json", {**read_timing(directory), "reused_from": origin})
            click.echo(f"{spec.key(seed)}: the same run as {origin} (equal settings): copied, not trained again")
        jobs += jobs_of(spec, trained, checkpoint_dir)
    if workers is None and ablation in params.maps:
        workers = os.cpu_count() or 1
    if jobs:
        click.echo(f"{ablation}/{variant}: training {len(jobs)} of {len(where)} runs"
                   + (f" on {min(workers, len(jobs))} workers" if workers else ""))
    if (address := scheduler_address(scheduler)) and jobs:
        from blocklab.cluster import train_on_cluster  # only then: dask.distributed is an optional dependency

        results = train_on_cluster(jobs, corpus, address, echo=click.echo)
    else:
        results = train_runs(jobs, corpus, workers=workers)
    for key, result in results.items():
        directory, store_key, spec = where[key]
        write_run(directory, result, tokens_per_step=spec.train.batch_size * spec.model.context,
                  model=spec.model, chars=corpus.chars)
        store.put(store_key, directory, key)
        m = result.metrics
        click.echo(
            f"{key}: train loss (last 25) {_loss(m['train_loss_last25'])}, val loss {_loss(m['val_loss'])}, "
            f"{m['steps'] / result.seconds:.1f} steps/s" + (f"; diverged at step {m['diverged_at_step']}"
                                                             if m["diverged"] else "")
        )
    if results:
        training = sum(r.seconds for r in results.values())
        overhead = sum(r.cell_seconds - r.seconds for r in results.values())
        click.echo(f"{ablation}/{variant}: {len(results)} runs trained in {time.time() - started:.0f} s; per run, "
                   f"its wall time in a worker minus its training time: {overhead / training:.1%} of its training "
                   f"time on average")


def _loss(value: float | None) -> str:
    """A diverged run records no finite loss: None."""
    return "none (not finite)" if value is None else f"{value:.4f}"


if __name__ == "__main__":
    main()

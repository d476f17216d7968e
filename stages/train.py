"""DVC stages `train@<ablation>` and `map@<map>`: every seed of every variant of an ablation, or every cell of
every variant of a map, every seed, into the stage's output, copied from the run store, which trains first what it
lacks (`blocklab.schedule.plan.stage_runs`): side by side in one-thread workers, or on a Dask cluster
(`$BLOCKLAB_DASK_SCHEDULER`, blocklab.schedule.cluster). Each run's record (what git keeps of it) goes to
`--records`, reports/runs/<ablation>/ in dvc.yaml. `blocklab prefetch` trains the whole plan's runs ahead."""

import os
import time
from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.options import params_option
from blocklab.params.schema import load_params
from blocklab.run.data import load_corpus
from blocklab.schedule.cluster import scheduler_address
from blocklab.schedule.plan import planned_runs, stage_runs
from blocklab.schedule.run_store import RunKeys, RunStore
from blocklab.schedule.train_stages import STORE_DIR


@click.command()
@click.option("--ablation", required=True, help="Ablation or map name in params.yaml (ablations.<name>, maps.<name>).")
@click.option("--variant", default=None, help="Only this variant (<ablations|maps>.<name>.variants.<variant>) "
                                             "[default: every variant].")
@click.argument("encoded", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--records", "records_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where each run's record goes, in the layout of OUT_DIR (<variant>[/<cell>]/seed<k>): its "
                   "deterministic files and settings, committed to git (blocklab.run.results.write_record) "
                   "[default: none written].")
@params_option
@click.option("--checkpoints", "checkpoint_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where long runs keep checkpoints to resume from, a folder per variant (outside DVC's "
                   "outputs, which DVC removes before a stage runs).")
@click.option("--store", "store_dir", type=click.Path(file_okay=False, path_type=Path), default=STORE_DIR,
              show_default=True, help="Runs kept by what determines their results (blocklab.schedule.run_store), outside "
                                      "DVC's outputs: a run with equal settings is copied, not trained again.")
@click.option("--workers", type=int, default=None,
              help="Worker processes [default: one per core].")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A Dask scheduler (tcp://host:8786) to submit the runs to instead of the local workers "
                   "[default: $BLOCKLAB_DASK_SCHEDULER, else the local workers].")
@reports_errors
def main(ablation: str, variant: str | None, encoded: Path, out_dir: Path, records_dir: Path | None, params_file: str,
         checkpoint_dir: Path | None, store_dir: Path, workers: int | None, scheduler: str | None) -> None:
    started = time.time()
    params = load_params(params_file)
    specs = params.all_runs_of(ablation) if variant is None else params.runs_of(ablation, variant)
    runs = planned_runs(specs, RunKeys(encoded),
                        None if checkpoint_dir is None else lambda spec: checkpoint_dir / spec.variant)
    name = ablation if variant is None else f"{ablation}/{variant}"
    results = stage_runs(runs, lambda: load_corpus(encoded), RunStore(store_dir), out_dir, records=records_dir,
                         workers=workers or os.cpu_count() or 1, scheduler=scheduler_address(scheduler), name=name,
                         echo=click.echo)
    if results:
        training = sum(r.seconds for r in results.values())
        overhead = sum(r.wall_seconds - r.seconds for r in results.values())
        click.echo(f"{name}: {len(results)} of {len(runs)} runs trained in {time.time() - started:.0f} s; "
                   f"per run, its wall time in a worker minus its training time: {overhead / training:.1%} of its "
                   f"training time on average")


if __name__ == "__main__":
    main()

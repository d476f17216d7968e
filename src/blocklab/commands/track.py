"""`blocklab track`: every trained run into MLflow (the DVC stage `track` runs it)."""

from __future__ import annotations

from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.options import former_spelling, params_option
from blocklab.params.schema import load_params
from blocklab.schedule.train_stages import RECORDS_DIR, RUNS_DIR


@click.command(short_help="Log every trained run to MLflow (the pipeline's last stage).")
@click.option("--records", "runs_dir", default=str(RECORDS_DIR), show_default=True,
              type=click.Path(exists=True, file_okay=False),
              help="The runs' records (committed), whose numbers, curves and samples are logged.")
@former_spelling("--runs", "--records", "old_runs_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--weights", "weights_dir", default=str(RUNS_DIR), show_default=True, type=click.Path(file_okay=False),
              help="The train stages' outputs: each variant's seed-0 weights are logged as its model, and each "
                   "run's wall time, where they are on this machine.")
@click.option("--reports", "reports_dir", default="reports", show_default=True,
              type=click.Path(exists=True, file_okay=False), help="Where metrics.json and figures/ are.")
@click.option("--tracking-uri", default=None, help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db).")
@params_option
@reports_errors
def track(runs_dir: str, old_runs_dir: str | None, weights_dir: str, reports_dir: str, tracking_uri: str | None,
          params_file: str) -> None:
    """Log every trained run that MLflow does not have yet (never twice), each variant's seeds nested
    under a parent run holding their means; finish what an interrupted logging left incomplete.

    A store that is unreachable or errors costs no result: a warning names the runs that were not
    logged and the command still succeeds, so the pipeline completes; run it again later."""
    from blocklab.tools.tracking.log_runs import track_reported

    track_reported(load_params(params_file), Path(old_runs_dir or runs_dir), Path(reports_dir), tracking_uri,
                   Path(weights_dir))

"""Every run in one place: reports/metrics.json, reports/timings.json and reports/summary.md."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from blocklab.config import Params
from blocklab.reference import published_loss
from blocklab.results import read_metrics, read_timing, run_dir

COLLAPSE_MARGIN = 0.05  # a run "collapsed" when it ends this close to the unigram baseline


def collect(params: Params, runs_dir: Path, baselines: dict) -> tuple[dict, dict]:
    """(metrics, timings) for every run params.yaml defines, keyed `<ablation>/<variant>/seed<k>`."""
    runs, timings = {}, {}
    for spec in params.specs():
        variant_dir = Path(runs_dir) / spec.ablation / spec.variant
        for seed in spec.seeds:
            directory = run_dir(variant_dir, seed)
            if not (directory / "metrics.json").exists():
                raise FileNotFoundError(
                    f"run {spec.key(seed)} has no results in {directory}: run `dvc repro` to train it"
                )
            metrics = read_metrics(directory)
            metrics["collapsed"] = abs(metrics["train_loss_last25"] - baselines["unigram"]) <= COLLAPSE_MARGIN
            runs[spec.key(seed)] = metrics
            timings[spec.key(seed)] = read_timing(directory)
    return {"baselines": baselines, "runs": runs}, timings


def runs_table(metrics: dict, reference: dict) -> pd.DataFrame:
    rows = []
    for key, run in metrics["runs"].items():
        published = published_loss(reference, key)
        rows.append(
            {
                "run": key,
                "train loss (last 25)": run["train_loss_last25"],
                "published": published,
                "difference": None if published is None else run["train_loss_last25"] - published,
                "val loss": run["val_loss"],
                "max grad norm": run["max_grad_norm"],
                "parameters": run["n_params"],
                "steps": run["steps"],
                "collapsed": "yes" if run["collapsed"] else "no",
            }
        )
    return pd.DataFrame(rows)


def summary_markdown(metrics: dict, reference: dict) -> str:
    b = metrics["baselines"]
    table = runs_table(metrics, reference).to_markdown(index=False, floatfmt=".4f", missingval="–")
    return (
        "# blocklab: summary of every run\n\n"
        "Losses are cross-entropy in nats per character. A run is *collapsed* when its final training loss "
        f"is within {COLLAPSE_MARGIN} of the unigram baseline: it has learnt character frequencies and nothing more.\n\n"
        "| baseline | loss |\n|---|---|\n"
        f"| unigram entropy (train) | {b['unigram']:.4f} |\n"
        f"| unigram cross-entropy (validation) | {b['unigram_val']:.4f} |\n"
        f"| uniform, ln V | {b['uniform']:.4f} |\n\n"
        "## Runs\n\n"
        f"{table}\n\n"
        "*published*: the lesson's figure (reference.yaml) where there is one.\n"
    )

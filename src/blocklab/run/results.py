"""The files one trained run leaves behind (blocklab.records reads them back).

    <runs>/<ablation>/<variant>/seed<k>/curve.csv     step, loss, grad_norm, lr, val_loss, attn_logit_max,
                                                      logit_log_z (blocklab.run.diagnostics)
    <runs>/<ablation>/<variant>/seed<k>/layers.csv    step, layer (1-based), resid_rms, resid_max_abs, block_cos,
                                                      dyt_saturated: the residual stream after each block at each
                                                      evaluation step (blocklab.run.diagnostics)
    <runs>/<ablation>/<variant>/seed<k>/metrics.json  final metrics (deterministic)
    <runs>/<ablation>/<variant>/seed<k>/timing.json   wall seconds, tokens/s, start and end of its training,
                                                      the step it resumed from, its wall time in the runner
                                                      (`wall_seconds`, set-up included; not deterministic)
    <runs>/<ablation>/<variant>/seed<k>/weights.sha256 the final weights' digest (`weights_digest`)
    <runs>/<ablation>/<variant>/seed<k>/sample.txt    what the final model writes (blocklab.run.sample; no file if
                                                      its weights are not finite)
    <runs>/<ablation>/<variant>/seed<k>/model.pt      the final weights with what rebuilds the model: its resolved
                                                      settings and the vocabulary (`sampling.read_model`)

A map's runs lie one folder deeper, by cell: <runs>/<map>/<variant>/<cell>/seed<k>/.

A run's record (`write_record`) is what git keeps of it, under reports/runs/ in the same layout: every file
above that is deterministic (all but timing.json and model.pt), and its resolved settings (settings.json).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from blocklab.run.settings import ModelConfig

PROBES = ("attn_logit_max", "logit_log_z")  # blocklab.run.diagnostics: what a run records at its evaluation steps
CURVE_COLUMNS = ["step", "loss", "grad_norm", "lr", "val_loss", *PROBES]
# ... and per block (blocklab.run.diagnostics), in layers.csv, one row per evaluation step and block
LAYER_PROBES = ("resid_rms", "resid_max_abs", "block_cos", "dyt_saturated")
LAYER_COLUMNS = ["step", "layer", *LAYER_PROBES]
MODEL_FILE = "model.pt"
MODEL_FORMAT = 1
DIGEST_FILE = "weights.sha256"
SAMPLE_FILE = "sample.txt"
SETTINGS_FILE = "settings.json"
# What a run's record copies of its files (the run's own bytes), besides its settings.json
RECORDED_FILES = ("metrics.json", "curve.csv", "layers.csv", DIGEST_FILE, SAMPLE_FILE)


@dataclass
class RunResult:
    curve: list[dict]  # one row per step: step, loss, grad_norm, lr, val_loss (None between evaluations)
    metrics: dict
    seconds: float
    resumed_from: int = 0  # the step a run resumed from its checkpoint (0: trained from the start)
    weights: dict | None = None  # the final state dict, on the CPU
    started_at: float = 0.0  # wall-clock time (time.time()) when its training started and ended
    ended_at: float = 0.0
    wall_seconds: float = 0.0  # its wall time in `blocklab.schedule.pool`, set up and results included (set there)
    layers: list[dict] = field(default_factory=list)  # LAYER_COLUMNS: per evaluation step and block
    sample: str | None = None  # what the final model writes (blocklab.run.sample; None: weights not finite)


def weights_digest(weights: dict) -> str:
    """sha256 of a state dict's tensors, name by name in name order (with each one's shape and dtype): equal
    bits, equal digest. What `reports/weights.json`, `blocklab fingerprint` and `blocklab audit` compare."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        tensor = weights[name].detach().cpu().contiguous()
        digest.update(f"{name}\0{tuple(tensor.shape)}\0{tensor.dtype}\0".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def finite_or_none(value: float) -> float | None:
    """A value as a run's files record it: JSON has no NaN or infinity, so a value that is not finite is None."""
    return value if math.isfinite(value) else None


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_run(directory: Path, result: RunResult, tokens_per_step: int, model: "ModelConfig | None" = None,
              chars: list[str] | None = None) -> None:
    """The run's files; with `model` and `chars`, also its weights as a self-contained `model.pt`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # The csv module rather than pandas: the train stage runs 30 times and pandas costs each a second to import.
    with open(directory / "curve.csv", "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(CURVE_COLUMNS)
        writer.writerows([["" if row[c] is None else row[c] for c in CURVE_COLUMNS] for row in result.curve])
    with open(directory / "layers.csv", "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(LAYER_COLUMNS)
        writer.writerows([["" if row[c] is None else row[c] for c in LAYER_COLUMNS] for row in result.layers])
    _write_json(directory / "metrics.json", result.metrics)
    steps = result.metrics["steps"]
    _write_json(
        directory / "timing.json",
        {"seconds": result.seconds, "tokens_per_second": steps * tokens_per_step / result.seconds,
         "resumed_from_step": result.resumed_from, "started_at": result.started_at, "ended_at": result.ended_at,
         "wall_seconds": result.wall_seconds},
    )
    if result.weights is not None:
        (directory / DIGEST_FILE).write_text(weights_digest(result.weights) + "\n")
    if result.sample is not None:
        (directory / SAMPLE_FILE).write_text(result.sample, encoding="utf-8")
    if model is not None and result.weights is not None:
        import torch  # here: the stages that only read results need no torch

        torch.save({"format": MODEL_FORMAT, "model": asdict(model), "chars": list(chars), "state_dict": result.weights},
                   directory / MODEL_FILE)


def write_record(run_folder: Path, record: Path, settings: dict) -> None:
    """A run's record in `record`: its deterministic files, copied from `run_folder` as they are, and `settings`
    (its resolved settings) as settings.json. A file the run did not write (a sample) is not there either."""
    record = Path(record)
    record.mkdir(parents=True, exist_ok=True)
    for name in RECORDED_FILES:
        source = Path(run_folder) / name
        if source.exists():
            (record / name).write_bytes(source.read_bytes())
        else:
            (record / name).unlink(missing_ok=True)
    _write_json(record / SETTINGS_FILE, settings)

"""The lesson's training loop, one seed at a time, writing a per-step curve.

AdamW (PyTorch defaults but the learning rate), batches drawn from a seeded
`torch.Generator`, linear warmup, gradient norm measured after backward and before the step.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass as plain_dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import ConfigDict, NonNegativeInt, PositiveFloat, PositiveInt
from pydantic.dataclasses import dataclass
from tqdm import tqdm

from blocklab.errors import BlocklabError
from blocklab.model import ModelConfig, build_model, parameter_counts

LAST_STEPS = 25  # the lesson reports the mean training loss over the last 25 steps


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class TrainConfig:
    steps: PositiveInt = 250
    lr: PositiveFloat = 3e-3
    batch_size: PositiveInt = 32
    warmup: NonNegativeInt = 0
    eval_interval: PositiveInt = 50
    eval_windows: PositiveInt = 256
    device: Literal["auto", "cpu", "cuda"] = "auto"


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """The lesson's schedule: linear warmup over `warmup` steps, then constant."""
    if cfg.warmup == 0:
        return cfg.lr
    return cfg.lr * min(1.0, (step + 1) / cfg.warmup)


def validation_windows(val: torch.Tensor, context: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed sample of the validation split: `count` windows spread evenly over it."""
    last_start = len(val) - context - 1
    if last_start < 0:
        raise BlocklabError(
            f"the validation split has {len(val)} characters, fewer than context + 1 = {context + 1}: "
            f"lower model.context or raise data.val_fraction"
        )
    starts = torch.linspace(0, last_start, min(count, last_start + 1)).long().unique()
    offsets = torch.arange(context)
    return val[starts[:, None] + offsets], val[starts[:, None] + offsets + 1]


@plain_dataclass
class RunResult:
    curve: list[dict]  # one row per step: step, loss, grad_norm, lr, val_loss (None between evaluations)
    metrics: dict
    seconds: float


@torch.no_grad()
def evaluate_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 256) -> float:
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, len(x), batch):
        logits = model(x[i : i + batch])
        total += F.cross_entropy(logits.flatten(0, 1), y[i : i + batch].flatten(), reduction="sum").item()
    model.train(was_training)
    return total / y.numel()


def train_run(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    seed: int,
    train: torch.Tensor,
    val: torch.Tensor,
    vocab_size: int,
    progress: str | None = None,
) -> RunResult:
    """Train one seed exactly as the lesson does and return its curve and final metrics."""
    device = resolve_device(train_cfg.device)
    T, B = model_cfg.context, train_cfg.batch_size
    if len(train) < T + 2:
        raise BlocklabError(
            f"the training split has {len(train)} characters, fewer than context + 2 = {T + 2}: "
            f"lower model.context or use a longer corpus"
        )
    val_x, val_y = (t.to(device) for t in validation_windows(val, T, train_cfg.eval_windows))
    model = build_model(model_cfg, vocab_size, seed).to(device)
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(params, lr=train_cfg.lr)
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.arange(T + 1)
    train_dev = train.to(device)

    curve: list[dict] = []
    started = time.perf_counter()
    for step in tqdm(range(train_cfg.steps), desc=progress, disable=progress is None, leave=False):
        starts = torch.randint(0, len(train) - T - 1, (B,), generator=generator)
        chunk = train_dev[starts.to(device)[:, None] + offsets.to(device)]
        x, y = chunk[:, :-1], chunk[:, 1:]
        lr = learning_rate(train_cfg, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
        optimizer.step()
        row = {"step": step, "loss": loss.item(), "grad_norm": grad_norm.item(), "lr": lr, "val_loss": None}
        if (step + 1) % train_cfg.eval_interval == 0 or step + 1 == train_cfg.steps:
            row["val_loss"] = evaluate_loss(model, val_x, val_y)
        curve.append(row)
    seconds = time.perf_counter() - started

    losses = [r["loss"] for r in curve]
    last = losses[-LAST_STEPS:]
    metrics = {
        "train_loss_last25": sum(last) / len(last),
        "val_loss": curve[-1]["val_loss"],
        "max_grad_norm": max(r["grad_norm"] for r in curve),
        "n_params": parameter_counts(model)["total"],
        "steps": len(curve),
    }
    return RunResult(curve=curve, metrics=metrics, seconds=seconds)

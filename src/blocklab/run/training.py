"""The lesson's training loop, one seed at a time, writing a per-step curve.

AdamW (PyTorch defaults but the learning rate), batches drawn from a seeded
`torch.Generator`, linear warmup, gradient norm measured after backward and before the step.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from blocklab.errors import BlocklabError
from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.run.diagnostics import Diagnostics
from blocklab.run.model import build_model, learning_rate_multipliers, parameter_counts, training_flops_per_token
from blocklab.run.optimizer import AdamW
from blocklab.run.results import LAYER_PROBES, PROBES, RunResult, finite_or_none

LAST_STEPS = 25  # the lesson reports the mean training loss over the last 25 steps
EVAL_BATCH = 256  # validation windows per forward pass
CHECKPOINT_FORMAT = 6  # 3: blocklab.run.optimizer.AdamW's flat state; 4: with the loss at initialisation; 5: diagnostics;
# 6: per-block diagnostics


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


def loss_and_gradients(model: torch.nn.Module, params: list[torch.Tensor], chunk: torch.Tensor, z_loss: float = 0.0
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """The lesson's step up to the optimizer, on cleared gradients: loss on a (B, T + 1) chunk, the gradients,
    and their norm over all parameters (measured, not clipped). Returns the loss and the norm as 0-d tensors.
    With `z_loss`, the gradients are those of the loss plus PaLM's z_loss * mean(log Z)^2 (Z the softmax
    normaliser of the logits); the loss returned is the cross-entropy alone."""
    logits = model(chunk[:, :-1])
    loss = F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten())
    if z_loss:
        (loss + z_loss * torch.logsumexp(logits, dim=-1).pow(2).mean()).backward()
    else:
        loss.backward()
    return loss.detach(), torch.linalg.vector_norm(torch.stack(torch._foreach_norm([p.grad for p in params])))


@torch.no_grad()
def evaluate_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = EVAL_BATCH) -> float:
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, len(x), batch):
        logits = model(x[i : i + batch])
        total += F.cross_entropy(logits.flatten(0, 1), y[i : i + batch].flatten(), reduction="sum").item()
    model.train(was_training)
    return total / y.numel()


def validation_loss_and_probes(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor
                               ) -> tuple[float, dict[str, float | None], list[dict[str, float | None]]]:
    """The validation loss, and what `blocklab.run.diagnostics` reads of the model meanwhile: the whole model's
    probes and each block's."""
    with Diagnostics(model) as diagnostics:
        loss = evaluate_loss(model, x, y)
    return loss, diagnostics.values(), diagnostics.layers()


@torch.no_grad()
def random_batches_loss(model: torch.nn.Module, val: torch.Tensor, context: int, batch_size: int, batches: int,
                        seed: int) -> float:
    """The lecture's `estimate_loss`: the mean of the cross-entropies of `batches` random validation batches
    of (batch_size, context), drawn from their own seeded generator (the training batches' stream is left alone)."""
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    windows = torch.arange(context + 1)
    device = next(model.parameters()).device
    losses = []
    for _ in range(batches):
        starts = torch.randint(0, len(val) - context, (batch_size,), generator=generator)
        chunk = val[starts[:, None] + windows].to(device)
        logits = model(chunk[:, :-1])
        losses.append(F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten()).item())
    model.train(was_training)
    return sum(losses) / len(losses)


@torch.no_grad()
def skipped_block_losses(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[float | None]:
    """Per block, first to last, the validation loss with that block skipped: its output replaced by its input
    (Sun et al. 2025's fig. 1, "how much each layer still does"). Read after training; changes nothing."""
    losses = []
    for block in getattr(model, "blocks", []):
        handle = block.register_forward_hook(lambda _module, inputs, _output: inputs[0])
        try:
            losses.append(finite_or_none(evaluate_loss(model, x, y)))
        finally:
            handle.remove()
    return losses


@dataclass
class Record:
    """What a run has measured so far: each step's loss and gradient norm, and at each evaluation step the
    validation loss and the diagnostics; its validation loss before the first step; the step it starts from."""

    losses: torch.Tensor
    grad_norms: torch.Tensor
    val_losses: dict[int, float] = field(default_factory=dict)
    probes: dict[int, dict] = field(default_factory=dict)
    layers: dict[int, list[dict]] = field(default_factory=dict)
    init_loss: float = math.nan
    first: int = 0

    def evaluate(self, step: int, model: torch.nn.Module, val_x: torch.Tensor, val_y: torch.Tensor) -> None:
        self.val_losses[step], self.probes[step], self.layers[step] = validation_loss_and_probes(model, val_x, val_y)


def train_run(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    seed: int,
    train: torch.Tensor,
    val: torch.Tensor,
    vocab_size: int,
    progress: str | None = None,
    position: int = 0,
    checkpoint: Path | None = None,
    on_step: Callable[[int], None] | None = None,
) -> RunResult:
    """Train one seed exactly as the lesson does and return its curve and final metrics.

    With a `checkpoint` path, a run longer than `checkpoint_every` steps saves its whole state there
    every `checkpoint_every` steps and, started again after an interruption, resumes from it: the
    resumed curve is the uninterrupted one. The file is removed when the run completes.

    `on_step(step)` is called after each completed step. The thread count is the caller's (it decides
    how the results round): `blocklab.run.job` trains every CPU run with one. (Longer than this package's
    other functions on purpose: the lesson's set-up and loop read best whole, against its text.)"""
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
    optimizer = AdamW(params, lr=train_cfg.lr, weight_decay=train_cfg.weight_decay,
                      independent_weight_decay=train_cfg.independent_weight_decay,
                      lr_multipliers=learning_rate_multipliers(model))
    generator = torch.Generator().manual_seed(seed)  # batches are drawn on the CPU, as in the lesson
    windows = torch.arange(T + 1, device=device)
    train_on_device = train.to(device)
    steps = train_cfg.steps
    record = Record(torch.empty(steps, device=device), torch.empty(steps, device=device))
    saving = Checkpoints.of(checkpoint, train_cfg, {"model": asdict(model_cfg), "train": asdict(train_cfg),
                                                     "seed": seed, "vocab": vocab_size, "n_train": len(train)})
    if saving is not None:
        saving.resume(model, optimizer, generator, record)
    if record.first == 0:  # the validation loss at initialisation (no randomness drawn: the batches stay the lesson's)
        record.init_loss = evaluate_loss(model, val_x, val_y)
    diverged_at: int | None = None  # a loss or gradient norm that is NaN or infinite ends the run there
    started, started_at = time.perf_counter(), time.time()
    for step in tqdm(range(record.first, steps), desc=progress, disable=progress is None, position=position,
                     leave=False, initial=record.first, total=steps):
        starts = torch.randint(0, len(train) - T - 1, (B,), generator=generator).to(device)
        chunk = train_on_device[starts[:, None] + windows]  # (B, T + 1)
        optimizer.lr = learning_rate(train_cfg, step)
        optimizer.zero_grad()
        record.losses[step], record.grad_norms[step] = loss_and_gradients(model, params, chunk, train_cfg.z_loss)
        if not bool(torch.isfinite(record.losses[step]) & torch.isfinite(record.grad_norms[step])):
            diverged_at = step  # stop before the step: the weights stay finite for the last evaluation
            record.evaluate(step, model, val_x, val_y)
            break
        optimizer.step()
        if (step + 1) % train_cfg.eval_interval == 0 or step + 1 == steps:
            record.evaluate(step, model, val_x, val_y)
        if on_step is not None:
            on_step(step)
        if saving is not None and (step + 1) % saving.every == 0 and step + 1 < steps:
            saving.save(step + 1, model, optimizer, generator, record)
    seconds, ended_at = time.perf_counter() - started, time.time()
    if saving is not None:
        saving.remove()
    done = steps if diverged_at is None else diverged_at + 1
    metrics = final_metrics(model, record, done, diverged_at, device, tokens_per_step=B * T, context=T)
    if train_cfg.eval_batches:  # only then: the metrics of runs without it stay as they were
        metrics["val_loss_batches"] = finite_or_none(random_batches_loss(model, val, T, B, train_cfg.eval_batches,
                                                                         seed))
    if train_cfg.layer_skip:  # only then: the metrics of runs without it stay as they were
        whole = metrics["val_loss"]
        metrics["skip_loss_delta"] = [None if loss is None or whole is None else loss - whole
                                      for loss in skipped_block_losses(model, val_x, val_y)]
    weights = {name: tensor.detach().to("cpu", copy=True) for name, tensor in model.state_dict().items()}
    return RunResult(curve=curve_rows(record, train_cfg, done), metrics=metrics, layers=layer_rows(record),
                     seconds=seconds, resumed_from=record.first, weights=weights, started_at=started_at,
                     ended_at=ended_at)


def curve_rows(record: Record, train_cfg: TrainConfig, done: int) -> list[dict]:
    """One row per step trained: its loss, gradient norm and learning rate; at evaluation steps the validation
    loss and the diagnostics (None elsewhere)."""
    return [{"step": step, "loss": loss, "grad_norm": norm, "lr": learning_rate(train_cfg, step),
             "val_loss": record.val_losses.get(step), **record.probes.get(step, dict.fromkeys(PROBES))}
            for step, (loss, norm) in enumerate(zip(record.losses[:done].tolist(), record.grad_norms[:done].tolist()))]


def layer_rows(record: Record) -> list[dict]:
    """layers.csv: one row per evaluation step and block (1-based), the block's diagnostics."""
    return [{"step": step, "layer": layer, **values} for step in sorted(record.layers)
            for layer, values in enumerate(record.layers[step], start=1)]


def layer_metrics(layers: list[dict]) -> dict:
    """The last evaluation's per-block diagnostics as metrics.json holds them: a list per probe, first block
    first; the residual stream's growth from the first block to the last (RMS after the last / after the
    first); and the mean cos(input, output) of the deeper half of the blocks (Sun et al. 2025's near-identity
    deep blocks). None without blocks or a value."""
    lists = {name: [values[name] for values in layers] for name in LAYER_PROBES}
    rms, cos = lists["resid_rms"], lists["block_cos"][len(layers) // 2:]
    growth = rms[-1] / rms[0] if rms and rms[0] and rms[-1] is not None else None
    deep = sum(cos) / len(cos) if cos and None not in cos else None
    return {**lists, "resid_growth": growth, "block_cos_deep": deep}


def final_metrics(model: torch.nn.Module, record: Record, done: int, diverged_at: int | None,
                  device: torch.device, tokens_per_step: int, context: int) -> dict:
    """metrics.json: the lesson's figure (the mean training loss over the last 25 steps), the last evaluation,
    the largest gradient norm, the parameter counts, the training compute (the FLOPs of the `done` steps
    trained: blocklab.run.model.training_flops_per_token), and what produced the run. None where a diverged run
    has no finite value to report (JSON has no NaN)."""
    last = [x for x in record.losses[:done][-LAST_STEPS:].tolist() if math.isfinite(x)]
    finite_norms = [x for x in record.grad_norms[:done].tolist() if math.isfinite(x)]
    counts = parameter_counts(model)
    return {
        "train_loss_last25": sum(last) / len(last) if last else None,
        "val_loss": finite_or_none(record.val_losses[done - 1]),
        "val_loss_init": finite_or_none(record.init_loss),  # before the first step: what LR sensitivity caps a loss at
        **record.probes[done - 1],  # blocklab.run.diagnostics at the last evaluation
        **layer_metrics(record.layers[done - 1]),
        "max_grad_norm": max(finite_norms) if finite_norms else None,
        "diverged": diverged_at is not None,
        "diverged_at_step": diverged_at,
        "n_params": counts["total"],
        "n_params_non_embedding": counts["non_embedding"],
        "n_params_attention": counts["attention"],
        "n_params_feed_forward": counts["feed_forward"],
        "share_attention": counts["attention"] / counts["total"],
        "share_feed_forward": counts["feed_forward"] / counts["total"],
        "steps": done,
        "training_flops": training_flops_per_token(model, context) * tokens_per_step * done,
        # What produced it, so that a result restored from a shared DVC remote says where it came from.
        "device": device.type,
        "torch_version": torch.__version__,
    }


@dataclass
class Checkpoints:
    """A long run's checkpoint: its whole state saved every `every` steps, resumed from after an interruption
    when it was saved by a run of the same settings (`fingerprint`), removed when the run completes."""

    path: Path
    every: int
    fingerprint: dict

    @classmethod
    def of(cls, path: Path | None, train_cfg: TrainConfig, settings: dict) -> "Checkpoints | None":
        """Checkpoints for a run longer than `checkpoint_every` steps with somewhere to keep them, else None."""
        if path is None or not train_cfg.steps > train_cfg.checkpoint_every > 0:
            return None
        return cls(Path(path), train_cfg.checkpoint_every, {"format": CHECKPOINT_FORMAT, **settings})

    def resume(self, model: torch.nn.Module, optimizer: AdamW, generator: torch.Generator, record: Record) -> None:
        if not self.path.exists():
            return
        saved = load_checkpoint(self.path)
        if saved["fingerprint"] != self.fingerprint:  # another run's: ignored, and overwritten in time
            return
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        generator.set_state(saved["generator"])
        record.first = step = saved["step"]
        record.losses[:step], record.grad_norms[:step] = saved["losses"], saved["grad_norms"]
        record.val_losses.update(saved["val_losses"])
        record.probes.update(saved["probes"])
        record.layers.update(saved["layers"])
        record.init_loss = saved["val_loss_init"]

    def save(self, step: int, model: torch.nn.Module, optimizer: AdamW, generator: torch.Generator,
             record: Record) -> None:
        """The state after `step` steps, written atomically: an interruption while saving keeps the last one."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".part")
        torch.save({"fingerprint": self.fingerprint, "step": step, "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
                    "losses": record.losses[:step].clone(), "grad_norms": record.grad_norms[:step].clone(),
                    "val_losses": dict(record.val_losses), "val_loss_init": record.init_loss,
                    "probes": dict(record.probes), "layers": dict(record.layers)}, partial)
        os.replace(partial, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def load_checkpoint(path: Path) -> dict:
    """A checkpoint's state, on the CPU whatever device trains: the batch generator is a CPU generator
    (`Generator.set_state` takes only a CPU tensor), and `load_state_dict` copies the rest to the model's
    and the optimizer's own devices."""
    return torch.load(path, map_location="cpu", weights_only=False)

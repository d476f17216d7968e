"""The lesson's training loop, one seed at a time, writing a per-step curve.

AdamW (PyTorch defaults but the learning rate), batches drawn from a seeded
`torch.Generator`, linear warmup, gradient norm measured after backward and before the step.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import platform
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from blocklab.config import ModelConfig, TrainConfig
from blocklab.data import atomic_write
from blocklab.errors import BlocklabError
from blocklab.model import build_model, parameter_counts
from blocklab.rounding import sum_norm_gradients_like, torch_threads
from blocklab.optimizer import AdamW

OMP_WAIT_POLICY = "OMP_WAIT_POLICY"
CACHE_DIR_ENV = "BLOCKLAB_CACHE_DIR"
LAST_STEPS = 25  # the lesson reports the mean training loss over the last 25 steps
EVAL_BATCH = 256  # validation windows per forward pass
CHECKPOINT_FORMAT = 3  # 3: blocklab.optimizer.AdamW's flat state


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


@dataclass
class RunResult:
    curve: list[dict]  # one row per step: step, loss, grad_norm, lr, val_loss (None between evaluations)
    metrics: dict
    seconds: float


def loss_and_gradients(model: torch.nn.Module, params: list[torch.Tensor], chunk: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """The lesson's step up to the optimizer, on cleared gradients: loss on a (B, T + 1) chunk, the gradients,
    and their norm over all parameters (measured, not clipped). Returns the loss and the norm as 0-d tensors."""
    logits = model(chunk[:, :-1])
    loss = F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten())
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
    round_like_threads: int | None = None,
) -> RunResult:
    """Train one seed exactly as the lesson does and return its curve and final metrics.

    With a `checkpoint` path, a run longer than `checkpoint_every` steps saves its whole state there
    every `checkpoint_every` steps and, started again after an interruption, resumes from it: the
    resumed curve is the uninterrupted one. The file is removed when the run completes.

    With `round_like_threads`, a CPU run in a process with fewer threads sums what the thread count
    rounds (LayerNorm's weight and bias gradients) as that many threads would: its numbers are then those
    of a process with `round_like_threads` threads."""
    device = resolve_device(train_cfg.device)
    T, B = model_cfg.context, train_cfg.batch_size
    if len(train) < T + 2:
        raise BlocklabError(
            f"the training split has {len(train)} characters, fewer than context + 2 = {T + 2}: "
            f"lower model.context or use a longer corpus"
        )
    val_x, val_y = (t.to(device) for t in validation_windows(val, T, train_cfg.eval_windows))
    model = build_model(model_cfg, vocab_size, seed).to(device)
    if round_like_threads is not None and round_like_threads != torch.get_num_threads():
        sum_norm_gradients_like(model, round_like_threads)
    params = list(model.parameters())
    optimizer = AdamW(params, lr=train_cfg.lr)
    generator = torch.Generator().manual_seed(seed)  # batches are drawn on the CPU, as in the lesson
    windows = torch.arange(T + 1, device=device)
    train_on_device = train.to(device)

    steps = train_cfg.steps
    losses = torch.empty(steps, device=device)
    grad_norms = torch.empty(steps, device=device)
    val_losses: dict[int, float] = {}
    diverged_at: int | None = None  # a loss or gradient norm that is NaN or infinite ends the run there
    every = train_cfg.checkpoint_every if checkpoint is not None and steps > train_cfg.checkpoint_every > 0 else 0
    fingerprint = {"format": CHECKPOINT_FORMAT, "model": asdict(model_cfg), "train": asdict(train_cfg),
                   "seed": seed, "vocab": vocab_size, "n_train": len(train)}
    first = 0
    if every and Path(checkpoint).exists():
        saved = torch.load(checkpoint, map_location=device, weights_only=False)
        if saved["fingerprint"] == fingerprint:
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            generator.set_state(saved["generator"])
            first = saved["step"]
            losses[:first], grad_norms[:first] = saved["losses"], saved["grad_norms"]
            val_losses.update(saved["val_losses"])
    started = time.perf_counter()
    for step in tqdm(range(first, steps), desc=progress, disable=progress is None, position=position, leave=False,
                     initial=first, total=steps):
        starts = torch.randint(0, len(train) - T - 1, (B,), generator=generator).to(device)
        chunk = train_on_device[starts[:, None] + windows]  # (B, T + 1)
        optimizer.lr = learning_rate(train_cfg, step)
        optimizer.zero_grad()
        losses[step], grad_norms[step] = loss_and_gradients(model, params, chunk)
        if not bool(torch.isfinite(losses[step]) & torch.isfinite(grad_norms[step])):
            diverged_at = step  # stop before the step: the weights stay finite for the last evaluation
            val_losses[step] = evaluate_loss(model, val_x, val_y)
            break
        optimizer.step()
        if (step + 1) % train_cfg.eval_interval == 0 or step + 1 == steps:
            val_losses[step] = evaluate_loss(model, val_x, val_y)
        if every and (step + 1) % every == 0 and step + 1 < steps:
            _save_checkpoint(checkpoint, {
                "fingerprint": fingerprint, "step": step + 1, "model": model.state_dict(),
                "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
                "losses": losses[: step + 1].clone(), "grad_norms": grad_norms[: step + 1].clone(),
                "val_losses": dict(val_losses)})
    seconds = time.perf_counter() - started
    if every:
        Path(checkpoint).unlink(missing_ok=True)

    done = steps if diverged_at is None else diverged_at + 1
    curve = [
        {"step": step, "loss": loss, "grad_norm": norm, "lr": learning_rate(train_cfg, step),
         "val_loss": val_losses.get(step)}
        for step, (loss, norm) in enumerate(zip(losses[:done].tolist(), grad_norms[:done].tolist()))
    ]
    last = [x for x in losses[:done][-LAST_STEPS:].tolist() if math.isfinite(x)]
    finite_norms = [r["grad_norm"] for r in curve if math.isfinite(r["grad_norm"])]
    counts = parameter_counts(model)
    metrics = {
        # None where a diverged run has no finite value to report (JSON has no NaN).
        "train_loss_last25": sum(last) / len(last) if last else None,
        "val_loss": _finite_or_none(val_losses[done - 1]),
        "max_grad_norm": max(finite_norms) if finite_norms else None,
        "diverged": diverged_at is not None,
        "diverged_at_step": diverged_at,
        "n_params": counts["total"],
        "n_params_attention": counts["attention"],
        "n_params_feed_forward": counts["feed_forward"],
        "share_attention": counts["attention"] / counts["total"],
        "share_feed_forward": counts["feed_forward"] / counts["total"],
        "steps": done,
    }
    if train_cfg.eval_batches:  # only then: the metrics of runs without it stay as they were
        metrics["val_loss_batches"] = _finite_or_none(random_batches_loss(
            model, val, T, B, train_cfg.eval_batches, seed))
    return RunResult(curve=curve, metrics=metrics, seconds=seconds)


def _save_checkpoint(path: Path, state: dict) -> None:
    """Write atomically: an interruption while saving leaves the previous checkpoint intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    torch.save(state, partial)
    os.replace(partial, path)


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _train_job(job: dict) -> RunResult:
    torch.set_num_threads(job.pop("threads"))
    return train_run(**job)


def train_seeds(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    seeds: Sequence[int],
    train: torch.Tensor,
    val: torch.Tensor,
    vocab_size: int,
    label: str | None = None,
    checkpoint_dir: Path | None = None,
) -> dict[int, RunResult]:
    """Train every seed of one variant; on the CPU, side by side in worker processes.

    The workers share torch's default thread count (one thread each on two cores for two or more seeds),
    which keeps the cores busier than one multi-threaded run at a time: at this model's size a second
    thread adds little (150 steps of the lesson's 6-layer model took 10.7 s with two threads and 13.3 s
    with one, measured here one after the other). Each run still rounds as it would alone with the default
    thread count (see `blocklab.rounding`), so its numbers are bitwise those it gets alone, and those of the
    lesson's plain loop. Workers wait for OpenMP work passively: with the default spinning, two
    two-threaded processes on two cores crawl (1.7 steps/s each instead of 10.8, measured here)."""
    threads = torch.get_num_threads()
    jobs = [
        dict(model_cfg=model_cfg, train_cfg=train_cfg, seed=seed, train=train, val=val, vocab_size=vocab_size,
             progress=None if label is None else f"{label}/seed{seed}", position=i,
             checkpoint=None if checkpoint_dir is None else Path(checkpoint_dir) / f"seed{seed}.pt",
             round_like_threads=threads)
        for i, seed in enumerate(seeds)
    ]
    if len(jobs) == 1 or resolve_device(train_cfg.device).type != "cpu":
        return {job["seed"]: train_run(**job) for job in jobs}
    share = threads_per_worker(model_cfg, train_cfg, vocab_size, len(jobs))
    if share == threads > 1:
        tqdm.write(f"{label or 'these runs'}: with one thread this model would round otherwise than with {threads} "
                   f"(a kernel sums by thread where blocklab.rounding has no twin for it), so each of its "
                   f"{len(jobs)} seeds trains with all {threads} threads", file=sys.stderr)
    for job in jobs:
        job["threads"] = share
    # OpenMP reads its wait policy once, when torch loads: a process that already waits passively (the
    # train stage sets it before importing torch) can fork cheap workers; any other starts fresh ones.
    context = multiprocessing.get_context("fork" if waits_passively() else "spawn")
    with passive_openmp(), ProcessPoolExecutor(max_workers=len(jobs), mp_context=context) as pool:
        return dict(zip(seeds, pool.map(_train_job, jobs)))


def threads_per_worker(model_cfg: ModelConfig, train_cfg: TrainConfig, vocab_size: int, workers: int) -> int:
    """Threads for each of `workers` side-by-side runs: a share of torch's default, but only where one
    training step and one evaluation of this model come out bitwise equal with the share (norm gradients
    summed as the default would) and with the default; otherwise the default. Whether a matrix product's
    rounding depends on the thread count is up to the BLAS and the shapes: here it does not at the lesson's
    sizes but does for a vocabulary of 11, so every model shape is checked (0.6 s) and the verdict kept in
    the user's cache, keyed by everything it depends on, for the next stage with the same shapes."""
    threads = torch.get_num_threads()
    share = max(1, threads // workers)
    if share == threads:
        return threads
    checked = {"threads": threads, "share": share, "model": asdict(model_cfg), "batch_size": train_cfg.batch_size,
               "eval_rows": min(train_cfg.eval_windows, EVAL_BATCH), "vocab": vocab_size}
    key = hashlib.sha256(json.dumps([_machine(), checked], sort_keys=True).encode()).hexdigest()
    checks = _read_thread_checks()
    if key not in checks:
        alone = _one_step_and_evaluation(model_cfg, train_cfg, vocab_size, threads, round_like_threads=threads)
        shared = _one_step_and_evaluation(model_cfg, train_cfg, vocab_size, share, round_like_threads=threads)
        checks[key] = {"rounds_alike": all(torch.equal(a, b) for a, b in zip(alone, shared)), "checked": checked}
        _write_thread_checks(checks)
    return share if checks[key]["rounds_alike"] else threads


def thread_checks_file() -> Path:
    """Where verdicts of `threads_per_worker` are kept: $BLOCKLAB_CACHE_DIR, else the user's cache folder."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "blocklab"
    return Path(os.environ.get(CACHE_DIR_ENV) or default) / "thread_checks.json"


def _machine() -> dict:
    """What decides which kernels torch and its BLAS run, hence how they round."""
    cpu = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                    if line.startswith("model name")), cpu)
    steering = {name: value for name, value in os.environ.items() if name.startswith(("MKL_", "ATEN_", "OMP_"))
                and name != OMP_WAIT_POLICY}
    return {"torch": torch.__version__, "blas": torch.__config__.show(), "capability":
            torch.backends.cpu.get_cpu_capability(), "cpu": cpu, "env": steering}


def _read_thread_checks() -> dict:
    try:
        return json.loads(thread_checks_file().read_text())
    except (OSError, ValueError):  # none yet, or unreadable: check again
        return {}


def _write_thread_checks(checks: dict) -> None:
    """Atomically, and quietly where the cache folder cannot be written: the check is then repeated."""
    try:
        atomic_write(thread_checks_file(), json.dumps(checks, indent=1).encode())
    except OSError:
        pass


def _one_step_and_evaluation(model_cfg: ModelConfig, train_cfg: TrainConfig, vocab_size: int, threads: int,
                             round_like_threads: int) -> list[torch.Tensor]:
    """What a training step and an evaluation compute, with `threads` threads: losses, gradients, their norm."""
    with torch_threads(threads):
        model = build_model(model_cfg, vocab_size, seed=0)
        if threads != round_like_threads:
            sum_norm_gradients_like(model, round_like_threads)
        g = torch.Generator().manual_seed(0)
        chunk = torch.randint(0, vocab_size, (train_cfg.batch_size, model_cfg.context + 1), generator=g)
        params = list(model.parameters())
        loss, norm = loss_and_gradients(model, params, chunk)  # a new model: no gradients yet
        grads = [p.grad for p in params]
        windows = torch.randint(0, vocab_size, (min(train_cfg.eval_windows, EVAL_BATCH), model_cfg.context + 1), generator=g)
        evaluation = torch.tensor(evaluate_loss(model, windows[:, :-1], windows[:, 1:]))
        return [loss, norm, evaluation, *grads]


def waits_passively() -> bool:
    return os.environ.get(OMP_WAIT_POLICY, "").upper() == "PASSIVE"


@contextmanager
def passive_openmp():
    """Processes started inside this block wait for OpenMP work passively instead of spinning."""
    previous = os.environ.get(OMP_WAIT_POLICY)
    os.environ[OMP_WAIT_POLICY] = "PASSIVE"
    try:
        yield
    finally:
        if previous is None:
            del os.environ[OMP_WAIT_POLICY]
        else:
            os.environ[OMP_WAIT_POLICY] = previous

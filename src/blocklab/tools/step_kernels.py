"""Where a training step's time goes: the trainer's step at one thread, recorded kernel by kernel and replayed.

Each ATen operation of one step (forward, backward, gradient norm, AdamW) is recorded with the shapes and
strides of its tensors, then the operations of each kind are replayed on fresh tensors of those shapes and
timed, best of several replays. Every kernel here decides the bits of the result: a faster one that rounds
differently changes the run. So their summed time at one thread bounds what a trainer that rounds as these
kernels do can reach on this machine, however little else it spends: the benchmark prints that ceiling beside
the ratio it measures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.run.model import build_model
from blocklab.run.optimizer import AdamW
from blocklab.run.threads import torch_threads
from blocklab.run.training import loss_and_gradients

KINDS = {  # ATen operations by what they compute; anything else that is not a view is "other"
    "matrix products": {"mm", "addmm", "bmm"},
    "attention": {"_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward"},
    "GELU": {"gelu", "gelu_backward"},
    "LayerNorm": {"native_layer_norm", "native_layer_norm_backward"},
    "AdamW": {"_foreach_copy_", "mul_", "lerp_", "addcmul_", "sqrt", "div_", "add_", "addcdiv_"},
}
VIEWS = {"view", "_unsafe_view", "t", "transpose", "slice", "split", "unsqueeze", "detach", "expand", "alias",
         "as_strided", "permute", "select", "squeeze"}  # no arithmetic: metadata only


@dataclass(frozen=True)
class _TensorShape:
    shape: tuple
    stride: tuple
    dtype: torch.dtype

    def fresh(self) -> torch.Tensor:
        """A tensor laid out the same (floating point: random; integer ids: zeros, valid for any table)."""
        size = 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride)) if all(self.shape) else 0
        base = torch.randn(size, dtype=self.dtype) if self.dtype.is_floating_point else torch.zeros(size, dtype=self.dtype)
        return base.as_strided(self.shape, self.stride)


def _shape_of(value):
    return _TensorShape(tuple(value.shape), value.stride(), value.dtype) if isinstance(value, torch.Tensor) else value


def _fresh(value):
    return value.fresh() if isinstance(value, _TensorShape) else value


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.calls.append((func, tree_map(_shape_of, args), tree_map(_shape_of, kwargs)))
        return func(*args, **kwargs)


def kind_of(name: str) -> str | None:
    """The kind of an ATen operation (its overload packet's name); None for a view."""
    if name in VIEWS:
        return None
    return next((kind for kind, names in KINDS.items() if name in names), "other")


def record_step(model_cfg: ModelConfig, train_cfg: TrainConfig, vocab_size: int, warmup_steps: int = 3) -> list[tuple]:
    """The ATen calls of one training step of the trainer at one thread, after a few steps of warm-up."""
    with torch_threads(1):
        model = build_model(model_cfg, vocab_size, seed=0)
        params = list(model.parameters())
        optimizer = AdamW(params, lr=train_cfg.lr)
        g = torch.Generator().manual_seed(0)

        def step():
            chunk = torch.randint(0, vocab_size, (train_cfg.batch_size, model_cfg.context + 1), generator=g)
            optimizer.zero_grad()
            loss_and_gradients(model, params, chunk)
            optimizer.step()

        for _ in range(warmup_steps):
            step()
        recorder = _Recorder()
        with recorder:
            step()
    return recorder.calls


def kernel_seconds(calls: list[tuple], repeats: int = 10) -> dict[str, float]:
    """Seconds per step of each kind of kernel at one thread: each kind's calls replayed in order on fresh
    tensors, best of `repeats` (caches warm: an optimistic figure, so a ceiling drawn from it is one)."""
    by_kind: dict[str, list] = {kind: [] for kind in (*KINDS, "other")}
    for func, args, kwargs in calls:
        kind = kind_of(func.overloadpacket.__name__)
        if kind is not None:
            by_kind[kind].append((func, tree_map(_fresh, args), tree_map(_fresh, kwargs)))
    with torch_threads(1):
        return {kind: min(_replayed(replay) for _ in range(repeats + 1)) if replay else 0.0
                for kind, replay in by_kind.items()}


def _replayed(replay: list[tuple]) -> float:
    started = time.perf_counter()
    for func, args, kwargs in replay:
        func(*args, **kwargs)
    return time.perf_counter() - started

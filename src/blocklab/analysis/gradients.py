"""How much gradient reaches the input through a stack of blocks (the lesson's table B)."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn as nn

from blocklab.run.settings import ModelConfig
from blocklab.run.job import THREADS
from blocklab.run.model import Block
from blocklab.run.threads import torch_threads


def input_gradient_norm(cfg: ModelConfig, depth: int, shape: tuple[int, int] = (4, 16), seed: int = 0) -> float:
    """Norm of d loss / d input for `depth` blocks, loss = mean(stack(x)^2): seed, build, then draw x."""
    torch.manual_seed(seed)
    stack = nn.Sequential(*(Block(cfg, layer) for layer in range(1, depth + 1)))
    x = torch.randn(*shape, cfg.d_model, requires_grad=True)
    stack(x).pow(2).mean().backward()
    return torch.linalg.vector_norm(x.grad).item()


def gradient_table(base: ModelConfig, depths: list[int], placements: list[str], seed: int = 0) -> dict:
    """`{"<placement>/<with|without>": {"<depth>": norm}}` for every placement, with and without residuals."""
    table = {}
    with torch_threads(THREADS):  # one thread, as every run: the sums round the same on every machine
        for placement in placements:
            for residual in ("plain", "none"):
                cfg = replace(base, placement=placement, residual=residual)
                key = f"{placement}/{'with' if residual == 'plain' else 'without'}"
                table[key] = {str(d): input_gradient_norm(cfg, d, seed=seed) for d in depths}
    return table

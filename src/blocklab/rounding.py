"""Bit-for-bit machinery, kept out of the model: what lets a one-thread worker train exactly as a
process with more threads does, so a variant's seeds can train side by side.

Two kernels sum by thread. ATen's CPU LayerNorm backward gives each thread a contiguous block of rows,
sums the weight and bias gradients within each block, then adds the blocks' sums: on an AMD EPYC the
only result in the lesson's model that depends on the thread count. On an AVX-512 Xeon, MKL also splits
the rows of a weight gradient's matrix product (x^T dy, summed over every position of the batch) among
the threads and adds their partial products. The trainer turns a built model's `nn.LayerNorm`s (and,
where the CPU needs it, its `nn.Linear`s) into twins that sum in the blocks of N threads (`RoundLike`),
and checks per model shape and CPU which recipe makes one step come out bitwise equal
(`runner.threads_per_worker`). A kernel without such a twin (ReZero's) is left as it is; where the
check then fails, the seeds keep every thread.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from blocklab.model import Residual


class BlockwiseLayerNorm(nn.LayerNorm):
    """`nn.LayerNorm` that sums its weight and bias gradients as `row_blocks` CPU threads would: a
    single-threaded process whose norms sum in the blocks of N threads trains bit for bit as an N-thread
    process does. Made from a built model's `nn.LayerNorm` by `sum_norm_gradients_like` (same parameters)."""

    row_blocks: int = 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.row_blocks == 1 or x.device.type != "cpu" or not torch.is_grad_enabled():
            return super().forward(x)
        return _BlockwiseBackward.apply(x, self.weight, self.bias, self.eps, self.row_blocks)


class _BlockwiseBackward(torch.autograd.Function):
    """ATen's own LayerNorm kernels; the backward runs one block of rows at a time, single-threaded, split
    as `at::parallel_for` splits rows among threads (ceil(rows / blocks) each), and adds the blocks' weight
    and bias gradients in thread order, as ATen's second pass does."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps, blocks):
        shape = (x.shape[-1],)
        y, mean, rstd = torch.native_layer_norm(x, shape, weight, bias, eps)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        ctx.blocks = blocks
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        n = x.shape[-1]
        rows = x.numel() // n
        dy, x2, mean, rstd = dy.reshape(rows, n), x.reshape(rows, n), mean.reshape(rows, 1), rstd.reshape(rows, 1)
        size = -(-rows // min(ctx.blocks, rows))
        dxs, dweight, dbias = [], None, None
        with torch_threads(1):
            for start in range(0, rows, size):
                part = slice(start, start + size)
                dx, dw, db = torch.ops.aten.native_layer_norm_backward(
                    dy[part], x2[part], (n,), mean[part], rstd[part], weight, bias, [True, True, True])
                dxs.append(dx)
                dweight = dw if dweight is None else dweight + dw
                dbias = db if dbias is None else dbias + db
        return torch.cat(dxs).view_as(x), dweight, dbias, None, None


class BlockwiseLinear(nn.Linear):
    """`nn.Linear` whose weight gradient sums the rows' partial products as `row_blocks` CPU threads of
    MKL do (x^T dy over ceil(rows / blocks) rows each, added in thread order); its output and its input's
    and bias's gradients are ATen's own. Made by `RoundLike(products=True)` (same parameters)."""

    row_blocks: int = 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.row_blocks == 1 or x.device.type != "cpu" or not torch.is_grad_enabled():
            return super().forward(x)
        return _BlockwiseProduct.apply(x, self.weight, self.bias, self.row_blocks)


class _BlockwiseProduct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, blocks):
        ctx.save_for_backward(x, weight)
        ctx.blocks, ctx.has_bias = blocks, bias is not None
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        dy2, x2 = dy.reshape(-1, dy.shape[-1]), x.reshape(-1, x.shape[-1])  # (rows, out), (rows, in)
        rows = x2.shape[0]
        size = -(-rows // min(ctx.blocks, rows))
        dweight_t = None
        with torch_threads(1):
            for start in range(0, rows, size):
                part = x2[start : start + size].t().mm(dy2[start : start + size])
                dweight_t = part if dweight_t is None else dweight_t + part
        dx = dy2.mm(weight).view_as(x)
        return dx, dweight_t.t(), dy2.sum(0) if ctx.has_bias else None, None


class BlockwiseReZero(Residual):
    """ReZero's `x + alpha * y` whose gradient for the scalar alpha, a sum over every element of the batch,
    is summed in `row_blocks` contiguous blocks added in order, as ATen's reduction splits it among that
    many threads. Made by `RoundLike` from a ReZero `Residual` (same parameter)."""

    row_blocks: int = 1

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.row_blocks == 1 or x.device.type != "cpu" or not torch.is_grad_enabled():
            return super().forward(x, y)
        return x + _BlockwiseScale.apply(self.alpha, y, self.row_blocks)


class _BlockwiseScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, alpha, y, blocks):
        ctx.save_for_backward(alpha, y)
        ctx.blocks = blocks
        return alpha * y

    @staticmethod
    def backward(ctx, grad):
        alpha, y = ctx.saved_tensors
        products = (grad * y).reshape(-1)
        size = -(-products.numel() // min(ctx.blocks, products.numel()))
        dalpha = None
        with torch_threads(1):
            for start in range(0, products.numel(), size):
                part = products[start : start + size].sum()
                dalpha = part if dalpha is None else dalpha + part
        return dalpha, grad * alpha, None


@dataclass(frozen=True)
class RoundLike:
    """How a process with fewer threads sums what the thread count rounds, so that a model trains bit
    for bit as in a process with `threads` threads: its LayerNorms' gradients always, its matrix
    products' weight gradients too with `products` (the CPUs whose BLAS splits them among threads)."""

    threads: int
    products: bool = False

    def apply(self, model: nn.Module) -> nn.Module:
        """In place: each `nn.LayerNorm` becomes a `BlockwiseLayerNorm` (with `products`, each `nn.Linear`
        a `BlockwiseLinear`) with the same parameters."""
        sum_norm_gradients_like(model, self.threads)
        for module in model.modules():
            if type(module) is Residual and module.scheme == "rezero":
                module.__class__ = BlockwiseReZero
                module.row_blocks = self.threads
        if self.products:
            for module in model.modules():
                if type(module) is nn.Linear:
                    module.__class__ = BlockwiseLinear
                    module.row_blocks = self.threads
        return model


@contextmanager
def torch_threads(threads: int):
    """Run the block with `threads` intra-op threads, then restore the count."""
    before = torch.get_num_threads()
    if threads != before:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if threads != before:
            torch.set_num_threads(before)


def sum_norm_gradients_like(model: nn.Module, threads: int) -> nn.Module:
    """Make `model`'s LayerNorms sum their weight and bias gradients as `threads` CPU threads would
    (in place: each `nn.LayerNorm` becomes a `BlockwiseLayerNorm` with the same parameters)."""
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            module.__class__ = BlockwiseLayerNorm
            module.row_blocks = threads
    return model

"""Bit-for-bit machinery, kept out of the model: what lets a one-thread worker train exactly as a
process with more threads does, so a variant's seeds can train side by side.

ATen's CPU LayerNorm backward gives each thread a contiguous block of rows, sums the weight and bias
gradients within each block, then adds the blocks' sums: the only result in the lesson's model that
depends on the thread count (every matrix product, attention, GELU, embedding and loss gradient came
out bitwise equal with 1 and 2 threads here). The trainer turns a built model's `nn.LayerNorm`s into
`BlockwiseLayerNorm`s that sum in the blocks of N threads (`sum_norm_gradients_like`), and checks per
model shape that one step comes out bitwise equal (`training.threads_per_worker`). A norm without such a
twin (RMSNorm) is left as it is; where the check then fails, the seeds keep every thread.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn as nn


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

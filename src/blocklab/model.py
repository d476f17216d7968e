"""The lesson's TinyLM: a character-level Transformer whose block can be ablated.

Every switch an ablation flips (norm placement, residual, feed-forward width, activation,
depth) is a field of `ModelConfig` (in `blocklab.config`, with the rest of params.yaml's schema)
and is read in exactly one place below.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn as nn
import torch.nn.functional as F

from blocklab.config import ModelConfig


ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}


class LayerNorm(nn.LayerNorm):
    """`nn.LayerNorm` that can sum its weight and bias gradients as `row_blocks` CPU threads would.

    ATen's CPU LayerNorm backward gives each thread a contiguous block of rows, sums the weight and
    bias gradients within each block, then adds the blocks' sums: the only result in this model that
    depends on the thread count (every matrix product, attention, GELU, embedding and loss gradient
    came out bitwise equal with 1 and 2 threads here). A single-threaded process whose norms sum in the
    blocks of N threads therefore trains bit for bit as an N-thread process does, which is what lets
    seeds train side by side on one core each and still give the numbers they give alone."""

    row_blocks: int = 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.row_blocks == 1 or x.device.type != "cpu" or not torch.is_grad_enabled():
            return super().forward(x)
        return _BlockwiseLayerNorm.apply(x, self.weight, self.bias, self.eps, self.row_blocks)


class _BlockwiseLayerNorm(torch.autograd.Function):
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
    """Make `model`'s LayerNorms sum their weight and bias gradients as `threads` CPU threads would."""
    for module in model.modules():
        if isinstance(module, LayerNorm):
            module.row_blocks = threads
    return model


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, nh, T, hs)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.widen = nn.Linear(cfg.d_model, cfg.ffn_mult * cfg.d_model)
        self.act = ACTIVATIONS[cfg.activation]()
        self.narrow = nn.Linear(cfg.ffn_mult * cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.narrow(self.act(self.widen(x)))


class Block(nn.Module):
    """One Transformer block. Pre-norm: x + f(ln(x)); post-norm: ln(x + f(x)).
    Without the residual the `x +` is dropped and the sub-layer output is passed on."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        # Creation order (norms, attention, feed-forward) fixes what a seed initialises.
        self.ln1 = LayerNorm(cfg.d_model)
        self.ln2 = LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ffn = FeedForward(cfg)
        self.pre_norm = cfg.norm == "pre"
        self.residual = cfg.residual

    def _sublayer(self, x: torch.Tensor, f: nn.Module, norm: nn.Module) -> torch.Tensor:
        y = f(norm(x)) if self.pre_norm else f(x)
        if self.residual:
            y = x + y
        return y if self.pre_norm else norm(y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._sublayer(x, self.attn, self.ln1)
        return self._sublayer(x, self.ffn, self.ln2)


class TinyLM(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.context, cfg.d_model)
        self.blocks = nn.Sequential(*(Block(cfg) for _ in range(cfg.n_layers)))
        # Post-norm blocks already end in a LayerNorm, so only pre-norm gets a final one.
        self.ln_f = LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.head = nn.Linear(cfg.d_model, vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, T) character ids -> (B, T, V) logits."""
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        return self.head(self.ln_f(self.blocks(x)))


def build_model(cfg: ModelConfig, vocab_size: int, seed: int) -> TinyLM:
    """The lesson's seeded construction: the global seed is set immediately before building."""
    torch.manual_seed(seed)
    return TinyLM(cfg, vocab_size)


def parameter_counts(model: TinyLM) -> dict[str, int]:
    """Parameters in total and by part: attention, feed-forward, and everything else."""
    def count(modules) -> int:
        return sum(p.numel() for m in modules for p in m.parameters())

    blocks = list(model.blocks)
    total = count([model])
    attention = count(b.attn for b in blocks)
    feed_forward = count(b.ffn for b in blocks)
    return {
        "total": total,
        "attention": attention,
        "feed_forward": feed_forward,
        "other": total - attention - feed_forward,
    }

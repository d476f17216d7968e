"""The lesson's TinyLM, a character-level Transformer whose block is assembled from choices.

Every choice an ablation makes (attention heads and projection, feed-forward kind and width,
activation, norm type and placement, residual scheme, depth) is a field of `ModelConfig` (in
`blocklab.config`, with the rest of params.yaml's schema) and is read in exactly one place below.
The defaults build the lesson's model; module creation order (embeddings, blocks: norms, attention,
feed-forward; final norm, head) fixes what a seed initialises. How many threads compute it (which
decides how its sums round) is `blocklab.runner`'s business, not the model's.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from blocklab.config import ModelConfig

NORM_EPS = 1e-5
ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU}


class CausalSelfAttention(nn.Module):
    """`n_heads` causal heads from one fused q/k/v projection, concatenated, then (optionally) projected."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.qkv_bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model) if cfg.attn_proj else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, nh, T, hs)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    """widen -> activation -> narrow (the narrowing projection optional: then the width stays d_model)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.widen = nn.Linear(cfg.d_model, cfg.hidden_width)
        self.act = ACTIVATIONS[cfg.activation]()
        self.narrow = nn.Linear(cfg.hidden_width, cfg.d_model) if cfg.ffn_proj else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.narrow(self.act(self.widen(x)))


class SwiGLU(nn.Module):
    """Shazeer (2020): w2(silu(w1 x) * w3 x), no biases."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.hidden_width, bias=False)
        self.w3 = nn.Linear(cfg.d_model, cfg.hidden_width, bias=False)
        self.w2 = nn.Linear(cfg.hidden_width, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


FEED_FORWARDS = {"mlp": MLP, "swiglu": SwiGLU}


def make_norm(cfg: ModelConfig) -> nn.Module:
    if cfg.norm_type == "layernorm":
        return nn.LayerNorm(cfg.d_model, eps=NORM_EPS)
    if cfg.norm_type == "rmsnorm":  # Zhang & Sennrich (2019): no re-centring, no bias
        return nn.RMSNorm(cfg.d_model, eps=NORM_EPS)
    return nn.Identity()


class Residual(nn.Module):
    """How a sub-layer's output y joins its input x: none (y), plain (x + y), ReZero (x + alpha * y, alpha a
    learned scalar starting at 0; Bachlechner et al. 2020) or DeepNorm (alpha * x + y with alpha = (2N)^(1/4),
    inside the post-norm; Wang et al. 2022)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.scheme = {True: "plain", False: "none"}.get(cfg.residual, cfg.residual)
        if self.scheme == "rezero":
            self.alpha = nn.Parameter(torch.zeros(()))
        elif self.scheme == "deepnorm":
            self.alpha = (2 * cfg.n_layers) ** 0.25

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.scheme == "plain":
            return x + y
        if self.scheme == "rezero":
            return x + self.alpha * y
        if self.scheme == "deepnorm":
            return self.alpha * x + y
        return y


class Block(nn.Module):
    """One Transformer block. Pre-norm: res(x, f(norm(x))); post-norm: norm(res(x, f(x))); the residual
    `res` is one of `Residual`'s schemes. Without a feed-forward network the block is attention alone."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        has_ffn = cfg.ffn != "none"
        self.ln1 = make_norm(cfg)
        self.ln2 = make_norm(cfg) if has_ffn else None
        self.attn = CausalSelfAttention(cfg)
        self.ffn = FEED_FORWARDS[cfg.ffn](cfg) if has_ffn else None
        self.res1 = Residual(cfg)
        self.res2 = Residual(cfg) if has_ffn else None
        self.pre_norm = cfg.norm == "pre"

    def _sublayer(self, x: torch.Tensor, f: nn.Module, norm: nn.Module, residual: Residual) -> torch.Tensor:
        y = residual(x, f(norm(x)) if self.pre_norm else f(x))
        return y if self.pre_norm else norm(y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._sublayer(x, self.attn, self.ln1, self.res1)
        return x if self.ffn is None else self._sublayer(x, self.ffn, self.ln2, self.res2)


class TinyLM(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.context, cfg.d_model)
        self.blocks = nn.Sequential(*(Block(cfg) for _ in range(cfg.n_layers)))
        # Post-norm blocks already end in a norm, so by default only pre-norm gets a final one.
        self.ln_f = make_norm(cfg) if cfg.has_final_norm else nn.Identity()
        self.head = nn.Linear(cfg.d_model, vocab_size)
        if cfg.residual == "deepnorm":
            _scale_deepnorm_projections(self.blocks, beta=(8 * cfg.n_layers) ** -0.25)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, T) character ids -> (B, T, V) logits."""
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        return self.head(self.ln_f(self.blocks(x)))


@torch.no_grad()
def _scale_deepnorm_projections(blocks: nn.Sequential, beta: float) -> None:
    """DeepNet's initialisation: the value and output projections and the feed-forward weights scaled by
    beta (queries and keys are left alone)."""
    for block in blocks:
        d = block.attn.qkv.out_features // 3
        block.attn.qkv.weight[2 * d :].mul_(beta)
        weights = [m.weight for m in [block.attn.proj, *(block.ffn.modules() if block.ffn else [])]
                   if isinstance(m, nn.Linear)]
        for weight in weights:
            weight.mul_(beta)


class Bigram(nn.Module):
    """The lecture's first rung: the next character's logits read straight from a V x V embedding."""

    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(vocab_size, vocab_size)
        self.blocks = nn.Sequential()

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.tok_emb(idx)


MODELS = {"transformer": TinyLM, "bigram": Bigram}


def build_model(cfg: ModelConfig, vocab_size: int, seed: int) -> nn.Module:
    """The lesson's seeded construction: the global seed is set immediately before building."""
    torch.manual_seed(seed)
    return MODELS[cfg.kind](cfg, vocab_size)


def parameter_counts(model: nn.Module) -> dict[str, int]:
    """Parameters in total and by part: attention, feed-forward, and everything else."""
    def count(modules) -> int:
        return sum(p.numel() for m in modules if m is not None for p in m.parameters())

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

"""The lesson's TinyLM, a character-level Transformer whose block is assembled from choices.

Every choice an ablation makes (attention heads and projection, feed-forward kind and width,
activation, norm type and placement, residual scheme, depth) is a field of `ModelConfig` (in
`blocklab.params.schema`, with the rest of params.yaml's schema) and is read in exactly one place below.
The defaults build the lesson's model; module creation order (embeddings, blocks: norms, attention,
feed-forward; final norm, head) fixes what a seed initialises. How many threads compute it (which
decides how its sums round) is `blocklab.schedule.pool`'s business, not the model's.
"""

from __future__ import annotations

from functools import cache

import torch
import torch.nn as nn
import torch.nn.functional as F

from blocklab.run.settings import ModelConfig

NORM_EPS = 1e-5
ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU}


class CausalSelfAttention(nn.Module):
    """`n_heads` causal heads from one fused q/k/v projection, concatenated, then (optionally) projected;
    optionally a norm over each head's queries and keys first (qk-layernorm: Dehghani et al. 2023), or over all
    heads' at once before they are split (OLMo 2's QK-norm)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.qkv_bias and cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias) if cfg.attn_proj else nn.Identity()
        head = cfg.d_model // cfg.n_heads
        self.qk_norm_over_width = cfg.qk_norm_over == "width"
        normed = cfg.d_model if self.qk_norm_over_width else head
        self.q_norm = make_norm(cfg.qk_norm, normed, cfg) if cfg.qk_norm != "none" else None
        self.k_norm = make_norm(cfg.qk_norm, normed, cfg) if cfg.qk_norm != "none" else None
        self.rotary = Rotary(head) if cfg.rope else None
        # mup: q.k / d_head, equal to the usual q.k / sqrt(d_head) at the base width; None: that usual scale
        self.scale = None if cfg.parametrization == "standard" else (cfg.base_width // cfg.n_heads) ** 0.5 / head

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values per head: (B, T, C) -> 3 x (B, nh, T, hs)."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        if self.q_norm is not None and self.qk_norm_over_width:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        if self.q_norm is not None and not self.qk_norm_over_width:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        return q, k, v

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.heads(x)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The attention logits the softmax takes, (B, nh, T, T): q.k times the scale, -inf where causality
        masks them (what `blocklab.run.diagnostics` reads; training never calls it)."""
        q, k, _ = self.heads(x)
        scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if self.scale is None else self.scale)
        T = x.shape[1]
        return scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))


class Rotary(nn.Module):
    """Rotary positions (Su et al. 2021, RoFormer, eq. 34): channels (2i, 2i+1) of a head's query or key at
    position m rotated by the angle m * theta_i, theta_i = 10000^(-2i / d_head). No parameters."""

    def __init__(self, head: int, base: float = 10000.0):
        super().__init__()
        self.register_buffer("theta", base ** (-torch.arange(0, head, 2, dtype=torch.float32) / head),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., T, head) -> the same, each position's pairs rotated."""
        angles = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)[:, None] * self.theta
        cos, sin = angles.cos(), angles.sin()
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class MLP(nn.Module):
    """widen -> activation -> narrow (the narrowing projection optional: then the width stays d_model)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.widen = nn.Linear(cfg.d_model, cfg.hidden_width, bias=cfg.bias)
        self.act = ACTIVATIONS[cfg.activation]()
        self.narrow = nn.Linear(cfg.hidden_width, cfg.d_model, bias=cfg.bias) if cfg.ffn_proj else nn.Identity()

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


class DyT(nn.Module):
    """Dynamic Tanh (Zhu, Chen, He, LeCun, Liu 2025), a norm's stand-in: gamma * tanh(alpha * x) + beta, alpha
    one learned scalar starting at `alpha0`, gamma and beta per channel (1 and 0, as a norm's affine starts)."""

    def __init__(self, width: int, alpha0: float, bias: bool = True):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((), alpha0))
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.alpha * x) * self.weight
        return y if self.bias is None else y + self.bias


def make_norm(kind: str, width: int, cfg: ModelConfig) -> nn.Module:
    """A norm of `kind` over `width` channels, with a bias unless `cfg.bias` is false."""
    if kind == "layernorm":
        return nn.LayerNorm(width, eps=NORM_EPS, bias=cfg.bias)
    if kind == "rmsnorm":  # Zhang & Sennrich (2019): no re-centring, no bias
        return nn.RMSNorm(width, eps=NORM_EPS)
    if kind == "dyt":
        return DyT(width, cfg.dyt_alpha0, bias=cfg.bias)
    return nn.Identity()


class Residual(nn.Module):
    """How a sub-layer's output y joins its input x: none (y), plain (x + y), ReZero (x + alpha * y, alpha a
    learned scalar starting at 0; Bachlechner et al. 2020) or DeepNorm (alpha * x + y with alpha = (2N)^(1/4),
    inside the post-norm; Wang et al. 2022)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.scheme = cfg.residual
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
    """Block `layer` (1-based) of the stack. Where its norms sit (`placement`), with f a sub-layer and res one of
    `Residual`'s schemes: pre res(x, f(N(x))), with LayerNorm scaling res(x, f(N(x) / sqrt(layer))); post
    N(res(x, f(x))); peri res(x, N_out(f(N_in(x)))); reordered res(x, N(f(x))). Mix-LN's blocks are post or pre
    (`ModelConfig.post_norm_blocks`). Without a feed-forward network the block is attention alone."""

    def __init__(self, cfg: ModelConfig, layer: int = 1):
        super().__init__()
        has_ffn = cfg.ffn != "none"
        self.placement = "post" if layer <= cfg.post_norm_blocks else "pre" if cfg.placement == "mix" else cfg.placement
        self.ln1 = make_norm(cfg.norm_type, cfg.d_model, cfg)
        self.ln2 = make_norm(cfg.norm_type, cfg.d_model, cfg) if has_ffn else None
        if self.placement == "peri":  # the output norms (the norms above are the input ones)
            self.ln1_out = make_norm(cfg.norm_type, cfg.d_model, cfg)
            self.ln2_out = make_norm(cfg.norm_type, cfg.d_model, cfg) if has_ffn else None
        self.attn = CausalSelfAttention(cfg)
        self.ffn = FEED_FORWARDS[cfg.ffn](cfg) if has_ffn else None
        self.res1 = Residual(cfg)
        self.res2 = Residual(cfg) if has_ffn else None
        self.input_scale = layer ** -0.5 if cfg.norm_scaling else None

    def _sublayer(self, x: torch.Tensor, f: nn.Module, norm: nn.Module, residual: Residual,
                  norm_out: nn.Module | None) -> torch.Tensor:
        if self.placement == "post":
            return norm(residual(x, f(x)))
        if self.placement == "reordered":
            return residual(x, norm(f(x)))
        h = norm(x) if self.input_scale is None else norm(x) * self.input_scale
        return residual(x, f(h) if norm_out is None else norm_out(f(h)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._sublayer(x, self.attn, self.ln1, self.res1, getattr(self, "ln1_out", None))
        if self.ffn is None:
            return x
        return self._sublayer(x, self.ffn, self.ln2, self.res2, getattr(self, "ln2_out", None))


class TinyLM(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(vocab_size, cfg.d_model)
        self.pos_emb = None if cfg.rope else nn.Embedding(cfg.context, cfg.d_model)  # rope: positions in attention
        self.emb_norm = make_norm(cfg.norm_type, cfg.d_model, cfg) if cfg.placement == "peri" else None  # Peri-LN's
        self.blocks = nn.Sequential(*(Block(cfg, layer) for layer in range(1, cfg.n_layers + 1)))
        # Post-norm blocks already end in a norm, so by default every placement but post gets a final one.
        self.ln_f = make_norm(cfg.norm_type, cfg.d_model, cfg) if cfg.has_final_norm else nn.Identity()
        self.head = (nn.Linear(cfg.d_model, vocab_size, bias=cfg.bias) if cfg.parametrization == "standard"
                     else MuReadout(cfg.d_model, vocab_size, cfg.width_multiplier, bias=cfg.bias))
        if cfg.residual == "deepnorm":
            _scale_deepnorm_projections(self.blocks, beta=(8 * cfg.n_layers) ** -0.25)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, T) character ids -> (B, T, V) logits."""
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
        if self.emb_norm is not None:
            x = self.emb_norm(x)
        return self.head(self.ln_f(self.blocks(x)))


class MuReadout(nn.Linear):
    """mup's output layer (Yang et al. 2022): a linear layer whose logits are divided by the width multiplier."""

    def __init__(self, d_model: int, vocab_size: int, width_multiplier: float, bias: bool = True):
        super().__init__(d_model, vocab_size, bias=bias)
        self.width_multiplier = width_multiplier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) / self.width_multiplier


def learning_rate_multipliers(model: nn.Module) -> list[float] | None:
    """Per parameter (in `model.parameters()` order), what mup multiplies the learning rate by: 1 / m for the
    hidden matrices (both dimensions grow with the width: q/k/v, output and feed-forward projections), 1 for
    the rest (embeddings, biases, norms, the readout, whose logits mup scales instead). None under the
    standard parametrisation."""
    cfg = getattr(model, "cfg", None)
    if cfg is None or cfg.parametrization == "standard":
        return None
    hidden = {id(m.weight) for block in model.blocks for m in block.modules()
              if isinstance(m, nn.Linear) and not isinstance(m, MuReadout)}
    return [1 / cfg.width_multiplier if id(p) in hidden else 1.0 for p in model.parameters()]


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
    """Parameters in total, without the embeddings (the token and position tables: Kaplan et al. 2020's N), and by
    part: attention, feed-forward, and everything else."""
    def count(modules) -> int:
        return sum(p.numel() for m in modules if m is not None for p in m.parameters())

    blocks = list(model.blocks)
    total = count([model])
    attention = count(b.attn for b in blocks)
    feed_forward = count(b.ffn for b in blocks)
    return {
        "total": total,
        "non_embedding": total - count(m for m in model.modules() if isinstance(m, nn.Embedding)),
        "attention": attention,
        "feed_forward": feed_forward,
        "other": total - attention - feed_forward,
    }


def training_flops_per_token(model: nn.Module, context: int) -> int:
    """Matrix-product FLOPs to train on one token: 3x the forward pass (the backward costs about twice the
    forward), as in Kaplan et al. (2020)'s C = 6NT plus attention. Forward: 2 per weight of every linear layer
    (the projections, the feed-forward's matrices, the head), and per attention layer 2*2*T*d for its scores and
    weighted sum (the full T x T, as the kernels compute it). An embedding is a lookup; element-wise work (norms,
    softmax, activations, AdamW) is not counted."""
    matrices = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    attention = sum(4 * context * m.qkv.in_features for m in model.modules() if isinstance(m, CausalSelfAttention))
    return 3 * (2 * matrices + attention)


@cache
def planned_flops_per_token(cfg: ModelConfig, vocab: int) -> int:
    """`training_flops_per_token` of the model `cfg` builds, counted without building its weights (on PyTorch's
    meta device): what planning and benchmarks estimate from settings alone."""
    with torch.device("meta"):
        model = MODELS[cfg.kind](cfg, vocab)
    return training_flops_per_token(model, cfg.context)

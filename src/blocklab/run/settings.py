"""What one run trains with: the model's settings and the training's, each field with its default (the lesson's
TinyLM and loop) and its check. `params.yaml` (blocklab.params.schema) resolves every run to one of each."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Literal, Optional

from pydantic import ConfigDict, Field, NonNegativeInt, PositiveInt, model_validator
from pydantic.dataclasses import dataclass as settings

# A learning rate of YAML's `.inf` is no rate: a positive number, and finite.
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


@settings(frozen=True, config=ConfigDict(extra="forbid"))
class ModelConfig:
    """What a model is built from: `blocklab.run.model` reads each field in one place. The defaults are the
    lesson's TinyLM."""

    kind: Literal["transformer", "bigram"] = "transformer"  # bigram: logits read from a V x V embedding
    d_model: PositiveInt = 64
    n_heads: PositiveInt = 4
    n_layers: PositiveInt = 6
    context: PositiveInt = 32
    qkv_bias: bool = True  # the q, k, v projections' bias (the lecture's heads have none)
    attn_proj: bool = True  # the attention's output projection (the lecture's early rungs have none)
    ffn: Literal["mlp", "swiglu", "none"] = "mlp"
    ffn_mult: PositiveInt = 4  # hidden width = ffn_mult * d_model (SwiGLU: 2/3 of it, to match parameters)
    ffn_hidden: Optional[PositiveInt] = None  # the hidden width itself, overriding ffn_mult
    ffn_proj: bool = True  # the MLP's output projection; without it the hidden width must be d_model
    activation: Literal["gelu", "relu", "silu"] = "gelu"
    # The norm's placement, where a block's norms sit (blocklab.run.model.Block): pre x + f(N(x)); post
    # N(x + f(x)); peri (Kim et al. 2025, Gemma's "sandwich") x + N_out(f(N_in(x))), the embeddings normed too;
    # reordered (OLMo 2) x + N(f(x)); mix (Li et al. 2025) post in the first floor(mix_fraction * n_layers)
    # blocks, pre after
    placement: Literal["pre", "post", "peri", "reordered", "mix"] = "pre"
    mix_fraction: Optional[Annotated[float, Field(ge=0, le=1)]] = None  # placement: mix only; default 0.25
    # LayerNorm scaling (Sun et al. 2025, "The Curse of Depth"): pre-norm's x + f(N(x) / sqrt(l)) in block l
    norm_scaling: bool = False
    # dyt: Zhu et al. 2025's gamma * tanh(alpha * x) + beta in place of each norm, alpha a learned scalar from
    # dyt_alpha (default 0.5)
    norm_type: Literal["layernorm", "rmsnorm", "dyt", "none"] = "layernorm"
    dyt_alpha: Optional[PositiveFloat] = None  # norm_type: dyt only
    final_norm: Optional[bool] = None  # a norm before the head; default: every placement but post has one
    rope: bool = False  # rotary positions (Su et al. 2021) on each head's q and k, in place of the learned table
    bias: bool = True  # false: no bias anywhere (linear layers, qkv_bias's included, norms, head), as Llama's
    # The residual connection around each sub-layer f: plain x + f(x); none f(x); rezero x + a * f(x), a a learned
    # scalar from 0 (Bachlechner et al. 2020); deepnorm LN(alpha * x + f(x)) (Wang et al. 2022)
    residual: Literal["plain", "none", "rezero", "deepnorm"] = "plain"
    qk_norm: Literal["none", "layernorm", "rmsnorm"] = "none"  # a norm over the queries and the keys
    # what QK-norm normalises over: each head's queries and keys apart (head; Dehghani et al. 2023), or all heads'
    # at once over the model's width, before they are split into heads (width; OLMo 2)
    qk_norm_over: Literal["head", "width"] = "head"
    # mup: Yang et al. 2022's parametrisation for Adam, relative to a model of width base_width (where it is
    # the standard one): hidden matrices' learning rate and the output logits / (d_model / base_width),
    # attention logits q.k / d_head (scaled to equal q.k / sqrt(d_head) at the base width)
    parametrization: Literal["standard", "mup"] = "standard"
    base_width: PositiveInt = 64

    @model_validator(mode="after")
    def _consistent(self) -> "ModelConfig":
        if self.d_model % self.n_heads:
            raise ValueError(
                f"n_heads={self.n_heads} must divide d_model={self.d_model} "
                f"(each head gets d_model / n_heads channels)"
            )
        if self.ffn == "mlp" and not self.ffn_proj and self.hidden_width != self.d_model:
            raise ValueError(
                f"an MLP without its output projection (ffn_proj: false) must keep the width: hidden width "
                f"{self.hidden_width} != d_model {self.d_model} (set ffn_mult: 1)"
            )
        if self.residual == "deepnorm" and self.placement != "post":
            raise ValueError("residual: deepnorm is a post-norm scheme (LN(alpha * x + f(x))): set placement: post")
        if self.mix_fraction is not None and self.placement != "mix":
            raise ValueError(f"mix_fraction sets how many blocks of placement: mix are post-norm: with placement: "
                             f"{self.placement} it means nothing (set placement: mix, or remove mix_fraction)")
        if self.norm_scaling and self.placement != "pre":
            raise ValueError(f"norm_scaling scales pre-norm's normalised input (x + f(N(x) / sqrt(l))): with "
                             f"placement: {self.placement} there is none (set placement: pre)")
        if self.norm_type == "none" and (self.placement in ("peri", "reordered", "mix") or self.norm_scaling):
            what = "norm_scaling: true" if self.norm_scaling else f"placement: {self.placement}"
            raise ValueError(f"{what} places norms, and norm_type: none has none to place (choose a norm_type)")
        if self.dyt_alpha is not None and self.norm_type != "dyt":
            raise ValueError(f"dyt_alpha is DyT's initial alpha: with norm_type: {self.norm_type} there is no DyT "
                             f"(set norm_type: dyt, or remove dyt_alpha)")
        if self.qk_norm_over != "head" and self.qk_norm == "none":
            raise ValueError("qk_norm_over says what QK-norm normalises over: with qk_norm: none there is none "
                             "(set qk_norm, or remove qk_norm_over)")
        if self.rope and (self.d_model // self.n_heads) % 2:
            raise ValueError(f"rope rotates each head's channels in pairs: the head size d_model / n_heads = "
                             f"{self.d_model // self.n_heads} must be even (change d_model or n_heads)")
        if self.rope and self.kind == "bigram":
            raise ValueError("rope rotates attention's queries and keys: kind: bigram has no attention")
        if self.parametrization == "mup" and self.base_width % self.n_heads:
            raise ValueError(f"n_heads={self.n_heads} must divide base_width={self.base_width} (mup scales each "
                             f"head's attention against the base width's head size)")
        return self

    def canonical(self) -> "ModelConfig":
        """These settings in the one spelling of the computation they build, by which a run is keyed and trained:
        mup at its base width is the standard parametrisation (every multiplier 1, its attention scale the
        usual 1/sqrt(d_head): the proxies map's mup cells at width 64 are its standard cells, bit for bit)."""
        if self.parametrization == "mup" and self.d_model == self.base_width:
            return replace(self, parametrization="standard", base_width=ModelConfig.base_width)
        return self

    @property
    def width_multiplier(self) -> float:
        """mup's m = d_model / base_width (1 under the standard parametrisation)."""
        return self.d_model / self.base_width if self.parametrization == "mup" else 1.0

    @property
    def hidden_width(self) -> int:
        if self.ffn_hidden is not None:
            return self.ffn_hidden
        if self.ffn == "swiglu":  # three matrices instead of two: 2/3 of the MLP's width (Shazeer 2020)
            return round(2 * self.ffn_mult * self.d_model / 3)
        return self.ffn_mult * self.d_model

    @property
    def has_final_norm(self) -> bool:
        return self.placement != "post" if self.final_norm is None else self.final_norm

    @property
    def post_norm_blocks(self) -> int:
        """How many blocks, the first ones, place their norms after the residual: all under post-norm, the
        first floor(mix_fraction * n_layers) under mix, none otherwise."""
        if self.placement == "mix":
            return int((0.25 if self.mix_fraction is None else self.mix_fraction) * self.n_layers)
        return self.n_layers if self.placement == "post" else 0

    @property
    def dyt_alpha0(self) -> float:
        return 0.5 if self.dyt_alpha is None else self.dyt_alpha


@settings(frozen=True, config=ConfigDict(extra="forbid"))
class TrainConfig:
    """How a run trains: `blocklab.run.training`."""

    steps: PositiveInt = 250
    lr: PositiveFloat = 3e-3
    batch_size: PositiveInt = 32
    warmup: NonNegativeInt = 0
    eval_interval: PositiveInt = 50
    eval_windows: PositiveInt = 256
    eval_batches: NonNegativeInt = 0  # the lecture's estimate too: mean loss over this many random validation batches
    device: Literal["auto", "cpu", "cuda"] = "auto"
    checkpoint_every: NonNegativeInt = 1000  # runs longer than this save a checkpoint this often; 0: never
    # PaLM's auxiliary loss z_loss * mean(log Z)^2, Z the softmax normaliser of the output logits (0: none); the
    # losses a run reports stay the cross-entropy alone
    z_loss: NonNegativeFloat = 0.0
    weight_decay: NonNegativeFloat = 0.01  # AdamW's, torch's default
    # false: AdamW's decay, coupled to the learning rate (theta -= lr * weight_decay * theta); true: independent
    # of it (theta -= weight_decay * theta, times the warmup's ramp), as Wortsman et al. 2023 train
    independent_weight_decay: bool = False
    # true: after training, the validation loss with each block skipped in turn (its output its input), less the
    # whole model's, in metrics.json's skip_loss_delta (Sun et al. 2025's fig. 1: how much each block still does)
    layer_skip: bool = False

    @model_validator(mode="after")
    def _warmup_within_the_run(self) -> "TrainConfig":
        if self.warmup > self.steps:  # the learning rate would never reach the rate asked for
            raise ValueError(f"a warmup of {self.warmup} steps is longer than the run's {self.steps} steps: the "
                             f"learning rate would never reach lr (shorten warmup, or raise steps)")
        return self

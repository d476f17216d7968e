"""What a run measures of its model besides the loss, at its evaluation steps only: the two instabilities of
Wortsman et al. 2023 (*Small-scale proxies for large-scale Transformer training instabilities*).

- `attn_logit_max`: the largest attention logit (what the softmax takes: q.k / sqrt(d_head), or mup's
  q.k / d_head scaled alike) over layers, heads and unmasked positions of the validation windows. Without
  qk-layernorm it grows with the learning rate until the softmax is one-hot (Dehghani et al. 2023).
- `logit_log_z`: the mean over positions of log Z, Z the softmax normaliser of the output logits (PaLM's
  z-loss keeps it near 0; Chowdhery et al. 2022).

And per block (`LAYER_PROBES`), what the 2025 papers on the norm's placement measure of the forward residual
stream (Kim et al. 2025, Peri-LN; Sun et al. 2025, "The Curse of Depth"):

- `resid_rms`: the root mean square of the residual stream after the block, over every channel of every
  position of the validation windows; `resid_max_abs`: its largest |h| ("massive activations");
- `block_cos`: the mean over positions of the cosine of the block's input and output (near 1: the block
  barely changes the stream, "near-identity");
- `dyt_saturated`: under DyT, the fraction of its inputs with |alpha * x| > 2 (tanh saturated) in the block's
  DyTs (Zhu et al. 2025); None without DyT.

All are read while the validation loss is computed, by forward hooks that only read what passes (the
attention's input, a block's input and output, a DyT's input, the model's output): they draw no random numbers
and change no bit of the loss or of training (tests/test_proxies_switches.py, tests/test_layer_diagnostics.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from blocklab.run.model import CausalSelfAttention, DyT
from blocklab.run.results import LAYER_PROBES, PROBES, finite_or_none

SATURATED = 2.0  # |alpha * x| above which DyT's tanh counts as saturated (Zhu et al. 2025)


class _Stream:
    """What one block's hooks have summed over the validation windows so far."""

    def __init__(self):
        self.squares, self.elements, self.max_abs = 0.0, 0, 0.0
        self.cos, self.positions = 0.0, 0
        self.saturated, self.dyt_inputs = 0, 0

    def values(self) -> dict[str, float | None]:
        seen = self.elements > 0
        return dict(zip(LAYER_PROBES, (finite_or_none(math.sqrt(self.squares / self.elements)) if seen else None,
                                       finite_or_none(self.max_abs) if seen else None,
                                       finite_or_none(self.cos / self.positions) if seen else None,
                                       self.saturated / self.dyt_inputs if self.dyt_inputs else None)))


class Diagnostics:
    """Forward hooks on a model's attention layers and on the model itself, active inside `with`."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.attn_logit_max = -math.inf
        self._log_z_sum, self._positions = 0.0, 0
        self.streams = [_Stream() for _ in getattr(model, "blocks", [])]
        self._handles: list = []

    def __enter__(self) -> "Diagnostics":
        attention = [m for m in self.model.modules() if isinstance(m, CausalSelfAttention)]
        self._handles = [m.register_forward_hook(self._attention) for m in attention]
        self._handles.append(self.model.register_forward_hook(self._output))
        for block, stream in zip(getattr(self.model, "blocks", []), self.streams):
            self._handles.append(block.register_forward_hook(self._block(stream)))
            self._handles += [m.register_forward_pre_hook(self._dyt(stream)) for m in block.modules()
                              if isinstance(m, DyT)]
        return self

    @staticmethod
    def _block(stream: _Stream):
        def hook(_module, inputs: tuple, output: torch.Tensor) -> None:
            out = output.detach().double()
            stream.squares += out.pow(2).sum().item()
            stream.elements += out.numel()
            stream.max_abs = max(stream.max_abs, out.abs().max().item())
            stream.cos += F.cosine_similarity(inputs[0].detach().double(), out, dim=-1).sum().item()
            stream.positions += out.shape[0] * out.shape[1]
        return hook

    @staticmethod
    def _dyt(stream: _Stream):
        def hook(module: DyT, inputs: tuple) -> None:
            stream.saturated += int(((module.alpha.detach() * inputs[0].detach()).abs() > SATURATED).sum().item())
            stream.dyt_inputs += inputs[0].numel()
        return hook

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()

    def _attention(self, module: CausalSelfAttention, inputs: tuple, _output) -> None:
        self.attn_logit_max = max(self.attn_logit_max, module.logits(inputs[0]).max().item())

    def _output(self, _module, _inputs, logits: torch.Tensor) -> None:
        log_z = torch.logsumexp(logits.double(), dim=-1)
        self._log_z_sum += log_z.sum().item()
        self._positions += log_z.numel()

    def values(self) -> dict[str, float | None]:
        """What the hooks saw: None for a model without attention (the bigram), or a value that is not finite."""
        log_z = self._log_z_sum / self._positions if self._positions else math.nan
        return dict(zip(PROBES, (finite_or_none(self.attn_logit_max), finite_or_none(log_z))))

    def layers(self) -> list[dict[str, float | None]]:
        """Per block, first to last: `LAYER_PROBES`."""
        return [stream.values() for stream in self.streams]

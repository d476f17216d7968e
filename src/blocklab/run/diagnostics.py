"""What a run measures of its model besides the loss, at its evaluation steps only: the two instabilities of
Wortsman et al. 2023 (*Small-scale proxies for large-scale Transformer training instabilities*).

- `attn_logit_max`: the largest attention logit (what the softmax takes: q.k / sqrt(d_head), or mup's
  q.k / d_head scaled alike) over layers, heads and unmasked positions of the validation windows. Without
  qk-layernorm it grows with the learning rate until the softmax is one-hot (Dehghani et al. 2023).
- `logit_log_z`: the mean over positions of log Z, Z the softmax normaliser of the output logits (PaLM's
  z-loss keeps it near 0; Chowdhery et al. 2022).

Both are read while the validation loss is computed, by forward hooks that only read what passes (the
attention's input, the model's output): they draw no random numbers and change no bit of the loss or of
training (tests/test_proxies_switches.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from blocklab.run.model import CausalSelfAttention
from blocklab.run.results import PROBES, finite_or_none


class Diagnostics:
    """Forward hooks on a model's attention layers and on the model itself, active inside `with`."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.attn_logit_max = -math.inf
        self._log_z_sum, self._positions = 0.0, 0
        self._handles: list = []

    def __enter__(self) -> "Diagnostics":
        attention = [m for m in self.model.modules() if isinstance(m, CausalSelfAttention)]
        self._handles = [m.register_forward_hook(self._attention) for m in attention]
        self._handles.append(self.model.register_forward_hook(self._output))
        return self

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

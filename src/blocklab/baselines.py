"""What a model that ignores context scores: the unigram and uniform baselines (nats per character)."""

from __future__ import annotations

import math

import torch


def unigram_baselines(train: torch.Tensor, val: torch.Tensor, vocab_size: int) -> dict[str, float]:
    """`unigram`: entropy of the training split's character frequencies (the best loss without context);
    `unigram_val`: cross-entropy of the validation split under those frequencies (add-one smoothed, so a
    character unseen in training costs a finite amount); `uniform`: ln V."""
    counts = torch.bincount(train, minlength=vocab_size).double()
    p_train = counts / counts.sum()
    nonzero = p_train[p_train > 0]
    smoothed = (counts + 1) / (counts.sum() + vocab_size)
    return {
        "unigram": float(-(nonzero * nonzero.log()).sum()),
        "unigram_val": float(-smoothed.log()[val].mean()),
        "uniform": math.log(vocab_size),
    }

"""What a model that ignores context scores: the unigram and uniform baselines (nats per character)."""

from __future__ import annotations

import math

import numpy as np


def unigram_baselines(train: np.ndarray, val: np.ndarray, vocab_size: int) -> dict[str, float]:
    """`unigram`: entropy of the training split's character frequencies (the best loss without context);
    `unigram_val`: cross-entropy of the validation split under those frequencies (add-one smoothed, so a
    character unseen in training costs a finite amount); `uniform`: ln V."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64)
    p_train = counts / counts.sum()
    nonzero = p_train[p_train > 0]
    smoothed = (counts + 1) / (counts.sum() + vocab_size)
    return {
        "unigram": float(-(nonzero * np.log(nonzero)).sum()),
        "unigram_val": float(-np.log(smoothed)[val].mean()),
        "uniform": math.log(vocab_size),
    }

"""AdamW exactly as `torch.optim.AdamW(params, lr=lr, foreach=True)` computes it, without the class.

The update is torch's own (`torch.optim.adam.adam`, the function `AdamW.step` calls, with decoupled
weight decay), so the arithmetic and its rounding are torch's. What is left out is the `Optimizer`
class: creating any torch optimizer imports `torch._dynamo`, 3.3 s measured here, which every train
stage and every seed's worker would pay before its first step.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.optim.adam import adam

BETAS = (0.9, 0.999)  # torch.optim.AdamW's defaults, which the lesson keeps
EPS = 1e-8
WEIGHT_DECAY = 1e-2


class AdamW:
    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float):
        self.params = list(params)
        self.lr = lr
        # As torch initialises its state: steps as float32 scalars on the CPU, moments as zeros.
        self.steps = [torch.tensor(0.0) for _ in self.params]
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        if any(p.grad is None for p in self.params):
            raise ValueError("every parameter needs a gradient (torch's AdamW would skip it and keep its state)")
        adam(
            self.params, [p.grad for p in self.params], self.exp_avgs, self.exp_avg_sqs, [], self.steps,
            foreach=True, decoupled_weight_decay=True, amsgrad=False, beta1=BETAS[0], beta2=BETAS[1],
            lr=self.lr, weight_decay=WEIGHT_DECAY, eps=EPS, maximize=False,
        )

    def state_dict(self) -> dict:
        return {"lr": self.lr, "steps": self.steps, "exp_avgs": self.exp_avgs, "exp_avg_sqs": self.exp_avg_sqs}

    def load_state_dict(self, state: dict) -> None:
        self.lr = state["lr"]
        for mine, saved in ((self.steps, state["steps"]), (self.exp_avgs, state["exp_avgs"]),
                            (self.exp_avg_sqs, state["exp_avg_sqs"])):
            if len(mine) != len(saved):
                raise ValueError(f"the saved state holds {len(saved)} tensors for {len(mine)} parameters")
            for tensor, value in zip(mine, saved):
                tensor.copy_(value)

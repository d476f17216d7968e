"""AdamW exactly as `torch.optim.AdamW(params, lr=lr)` computes it, a few whole-model operations a step.

torch's AdamW on the CPU (`foreach=True`, its default there) runs each of its eight element-wise
operations once per parameter tensor: 6 layers make 76 tensors, ~600 small operations and as many
scalar-to-tensor copies a step. Here every parameter lives in one flat buffer (the module's parameters
become views of it), as do the moments and a copy of the gradients, and each operation runs once over
the buffer: the same element-wise arithmetic in the same order, so the same bits (tested against
`torch.optim.AdamW` over many steps; element-wise kernels round alike whether an element falls in
their vectorised body or their scalar tail, checked in the tests too).

What is left out is the `Optimizer` class: creating any torch optimizer imports `torch._dynamo`, 3.3 s
measured here, which every train stage and every seed's worker would pay before its first step.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

BETAS = (0.9, 0.999)  # torch.optim.AdamW's defaults, which the lesson keeps
EPS = 1e-8
WEIGHT_DECAY = 1e-2
ALIGN = 16  # elements: each parameter starts 64-byte aligned in the buffer, as a tensor of its own would


class AdamW:
    """Create it after the model is on its device: the parameters' storage moves into the optimizer's
    buffer (moving the model afterwards would detach them from it).

    `lr` is the learning rate of the step to come (the trainer sets it every step, warmup included) and
    `peak_lr` the schedule's top. `weight_decay` decays coupled to the learning rate (torch's AdamW:
    theta -= lr * weight_decay * theta), or with `independent_weight_decay` independently of it (theta -=
    weight_decay * (lr / peak_lr) * theta: the schedule's ramp, not the rate's size; Loshchilov & Hutter,
    Wortsman et al. 2023). `lr_multipliers` (one per parameter, e.g. mup's) scale each parameter's learning
    rate, its coupled decay included."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, weight_decay: float = WEIGHT_DECAY,
                 independent_weight_decay: bool = False, peak_lr: float | None = None,
                 lr_multipliers: list[float] | None = None):
        self.params = list(params)
        if len({(p.dtype, p.device) for p in self.params}) > 1:
            raise ValueError("every parameter must share one dtype and device")
        self.lr = lr
        self.peak_lr = lr if peak_lr is None else peak_lr
        self.weight_decay, self.independent_weight_decay = weight_decay, independent_weight_decay
        self.step_count = 0
        offsets, size = [], 0
        for p in self.params:
            offsets.append(size)
            size += -(-p.numel() // ALIGN) * ALIGN
        first = self.params[0]
        self.flat_params, self.flat_grads, self.exp_avg, self.exp_avg_sq = (
            torch.zeros(size, dtype=first.dtype, device=first.device) for _ in range(4))
        self._grad_views = []
        for p, start in zip(self.params, offsets):
            view = self.flat_params[start : start + p.numel()].view_as(p)
            view.copy_(p.detach())
            p.data = view
            self._grad_views.append(self.flat_grads[start : start + p.numel()].view_as(p))
        self.lr_scale = None  # per element, only where some parameter's rate is scaled
        if lr_multipliers is not None and any(m != 1 for m in lr_multipliers):
            self.lr_scale = torch.ones(size, dtype=first.dtype, device=first.device)
            for p, start, multiplier in zip(self.params, offsets, lr_multipliers):
                self.lr_scale[start : start + p.numel()] = multiplier

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        if self.params[0].data_ptr() != self.flat_params.data_ptr():  # the first parameter starts the buffer
            raise RuntimeError("the parameters moved out of the optimizer's buffer (create it after .to(device))")
        if any(p.grad is None for p in self.params):
            raise ValueError("every parameter needs a gradient (torch's AdamW would skip it and keep its state)")
        torch._foreach_copy_(self._grad_views, [p.grad for p in self.params])
        self.step_count += 1
        beta1, beta2 = BETAS
        # torch's `_multi_tensor_adam` (capturable=False), operation by operation, on the whole buffer.
        step = float(self.step_count)
        step_size = (self.lr / (1 - beta1**step)) * -1
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        params, grads, exp_avg, exp_avg_sq = self.flat_params, self.flat_grads, self.exp_avg, self.exp_avg_sq
        decay = self.weight_decay * (self.lr / self.peak_lr if self.independent_weight_decay else self.lr)
        if self.lr_scale is None or self.independent_weight_decay:
            params.mul_(1 - decay)
        else:
            params.mul_(1 - decay * self.lr_scale)
        exp_avg.lerp_(grads, 1 - beta1)
        exp_avg_sq.mul_(beta2)
        exp_avg_sq.addcmul_(grads, grads, value=1 - beta2)
        denom = exp_avg_sq.sqrt()
        denom.div_(bias_correction2_sqrt)
        denom.add_(EPS)
        if self.lr_scale is None:
            params.addcdiv_(exp_avg, denom, value=step_size)
        else:
            params.addcdiv_(exp_avg * self.lr_scale, denom, value=step_size)

    def state_dict(self) -> dict:
        return {"lr": self.lr, "step": self.step_count, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}

    def load_state_dict(self, state: dict) -> None:
        for name in ("exp_avg", "exp_avg_sq"):
            if state[name].shape != getattr(self, name).shape:
                raise ValueError(f"the saved {name} holds {state[name].numel()} values for a buffer of "
                                 f"{getattr(self, name).numel()} (another model?)")
        self.lr = state["lr"]
        self.step_count = int(state["step"])
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])

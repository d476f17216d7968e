"""The benchmark's kernel-by-kernel account of a training step (no timing asserted: only what is recorded)."""

import torch

from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.tools.step_kernels import KINDS, _TensorShape, kernel_seconds, kind_of, record_step


def test_operations_are_sorted_by_what_they_compute():
    assert kind_of("addmm") == "matrix products"
    assert kind_of("_scaled_dot_product_flash_attention_for_cpu_backward") == "attention"
    assert kind_of("native_layer_norm_backward") == "LayerNorm"
    assert kind_of("lerp_") == "AdamW"
    assert kind_of("nll_loss_forward") == "other"
    assert kind_of("transpose") is None  # a view: no arithmetic to time


def test_a_replayed_tensor_keeps_the_recorded_layout():
    recorded = _TensorShape((4, 3), (1, 4), torch.float32)  # a transposed 3 x 4
    fresh = recorded.fresh()
    assert (fresh.shape, fresh.stride(), fresh.dtype) == ((4, 3), (1, 4), torch.float32)
    ids = _TensorShape((2, 5), (5, 1), torch.int64).fresh()
    assert ids.dtype == torch.int64 and not ids.any()  # valid ids for any embedding or loss


def test_one_recorded_step_holds_every_kind_of_kernel_and_replays():
    model = ModelConfig(n_layers=2, placement="post")
    calls = record_step(model, TrainConfig(lr=1e-2), vocab_size=65)
    names = {func.overloadpacket.__name__ for func, _, _ in calls}
    assert {"addmm", "mm", "gelu", "gelu_backward", "native_layer_norm", "lerp_", "addcdiv_"} <= names
    assert sum(name.startswith("_scaled_dot_product") for name in names) == 2  # forward and backward
    # one LayerNorm backward per norm: two blocks of two norms
    assert sum(func.overloadpacket.__name__ == "native_layer_norm_backward" for func, _, _ in calls) == 2 * 2
    seconds = kernel_seconds(calls, repeats=1)
    assert set(seconds) == {*KINDS, "other"} and all(s > 0 for s in seconds.values())

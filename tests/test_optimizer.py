import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from blocklab.run.settings import ModelConfig
from blocklab.run.model import build_model
from blocklab.run.optimizer import AdamW

VOCAB = 65


def _train(model, step_fn, steps: int, warmup: int = 5) -> None:
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        idx = torch.randint(0, VOCAB, (8, 33), generator=g)
        loss = F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten())
        step_fn(loss, 1e-2 * min(1.0, (step + 1) / warmup))


def test_adamw_updates_bitwise_as_torch_adamw_with_a_changing_learning_rate():
    # 65 characters: the head's bias (65 values) ends in an element-wise kernel's scalar tail in torch's
    # per-tensor AdamW but inside the vectorised body of the flat buffer.
    ours_model, torch_model = (build_model(ModelConfig(n_layers=2, placement="post"), VOCAB, 0) for _ in range(2))
    ours, theirs = AdamW(ours_model.parameters(), lr=1e-2), torch.optim.AdamW(torch_model.parameters(), lr=1e-2,
                                                                             foreach=True)

    def ours_step(loss, lr):
        ours.lr = lr
        ours.zero_grad()
        loss.backward()
        ours.step()

    def torch_step(loss, lr):
        for group in theirs.param_groups:
            group["lr"] = lr
        theirs.zero_grad()
        loss.backward()
        theirs.step()

    _train(ours_model, ours_step, 30, warmup=10)
    _train(torch_model, torch_step, 30, warmup=10)
    assert all(torch.equal(a, b) for a, b in zip(ours_model.parameters(), torch_model.parameters()))
    assert not torch.equal(next(ours_model.parameters()), next(build_model(ModelConfig(n_layers=2), VOCAB, 0).parameters()))


def test_adamw_state_saved_and_loaded_continues_identically():
    def step_fn(opt):
        def fn(loss, lr):
            opt.lr = lr
            opt.zero_grad()
            loss.backward()
            opt.step()
        return fn

    straight = build_model(ModelConfig(n_layers=1), VOCAB, 0)
    opt = AdamW(straight.parameters(), lr=1e-2)
    _train(straight, step_fn(opt), 6)
    resumed = build_model(ModelConfig(n_layers=1), VOCAB, 1)
    resumed.load_state_dict(straight.state_dict())
    again = AdamW(resumed.parameters(), lr=0.5)
    again.load_state_dict({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in opt.state_dict().items()})
    _train(straight, step_fn(opt), 4)
    _train(resumed, step_fn(again), 4)
    assert all(torch.equal(a, b) for a, b in zip(straight.parameters(), resumed.parameters()))


def test_elementwise_kernels_round_alike_in_their_vectorised_body_and_scalar_tail():
    # The flat buffer rests on this: torch's per-tensor AdamW computes a tensor's last numel % 16 values in
    # each kernel's scalar loop; the flat buffer computes them in its vectorised loop.
    g = torch.Generator().manual_seed(0)
    n = 15 * 4000
    a, b = torch.randn(n, generator=g) * 1e-2, torch.randn(n, generator=g) * 1e-2
    c = torch.rand(n, generator=g) * 1e-4 + 1e-9
    ops = {
        "lerp_": lambda x, y, z: x.lerp_(y, 1 - 0.9),
        "mul_": lambda x, y, z: x.mul_(1 - 1e-2 * 1e-2),
        "addcmul_": lambda x, y, z: x.addcmul_(y, y, value=1 - 0.999),
        "sqrt/div_/add_": lambda x, y, z: z.sqrt().div_(0.0316).add_(1e-8),
        "addcdiv_": lambda x, y, z: x.addcdiv_(y, z, value=-0.0123),
    }
    for name, op in ops.items():
        whole = op(a.clone(), b.clone(), c.clone())
        tails = torch.cat([op(a[i : i + 15].clone(), b[i : i + 15].clone(), c[i : i + 15].clone())
                           for i in range(0, n, 15)])
        assert torch.equal(whole, tails), name


def test_parameters_become_views_of_one_aligned_buffer_and_moving_them_is_caught():
    model = build_model(ModelConfig(n_layers=1), VOCAB, 0)
    before = [p.detach().clone() for p in model.parameters()]
    opt = AdamW(model.parameters(), lr=1e-3)
    for p, saved in zip(model.parameters(), before):
        assert torch.equal(p, saved)
        assert p.untyped_storage().data_ptr() == opt.flat_params.untyped_storage().data_ptr()
        assert p.data_ptr() % 64 == 0
    F.cross_entropy(model(torch.zeros(2, 4, dtype=torch.long)).flatten(0, 1), torch.zeros(8, dtype=torch.long)).backward()
    model.to(torch.float64)
    with pytest.raises(RuntimeError, match="create it after"):
        opt.step()


def test_a_training_step_does_not_import_torch_dynamo():
    # Creating a torch.optim optimizer imports torch._dynamo (seconds); ours must not.
    code = (
        "import sys, torch\n"
        "from blocklab.run.optimizer import AdamW\n"
        "m = torch.nn.Linear(4, 2)\n"
        "o = AdamW(m.parameters(), lr=1e-3)\n"
        "m(torch.ones(3, 4)).sum().backward(); o.step()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"

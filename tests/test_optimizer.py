import subprocess
import sys

import torch
import torch.nn.functional as F

from blocklab.model import ModelConfig, build_model
from blocklab.optimizer import AdamW

VOCAB = 65


def _train(model, step_fn, steps: int, warmup: int = 5) -> None:
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        idx = torch.randint(0, VOCAB, (8, 33), generator=g)
        loss = F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten())
        step_fn(loss, 1e-2 * min(1.0, (step + 1) / warmup))


def test_adamw_updates_bitwise_as_torch_adamw_with_a_changing_learning_rate():
    ours_model, torch_model = (build_model(ModelConfig(n_layers=2, norm="post"), VOCAB, 0) for _ in range(2))
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

    _train(ours_model, ours_step, 12)
    _train(torch_model, torch_step, 12)
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
    again.load_state_dict({k: [t.clone() for t in v] if isinstance(v, list) else v
                           for k, v in opt.state_dict().items()})
    _train(straight, step_fn(opt), 4)
    _train(resumed, step_fn(again), 4)
    assert all(torch.equal(a, b) for a, b in zip(straight.parameters(), resumed.parameters()))


def test_a_training_step_does_not_import_torch_dynamo():
    # Creating a torch.optim optimizer imports torch._dynamo (seconds); ours must not.
    code = (
        "import sys, torch\n"
        "from blocklab.optimizer import AdamW\n"
        "m = torch.nn.Linear(4, 2)\n"
        "o = AdamW(m.parameters(), lr=1e-3)\n"
        "m(torch.ones(3, 4)).sum().backward(); o.step()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"

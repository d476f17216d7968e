"""Does this machine compute blocklab's bits? A few short runs, their weights' digests, and the committed ones.

The runs exercise every kind of kernel the plan's runs use (LayerNorm, RMSNorm and DyT's tanh, GELU, ReLU and
SwiGLU, attention with and without a norm on its queries and keys, learned and rotary positions, post-norm,
pre-norm, Peri-LN and ReZero, muP's scaled products, z-loss, AdamW) on a corpus that needs no download: a fixed sequence of tokens, the same everywhere.
`reports/fingerprint.json` holds their digests as the committed results' machine computed them (the DVC stage
`fingerprint`); `blocklab fingerprint` trains them again here and compares.
"""

from __future__ import annotations

import json
from pathlib import Path

from blocklab.run.settings import ModelConfig, TrainConfig

FINGERPRINT_FILE = Path("reports/fingerprint.json")
VOCAB = 65
STEPS = 30

# name -> (model, training): short runs that between them use every kernel of the plan's runs
RUNS = {
    "post-norm, GELU, LayerNorm (table A)": (ModelConfig(placement="post"), TrainConfig(steps=STEPS, lr=1e-2, device="cpu")),
    "pre-norm, RMSNorm, SwiGLU, qk-RMSNorm, z-loss": (
        ModelConfig(norm_type="rmsnorm", ffn="swiglu", activation="silu", qk_norm="rmsnorm", n_layers=2),
        TrainConfig(steps=STEPS, lr=3e-3, warmup=10, z_loss=1e-4, device="cpu")),
    "ReZero, ReLU, no norm": (ModelConfig(residual="rezero", norm_type="none", activation="relu", n_layers=4),
                              TrainConfig(steps=STEPS, lr=1e-2, device="cpu")),
    "muP at width 128, qk-layernorm, DeepNorm": (
        ModelConfig(d_model=128, n_layers=2, parametrization="mup", base_width=64, qk_norm="layernorm",
                    placement="post", residual="deepnorm"),
        TrainConfig(steps=STEPS, lr=1e-2, warmup=5, device="cpu")),
    "Peri-LN with DyT, rotary positions, no biases": (
        ModelConfig(placement="peri", norm_type="dyt", rope=True, bias=False, n_layers=2),
        TrainConfig(steps=STEPS, lr=3e-3, device="cpu")),
}


def corpus():
    """A fixed token sequence (no download, no random generator): training and validation tokens."""
    import torch

    n = 40_000
    i = torch.arange(n, dtype=torch.int64)
    tokens = (i * 31 + (i * i) // 7 + (i // 97) * 13) % VOCAB
    return tokens[: n * 9 // 10], tokens[n * 9 // 10:]


def digests(echo=None) -> dict[str, dict]:
    """Train every fingerprint run here (one thread, on the pinned path) and return each one's weights digest
    and last training loss."""
    from blocklab.run.job import THREADS
    from blocklab.run.numerics import check_pinned
    from blocklab.run.results import weights_digest
    from blocklab.run.threads import torch_threads
    from blocklab.run.training import train_run

    check_pinned()
    train, val = corpus()
    out = {}
    with torch_threads(THREADS):
        for name, (model, train_cfg) in RUNS.items():
            result = train_run(model.canonical(), train_cfg, 0, train, val, VOCAB)
            out[name] = {"weights": weights_digest(result.weights), "loss": result.curve[-1]["loss"]}
            if echo:
                echo(f"  {out[name]['weights'][:16]}  {name}")
    return out


def recorded(runs: dict[str, dict]) -> dict:
    """What the committed file holds: the family and versions the bits belong to, and the digests. Nothing that
    names the machine: another machine of the family writes the same bytes."""
    from blocklab.run.numerics import PINS, numeric_path

    path = numeric_path()
    return {"family": path["family"], "pins": PINS, "torch": path["torch"], "mkl": path["mkl_version"],
            "runs": {name: run["weights"] for name, run in runs.items()}}


def first_difference(here: dict, committed: dict) -> str | None:
    """The first way `here` differs from `committed` (None: the same bits)."""
    for key in ("family", "torch", "mkl", "pins"):
        if here[key] != committed.get(key):
            return f"{key}: this machine has {here[key]!r}, the committed results {committed.get(key)!r}"
    for name, digest in committed["runs"].items():
        if here["runs"].get(name) != digest:
            return f"run '{name}': weights {str(here['runs'].get(name))[:16]} here, {digest[:16]} committed"
    return None


def read_committed(path: Path = FINGERPRINT_FILE) -> dict:
    return json.loads(Path(path).read_text())


def reported(committed_file: Path, echo) -> int:
    """`blocklab fingerprint`: the machine's numeric family and the runs' digests, printed, against the
    committed ones; the exit status (0: the same bits, 1: not)."""
    import time

    import torch

    from blocklab.run.numerics import PINS, numeric_path

    started = time.perf_counter()
    path = numeric_path()
    echo(f"CPU            {path['cpu']} ({path['machine']})")
    echo(f"numeric family {path['family']}")
    echo(f"  ATen         {path['aten']} (pinned: ATEN_CPU_CAPABILITY={PINS['ATEN_CPU_CAPABILITY']})")
    echo(f"  MKL          {path['mkl'] or 'none'} {path['mkl_version']}, dispatching for {path['mkl_dispatch'] or '-'}"
         f" (pinned: MKL_CBWR={PINS['MKL_CBWR']})")
    echo(f"  oneDNN       {path['onednn'] or 'none'} (pinned: ONEDNN_MAX_CPU_ISA={PINS['ONEDNN_MAX_CPU_ISA']})")
    echo(f"  torch        {path['torch']}")
    if torch.cuda.is_available():
        echo("  (runs on this machine's GPU are another family, not pinned: CUDA rounds as its kernels do; the "
             "fingerprint checks the CPU)")
    echo(f"{len(RUNS)} fingerprint runs, {STEPS} steps each, at one thread:")
    here = recorded(digests(echo=echo))
    echo(f"({time.perf_counter() - started:.1f} s)")
    if not Path(committed_file).exists():
        echo(f"{committed_file} does not exist: nothing to compare with (`dvc repro fingerprint` writes it)")
        return 1
    committed = read_committed(committed_file)
    if here["family"] != committed.get("family"):
        echo(f"the committed results were made in the family '{committed.get('family')}': this machine's bits are "
             f"not expected to match them (docs/reproducibility.md)")
        return 1
    difference = first_difference(here, committed)
    if difference:
        echo(f"differs from {committed_file}: {difference}")
        return 1
    echo(f"the same bits as {committed_file}: this machine computes the committed results' numbers")
    return 0

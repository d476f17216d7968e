"""What rotary positions cost (`blocklab bench --rotary`; issue 66, item 4).

Two ratios, each measured within one run, at the trainer's one thread, the two sides alternating so that a shared
machine slows them alike:

- a training step (forward and backward, `blocklab.run.training.loss_and_gradients`) of an ablation's block with
  rotary positions against the same block with the learned position table (the modern ladder's today's block and
  its removal of rotary, by default), on the same batches;
- the rotation alone (`blocklab.run.model.Rotary` on a head's queries and keys, forward and backward) against the
  attention it rotates (`scaled_dot_product_attention` on the same queries, keys and values, forward and backward).

The first is what a run pays; the second says how far the rotation is from the work it serves."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Callable

import click


def _alternated(timed: dict[str, Callable[[], None]], repeats: int, warmup: int = 3) -> dict[str, float]:
    """The median seconds of each callable over `repeats` calls, the callables taking turns (after `warmup` each)."""
    for call in timed.values():
        for _ in range(warmup):
            call()
    seconds: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(repeats):
        for name, call in timed.items():
            started = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in seconds.items()}


def measured(ablation: str, with_rope: str, without_rope: str, corpus, params_file: str, repeats: int) -> dict:
    """Each side's median seconds and the two ratios (see the module's docstring), on batches of `corpus`
    (blocklab.run.data.Corpus)."""
    import torch
    import torch.nn.functional as F

    from blocklab.params.schema import load_params
    from blocklab.run.job import THREADS
    from blocklab.run.model import Rotary, build_model
    from blocklab.run.threads import torch_threads
    from blocklab.run.training import loss_and_gradients

    plan = load_params(params_file)
    specs = {"rotary": plan.spec(ablation, with_rope), "learned": plan.spec(ablation, without_rope)}
    if not specs["rotary"].model.rope or specs["learned"].model.rope:
        raise click.UsageError(f"{ablation}/{with_rope} must have rotary positions and {ablation}/{without_rope} "
                               f"the learned table (model.rope true and false)")
    model_cfg, train_cfg = specs["rotary"].model, specs["rotary"].train
    generator = torch.Generator().manual_seed(0)
    starts = torch.randint(0, len(corpus.train) - model_cfg.context - 1, (train_cfg.batch_size,), generator=generator)
    chunk = corpus.train[starts[:, None] + torch.arange(model_cfg.context + 1)]

    def step(model: torch.nn.Module) -> Callable[[], None]:
        params = [p for p in model.parameters() if p.requires_grad]

        def run() -> None:
            for p in params:
                p.grad = None
            loss_and_gradients(model, params, chunk)
        return run

    head = model_cfg.d_model // model_cfg.n_heads
    shape = (train_cfg.batch_size, model_cfg.n_heads, model_cfg.context, head)
    q, k, v = (torch.randn(shape, generator=generator, requires_grad=True) for _ in range(3))
    rotary = Rotary(head)

    def rotation() -> None:
        (rotary(q).sum() + rotary(k).sum()).backward()

    def attention() -> None:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

    with torch_threads(THREADS):
        models = {name: build_model(spec.model.canonical(), corpus.vocab_size, seed=0) for name, spec in specs.items()}
        steps = _alternated({name: step(model) for name, model in models.items()}, repeats)
        parts = _alternated({"rotation": rotation, "attention": attention}, repeats)
    return {"ablation": ablation, "with_rope": with_rope, "without_rope": without_rope, "repeats": repeats,
            "step_seconds": steps, "step_ratio": steps["rotary"] / steps["learned"],
            "part_seconds": parts, "rotation_over_attention": parts["rotation"] / parts["attention"]}


def shown(ablation: str, with_rope: str, without_rope: str, encoded: str, params_file: str, repeats: int) -> dict:
    from blocklab.run.data import load_corpus

    figures = measured(ablation, with_rope, without_rope, load_corpus(Path(encoded)), params_file, repeats)
    steps, parts = figures["step_seconds"], figures["part_seconds"]
    click.echo(f"\nrotary positions: {ablation}/{with_rope} against {ablation}/{without_rope}, one thread, "
               f"medians of {repeats} alternated")
    click.echo(f"  a training step (forward and backward): {steps['rotary'] * 1e3:.2f} ms with rotary, "
               f"{steps['learned'] * 1e3:.2f} ms with the learned table: {figures['step_ratio']:.2f}x")
    click.echo(f"  the rotation of the queries and keys: {parts['rotation'] * 1e3:.3f} ms, the attention it rotates "
               f"{parts['attention'] * 1e3:.3f} ms: {figures['rotation_over_attention']:.2f}x the attention")
    return figures

"""The trainer against the lesson's loop written plainly, on the same runs: throughput, equal results, GFLOP/s,
and the ceiling on the ratio at bitwise-equal results (one step's kernels at one thread, by kind)."""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

import click
import torch
import torch.nn as nn
import torch.nn.functional as F

from blocklab.errors import BlocklabError
from blocklab.run.job import THREADS
from blocklab.params.schema import RunSpec, load_params
from blocklab.run.data import Corpus
from blocklab.run.model import planned_flops_per_token
from blocklab.run.settings import ModelConfig
from blocklab.run.threads import torch_threads
from blocklab.run.training import LAST_STEPS
from blocklab.schedule.plan import jobs_of
from blocklab.schedule.pool import train_runs
from blocklab.schedule.train_stages import require_encoded
from blocklab.tools.step_kernels import kernel_seconds, record_step


# --- the lesson's model and loop, exactly as ../shared/reference/README.md describes them ---------

class _RefAttention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class _RefBlock(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.d_model
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = _RefAttention(d, cfg.n_heads)
        self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.pre = cfg.placement == "pre"

    def forward(self, x):
        if self.pre:
            x = x + self.attn(self.ln1(x))
            return x + self.ffn(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ffn(x))


class _RefTinyLM(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.context, cfg.d_model)
        self.blocks = nn.ModuleList(_RefBlock(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model) if cfg.placement == "pre" else None
        self.head = nn.Linear(cfg.d_model, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x) if self.ln_f is not None else x)


def reference_loop(spec: RunSpec, seed: int, train: torch.Tensor, vocab: int) -> float:
    """The lesson's loop, plainly; returns the mean training loss over the last 25 steps."""
    cfg, tc = spec.model, spec.train
    T, B = cfg.context, tc.batch_size
    torch.manual_seed(seed)
    model = _RefTinyLM(cfg, vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr)
    g = torch.Generator().manual_seed(seed)
    losses = []
    for step in range(tc.steps):
        ix = torch.randint(0, len(train) - T - 1, (B,), generator=g)
        x = torch.stack([train[i : i + T] for i in ix])
        y = torch.stack([train[i + 1 : i + T + 1] for i in ix])
        lr = tc.lr * min(1.0, (step + 1) / tc.warmup) if tc.warmup else tc.lr
        for group in opt.param_groups:
            group["lr"] = lr
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, vocab), y.view(-1))
        opt.zero_grad()
        loss.backward()
        torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()  # measured, as in the lesson
        opt.step()
        losses.append(loss.item())
    return sum(losses[-LAST_STEPS:]) / LAST_STEPS


# --- what the machine and the model ask for -------------------------------------------------------

def matmul_peak_gflops(n: int = 2048, repeats: int = 5) -> float:
    """fp32 matrix-product peak with all threads: the best of a few large square products."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm-up
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _timed_train_seeds(spec: RunSpec, corpus: Corpus) -> tuple[float, dict]:
    started = time.perf_counter()
    results = train_runs(jobs_of(spec), corpus, progress=False)
    return time.perf_counter() - started, results


def trainer_as_the_stage_runs_it(spec: RunSpec, corpus: Corpus) -> tuple[float, dict]:
    """Seconds to train a variant's seeds in a fresh process, as the train stage does, timed inside that
    process: the start of the process and the import of torch count as pipeline overhead, measured
    separately."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_timed_train_seeds, spec, corpus).result()


def compare_trainers(specs: list[RunSpec], corpus: Corpus, echo=print, rounding: bool = False) -> dict:
    """The trainer and the reference loop on the same runs, both at the trainer's one thread a run:
    throughput, ratio, and equal results.

    With `rounding`, the reference loop also runs each run with torch's default thread count, which sums
    otherwise (LayerNorm's gradients, and on some CPUs the products'): how far a change of rounding alone
    moves each result."""
    vocab = corpus.vocab_size
    # The first torch optimizer a process creates imports torch._dynamo (3.3 s here): not a cost per step.
    torch.optim.AdamW([torch.zeros(1, requires_grad=True)])
    rows, trainer_seconds, reference_seconds, steps = [], 0.0, 0.0, 0
    flops = 0
    for spec in specs:
        seconds, results = trainer_as_the_stage_runs_it(spec, corpus)
        trainer_seconds += seconds
        for seed in spec.seeds:
            started = time.perf_counter()
            with torch_threads(THREADS):
                reference = reference_loop(spec, seed, corpus.train, vocab)
            reference_seconds += time.perf_counter() - started
            ours = results[spec.key(seed)].metrics["train_loss_last25"]
            rows.append({"run": spec.key(seed), "trainer": ours, "reference": reference,
                         "difference": ours - reference})
            if rounding:
                rows[-1]["reference_default_threads"] = reference_loop(spec, seed, corpus.train, vocab)
                rows[-1]["rounding_difference"] = rows[-1]["reference_default_threads"] - reference
            steps += spec.train.steps
            flops += spec.train.steps * spec.train.batch_size * spec.model.context * planned_flops_per_token(
                spec.model, vocab)
            echo(f"  {spec.key(seed)}: trainer {ours:.4f}  reference {reference:.4f}"
                 + (f"  reference at {torch.get_num_threads()} threads {rows[-1]['reference_default_threads']:.4f}"
                    if rounding else ""))
    tokens = sum(s.train.steps * s.train.batch_size * s.model.context * len(s.seeds) for s in specs)
    kernels = step_kernel_bounds(specs, vocab, cores=torch.get_num_threads())
    return {
        "runs": rows,
        "steps": steps,
        "trainer": {"seconds": trainer_seconds, "steps_per_s": steps / trainer_seconds,
                    "tokens_per_s": tokens / trainer_seconds, "gflops": flops / trainer_seconds / 1e9},
        "reference": {"seconds": reference_seconds, "steps_per_s": steps / reference_seconds,
                      "tokens_per_s": tokens / reference_seconds, "gflops": flops / reference_seconds / 1e9},
        "throughput_ratio": reference_seconds / trainer_seconds,
        "kernels": kernels,
        "ceiling_ratio": reference_seconds / kernels["least_seconds"],
        "matrix_products_ceiling_ratio": reference_seconds / kernels["matrix_products_seconds"],
        "max_abs_difference": max(abs(r["difference"]) for r in rows),
        **({"max_abs_rounding_difference": max(abs(r["rounding_difference"]) for r in rows)} if rounding else {}),
        "matmul_peak_gflops": matmul_peak_gflops(),
        "threads": torch.get_num_threads(),
    }


def step_kernel_bounds(specs: list[RunSpec], vocab: int, cores: int) -> dict:
    """The least time the runs could take on `cores` cores with every result bitwise as it is: the kernels of
    each run's steps at one thread (`step_kernels`), summed over all steps and spread perfectly over the cores,
    with nothing else spent (no evaluation, no Python, no waiting). Also the same for the matrix products
    alone, the bound for a trainer free to round differently. And one step's kernels by kind, in ms."""
    least = products = 0.0
    by_kind: dict[str, float] = {}
    measured: dict[tuple, dict[str, float]] = {}  # the kernels depend on the model's and the batch's shapes only
    for spec in specs:
        shapes = (spec.model, spec.train.batch_size)
        if shapes not in measured:
            measured[shapes] = kernel_seconds(record_step(spec.model, spec.train, vocab))
        seconds = measured[shapes]
        runs = spec.train.steps * len(spec.seeds) / cores
        least += sum(seconds.values()) * runs
        products += seconds["matrix products"] * runs
        by_kind = by_kind or {kind: 1e3 * s for kind, s in seconds.items()}
    return {"least_seconds": least, "matrix_products_seconds": products, "step_ms_by_kind": by_kind,
            "step_of": specs[0].key(specs[0].seeds[0]).rsplit("/", 1)[0]}


def shown(ablation: str, steps: int | None, encoded: str, params_file: str, rounding: bool, echo=click.echo) -> dict:
    """The comparison run and printed: throughputs, GFLOP/s, the ratio and its ceilings, the kernels by kind."""
    from dataclasses import replace

    from blocklab.run.data import load_corpus

    specs = [s for s in load_params(params_file).specs() if s.ablation == ablation]
    if not specs:
        raise BlocklabError(f"--ablation: no ablation '{ablation}' in {params_file}")
    if steps is not None:
        specs = [replace(s, train=replace(s.train, steps=steps)) for s in specs]
    require_encoded(encoded, "the trainer comparison trains on it (--no-trainer skips it)")
    corpus = load_corpus(encoded)
    echo(f"benchmarking {ablation}: {sum(len(s.seeds) for s in specs)} runs, trainer and reference loop")
    figures = compare_trainers(specs, corpus, echo=click.echo, rounding=rounding)
    t, r = figures["trainer"], figures["reference"]
    echo(
        f"\n{'':22}{'steps/s':>10}{'tokens/s':>12}{'GFLOP/s':>10}\n"
        f"{'reference loop':22}{r['steps_per_s']:>10.1f}{r['tokens_per_s']:>12,.0f}{r['gflops']:>10.1f}\n"
        f"{'blocklab trainer':22}{t['steps_per_s']:>10.1f}{t['tokens_per_s']:>12,.0f}{t['gflops']:>10.1f}\n"
        f"{'fp32 matmul peak':22}{'':>10}{'':>12}{figures['matmul_peak_gflops']:>10.1f}\n\n"
        f"throughput ratio trainer / reference: {figures['throughput_ratio']:.2f}x\n"
        f"  ceiling with bitwise-equal results: {figures['ceiling_ratio']:.2f}x; matrix products alone: "
        f"{figures['matrix_products_ceiling_ratio']:.2f}x\n"
        f"largest |difference| in train_loss_last25: {figures['max_abs_difference']:.4f} "
        f"({'equal within 0.01' if figures['max_abs_difference'] <= 0.01 else 'NOT equal within 0.01'})"
    )
    if rounding:
        echo(f"largest |difference| the reference loop's own rounding makes ({figures['threads']} threads vs "
                   f"one): {figures['max_abs_rounding_difference']:.4f}")
    kernels = figures["kernels"]["step_ms_by_kind"]
    echo(f"\none step of {figures['kernels']['step_of']} at one thread, its kernels replayed by kind "
               f"({sum(kernels.values()):.1f} ms):")
    for kind, ms in kernels.items():
        echo(f"  {kind:18}{ms:>7.1f} ms")
    return figures

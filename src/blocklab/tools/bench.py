"""Benchmarks: the project's trainer against the lesson's loop written plainly, on the same runs.

Everything is a ratio measured within one run, because the machines are shared and noisy.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from blocklab.run.cell import THREADS
from blocklab.run.config import Params, RunSpec
from blocklab.run.settings import ModelConfig
from blocklab.run.data import Corpus
from blocklab.run.model import training_flops_per_token
from blocklab.run.threads import torch_threads
from blocklab.run.training import LAST_STEPS
from blocklab.schedule.plan import jobs_of
from blocklab.schedule.pool import train_runs
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
        self.pre = cfg.norm == "pre"

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
        self.ln_f = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else None
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
            flops += spec.train.steps * spec.train.batch_size * spec.model.context * training_flops_per_token(
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


def stage_seconds(timings_file: Path) -> dict[str, float]:
    """Each variant's training time in `timings_file` (reports/timings.json): its seeds train side by side,
    so a stage's time is its slowest seed's."""
    by_variant: dict[str, float] = {}
    for key, timing in json.loads(Path(timings_file).read_text()).items():
        variant = key.rsplit("/", 1)[0]
        by_variant[variant] = max(by_variant.get(variant, 0.0), timing["seconds"])
    return by_variant


def pipeline_overhead(timings_file: Path, echo=print) -> dict:
    """Force a full `dvc repro`, time it, and compare with the training time measured inside the runs.

    A variant's seeds train side by side, so a stage's training time is its slowest seed's. The run store is
    emptied first, so that every run trains rather than being copied."""
    import shutil

    from blocklab.schedule.run_store import STORE_DIR

    shutil.rmtree(STORE_DIR, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dvc", "repro", "--force", "--quiet"], check=True)
    wall = time.perf_counter() - started
    by_variant = stage_seconds(timings_file)
    training = sum(by_variant.values())
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dvc", "repro", "--quiet"], check=True)
    noop = time.perf_counter() - started
    return {"wall_seconds": wall, "training_seconds": training, "overhead_share": 1 - training / wall,
            "noop_repro_seconds": noop, "stages": len(by_variant)}


def plan_cost(old: Params, new: Params, corpus: Corpus, timings_file: Path, echo=print) -> dict:
    """What a change of plan costs in training time, old plan (every run trained) against new (a run equal to
    one an earlier stage trained is copied from the run store, blocklab.schedule.run_store), in the same run.

    A variant whose resolved settings (seeds included) both plans share, and that the new plan trains whole,
    costs the same under either: its time is read from this checkout's `timings_file` (a stage's time is
    its slowest seed's). Every other variant is trained as its stage trains it, old and new alternating so
    that the machine's drift falls on both; under the new plan only the seeds no earlier stage trained."""
    from dataclasses import replace

    old_specs = {(s.ablation, s.variant): s for s in old.specs()}
    by_variant = stage_seconds(timings_file)
    trained: set[tuple] = set()
    old_seconds = new_seconds = 0.0
    rows = []
    for spec in new.specs():
        before = old_specs.pop((spec.ablation, spec.variant), None)
        remaining = tuple(s for s in spec.seeds if (spec.model, spec.train, s) not in trained)
        trained.update((spec.model, spec.train, s) for s in spec.seeds)
        if before == spec and remaining == spec.seeds:
            old_cost = new_cost = by_variant[f"{spec.ablation}/{spec.variant}"]
        else:
            old_cost = 0.0 if before is None else (by_variant[f"{spec.ablation}/{spec.variant}"] if before == spec
                                                   else trainer_as_the_stage_runs_it(before, corpus)[0])
            new_cost = trainer_as_the_stage_runs_it(replace(spec, seeds=remaining), corpus)[0] if remaining else 0.0
            echo(f"{spec.ablation}/{spec.variant}: seeds {len(before.seeds) if before else 0} -> {len(spec.seeds)} "
                 f"({len(spec.seeds) - len(remaining)} copied): {old_cost:.1f} s -> {new_cost:.1f} s")
        old_seconds += old_cost
        new_seconds += new_cost
        rows.append({"variant": f"{spec.ablation}/{spec.variant}", "old_seconds": old_cost, "new_seconds": new_cost,
                     "seeds_copied": len(spec.seeds) - len(remaining)})
    for before in old_specs.values():  # variants the new plan dropped
        old_seconds += trainer_as_the_stage_runs_it(before, corpus)[0]
    return {"variants": rows, "old_seconds": old_seconds, "new_seconds": new_seconds,
            "ratio": new_seconds / old_seconds}


# A sweep that re-trains two one-seed stages per experiment (the residual ablation, 200 steps each) over a
# knob that changes no result (no run is long enough to checkpoint): every experiment does the same work,
# and all of them pass `blocklab check`, the pipeline's last stage, which a changed table-A setting fails.
QUEUE_SWEEP_PARAM = "ablations.residual.train.checkpoint_every"


def queue_sweep_values(count: int = 4) -> list[str]:
    """Values no earlier benchmark used: `dvc exp run` restores a stage from DVC's run cache when the same
    code, data and params ran before, and a restored stage would time nothing."""
    first = 1_000_000 + time.time_ns() // 1_000_000 % 1_000_000_000 * count
    return [str(first + i) for i in range(count)]


def queue_speedup(param: str, values: list[str], echo=print) -> dict:
    """Run the same kind of sweep through DVC's queue with one worker and with two, and compare.

    `values` are split in half: the first half is queued and run with `dvc queue start -j 1`, the second
    with `-j 2`; each value differs from every other and from earlier sweeps' (`queue_sweep_values`), so
    the run cache restores nothing the sweep should train. Runs land in a temporary MLflow store, and the
    experiments are removed afterwards."""
    half = len(values) // 2
    if half < 2:
        raise ValueError("give at least four values: two per queue setting")
    batches = {1: values[:half], 2: values[half:2 * half]}
    seconds: dict[int, float] = {}
    names: list[str] = []
    with tempfile.TemporaryDirectory() as store:
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{Path(store) / 'mlflow.db'}"}
        try:
            for jobs, batch in batches.items():
                for i, value in enumerate(batch):
                    name = f"bench-queue-j{jobs}-{i}"
                    names.append(name)
                    # `++`: set the key, adding it where params.yaml leaves it to the defaults
                    _dvc(env, "exp", "run", "--queue", "--name", name, "--set-param", f"++{param}={value}")
                started = time.perf_counter()
                _dvc(env, "queue", "start", "--jobs", str(jobs))
                _wait_for_queue(env, names[-len(batch):])
                seconds[jobs] = time.perf_counter() - started
                echo(f"  {len(batch)} experiments with -j {jobs}: {seconds[jobs]:.0f} s")
        finally:  # leave the user's queue and experiments as they were
            _dvc(env, "queue", "remove", *names, check=False)
            _dvc(env, "exp", "remove", *names, check=False)
    return {"param": param, "experiments_per_setting": half, "seconds_j1": seconds[1], "seconds_j2": seconds[2],
            "speedup": seconds[1] / seconds[2]}


def _dvc(env: dict, *args: str, check: bool = True) -> str:
    done = subprocess.run([sys.executable, "-m", "dvc", *args], env=env, capture_output=True, text=True)
    if check and done.returncode:
        raise RuntimeError(f"dvc {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def _wait_for_queue(env: dict, names: list[str], poll: float = 2.0) -> None:
    """Until every named experiment has succeeded; a failed one is an error."""
    while True:
        lines = [line for line in _dvc(env, "queue", "status").splitlines() if any(n in line for n in names)]
        if any("Failed" in line for line in lines):
            raise RuntimeError("a queued experiment failed:\n" + "\n".join(lines))
        if len(lines) == len(names) and all("Success" in line for line in lines):
            return
        time.sleep(poll)


# --- the whole plan at once against stage by stage, on a cluster of any size -------------------------

def plan_stage_times(params: Params, timings: dict) -> dict[str, list[float]]:
    """Each train and map stage's runs' training times (reports/timings.json), the runs it trains itself:
    a run copied from another stage's (`reused_from`) costs nothing."""
    stages: dict[str, list[float]] = {}
    for spec in params.specs() + params.map_specs():
        stage = f"{'map' if spec.cell else 'train'}_{spec.ablation}@{spec.variant}"
        for seed in spec.seeds:
            timing = timings.get(spec.key(seed))
            if timing is not None and "reused_from" not in timing:
                stages.setdefault(stage, []).append(timing["seconds"])
    return stages


def longest_first_makespan(seconds: list[float], workers: int) -> float:
    """How long `workers` take to run jobs of these durations, each taking the longest one left as it frees up."""
    import heapq

    free = [0.0] * min(workers, len(seconds))
    for duration in sorted(seconds, reverse=True):
        heapq.heapreplace(free, free[0] + duration)
    return max(free, default=0.0)


def plan_schedule(stages: dict[str, list[float]], workers: list[int]) -> list[dict]:
    """Per cluster size: the plan's training wall time stage by stage (`dvc repro`: each stage's runs on the
    cluster, the next stage when the slowest is back) and all at once (`blocklab prefetch`, longest first),
    and the share of the workers' time each keeps busy."""
    work = sum(map(sum, stages.values()))
    rows = []
    for count in workers:
        by_stage = sum(longest_first_makespan(times, count) for times in stages.values())
        at_once = longest_first_makespan([t for times in stages.values() for t in times], count)
        rows.append({"workers": count, "stage_by_stage_seconds": round(by_stage, 1),
                     "whole_plan_seconds": round(at_once, 1), "ratio": round(by_stage / at_once, 2),
                     "busy_stage_by_stage": round(work / (count * by_stage), 3),
                     "busy_whole_plan": round(work / (count * at_once), 3)})
    return rows


# --- the default plan from a cold store: stage by stage against all at once ----------------------------

def make_repro_both_ways(workdir: Path, dask_workers: int = 0, targets: tuple[str, ...] = (), echo=print) -> dict:
    """The default plan (or `targets`, as `dvc repro TARGETS` narrows it) reproduced twice from nothing, in two
    fresh clones of this repository's HEAD under `workdir` (no run store, no DVC cache): `dvc repro` (each train
    stage trains its own runs, stage by stage) and `blocklab prefetch` then `dvc repro` (every run at once,
    longest first; the stages copy them). With `targets`, the corpus is fetched and encoded first in each
    clone, untimed; the whole plan's time includes it. With `dask_workers`, both train on a local Dask cluster
    of that many one-thread workers, started here. Returns the wall times, their ratio, the runs' training
    time as each way measured it, how busy the workers were, and whether both ways wrote the same metrics (each
    run's `metrics.json`, byte for byte). Busy is the plan's work over workers x wall, the work being the runs'
    training time as prefetch measured it, one run per worker: stage by stage on this machine's workers, a
    3-seed stage time-slices its seeds on 2 cores, which stretches each run's own time without doing more."""
    from contextlib import ExitStack

    root = Path.cwd()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1"}
    figures: dict = {"targets": list(targets)}
    metrics: dict[str, dict[str, bytes]] = {}
    with ExitStack() as stack:
        workers = os.cpu_count() or 1
        if dask_workers:
            env["BLOCKLAB_DASK_SCHEDULER"] = stack.enter_context(_local_dask_cluster(dask_workers))
            workers = dask_workers
        for way, commands in (("stage_by_stage", [["dvc", "repro", *targets]]),
                              ("prefetch", [["blocklab", "prefetch", *targets], ["dvc", "repro", *targets]])):
            clone = Path(workdir) / way
            subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
            if targets:
                subprocess.run(["dvc", "repro", "encode"], cwd=clone, env=env, check=True, stdout=subprocess.DEVNULL)
            echo(f"{way}: {' && '.join(' '.join(c) for c in commands)} in {clone}")
            started = time.perf_counter()
            for command in commands:
                subprocess.run(command, cwd=clone, env=env, check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - started
            timings = _run_timings(clone / "data/runs")
            training = sum(t["seconds"] for t in timings.values() if "reused_from" not in t)
            metrics[way] = {str(path.relative_to(clone)): path.read_bytes()
                            for path in sorted((clone / "data/runs").glob("**/metrics.json"))}
            figures[way] = {"wall_seconds": round(wall, 1), "training_seconds": round(training, 1),
                            "runs": len(timings), "trained": sum("reused_from" not in t for t in timings.values())}
            echo(f"  {wall:.0f} s wall, {training:.0f} s of training as the runs measured it")
    work = figures["prefetch"]["training_seconds"]
    for way in ("stage_by_stage", "prefetch"):
        figures[way]["busy"] = round(work / (workers * figures[way]["wall_seconds"]), 3)
    figures["workers"] = workers
    figures["ratio"] = round(figures["stage_by_stage"]["wall_seconds"] / figures["prefetch"]["wall_seconds"], 3)
    figures["same_metrics"] = bool(metrics["prefetch"]) and metrics["stage_by_stage"] == metrics["prefetch"]
    return figures


def _run_timings(runs_dir: Path) -> dict[str, dict]:
    """Every run's timing.json under a train stages' output folder, by the run's path (<ablation>/.../seed<k>)."""
    return {str(path.parent.relative_to(runs_dir)): json.loads(path.read_text())
            for path in sorted(runs_dir.glob("**/timing.json"))}


def _local_dask_cluster(workers: int):
    """A Dask scheduler and `workers` one-thread worker processes (without nannies) on 127.0.0.1, stopped on
    leaving; yields its address."""
    from contextlib import contextmanager

    from blocklab.tools.processes import stop_group

    @contextmanager
    def cluster():
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        address = f"tcp://127.0.0.1:{port}"
        dask = str(Path(sys.executable).with_name("dask"))
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True}
        started = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                     "--dashboard-address", ":0", "--no-show"], **quiet)]
        # No nanny: a nanny starts its worker with MALLOC_TRIM_THRESHOLD_=65536 (Dask's default pre-spawn
        # environment), with which a run trains 1.6x slower here (docs/performance.md).
        started += [subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--no-nanny", "--host",
                                      "127.0.0.1", "--dashboard-address", ":0"], **quiet) for _ in range(workers)]
        try:
            from distributed import Client

            with Client(address, timeout="60s", set_as_default=False) as client:
                client.wait_for_workers(workers, timeout=120)
            yield address
        finally:
            for process in reversed(started):
                stop_group(process.pid)
                process.wait()

    return cluster()


# --- the plan bar's time left, against what the runs took ---------------------------------------------

def time_left_quality(params: Params, runs_dir: Path, at: tuple[float, ...] = (0.02, 0.05, 0.1, 0.25, 0.5, 0.75)
                      ) -> dict:
    """How well `blocklab prefetch`'s bar told the time left, from the runs it trained (their timing.json
    under `runs_dir`, all trained in one prefetch): after each share `at` of the runs was back, the time left
    the bar showed (the estimate still to train at the average pace so far, `blocklab.schedule.plan.estimated_seconds`)
    against the time the rest took. Also the least-squares fit of the estimate's four costs to these runs,
    which is where `blocklab.schedule.plan.COSTS` come from."""
    import numpy as np

    from blocklab.schedule.plan import cost_terms, estimated_seconds

    timings = _run_timings(runs_dir)
    runs = [(spec, timings[spec.key(seed)]) for spec in params.specs() + params.map_specs() for seed in spec.seeds
            if "reused_from" not in timings.get(spec.key(seed), {"reused_from": None})]
    if not runs:
        raise ValueError(f"no trained run's timing.json under {runs_dir}")
    seconds = np.array([t["seconds"] for _, t in runs])
    estimated = np.array([estimated_seconds(spec) for spec, _ in runs])
    start = min(t["started_at"] for _, t in runs)
    ended = np.array([t["ended_at"] - start for _, t in runs])
    order = np.argsort(ended)
    done, back, total = np.cumsum(estimated[order]), ended[order], ended.max()
    rows = []
    for share in at:
        i = max(int(share * len(runs)) - 1, 0)
        said = back[i] * (done[-1] - done[i]) / done[i]
        rows.append({"runs_back": i + 1, "elapsed": round(float(back[i]), 1), "time_left_said": round(float(said), 1),
                     "time_left_was": round(float(total - back[i]), 1), "ratio": round(float(said / (total - back[i])), 2)})

    fitted, *_ = np.linalg.lstsq(np.array([cost_terms(spec) for spec, _ in runs]), seconds, rcond=None)
    ratio = seconds / estimated
    return {"runs": len(runs), "at": rows, "measured_over_estimated": {
                "p10": round(float(np.percentile(ratio, 10)), 2), "median": round(float(np.median(ratio)), 2),
                "p90": round(float(np.percentile(ratio, 90)), 2)},
            "fitted": dict(zip(("SECONDS_PER_MATMUL_FLOP", "SECONDS_PER_TOKEN_CHANNEL_LAYER", "SECONDS_PER_STEP_LAYER",
                                "SECONDS_PER_STEP"), (float(f"{c:.2g}") for c in fitted)))}

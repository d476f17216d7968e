"""A map's cells on a Dask cluster (blocklab.schedule.cluster): a real `dask scheduler` and two real `dask worker`s on
127.0.0.1, started and stopped by the tests. The results equal the local workers' bit for bit; a worker
killed in the middle costs nothing; a scheduler that cannot be reached fails naming its address; workers
that a nanny started with MALLOC_TRIM_THRESHOLD_ are warned about. (The map's
stage and `blocklab prefetch` on a cluster, through DVC: tests/test_prefetch.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
import torch

from blocklab.errors import BlocklabError
from blocklab.run.job import Job, run_job
from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.run.data import Corpus
from blocklab.schedule.cluster import train_on_cluster
from blocklab.schedule.pool import train_runs

from conftest import free_port, reap_adopted, started, tree_of

DASK = str(Path(sys.executable).with_name("dask"))
# The scheduler's Active Memory Manager drops surplus replicas every 2 s by default; every 0.1 s here, so that a
# test waits for its cycles in a fraction of a run's time on any machine, not in a fixed time a fast one beats.
AMM_INTERVAL = 0.1
SCHEDULER_ENV = {"DASK_DISTRIBUTED__SCHEDULER__ACTIVE_MEMORY_MANAGER__INTERVAL": f"{AMM_INTERVAL}s"}


@contextmanager
def dask_cluster(workers: int = 2, kinds: list[tuple[list[str], dict[str, str]]] | None = None):
    """A scheduler and `workers` one-thread workers on 127.0.0.1; yields (address, the workers' processes).
    `kinds`: instead, one worker for each (extra `dask worker` options, extra environment)."""
    kinds = kinds or [([], {})] * workers
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    with ExitStack() as stack:
        stack.enter_context(started([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                     "--dashboard-address", ":0", "--no-show"],
                                    env={**os.environ, **SCHEDULER_ENV},
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        processes = [stack.enter_context(started([DASK, "worker", address, "--nthreads", "1",
                                                  "--host", "127.0.0.1", "--dashboard-address", ":0", *options],
                                                 env={**os.environ, **env},
                                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                     for options, env in kinds]
        from distributed import Client

        with Client(address, timeout="60s", set_as_default=False) as client:
            client.wait_for_workers(len(kinds), timeout=120)
        yield address, processes


def small_corpus(vocab: int = 11) -> Corpus:
    g = torch.Generator().manual_seed(0)
    return Corpus(chars=[chr(65 + i) for i in range(vocab)], train=torch.randint(0, vocab, (4000,), generator=g),
                  val=torch.randint(0, vocab, (1000,), generator=g))


def map_jobs(steps: int = 30) -> list[Job]:
    model = ModelConfig(d_model=16, n_heads=2, n_layers=2, context=8, placement="post")
    return [Job(f"m/post/lr{lr:g}_w{warmup}/seed{seed}", model,
                TrainConfig(steps=steps, lr=lr, warmup=warmup, eval_interval=10, eval_windows=64, device="cpu"), seed)
            for lr in (1e-3, 1e-2, 1e-1) for warmup in (0, 10) for seed in (0, 1)]


def same(a, b) -> bool:
    return a.curve == b.curve and a.metrics == b.metrics and all(
        torch.equal(a.weights[k], b.weights[k]) for k in a.weights)


def test_a_maps_cells_on_a_dask_cluster_equal_the_local_workers_bit_for_bit():
    corpus, jobs = small_corpus(), map_jobs()
    local = train_runs(jobs, corpus, workers=2, progress=False)
    with dask_cluster() as (address, _):
        started_at = time.perf_counter()
        remote = train_on_cluster(jobs, corpus, address, echo=lambda _: None)
        wall = time.perf_counter() - started_at
    assert list(remote) == [job.key for job in jobs]
    assert all(same(remote[key], local[key]) for key in local)
    training = sum(r.seconds for r in remote.values())
    overhead = sum(r.wall_seconds - r.seconds for r in remote.values())
    print(f"\n{len(jobs)} runs on 2 Dask workers: {wall:.1f} s; per run, its time from a worker taking it to its "
          f"result here minus its training: {overhead / training:.1%} of the training "
          f"({overhead / len(jobs) * 1000:.0f} ms a run, these runs being {training / len(jobs) * 1000:.0f} ms)")


@pytest.mark.parametrize("when", ["first runs", "last run"])
def test_a_worker_killed_in_the_middle_of_a_map_costs_nothing(when):
    """A worker killed as the first runs start, or the one training the last run once every other run is
    back (the moment the scheduler's memory manager keeps one copy of what the runs share: the corpus, once
    scattered, was then lost with that worker, and the run waiting on it forgotten)."""
    corpus, jobs = small_corpus(), map_jobs(steps=400)
    jobs[-1] = replace(jobs[-1], train=replace(jobs[-1].train, steps=3000))  # submitted last: ends last

    def unfinished_runs(dask_scheduler) -> list[str]:  # runs on the scheduler (a local function: pickled by value)
        return [str(key) for key, task in dask_scheduler.tasks.items() if str(key).startswith("blocklab-m/")
                and task.state in ("waiting", "queued", "no-worker", "processing")]

    with dask_cluster() as (address, workers):
        from concurrent.futures import ThreadPoolExecutor

        from distributed import Client

        with ThreadPoolExecutor(1) as pool, Client(address, timeout="60s", set_as_default=False) as watcher:
            submitted = pool.submit(train_on_cluster, jobs, corpus, address, lambda _: None)
            deadline = time.time() + 600
            # the last run: it alone unfinished (not merely one run unfinished: as the runs are submitted, one by
            # one, there is a moment with one too)
            last = f"blocklab-{jobs[-1].key}"
            while not (busy := [a for a, keys in watcher.processing().items() if keys]) or (
                    when == "last run" and [k[:len(last)] for k in watcher.run_on_scheduler(unfinished_runs)] != [last]):
                assert time.time() < deadline and not submitted.done(), f"no moment to kill a worker ({when})"
                time.sleep(0.2)
            if when == "last run":
                time.sleep(5 * AMM_INTERVAL)  # the memory manager's cycles drop the corpus's other copies
                # killed while it trains: the last run (3,000 steps) is far longer than five cycles
                assert len(watcher.run_on_scheduler(unfinished_runs)) == 1, "the last run ended before the kill"
            pids = watcher.run(os.getpid)
            victims = next(tree for tree in map(tree_of, workers) if pids[busy[0]] in {p.pid for p in tree})
            for process in victims:
                try:
                    process.kill()
                except psutil.NoSuchProcess:
                    pass
            psutil.wait_procs(victims, timeout=30)
            reap_adopted(victims)  # the worker process, orphaned when its nanny died, ended as this one's child
            remote = submitted.result(timeout=600)
    assert list(remote) == [job.key for job in jobs]  # every run, once
    for job in jobs[:4] + jobs[-2:]:
        assert same(remote[job.key], run_job(job, corpus)), job.key


def test_a_scheduler_that_cannot_be_reached_fails_naming_its_address():
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(BlocklabError, match=f"cannot reach the Dask scheduler at {address}"):
        train_on_cluster(map_jobs()[:1], small_corpus(), address, echo=lambda _: None)


def test_only_the_workers_whose_nanny_sets_malloc_trim_threshold_are_warned_about(tmp_path):
    """A nanny's default pre-spawn-environ sets MALLOC_TRIM_THRESHOLD_ (1.6x slower runs here): the warning
    names those workers and the two ways out, and neither way out is warned about: a worker without a
    nanny, and a nanny whose Dask config sets the variable to null (what the warning suggests)."""
    config = tmp_path / "dask"
    config.mkdir()
    (config / "blocklab.yaml").write_text("distributed:\n  nanny:\n    pre-spawn-environ:\n"
                                          "      MALLOC_TRIM_THRESHOLD_: null\n")
    said: list[str] = []
    kinds = [([], {}), (["--no-nanny"], {}), ([], {"DASK_CONFIG": str(config)})]
    with dask_cluster(kinds=kinds) as (address, _):
        from distributed import Client

        remote = train_on_cluster(map_jobs(steps=10)[:2], small_corpus(), address, echo=said.append)
        with Client(address, timeout="60s", set_as_default=False) as client:
            trimmed = [w for w, v in client.run(os.getenv, "MALLOC_TRIM_THRESHOLD_").items() if v is not None]
    assert len(remote) == 2 and len(trimmed) == 1
    warnings = [line for line in said if line.startswith("warning:")]
    assert len(warnings) == 1, said
    assert "1 of 3 Dask workers run with MALLOC_TRIM_THRESHOLD_=65536" in warnings[0] and trimmed[0] in warnings[0]
    assert "--no-nanny" in warnings[0] and "pre-spawn-environ.MALLOC_TRIM_THRESHOLD_ to null" in warnings[0]

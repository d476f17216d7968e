"""`blocklab prefetch`: the whole plan's runs trained at once into the run store, after which `dvc repro`
copies every run and trains nothing, writing what a plain `dvc repro` writes (real DVC, real workers, a
real Dask cluster); and a run store that never hands out a damaged entry."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from blocklab.params.schema import RunSpec, load_params
from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.schedule.plan import ensure_stored, estimated_seconds, planned_runs
from blocklab.schedule.run_store import RunKeys, RunStore

from conftest import DETERMINISTIC_RUN_FILES, free_port, make_small_project, outputs_of, pristine_copy
from test_cluster import dask_cluster, small_corpus

TRAINED_LINE = "steps/s"  # a train stage prints it for each run it trained itself

# A command run with SIGINT's default, as a terminal's shell runs it. A suite started in the background (`nohup
# make test &`, `cmd &` in a script) runs with SIGINT ignored, an ignored signal stays ignored across exec, and
# Python installs no Ctrl-C handler where it finds SIGINT ignored: a prefetch Ctrl-C'd in a suite started so
# trained on (SigIgn 0x1001007 in its /proc status: SIGHUP, SIGINT and SIGQUIT ignored).
WITH_CTRL_C = [sys.executable, "-c", ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                                      "os.execvp(sys.argv[1], sys.argv[1:])")]


def _lock(root: Path) -> dict:
    """dvc.lock: the same inputs, the same lock, whoever trained the runs (wall times are no output DVC records)."""
    return yaml.safe_load((root / "dvc.lock").read_text())


@pytest.mark.slow
def test_prefetch_then_dvc_repro_trains_nothing_and_writes_what_a_plain_dvc_repro_writes(reproduced_project,
                                                                                          tmp_path):
    project = make_small_project(tmp_path)
    # --extended: the whole pipeline, both plans, as a plain `dvc repro` reproduces it
    prefetched = project.run("blocklab", "prefetch", "--extended")
    plan = load_params(project.root / "params.yaml")
    distinct = len({(s.model, s.train, seed) for s in plan.specs() + plan.map_specs() for seed in s.seeds})
    assert f"0 of {distinct} distinct runs were in the run store; {distinct} trained" in prefetched.stdout
    assert f"training the plan, {distinct}/{distinct} runs" in prefetched.stderr  # one bar for the whole plan
    assert len(RunStore(project.root / "data/run_store").keys()) == distinct

    repro = project.run("dvc", "repro").stdout
    assert TRAINED_LINE not in repro, [line for line in repro.splitlines() if TRAINED_LINE in line]
    assert "trained ahead (blocklab prefetch)" in repro
    assert outputs_of(project.root) == reproduced_project.outputs  # runs and reports, byte for byte
    assert _lock(project.root) == _lock(reproduced_project.pristine)
    assert json.loads(project.run("dvc", "status", "--json").stdout) == {"track": ["always changed"]}  # by design
    again = project.run("blocklab", "prefetch", "--extended").stdout
    assert "0 train and map stages out of date" in again and "nothing to train" in again


@pytest.mark.slow
def test_prefetch_on_a_dask_cluster_trains_only_its_targets_runs_and_the_stage_copies_them(reproduced_project,
                                                                                           tmp_path):
    project = make_small_project(tmp_path)
    with dask_cluster() as (address, _):
        out = project.run("blocklab", "prefetch", "train@placement", "--scheduler", address).stdout
        assert f"to the Dask scheduler at {address} (2 workers)" in out
        assert "1 train and map stages out of date" in out and "4 trained" in out  # 2 variants x 2 seeds
        # and the stage's own path to the cluster: it trains what the store lacks there too
        project.env["BLOCKLAB_DASK_SCHEDULER"] = address
        staged = project.run("dvc", "repro", "map@stability").stdout
    # 2 variants x 2 lr x 2 warmups x 2 seeds, less those of placement's settings, which the store holds
    assert re.search(r"stability: training \d+ of 16 runs on the Dask cluster", staged), staged
    repro = project.run("dvc", "repro", "train@placement").stdout
    assert TRAINED_LINE not in repro and "trained ahead" in repro
    ours = outputs_of(project.root)
    for folder, runs in (("data/runs/stability/", 16), ("data/runs/placement/", 4)):
        theirs = {k: v for k, v in reproduced_project.outputs.items() if k.startswith(folder)}
        assert {k: v for k, v in ours.items() if k.startswith(folder)} == theirs
        assert len(theirs) == runs * len(DETERMINISTIC_RUN_FILES)


def test_prefetch_with_a_scheduler_that_cannot_be_reached_fails_naming_its_address(reproduced_project):
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    result = reproduced_project.run("blocklab", "prefetch", "--scheduler", address, check=False, timeout=60)
    assert result.returncode == 1 and f"cannot reach the Dask scheduler at {address}" in result.stderr


def test_prefetch_interrupted_keeps_whole_runs_and_trains_only_the_rest_next_time(tmp_path):
    """The interruption comes at a point the test sets, whatever the machine's speed: half the map's runs (its
    post-norm variant's) take 12 steps, the other half ten million (days), all eight start at once (eight workers);
    Ctrl-C comes once the short ones are stored, while the long ones are certainly still training."""
    project = make_small_project(tmp_path)
    params = project.params
    stability = params["maps"]["stability"]
    stability["axes"] = {"train": {"lr": [0.001, 0.01], "steps": [12, 10_000_000]}}
    stability["variants"] = {"post": stability["variants"]["post"]}
    stability["labels"] = {k: v for k, v in stability.get("labels", {}).items() if k == "post"}
    project.params = params
    store = RunStore(project.root / "data/run_store")
    process = subprocess.Popen([*WITH_CTRL_C, "blocklab", "prefetch", "map@stability", "--workers", "8"],
                               cwd=project.root, env=project.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.time() + 600  # a bound on a broken prefetch, not on the machine's speed
    while len(store.keys()) < 4:
        assert time.time() < deadline and process.poll() is None, "prefetch stored not even the short runs"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
    assert process.wait(timeout=60) != 0  # a bound on a prefetch that ignores Ctrl-C, not on the machine
    kept = store.keys()
    assert len(kept) == 4  # the short runs, and none of the endless ones
    assert all(store.verified(key) for key in kept)  # every entry whole
    assert {store.verified(key).split("/")[2] for key in kept} == {"lr0.001_steps12", "lr0.01_steps12"}
    again = project.run("blocklab", "prefetch", "--dry-run", "map@stability").stdout
    assert "8 distinct (the others' settings equal one of them): 4 in the run store, 4 would train" in again


def test_after_a_code_change_every_train_stage_is_out_of_date_not_restorable_from_its_own_outputs(reproduced_project,
                                                                                                 tmp_path):
    """DVC's cache holds the outputs dvc.lock records (the project was reproduced here): a change to the code the
    runs depend on must still leave every train stage to train, none 'restored from DVC's run cache'."""
    project = pristine_copy(reproduced_project, tmp_path / "project")
    training = project.root / "src/blocklab/run/training.py"
    training.write_text(training.read_text() + "\n# changed\n")
    stages = len([s for s in project.run("dvc", "stage", "list", "--name-only").stdout.split()
                  if s.startswith(("train@", "map@"))])
    extended = project.run("blocklab", "params", "--stages", "extended").stdout.split()
    out = project.run("blocklab", "prefetch", "--dry-run").stdout
    assert f"{stages - len(extended)} train and map stages out of date (0 up to date)" in out, out
    assert "restored from DVC's run cache" not in out
    if extended:  # the extended plan's stages are left out, and said so; --extended counts them too
        assert f"{len(extended)} out-of-date stages of the extended plan left out ({', '.join(extended)})" in out
        out = project.run("blocklab", "prefetch", "--dry-run", "--extended").stdout
        assert f"{stages} train and map stages out of date (0 up to date)" in out, out


def test_a_damaged_store_entry_is_discarded_and_its_run_trained_afresh_by_the_stage(reproduced_project, tmp_path):
    project = pristine_copy(reproduced_project, tmp_path / "project")
    params = load_params(project.root / "params.yaml")
    key = RunKeys(project.root / "data/encoded").of(params.spec("placement", "pre"))[0]
    entry = project.root / "data/run_store" / key
    (entry / "metrics.json").write_text('{"train_loss_last25": 2.')  # truncated
    out = project.run("dvc", "repro", "--force", "--single-item", "train@placement").stdout
    assert f"entry {key[:12]}… (placement/pre/seed0's run) was damaged (its metrics.json does not match its " \
           f"manifest): discarded, the run trains afresh" in out
    assert "placement: training 1 of 4 runs" in out
    ours = outputs_of(project.root)
    assert {k: v for k, v in ours.items() if "placement/pre/" in k} == {
        k: v for k, v in reproduced_project.outputs.items() if "placement/pre/" in k}
    assert RunStore(project.root / "data/run_store").verified(key) == "placement/pre/seed0"


def test_a_stage_whose_runs_are_all_stored_copies_them_without_importing_torch(reproduced_project, tmp_path):
    """After `blocklab prefetch` every train stage only copies: it need not pay torch's import (2-3 s a stage,
    47 stages in the default plan)."""
    project = pristine_copy(reproduced_project, tmp_path / "project")
    out = tmp_path / "out"
    copied = project.run("python", "-X", "importtime", "stages/train.py", "--ablation", "placement", "--variant",
                         "pre", "data/encoded", str(out))
    assert "copied from the run store" in copied.stdout
    imported = {line.split("|")[-1].strip() for line in copied.stderr.splitlines() if line.startswith("import time:")}
    assert "blocklab.schedule.plan" in imported and "torch" not in imported
    for seed in (0, 1):
        assert (out / f"pre/seed{seed}/metrics.json").read_bytes() == reproduced_project.outputs[
            f"data/runs/placement/pre/seed{seed}/metrics.json"]
    # a run the store lacks still trains, through the same stage
    shutil.rmtree(project.root / "data/run_store")
    trained = project.run("python", "stages/train.py", "--ablation", "placement", "--variant", "pre",
                          "data/encoded", str(tmp_path / "again")).stdout
    assert "placement/pre: training 2 of 2 runs" in trained
    assert (tmp_path / "again/pre/seed0/metrics.json").read_bytes() == reproduced_project.outputs[
        "data/runs/placement/pre/seed0/metrics.json"]


def test_blocklab_store_counts_what_the_plan_uses_and_prunes_the_rest(reproduced_project, tmp_path):
    project = pristine_copy(reproduced_project, tmp_path / "project")
    plan = load_params(project.root / "params.yaml")
    distinct = len({(s.model, s.train, seed) for s in plan.specs() + plan.map_specs() for seed in s.seeds})
    shown = project.run("blocklab", "store").stdout
    assert f"data/run_store: {distinct} entries" in shown and f"used by params.yaml's plan: {distinct} (" in shown
    assert "needed by no current setting: 0 (" in shown
    params = project.params
    params["ablations"]["ffn_mult"]["train"]["lr"] = 0.02  # ffn_mult's 4 runs (no other stage's) are needed no more
    project.params = params
    assert "needed by no current setting: 4 (" in project.run("blocklab", "store").stdout
    pruned = project.run("blocklab", "store", "--prune").stdout
    assert "pruned 4 entries" in pruned
    assert len(RunStore(project.root / "data/run_store").keys()) == distinct - 4


def test_the_longest_runs_train_first_and_each_key_once(tmp_path):
    corpus = small_corpus()
    encoded = tmp_path / "encoded"
    encoded.mkdir()
    (encoded / "train.bin").write_bytes(bytes(corpus.train.tolist()))
    short = TrainConfig(steps=5, eval_interval=5, eval_windows=16, device="cpu")
    specs = [RunSpec("a", name, name, ModelConfig(d_model=16, n_heads=2, n_layers=layers, context=8),
                     replace(short, steps=steps), (0,))
             for name, layers, steps in [("small", 1, 5), ("deep", 4, 5), ("long", 1, 40), ("again", 1, 5)]]
    runs = planned_runs(specs, RunKeys(encoded))
    assert runs[0].store_key == runs[3].store_key  # equal settings, one key
    distinct = [r for i, r in enumerate(runs) if r.store_key not in {o.store_key for o in runs[:i]}]
    expected = sorted(distinct, key=lambda r: -estimated_seconds(r.spec))
    assert [r.spec.variant for r in expected] == ["long", "deep", "small"]
    store = RunStore(tmp_path / "store")
    results = ensure_stored(runs, corpus, store, workers=1, progress="none", echo=lambda _: None)
    assert list(results) == ["a/long/seed0", "a/deep/seed0", "a/small/seed0"]  # in that order, each once
    started = {key: json.loads((tmp_path / "store" / key / "timing.json").read_text())["started_at"]
               for key in store.keys()}
    assert sorted(started, key=started.get) == [r.store_key for r in expected]
    assert ensure_stored(runs, corpus, store, workers=1, progress="none", echo=lambda _: None) == {}


def test_the_plan_bar_ends_full_and_never_past_it(capsys):
    import warnings

    from blocklab.schedule.plan import PlannedRun, _PlanBar

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    runs = [PlannedRun(spec, seed, spec.key(seed), None) for spec in params.map_specs()[:30] for seed in spec.seeds]
    bar = _PlanBar(runs, 65)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tqdm warns when it clamps a bar gone past its total
        for run in reversed(runs):  # another order than the total was summed in
            bar.done(run)
            assert bar.bar.n <= bar.bar.total
    assert bar.bar.n == bar.bar.total and bar.count == len(runs)
    bar.close()
    assert "-00:00" not in capsys.readouterr().err

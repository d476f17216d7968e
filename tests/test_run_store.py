"""No run is trained twice: runs kept by what determines their results (blocklab.schedule.run_store)."""

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

import blocklab.run
from blocklab.params.schema import RunSpec, load_params
from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.schedule import run_store
from blocklab.schedule.run_store import DamagedEntry, RunKeys, RunStore

from conftest import ROOT

SPEC = RunSpec(ablation="a", variant="v", label="v", model=ModelConfig(n_layers=1),
               train=TrainConfig(steps=10, lr=1e-2), seeds=(0, 1))


@pytest.fixture
def encoded(tmp_path) -> Path:
    folder = tmp_path / "encoded"
    folder.mkdir()
    (folder / "train.bin").write_bytes(b"\x01\x02\x03")
    (folder / "vocab.json").write_text('["a", "b"]')
    return folder


def test_the_key_changes_with_every_input_of_a_run_and_with_nothing_else(encoded, monkeypatch, tmp_path):
    keys = RunKeys(encoded).of(SPEC)
    assert keys[0] != keys[1]  # the seed
    assert RunKeys(encoded).of(replace(SPEC, ablation="b", variant="w", label="w")) == keys  # names
    assert RunKeys(encoded).of(replace(SPEC, model=ModelConfig(n_layers=2)))[0] != keys[0]
    assert RunKeys(encoded).of(replace(SPEC, train=TrainConfig(steps=10, lr=2e-2)))[0] != keys[0]
    (encoded / "train.bin").write_bytes(b"\x01\x02\x04")
    assert RunKeys(encoded).of(SPEC)[0] != keys[0]  # the corpus
    (encoded / "train.bin").write_bytes(b"\x01\x02\x03")
    code = tmp_path / "package"
    shutil.copytree(run_store.RUN_CODE, code, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(run_store, "RUN_CODE", code)
    assert RunKeys(encoded).of(SPEC) == keys  # the same code elsewhere
    (code / "training.py").write_text((code / "training.py").read_text() + "\n# changed\n")
    assert RunKeys(encoded).of(SPEC)[0] != keys[0]  # the code that trains


def test_the_key_covers_the_whole_run_package_and_it_imports_nothing_outside_it(tmp_path, monkeypatch):
    """The code a key hashes is blocklab.run, every file of it (a new module counts at once), and that package
    is whole: what trains a run and writes its files imports no project module outside it (errors' messages
    aside). dvc.yaml's train stages depend on the same folder: one list, not two kept in step."""
    from test_stage_dependencies import _closure

    package = Path(blocklab.run.__file__).parent
    reached = set().union(*(_closure(path) for path in package.glob("*.py")))
    assert {Path(p).parent.name for p in reached} - {"blocklab"} <= {"run"}, sorted(reached)
    assert reached - {"src/blocklab/errors.py"} <= {f"src/blocklab/run/{p.name}" for p in package.glob("*.py")}
    code = tmp_path / "package"
    shutil.copytree(package, code, ignore=shutil.ignore_patterns("__pycache__"))
    before = run_store.code_digest(code)
    (code / "new_module.py").write_text("X = 1\n")
    assert run_store.code_digest(code) != before
    pipeline = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    assert "src/blocklab/run" in pipeline["stages"]["train"]["do"]["deps"]


def test_a_mup_run_at_its_base_width_is_keyed_and_trained_as_the_standard_run(tmp_path):
    """They build the same computation (the proxies map trained those 18 runs twice, with bit-identical
    results): one key, one run, trained with the standard settings whichever variant asks first."""
    from blocklab.schedule.plan import planned_runs

    encoded = tmp_path / "encoded"
    encoded.mkdir()
    (encoded / "train.bin").write_bytes(b"\x00\x01\x02")
    standard = RunSpec(ablation="proxies", variant="standard", label="standard", model=ModelConfig(d_model=64, n_layers=2),
                       train=TrainConfig(), seeds=(0,))
    mup = replace(standard, variant="mup", model=replace(standard.model, parametrization="mup", base_width=64))
    wider = replace(mup, model=replace(mup.model, d_model=128))
    keys = RunKeys(encoded)
    assert keys.of(mup) == keys.of(standard) and keys.of(wider) != keys.of(replace(wider, model=replace(
        wider.model, parametrization="standard")))
    (run,) = planned_runs([mup], keys)
    assert run.job().model == standard.model and run.key == "proxies/mup/seed0"


def _entry(tmp_path: Path, name: str = "run") -> Path:
    run = tmp_path / name
    run.mkdir(parents=True)
    (run / "metrics.json").write_text('{"val_loss": 2.2}')
    (run / "model.pt").write_bytes(b"weights")
    return run


def test_a_kept_run_is_copied_whole_with_where_it_was_first_trained(tmp_path):
    run = _entry(tmp_path)
    store = RunStore(tmp_path / "store")
    assert store.verified("k") is None
    store.put("k", run, "a/v/seed0")
    store.put("k", run, "b/w/seed0")  # already kept: the first stays
    assert store.verified("k") == "a/v/seed0"
    assert store.copy_to("k", tmp_path / "copy") == "a/v/seed0"
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["metrics.json", "model.pt"]
    assert (tmp_path / "copy" / "model.pt").read_bytes() == b"weights"
    assert not store.leftovers()


@pytest.mark.parametrize("damage", ["truncated", "changed", "missing", "no manifest"])
def test_a_damaged_entry_is_never_handed_out_it_is_discarded_naming_its_run(tmp_path, damage):
    store = RunStore(tmp_path / "store")
    store.put("k", _entry(tmp_path), "a/v/seed0")
    entry = tmp_path / "store" / "k"
    if damage == "truncated":
        (entry / "metrics.json").write_text('{"val_lo')
    elif damage == "changed":
        (entry / "model.pt").write_bytes(b"weightz")
    elif damage == "missing":
        (entry / "model.pt").unlink()
    else:
        (entry / "manifest.json").unlink()
    with pytest.raises(DamagedEntry, match="damaged .*discarded, the run trains afresh") as err:
        store.copy_to("k", tmp_path / "copy")
    assert damage == "no manifest" or "a/v/seed0" in str(err.value)
    assert not entry.exists() and store.verified("k") is None  # gone: the run is missing, to be trained
    assert not (tmp_path / "copy" / "metrics.json").exists() and not (tmp_path / "copy" / "model.pt").exists()
    store.put("k", _entry(tmp_path, "again"), "a/v/seed0")
    (entry / "metrics.json").write_text("{}")
    with pytest.raises(DamagedEntry):  # verified() checks as copy_to does
        store.verified("k")
    assert not entry.exists()


def test_an_entry_half_written_by_a_killed_process_is_invisible_and_pruned(tmp_path):
    store = RunStore(tmp_path / "store")
    script = (f"import sys, os, time; sys.path.insert(0, {str(Path(blocklab.run.__file__).parents[2])!r})\n"
              "from blocklab.schedule.run_store import RunStore\n"
              "def write(folder):\n"
              "    (folder / 'metrics.json').write_text('{}')\n"
              "    print('writing', flush=True); time.sleep(60)\n"
              f"RunStore({str(tmp_path / 'store')!r}).put_written('k', 'a/v/seed0', write)\n")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "writing"
    process.kill()
    process.wait()
    assert store.keys() == [] and store.verified("k") is None  # nothing visible under the key
    assert [p.name.startswith(".incoming-") for p in store.leftovers()] == [True]
    store.put("k", _entry(tmp_path), "a/v/seed0")  # the next put is not in its way
    assert store.verified("k") == "a/v/seed0"


def _put_many(root: str, run: str, start: float) -> str:
    while time.time() < start:
        pass
    RunStore(Path(root)).put("k", Path(run), f"from/{os.getpid()}/seed0")
    return RunStore(Path(root)).verified("k")


def test_two_processes_putting_the_same_key_at_once_leave_one_whole_entry(tmp_path):
    import multiprocessing

    run = _entry(tmp_path)
    for attempt in range(5):
        root = tmp_path / f"store{attempt}"
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            start = time.time() + 2  # both begin together, after the pool has started
            origins = pool.starmap(_put_many, [(str(root), str(run), start)] * 2)
        store = RunStore(root)
        assert store.keys() == ["k"] and not store.leftovers()
        assert origins[0] == origins[1] == store.verified("k")  # both see the one entry that won
        store.copy_to("k", tmp_path / f"copy{attempt}")


def _equal_pairs(params) -> list[tuple[str, str]]:
    """(first, later) variants of the plan whose resolved settings are equal, in stage order."""
    first: dict[tuple, str] = {}
    pairs = []
    for spec in params.specs() + params.map_specs():  # the maps' stages come after the ablations'
        for seed in spec.seeds:
            key = (spec.model, spec.train, seed)
            if key in first:
                pairs.append((first[key], spec.key(seed)))
            else:
                first[key] = spec.key(seed)
    return pairs


def test_the_default_plan_trains_none_of_its_runs_twice():
    pairs = _equal_pairs(load_params(ROOT / "params.yaml"))
    later = {b.rsplit("/", 1)[0] for _, b in pairs}
    # warmup/w0, w100, w200 are placement's post variants; the default 6-layer model is four variants'
    assert {"warmup/w0", "warmup/w100", "warmup/w200", "activation/gelu", "norm_type/layernorm", "ffn_type/mlp"} <= later
    # the stability map's cells that are placement's and depth's runs
    assert {"stability/post/lr0.01_w0", "stability/post/lr0.01_w100", "stability/pre/lr0.01_w0",
            "stability/pre/lr0.003_w0"} <= later
    assert len(pairs) >= 25


def test_a_run_with_the_settings_of_one_trained_before_is_copied_byte_for_byte(reproduced_project):
    root = reproduced_project.pristine  # right after the first `dvc repro` of the small plan
    pairs = _equal_pairs(load_params(root / "params.yaml"))
    assert pairs, "the small plan has no two variants with equal settings"
    out = reproduced_project.first_repro.stdout
    runs = root / "data" / "runs"
    for first, later in pairs:
        for name in ("metrics.json", "curve.csv", "model.pt"):
            assert (runs / later / name).read_bytes() == (runs / first / name).read_bytes(), (later, name)
        assert json.loads((runs / later / "timing.json").read_text())["reused_from"] == first
    copied = [line for line in out.splitlines() if "copied, not trained again" in line]
    assert len(copied) == len(pairs), copied


# Modules outside the run key, one of each kind: the schema and its wording, the figures' names, a map cell's name,
# a plot, the command line, the general helpers, where and when runs train, the train stage's own script.
OUTSIDE_THE_KEY = ("src/blocklab/params/schema.py", "src/blocklab/params/problems.py", "src/blocklab/params/figures.py",
                   "src/blocklab/params/cells.py", "src/blocklab/analysis/plots.py", "src/blocklab/cli.py",
                   "src/blocklab/json_files.py", "src/blocklab/records.py", "src/blocklab/schedule/plan.py",
                   "stages/train.py")


@pytest.mark.slow
def test_a_changed_line_outside_the_key_moves_no_key_and_stales_no_train_stage_one_in_the_model_moves_all(
        reproduced_project, tmp_path, monkeypatch):
    """Both directions of the key's promise, on a copy of the tree: DVC's view (`dvc status` of every train and map
    stage) and the run store's (every run's store key)."""
    from blocklab.params.schema import load_params
    from blocklab.schedule.plan import planned_runs

    from conftest import pristine_copy

    project = pristine_copy(reproduced_project, tmp_path / "project")
    trains = {name for name in project.run("dvc", "stage", "list", "--name-only").stdout.split()
              if name.startswith(("train@", "map@"))}
    assert trains

    def stale() -> set[str]:
        return set(json.loads(project.run("dvc", "status", "--json").stdout)) & trains

    def keys() -> list[str]:
        monkeypatch.setattr(run_store, "RUN_CODE", project.root / "src/blocklab/run")
        runs = planned_runs(load_params(project.root / "params.yaml").all_specs(),
                            RunKeys(project.root / "data/encoded"))
        return [run.store_key for run in runs]

    assert not stale()
    before = keys()
    for path in OUTSIDE_THE_KEY:
        (project.root / path).write_text((project.root / path).read_text() + "\n# a changed line\n")
        assert not stale(), f"a changed line in {path} stales train stages: {sorted(stale())}"
    assert keys() == before
    model = project.root / "src/blocklab/run/model.py"
    model.write_text(model.read_text() + "\n# a changed line\n")
    assert stale() == trains
    assert not set(keys()) & set(before)

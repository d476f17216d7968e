"""No run is trained twice: runs kept by what determines their results (blocklab.run_store)."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from blocklab.config import ModelConfig, RunSpec, TrainConfig, load_params
from blocklab.run_store import RunStore

from conftest import ROOT, make_small_project

SPEC = RunSpec(ablation="a", variant="v", label="v", model=ModelConfig(n_layers=1),
               train=TrainConfig(steps=10, lr=1e-2), seeds=(0, 1))


@pytest.fixture
def encoded(tmp_path) -> Path:
    folder = tmp_path / "encoded"
    folder.mkdir()
    (folder / "train.bin").write_bytes(b"\x01\x02\x03")
    (folder / "vocab.json").write_text('["a", "b"]')
    return folder


def test_the_key_changes_with_every_input_of_a_run_and_with_nothing_else(encoded, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("# a stage\n")
    keys = RunStore.keys(SPEC, encoded, [script])
    assert keys[0] != keys[1]  # the seed
    assert RunStore.keys(replace(SPEC, ablation="b", variant="w", label="w"), encoded, [script]) == keys  # names
    assert RunStore.keys(replace(SPEC, model=ModelConfig(n_layers=2)), encoded, [script])[0] != keys[0]
    assert RunStore.keys(replace(SPEC, train=TrainConfig(steps=10, lr=2e-2)), encoded, [script])[0] != keys[0]
    (encoded / "train.bin").write_bytes(b"\x01\x02\x04")
    assert RunStore.keys(SPEC, encoded, [script])[0] != keys[0]  # the corpus
    (encoded / "train.bin").write_bytes(b"\x01\x02\x03")
    script.write_text("# a stage, changed\n")
    assert RunStore.keys(SPEC, encoded, [script])[0] != keys[0]  # the code that trains
    script.write_text("# a stage\n")
    assert RunStore.keys(SPEC, encoded, [script]) == keys


def test_a_kept_run_is_copied_whole_with_where_it_was_first_trained(tmp_path):
    run = tmp_path / "runs" / "seed0"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text('{"val_loss": 2.2}')
    (run / "model.pt").write_bytes(b"weights")
    store = RunStore(tmp_path / "store")
    assert store.origin("k") is None
    store.put("k", run, "a/v/seed0")
    store.put("k", run, "b/w/seed0")  # already kept: the first stays
    assert store.origin("k") == "a/v/seed0"
    store.copy_to("k", tmp_path / "copy")
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["metrics.json", "model.pt"]
    assert (tmp_path / "copy" / "model.pt").read_bytes() == b"weights"
    assert not list((tmp_path / "store").glob(".incoming-*"))


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
    # warmup/w0, w100, w200 are norm_order's post variants; the default 6-layer model is four variants'
    assert {"warmup/w0", "warmup/w100", "warmup/w200", "activation/gelu", "norm_type/layernorm", "ffn_type/mlp"} <= later
    # the stability map's cells that are norm_order's and depth's runs
    assert {"stability/post/lr0.01_w0", "stability/post/lr0.01_w100", "stability/pre/lr0.01_w0",
            "stability/pre/lr0.003_w0"} <= later
    assert len(pairs) >= 25


def test_a_run_with_the_settings_of_one_trained_before_is_copied_byte_for_byte(tmp_path):
    project = make_small_project(tmp_path)  # its own: other tests run experiments in the shared one
    pairs = _equal_pairs(load_params(project.root / "params.yaml"))
    assert pairs, "the small plan has no two variants with equal settings"
    out = project.run("dvc", "repro").stdout
    runs = project.root / "data" / "runs"
    for first, later in pairs:
        for name in ("metrics.json", "curve.csv", "model.pt"):
            assert (runs / later / name).read_bytes() == (runs / first / name).read_bytes(), (later, name)
        assert json.loads((runs / later / "timing.json").read_text())["reused_from"] == first
    copied = [line for line in out.splitlines() if "copied, not trained again" in line]
    assert len(copied) == len(pairs), copied
    assert "Data and pipelines are up to date" in project.run("dvc", "status").stdout

"""The pipeline through real DVC, in a throw-away copy of the project."""

import json
import re

import pytest
import yaml

from conftest import ROOT, SHARED_CORPUS, copy_project


def stages_run(output: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", output)


def test_dvc_repro_on_a_small_corpus_writes_every_report(reproduced_project):
    small_project = reproduced_project
    result = small_project.first_repro
    assert stages_run(result.stdout)[:3] == ["download", "encode", "baselines"]
    metrics = json.loads((small_project.root / "reports" / "metrics.json").read_text())

    params = small_project.params
    expected_keys = {
        f"{a}/{v}/seed{s}" for a, abl in params["ablations"].items() for v in abl["variants"] for s in abl["seeds"]
    }
    assert set(metrics["runs"]) == expected_keys
    assert set(metrics["baselines"]) == {"unigram", "unigram_val", "uniform"}
    assert metrics["baselines"]["uniform"] == pytest.approx(__import__("math").log(28))
    for run in metrics["runs"].values():
        assert set(run) == {"train_loss_last25", "val_loss", "max_grad_norm", "n_params", "collapsed", "steps"}
        assert run["steps"] == 12
    timings = json.loads((small_project.root / "reports" / "timings.json").read_text())
    assert set(timings) == expected_keys and all(t["tokens_per_second"] > 0 for t in timings.values())
    summary = (small_project.root / "reports" / "summary.md").read_text()
    assert "norm_order/post_warmup/seed1" in summary and "unigram entropy" in summary
    curve = (small_project.root / "data/runs/norm_order/pre/seed0/curve.csv").read_text().splitlines()
    assert curve[0] == "step,loss,grad_norm,lr,val_loss" and len(curve) == 13

    shown = small_project.run("dvc", "metrics", "show", "--json").stdout
    assert "train_loss_last25" in shown

    # Nothing changed: a second repro re-runs nothing.
    again = small_project.run("dvc", "repro")
    assert stages_run(again.stdout) == []


def test_changing_one_ablations_learning_rate_reruns_only_its_stages(reproduced_project):
    small_project = reproduced_project
    small_project.commit("baseline results")
    result = small_project.run("dvc", "exp", "run", "-S", "ablations.norm_order.train.lr=1e-05")
    ran = stages_run(result.stdout)
    assert sorted(ran) == sorted(
        ["train_norm_order@post", "train_norm_order@pre", "train_norm_order@post_warmup", "evaluate"]
    )


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_CORPUS.exists(), reason="needs the shared Tiny Shakespeare copy")
def test_the_default_pipeline_reproduces_table_a_within_a_hundredth(tmp_path):
    project = copy_project(tmp_path / "project", SHARED_CORPUS)
    project.run("dvc", "repro")
    metrics = json.loads((project.root / "reports" / "metrics.json").read_text())
    table_a = yaml.safe_load((ROOT / "reference.yaml").read_text())["table_a"]
    runs = metrics["runs"]
    for key, published in table_a.items():
        assert runs[key]["train_loss_last25"] == pytest.approx(published, abs=0.01), key
    assert metrics["baselines"]["unigram"] == pytest.approx(3.309, abs=0.001)
    assert metrics["baselines"]["uniform"] == pytest.approx(4.174, abs=0.001)
    for key in ("norm_order/post/seed0", "norm_order/post/seed1"):
        assert runs[key]["collapsed"], key
    for variant in ("pre", "post_warmup"):
        for seed in (0, 1):
            assert not runs[f"norm_order/{variant}/seed{seed}"]["collapsed"]

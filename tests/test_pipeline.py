"""The pipeline through real DVC, in a throw-away copy of the project."""

import json
import re
import shutil

import pytest
import yaml

from blocklab.run.numerics import vendor_family

from blocklab.analysis.claims import load_claims
from blocklab.analysis.finding_plots import reads_map
from blocklab.params.schema import load_params
from blocklab.records import read_metrics
from blocklab.schedule.train_stages import stage_name

from conftest import ROOT, SHARED_CORPUS, copy_project


def stages_run(output: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", output)


def test_dvc_repro_on_a_small_corpus_writes_every_report(reproduced_project):
    small_project = reproduced_project
    result = small_project.first_repro
    ran = stages_run(result.stdout)
    assert ran.index("download") < ran.index("encode") < ran.index("baselines") < ran.index("evaluate")
    assert [s for s in ran if s not in ("samples", "weights")][-4:] == ["evaluate", "check", "report", "track"]
    assert "weights" in ran and "fingerprint" in ran  # what `blocklab audit` and `blocklab fingerprint` compare with
    assert ran.index("samples") < ran.index("report")  # lists the verdicts and shows the samples
    assert "1 of 1 findings hold; 2 of 2 invariants hold" in result.stdout
    metrics = json.loads((small_project.root / "reports" / "metrics.json").read_text())

    params = small_project.params
    plan = load_params(small_project.root / "params.yaml")
    expected_keys = {spec.key(s) for spec in plan.specs() + plan.map_specs() for s in spec.seeds}  # maps' cells too
    assert {k for k in expected_keys if k.startswith("stability/")} == {
        f"stability/{v}/lr{lr}_w{w}/seed{s}" for v in ("post", "pre") for lr in ("0.001", "0.01") for w in (0, 5)
        for s in (0, 1)}
    assert set(metrics["runs"]) == expected_keys
    assert set(metrics["baselines"]) == {"unigram", "unigram_val", "uniform"}
    assert metrics["baselines"]["uniform"] == pytest.approx(__import__("math").log(28))
    for run in metrics["runs"].values():
        assert {"train_loss_last25", "val_loss", "max_grad_norm", "n_params", "collapsed", "steps"} <= set(run)
        assert run["steps"] == 12
    timings = json.loads((small_project.root / "reports" / "timings.json").read_text())
    assert set(timings) == expected_keys and all(t["tokens_per_second"] > 0 for t in timings.values())
    summary = (small_project.root / "reports" / "summary.md").read_text()
    assert "pre-norm" in summary and "unigram entropy" in summary and "**Finding.**" in summary
    count = json.loads((small_project.root / "reports" / "claims_count.json").read_text())
    # other tests' experiments may have broken a claim since the first repro
    assert count["findings_total"] == 1 and count["invariants_total"] == 2
    assert f"## Claims: {count['findings_hold']} of 1 findings hold" in summary
    # another corpus than the one table A and the ladder were published on: no published column
    assert "| published" not in summary and "3.341 (seed 0)" not in summary
    curve = (small_project.root / "data/runs/placement/pre/seed0/curve.csv").read_text().splitlines()
    assert curve[0] == "step,loss,grad_norm,lr,val_loss,attn_logit_max,logit_log_z" and len(curve) == 13
    layers = (small_project.root / "data/runs/placement/pre/seed0/layers.csv").read_text().splitlines()
    assert layers[0] == "step,layer,resid_rms,resid_max_abs,block_cos,dyt_saturated" and len(layers) == 1 + 3  # 1 block

    figures = small_project.root / "reports" / "figures"
    claims = load_claims(small_project.root / "claims.yaml")
    for name, ablation in params["ablations"].items():
        for kind in ["loss", "grad_norm", "final", "layers"] + [f"{'params' if k == 'param_shares' else k}" for k in ablation.get("figures", [])]:
            png = figures / f"{name}_{kind}.png"
            if kind == "findings" and not any(reads_map(c, name) for c in claims):
                assert not png.exists(), png  # drawn where a finding compares two of its variants: none here
                continue
            assert png.stat().st_size > 10_000, png
            assert f"figures/{name}_{kind}.png" in summary, png
        assert f"## {name}" in summary
    assert (figures / "gradients.png").stat().st_size > 10_000 and "figures/gradients.png" in summary
    gradients = json.loads((small_project.root / "reports" / "gradients.json").read_text())
    assert set(gradients) == {"pre/with", "pre/without"}  # post-norm is not probed (its final norm hides it)
    assert set(gradients["pre/with"]) == {"1", "2"}

    shown = json.loads(small_project.run("dvc", "metrics", "show", "--json").stdout)
    (workspace,) = shown.values()
    declared = workspace["data"]
    assert declared["reports/claims_count.json"]["data"] == count
    variants = declared["reports/variants.json"]["data"]
    assert set(variants) == {f"{a}/{v}" for a, abl in params["ablations"].items() for v in abl["variants"]}
    assert variants["placement/pre"]["val_loss_mean"] == pytest.approx(
        sum(metrics["runs"][f"placement/pre/seed{s}"]["val_loss"] for s in (0, 1)) / 2, abs=1e-6)

    # Nothing changed: a second repro re-runs nothing but the track stage, which always runs (and logs nothing)
    again = small_project.run("dvc", "repro")
    assert stages_run(again.stdout) == ["track"]
    assert ": 0 runs logged, " in again.stdout and "; 0 variant parent runs logged" in again.stdout


def test_the_same_parameters_give_byte_identical_metrics_and_curves(reproduced_project):
    root = reproduced_project.root
    files = [root / "reports" / "metrics.json", root / "data/runs/placement/pre/seed0/curve.csv",
             root / "data/runs/placement/pre/seed1/metrics.json"]
    before = [f.read_bytes() for f in files]
    timing = root / "data/runs/placement/pre/seed0/timing.json"
    timing_before, recorded_before = timing.read_bytes(), _recorded_outputs(root, "train@placement")
    shutil.rmtree(root / "data" / "run_store")  # trained again, not copied from the run store
    reproduced_project.run("dvc", "repro", "--force", "--single-item", "train@placement")
    reproduced_project.run("dvc", "repro", "evaluate")
    assert [f.read_bytes() for f in files] == before
    # wall times live apart: the run's own changed, and DVC, which ignores them, records the same output
    assert timing.read_bytes() != timing_before
    assert _recorded_outputs(root, "train@placement") == recorded_before


def _recorded_outputs(root, stage: str) -> list:
    """What dvc.lock records of `stage`'s outputs (their hashes)."""
    return yaml.safe_load((root / "dvc.lock").read_text())["stages"][stage]["outs"]


def test_changing_one_variants_setting_leaves_every_other_ablations_training_stage_up_to_date(reproduced_project):
    project = reproduced_project
    params_file = project.root / "params.yaml"
    original = params_file.read_bytes()
    already = json.loads(project.run("dvc", "status", "--json").stdout)  # what other tests left to re-run
    changed = project.params
    variant = next(iter(changed["ablations"]["warmup"]["variants"]))
    changed["ablations"]["warmup"]["variants"][variant].setdefault("train", {})["warmup"] = 7
    project.params = changed
    try:
        stale = json.loads(project.run("dvc", "status", "--json").stdout)
    finally:
        params_file.write_bytes(original)
    # the gathering stages read every ablation (and `weights` every run): they depend on params.yaml as a whole
    assert sorted(set(stale) - set(already)) == sorted({"train@warmup", "evaluate", "weights", "report",
                                                        "track"} - set(already))


def test_renaming_a_variant_in_words_retrains_nothing(reproduced_project):
    """A label is display text: changing one leaves every train stage up to date; only the stages that
    read params.yaml whole (seconds, evaluate's outputs unchanged) and the report run again."""
    project = reproduced_project
    params_file = project.root / "params.yaml"
    original = params_file.read_bytes()
    changed = project.params
    variant = next(iter(changed["ablations"]["placement"]["variants"]))
    changed["ablations"]["placement"]["labels"][variant] = "renamed in words"
    project.params = changed
    try:
        stale = json.loads(project.run("dvc", "status", "--json").stdout)
    finally:
        params_file.write_bytes(original)
    assert not [stage for stage in stale if stage.startswith(("train@", "map@"))], stale
    assert "report" in stale


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_CORPUS.exists(), reason="needs the shared Tiny Shakespeare copy")
def test_the_pipeline_reproduces_table_a_within_a_hundredth(tmp_path):
    """Table A's stages through real DVC on Tiny Shakespeare: on a machine of the committed results' numeric
    family, every run bit for bit as committed; on any machine, every published figure within 0.01, but those
    that the CPU's rounding decides - a run on the collapse plateau (where its last 25 steps land is rounding
    noise) or one whose claim is marked known_to_fail - which must still collapse, or not, as published."""
    project = copy_project(tmp_path / "project", SHARED_CORPUS)
    table_a = yaml.safe_load((ROOT / "reference.yaml").read_text())["table_a"]["figures"]
    variants = sorted({key.rsplit("/", 1)[0] for key in table_a})
    project.run("dvc", "repro", "baselines", *sorted({stage_name(v.split("/")[0]) for v in variants}))
    runs = project.root / "data" / "runs"
    unigram = json.loads((project.root / "reports" / "baselines.json").read_text())["unigram"]
    assert unigram == pytest.approx(3.309, abs=0.001)
    measured = {key: read_metrics(runs / key)["train_loss_last25"] for key in table_a}
    if vendor_family() == json.loads((ROOT / "reports/fingerprint.json").read_text())["family"]:
        committed = json.loads((ROOT / "reports/metrics.json").read_text())["runs"]
        assert measured == {key: committed[key]["train_loss_last25"] for key in table_a}
    rounding_dependent = {c.id for c in load_claims(ROOT / "claims.yaml") if c.known_to_fail}
    exact = {key: published for key, published in table_a.items()
             if f"table_a.{key.replace('/', '.')}" not in rounding_dependent and abs(published - unigram) > 0.05}
    assert len(exact) >= len(table_a) // 2  # the learning runs: pre-norm, warmed-up post-norm, residuals
    for key, published in exact.items():
        assert measured[key] == pytest.approx(published, abs=0.01), key
    for key in table_a.keys() - exact.keys():
        assert (abs(measured[key] - unigram) <= 0.05) == (abs(table_a[key] - unigram) <= 0.05), key
    for seed in (0, 1):
        assert abs(measured[f"placement/post/seed{seed}"] - unigram) <= 0.05  # collapsed
        assert measured[f"placement/pre/seed{seed}"] < unigram - 0.5
        assert measured[f"placement/post_warmup/seed{seed}"] < unigram - 0.5

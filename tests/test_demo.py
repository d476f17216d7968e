"""`make demo` (`blocklab demo`): the lesson's table A through the real pipeline on a small project - trained by
`blocklab prefetch` and `dvc repro` of its stages, its findings checked, its figure drawn, two models sampled -
and its runs the default plan's own, which a later `make repro` copies instead of training again."""

import pytest

from conftest import DETERMINISTIC_RUN_FILES, make_small_project, outputs_of

DEMO_RUNS = ("data/runs/placement/", "data/runs/residual/")


@pytest.mark.slow
def test_demo_trains_table_a_through_dvc_checks_its_findings_and_a_later_repro_copies_its_runs(reproduced_project,
                                                                                                tmp_path):
    project = make_small_project(tmp_path)
    out = project.run("blocklab", "demo").stdout
    assert "$ blocklab prefetch train@placement train@residual" in out
    assert "$ dvc repro train@placement train@residual baselines" in out
    # the small plan: 2 variants of each ablation, placement 2 seeds, residual 1; its claims: a finding and a check over placement's
    # runs, and a check of the baselines
    assert "The findings these 6 runs decide (3 of 3 claims)" in out
    assert "pre_norm_learns" in out and "1 of 1 findings hold; 2 of 2 invariants hold" in out
    assert "--- placement/post/seed0 (post-norm at lr 1e-2, collapsed; validation loss" in out
    assert "--- placement/pre/seed0 (pre-norm at lr 1e-2, healthy; validation loss" in out
    assert (project.root / "data/demo/figures/placement_loss.png").stat().st_size > 10_000
    assert "make repro" in out.split("Next:")[1]
    # the runs are the plan's own, bit for bit what a plain `dvc repro` trains
    ours = {k: v for k, v in outputs_of(project.root).items() if k.startswith(DEMO_RUNS)}
    theirs = {k: v for k, v in reproduced_project.outputs.items() if k.startswith(DEMO_RUNS)}
    assert ours == theirs and len(ours) == 6 * len(DETERMINISTIC_RUN_FILES)
    # the rest of the plan: the demo's stages are up to date, and nothing of them trains again
    dry = project.run("blocklab", "prefetch", "--dry-run").stdout
    assert "(2 up to date)" in dry
    listed = {line.strip() for line in dry.splitlines() if line.startswith("  ")}  # the stages left to run
    assert listed and not listed & {"train@placement", "train@residual"}, dry
    assert not (project.root / "reports/claims.json").exists()  # the demo writes to data/demo/, not reports/
    assert (project.root / "data/demo/claims.json").exists()

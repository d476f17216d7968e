"""The experiment loop through real DVC: change a claimed knob with `dvc exp run -S`, then compare with
`dvc exp show`, `dvc metrics diff` and `dvc plots diff`. A claim that fails is recorded, never a failed run."""

import csv
import io
import json

import pytest
import yaml

from conftest import ROOT

KNOB = "ablations.placement.train.lr=1e-05"  # so small that pre-norm learns nothing in 12 steps
STATISTICS = {"val_loss_mean", "val_loss_ci95", "train_loss_mean", "train_loss_ci95", "collapsed", "blown_up"}


@pytest.fixture(scope="module")
def experiment(reproduced_project):
    """The reproduced small project committed as the baseline, then one experiment run in the workspace."""
    project = reproduced_project
    project.commit("baseline results")
    result = project.run("dvc", "exp", "run", "-S", KNOB)
    name = result.stdout.split("Ran experiment(s): ")[1].split()[0]
    return project, result, name


def test_an_experiment_that_breaks_a_claim_exits_0_reruns_only_its_stages_and_records_the_verdict(experiment):
    project, result, name = experiment
    ran = [line.split("'")[1] for line in result.stdout.splitlines() if line.startswith("Running stage")]
    assert sorted(ran) == sorted(["train@placement", "evaluate", "check", "samples", "weights", "report", "track"])
    assert "1 claims fail or are inconclusive:" in result.stdout
    listed = json.loads(project.run("dvc", "exp", "show", "--json").stdout)
    assert name in json.dumps(listed)
    verdicts = json.loads((project.root / "reports" / "claims.json").read_text())
    assert verdicts["pre_norm_learns"]["ok"] is False and verdicts["uniform_is_ln_v"]["ok"] is True
    assert json.loads((project.root / "reports" / "claims_count.json").read_text()) == {
        "findings_hold": 0, "findings_inconclusive": 0, "findings_fail": 1, "findings_not_comparable": 0,
        "findings_total": 1, "invariants_hold": 2, "invariants_total": 2, "findings_tested": 1, "findings_hold_holm": 0,
        "findings_fail_holm": 1}
    summary = (project.root / "reports" / "summary.md").read_text()
    assert summary.index("**Fail or are inconclusive (1):**\n\n- [fails] pre_norm_learns: Pre-norm ends below") \
        < summary.index("## placement")
    strict = project.run("blocklab", "check", "--strict", check=False)
    assert strict.returncode == 1 and strict.stdout.startswith("1 claims fail or are inconclusive:")


def _exp_show(project, *flags) -> list[str]:
    return next(csv.reader(io.StringIO(project.run("dvc", "exp", "show", "--csv", *flags).stdout)))


def test_dvc_exp_show_lists_at_most_six_metric_columns_per_variant_and_the_claims_count(experiment):
    project, _, _ = experiment
    columns = _exp_show(project)
    variants = {f"{a}/{v}": abl["seeds"] for a, abl in project.params["ablations"].items() for v in abl["variants"]}
    metric_columns = [c for c in columns if c.split(".")[0] in variants]
    for variant, seeds in variants.items():
        shown = {c.split(".", 1)[1] for c in metric_columns if c.split(".")[0] == variant}
        # one seed has no interval: DVC leaves out a null
        assert shown == (STATISTICS if len(seeds) > 1 else STATISTICS - {"val_loss_ci95", "train_loss_ci95"}), variant
    assert {"findings_hold", "findings_total", "invariants_hold", "invariants_total"} <= set(columns)
    # The lesson's eight ablations, at six columns per variant: at most 190 metric columns (there were ~1,100).
    default = yaml.safe_load((ROOT / "params.yaml").read_text())["ablations"]
    lesson = ["placement", "residual", "warmup", "residual_depth", "ffn_mult", "ffn_matched", "depth", "activation"]
    assert sum(len(default[a]["variants"]) for a in lesson) * len(STATISTICS) + 7 <= 190


def test_dvc_exp_show_only_changed_fits_in_40_columns_after_one_knob(experiment):
    project, _, _ = experiment
    columns = _exp_show(project, "--only-changed")
    assert len(columns) <= 40, columns
    assert "ablations.placement.train.lr" in columns and "placement/pre.val_loss_mean" in columns
    assert not [c for c in columns if c.startswith(("residual/", "depth/", "warmup/"))]


def test_dvc_metrics_diff_lists_the_changed_variants_means(experiment):
    project, _, name = experiment
    diff = json.loads(project.run("dvc", "metrics", "diff", "--json", "HEAD", name).stdout)
    changed = diff["reports/variants.json"]
    assert "placement/pre.val_loss_mean" in changed and "placement/post.train_loss_mean" in changed
    assert all(key.startswith("placement/") for key in changed), sorted(changed)
    assert changed["placement/pre.val_loss_mean"]["new"] > changed["placement/pre.val_loss_mean"]["old"]
    assert diff["reports/claims_count.json"]["findings_hold"] == {"old": 1, "new": 0, "diff": -1}


def test_dvc_plots_diff_draws_both_revisions_loss_curves_in_one_page(experiment, tmp_path):
    project, _, name = experiment
    project.run("dvc", "plots", "diff", "HEAD", name, "-o", str(tmp_path / "plots"))
    page = (tmp_path / "plots" / "index.html").read_text()
    assert "reports/curves/placement.csv" in page and "training loss" in page
    rendered = json.loads(project.run("dvc", "plots", "diff", "HEAD", name, "--json").stdout)
    rows = rendered["data"]["reports/curves/placement.csv"][0]["content"]["data"]["values"]
    assert {row["rev"] for row in rows} == {"HEAD", name}
    assert {row["variant"] for row in rows} == set(project.params["ablations"]["placement"]["variants"])


# `blocklab diff`: which findings the experiment moved, read through DVC's API from git revisions, a DVC
# experiment and the workspace.

def test_blocklab_diff_names_the_finding_an_experiment_broke_with_both_verdicts_and_intervals(experiment):
    project, _, name = experiment
    out = project.run("blocklab", "diff", "HEAD", name).stdout
    lines = out.splitlines()
    assert lines[0] == f"blocklab diff HEAD -> {name}: 1 claims changed verdict, 2 unchanged"
    assert lines[1] == "  - pre_norm_learns: holds -> fails"
    assert lines[2].strip().startswith("Pre-norm ends below the unigram baseline")
    assert lines[3].startswith("      HEAD: holds, measured ") and lines[4].startswith(f"      {name}: fails, measured ")
    assert "uniform_is_ln_v" not in out and "one_layer_parameters" not in out  # unchanged: counted, not listed
    assert "parameters changed: 1\n  ablations.placement.train.lr: 0.01 -> 1e-05\n" in out
    moved = out.split("95% interval: ")[1].split("\nfigures changed")[0].splitlines()
    assert int(moved[0]) == len(moved) - 1 >= 1 and all(m.strip().startswith("placement/") for m in moved[1:]), moved
    assert "placement/pre:" in out
    figures = out.split("figures changed: ")[1]
    assert "reports/figures/placement_loss.png" in figures and "residual_loss.png" not in figures

    # the workspace holds the experiment's results: the default comparison, HEAD -> workspace, says the same
    workspace = project.run("blocklab", "diff").stdout
    assert workspace.splitlines()[0] == "blocklab diff HEAD -> workspace: 1 claims changed verdict, 2 unchanged"
    assert workspace.splitlines()[1:] == lines[1:4] + [lines[4].replace(name, "workspace", 1)] + lines[5:]


def test_blocklab_diff_fails_on_a_changed_verdict_only_when_asked(experiment):
    project, _, name = experiment
    gate = project.run("blocklab", "diff", "HEAD", name, "--fail-on-change", check=False)
    assert gate.returncode == 1 and "pre_norm_learns: holds -> fails" in gate.stdout
    same = project.run("blocklab", "diff", "HEAD", "HEAD", "--fail-on-change")
    assert same.stdout.startswith("blocklab diff HEAD -> HEAD: 0 claims changed verdict, 3 unchanged")
    assert "parameters changed: 0" in same.stdout and "figures changed: 0" in same.stdout


def test_blocklab_diff_markdown_is_a_report_for_a_step_summary(experiment):
    from markdown_it import MarkdownIt

    project, _, name = experiment
    report = project.run("blocklab", "diff", "HEAD", name, "--markdown").stdout
    assert report.startswith(f"### blocklab diff: `HEAD` → `{name}`\n")
    html = MarkdownIt("commonmark").enable("table").render(report)  # with GitHub's tables
    assert html.count("<table>") == 3, html  # changed verdicts, parameters, variants that moved
    assert "<td><code>pre_norm_learns</code></td>\n<td>holds, measured" in html
    assert "<td><code>ablations.placement.train.lr</code></td>\n<td>0.01</td>\n<td>1e-05</td>" in html
    assert '<a href="reports/figures/placement_loss.png">placement_loss.png</a>' in html


def _refused(project, *args) -> str:
    """`blocklab diff` with bad input: exit 2, one line on stderr, nothing on stdout, nothing written."""
    before = project.run("git", "status", "--porcelain", "--untracked-files=all").stdout
    result = project.run("blocklab", "diff", *args, check=False)
    assert result.returncode == 2, result
    assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert project.run("git", "status", "--porcelain", "--untracked-files=all").stdout == before
    return result.stderr


def test_blocklab_diff_refuses_what_it_cannot_compare_in_one_line(experiment, small_project):
    project, _, _ = experiment
    assert "unknown revision 'no-such-revision'" in _refused(project, "HEAD", "no-such-revision")
    first = project.run("git", "rev-list", "--max-parents=0", "HEAD").stdout.strip()  # the plan, before any repro
    assert f"revision '{first}' has no reports/claims.json" in _refused(project, first, "HEAD")
    assert "the workspace has no reports/claims.json: run `dvc repro` first" in _refused(small_project)

    params = (project.root / "params.yaml").read_text()
    lock = (project.root / "dvc.lock").read_text()
    try:  # a parameter changed and not reproduced; then a dvc.lock edited by hand
        (project.root / "params.yaml").write_text(params.replace("steps: 12", "steps: 13", 1))
        assert "out of date" in _refused(project) and "run `dvc repro` first" in _refused(project)
        (project.root / "params.yaml").write_text(params)
        (project.root / "dvc.lock").write_text(lock.replace("md5: ", "md5: 0", 1))
        assert "out of date" in _refused(project)
    finally:
        (project.root / "params.yaml").write_text(params)
        (project.root / "dvc.lock").write_text(lock)


def test_every_figure_the_knob_touches_says_the_rate_it_trained_at_and_no_other_figure_changes_its_title(
        experiment):
    """Titles are written from the resolved settings: after `-S ablations.placement.train.lr=1e-05` every figure
    of the placement ablation says lr 1e-5 (the committed ones said 1e-2), and the others are titled as before."""
    import subprocess

    from PIL import Image

    project, _, _ = experiment

    def committed_title(name: str) -> str:
        png = subprocess.run(["git", "show", f"HEAD:reports/figures/{name}"], cwd=project.root, capture_output=True,
                             check=True).stdout
        return Image.open(io.BytesIO(png)).text["Title"]

    now = {path.name: Image.open(path).text["Title"] for path in sorted((project.root / "reports/figures").glob("*.png"))}
    placement = {name: title for name, title in now.items() if name.startswith("placement_")}
    assert len(placement) >= 4 and all("lr 1e-5," in title for title in placement.values()), placement
    assert "lr 1e-2," in committed_title("placement_loss.png")
    for name, title in now.items():
        if not name.startswith("placement_"):
            assert committed_title(name) == title, name

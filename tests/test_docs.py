"""The README and docs state no result by hand: every number the pipeline produces sits in a generated block that
`blocklab docs` writes from reports/, and a test compares each block with what the committed reports say."""

import json
import re
import shutil

import pytest
from click.testing import CliRunner

from blocklab.cli import main
from blocklab.tools.docs import BLOCK, Sources, regenerate, stale

from conftest import ROOT

# The documents that state results (the performance pages hold measurements of the code, dated, not results).
RESULT_DOCUMENTS = ["README.md", "docs/pipeline.md", "docs/claims.md", "docs/tracking.md", "docs/sharing.md",
                    "docs/ci.md", "docs/reliability.md", "docs/tests.md"]
# a loss-like number (a measured ratio or time, 1.84× or 2.05 s, is a measurement of the code, not a result)
RESULT_LIKE = re.compile(r"(?<![\w.])\d+\.\d{2,}(?![\w.]|\s?(?:×|x\b|%|s\b|ms\b|min\b|GB\b|MB\b))"
                         r"|\b\d+ of \d+ (?:findings|claims|checks)")
NOT_RESULTS = re.compile(r"\(https?://[^)]*\)|Python ≥ \d+\.\d+")  # links (arXiv numbers), versions


def test_every_generated_block_matches_the_committed_reports():
    assert stale(ROOT) == [], "run `blocklab docs` after `make repro`"
    result = CliRunner().invoke(main, ["docs", "--check"])
    assert result.exit_code == 0, result.output


def test_a_block_follows_the_reports_and_check_names_the_stale_document(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "reports", tmp_path / "reports")
    for name in ("claims.yaml", "params.yaml"):  # the claims, their words written from the plan's settings
        shutil.copy(ROOT / name, tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("<!-- generated: findings ladder.bigram -->\n<!-- end: findings -->\n"
                                        "<!-- generated: count -->\n<!-- end: count -->\n")
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["docs"]).exit_code == 0
    before = (tmp_path / "README.md").read_text()
    committed = json.loads((ROOT / "reports/claims.json").read_text())["ladder.bigram"]
    assert f"| **{committed['verdict']}** |" in before
    verdicts = json.loads((tmp_path / "reports/claims.json").read_text())
    verdicts["ladder.bigram"]["verdict"] = "fails"
    (tmp_path / "reports/claims.json").write_text(json.dumps(verdicts))
    checked = CliRunner().invoke(main, ["docs", "--check"])
    assert checked.exit_code == 1 and "README.md: generated blocks differ from reports/" in checked.output
    assert "| **fails** |" in regenerate(before, Sources(tmp_path))


def _published_or_planned() -> set[str]:
    """Numbers a document may state by hand: the published figures and the plan's own settings and rules."""
    text = "".join((ROOT / name).read_text() for name in ("reference.yaml", "params.yaml", "claims.yaml"))
    return set(re.findall(r"\d+\.\d+", text))


@pytest.mark.parametrize("document", RESULT_DOCUMENTS)
def test_a_document_states_no_result_by_hand(document):
    """Outside generated blocks, no loss-like number (two decimals or more) that is not a published figure or a
    setting, and no "N of M findings": those drift (the README once said 37 of 43 beside reports saying 45 of 57)."""
    text = NOT_RESULTS.sub("", BLOCK.sub("", (ROOT / document).read_text()))
    allowed = _published_or_planned()
    hand_typed = [m for m in RESULT_LIKE.findall(text) if m not in allowed]
    assert hand_typed == [], f"{document}: put these in a generated block (blocklab.tools.docs): {hand_typed}"


def test_the_walkthroughs_captured_outputs_start_from_the_committed_reports():
    """What the README shows of `dvc metrics diff` and `blocklab diff` is real: its HEAD side is the committed run."""
    variants = json.loads((ROOT / "reports/variants.json").read_text())
    count = json.loads((ROOT / "reports/claims_count.json").read_text())
    rows = [line.split() for line in (ROOT / "docs/walkthrough/metrics_diff.txt").read_text().splitlines()[2:]
            if line.startswith("reports/")]
    assert len(rows) > 10
    for path, metric, head, *_ in rows:
        value = count[metric] if path.endswith("claims_count.json") else \
            variants[metric.rsplit(".", 1)[0]][metric.rsplit(".", 1)[1]]
        assert abs(float(head) - value) <= 1e-5 * max(1, abs(value)), (metric, head, value)
    verdicts = json.loads((ROOT / "reports/claims.json").read_text())
    diff = (ROOT / "docs/walkthrough/blocklab_diff.txt").read_text()
    changed = re.findall(r"^\s+- (\S+): (\w[\w ]*?) -> ", diff, re.M)
    assert changed
    for claim, before in changed:
        assert verdicts[claim]["verdict"] == before, claim


def test_the_readme_shows_the_commands_whose_outputs_it_shows():
    readme = (ROOT / "README.md").read_text()
    for captured in sorted((ROOT / "docs/walkthrough").glob("*.txt")):
        command = captured.read_text().splitlines()[0].removeprefix("$ ").replace(" --no-pager", "")
        assert f"\n{command}  " in readme or f"\n{command}\n" in readme, command


def test_the_pilots_block_reads_its_records_and_the_length_it_chose(tmp_path):
    """The pilot's table is its records' paired differences along the run, and its sentence the length the chosen
    ablation trains: a curve changed in a record, or the length in params.yaml, changes the words."""
    import pandas as pd

    from blocklab.tools.docs import pilot

    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(ROOT / "reports" / "runs" / "modern_ladder_pilot", tmp_path / "reports/runs/modern_ladder_pilot")
    written = pilot(Sources(tmp_path), "modern_ladder_pilot", "modern_ladder")
    rows = [line for line in written.splitlines() if line.startswith("| +")]
    assert len(rows) == 6 and "`modern_ladder` trains 3,000 steps" in written
    for seed in (0, 1):  # rotary's rung ends above the rung before on both seeds: its sign changes at the end
        curve_file = tmp_path / f"reports/runs/modern_ladder_pilot/rope/seed{seed}/curve.csv"
        curve = pd.read_csv(curve_file)
        curve.loc[curve["val_loss"].last_valid_index(), "val_loss"] += 1.0
        curve.to_csv(curve_file, index=False)
    changed = pilot(Sources(tmp_path), "modern_ladder_pilot", "modern_ladder")
    rope = next(line for line in changed.splitlines() if line.startswith("| + rotary"))
    assert rope.endswith("| 3,000 | 3,000 |") and rope != next(r for r in rows if r.startswith("| + rotary"))
    params = tmp_path / "params.yaml"
    params.write_text(params.read_text().replace("steps: 3000, eval_interval: 100}\n    figures: [findings]",
                                                 "steps: 2500, eval_interval: 100}\n    figures: [findings]"))
    assert "`modern_ladder` trains 2,500 steps" in pilot(Sources(tmp_path), "modern_ladder_pilot", "modern_ladder")

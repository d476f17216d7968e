"""The README's paragraphs beside its figures are written from the resolved settings and the verdicts
(blocklab.tools.readme_paragraphs): they follow a changed parameter, and a changed verdict changes their words."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from blocklab.analysis.run_table import RunTable
from blocklab.params.schema import parse_params
from blocklab.tools.readme_paragraphs import PARAGRAPHS

from conftest import ROOT

RAW = yaml.safe_load((ROOT / "params.yaml").read_text())
VERDICTS = json.loads((ROOT / "reports" / "claims.json").read_text())
MAPS = json.loads((ROOT / "reports" / "maps.json").read_text())


def test_the_first_figures_words_say_the_learning_rate_the_readmes_experiment_sets():
    raw = copy.deepcopy(RAW)
    before = PARAGRAPHS["placement-figure"](RunTable.of(parse_params(raw)), VERDICTS, MAPS)
    assert "at learning rate 1e-2" in before and "lr 3e-3" not in before
    raw["ablations"]["placement"]["train"]["lr"] = 0.003  # dvc exp run -S ablations.placement.train.lr=0.003
    after = PARAGRAPHS["placement-figure"](RunTable.of(parse_params(raw)), VERDICTS, MAPS)
    assert "at learning rate 3e-3" in after and "at lr 3e-3](reports/figures/placement_loss.png)" in after
    assert "1e-2" not in after


@pytest.mark.parametrize("name", list(PARAGRAPHS))
def test_a_paragraph_says_what_each_verdict_it_reads_decided(name):
    """Flip each verdict one at a time: the paragraph that reads it says something else, so it cannot state a finding
    its verdict does not back."""
    table = RunTable.of(parse_params(copy.deepcopy(RAW)))
    written = PARAGRAPHS[name](table, VERDICTS, MAPS)
    read = []
    for cid, found in VERDICTS.items():
        for other in ("holds", "fails", "inconclusive"):
            if other == found["verdict"]:
                continue
            flipped = {**VERDICTS, cid: {**found, "verdict": other}}
            if PARAGRAPHS[name](table, flipped, MAPS) != written:
                read.append(cid)
                break
    assert read, f"{name} reads no verdict"
    assert len(set(read)) == len(read)


def test_the_readme_shows_each_paragraph_as_blocklab_docs_writes_it():
    readme = (ROOT / "README.md").read_text()
    for name in PARAGRAPHS:
        assert f"<!-- generated: paragraph {name} -->\n" in readme, name


@pytest.mark.parametrize("paragraph, name, least", [("placements-map", "placements", 10),
                                                     ("lr-frontier", "lr_frontier", 4),
                                                     ("modern-ladder", "modern_ladder", 12),
                                                     ("scale-trend", "scale", 4)])
def test_a_paragraph_says_every_verdict_its_figure_draws(paragraph, name, least):
    """The findings figure beside a map's or an ablation's paragraph draws each finding over its runs with its
    interval: the paragraph reads every one of those verdicts (flipping any changes its words), so it cannot say
    what the figure beside it contradicts."""
    from blocklab.analysis.claims import load_claims
    from blocklab.analysis.finding_plots import reads_map

    table = RunTable.of(parse_params(copy.deepcopy(RAW)))
    written = PARAGRAPHS[paragraph](table, VERDICTS, MAPS)
    drawn = [c.id for c in load_claims(ROOT / "claims.yaml", table) if reads_map(c, name)
             and VERDICTS[c.id].get("interval")]
    assert len(drawn) >= least
    for cid in drawn:
        for other in {"holds", "fails", "inconclusive"} - {VERDICTS[cid]["verdict"]}:
            flipped = {**VERDICTS, cid: {**VERDICTS[cid], "verdict": other}}
            assert PARAGRAPHS[paragraph](table, flipped, MAPS) != written, (cid, other)


def test_the_frontier_paragraph_names_the_depth_its_findings_read():
    """The paragraph says its findings pair the seeds at the map's deepest stack: each finding reads that group."""
    from blocklab.analysis.claims import load_claims
    from blocklab.analysis.finding_plots import reads_map

    table = RunTable.of(parse_params(copy.deepcopy(RAW)))
    deepest = max(next(values for _, field, values in table.maps["lr_frontier"].axes if field == "n_layers"))
    findings = [c for c in load_claims(ROOT / "claims.yaml", table) if reads_map(c, "lr_frontier")]
    assert findings and all(f'"l{deepest}"' in f"{c.left} {c.right}" for c in findings)
    assert f"paired with pre-norm's, at {deepest} blocks" in PARAGRAPHS["lr-frontier"](table, VERDICTS, MAPS)

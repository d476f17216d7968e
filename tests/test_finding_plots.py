"""A map's findings figure (blocklab.analysis.finding_plots): a panel per finding that reads the map's cells, its
own quantity with its interval (or, decided value by value, its values against their bound), coloured by its
verdict; the findings of other maps left out. An ablation's: a row per paired difference of two variants, its other
findings as panels below."""

from __future__ import annotations

import matplotlib.image
import pytest
from PIL import Image

from blocklab.analysis.claims import Compare, Monotone, Within
from blocklab.analysis.finding_plots import VERDICT_COLOURS, _quantity, findings_figure, reads_map


def compare(cid: str, left: str, right: str, op: str = "<") -> Compare:
    return Compare(id=cid, claim="words", kind="finding", rule="compare", left=left, op=op, right=right)


CLAIMS = [
    compare("m.lower", 'mean("m/a/l24_lr0.003", "val_loss")', 'mean("m/b/l24_lr0.003", "val_loss")'),
    Monotone(id="m.grows", claim="words", kind="finding", rule="monotone", direction="increasing",
             values=['mean("m/a/l6", "resid_rms_last")', 'mean("m/a/l12", "resid_rms_last")',
                     'mean("m/a/l24", "resid_rms_last")']),
    Within(id="m.same", claim="words", kind="finding", rule="within", value='mean("m/a/l6", "val_loss") - 2.2',
           expected=0, tolerance=0.02),
    compare("m.counts", 'untrained("m/a/l6")', 'untrained("m/b/l6")', "<="),
    compare("other.lower", 'mean("other/a", "val_loss")', 'mean("other/b", "val_loss")'),
]
VERDICTS = {
    "m.lower": {"verdict": "holds", "interval": [-0.08, -0.02]},
    "m.grows": {"verdict": "inconclusive", "interval": [[0.5, 1.5], [-0.2, 2.0]], "known_to_fail": True},
    "m.same": {"verdict": "fails", "interval": [0.05, 0.09]},
    "m.counts": {"verdict": "holds"},  # a count: no interval, no panel
    "other.lower": {"verdict": "holds", "interval": [-0.1, -0.05]},
}


def test_a_map_reads_only_its_own_findings():
    assert [c.id for c in CLAIMS if reads_map(c, "m")] == ["m.lower", "m.grows", "m.same", "m.counts"]
    assert [c.id for c in CLAIMS if reads_map(c, "other")] == ["other.lower"]


def test_a_panel_says_the_quantity_its_finding_reads():
    assert [_quantity(c) for c in CLAIMS[:4]] == ["final validation loss", "RMS of the stream after the last block",
                                                 "final validation loss", "seeds that did not train"]


def test_the_figure_draws_a_panel_per_finding_with_an_interval_in_its_verdicts_colour(tmp_path):
    path = findings_figure([c for c in CLAIMS if reads_map(c, "m")], VERDICTS, "m: findings\nwidth 64",
                           tmp_path / "m_findings.png")
    assert path == tmp_path / "m_findings.png"
    assert Image.open(path).info["Title"] == "m: findings\nwidth 64"
    pixels = matplotlib.image.imread(path)[..., :3].reshape(-1, 3)

    def present(colour: str) -> bool:
        rgb = matplotlib.colors.to_rgb(colour)
        return bool((abs(pixels - rgb).max(axis=1) < 0.02).sum() > 50)

    assert present(VERDICT_COLOURS["holds"]) and present(VERDICT_COLOURS["fails"])
    assert present(VERDICT_COLOURS["inconclusive"])


def test_no_figure_when_no_finding_has_an_interval_or_a_bound(tmp_path):
    assert findings_figure([CLAIMS[3]], VERDICTS, "m", tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


@pytest.mark.parametrize("verdict", ["holds", "fails", "inconclusive"])
def test_a_finding_that_changes_verdict_changes_colour(tmp_path, verdict):
    path = findings_figure([CLAIMS[0]], {"m.lower": {"verdict": verdict, "interval": [-0.08, -0.02]}}, "m",
                           tmp_path / f"{verdict}.png")
    pixels = matplotlib.image.imread(path)[..., :3].reshape(-1, 3)
    counts = {v: int((abs(pixels - matplotlib.colors.to_rgb(c)).max(axis=1) < 0.02).sum())
              for v, c in VERDICT_COLOURS.items()}
    assert max(counts, key=counts.get) == verdict


def test_every_finding_of_the_plan_names_its_quantity_in_words():
    """No panel labelled with a raw argument (a field name, or "first" of slope_at): each quantity a finding of
    claims.yaml reads is one the figure knows the words of."""
    from blocklab.analysis.claims import load_claims
    from blocklab.analysis.finding_plots import DERIVED_WORDS, QUANTITY_WORDS

    from conftest import ROOT

    known = set(QUANTITY_WORDS.values()) | set(DERIVED_WORDS.values())
    unnamed = {c.id: _quantity(c) for c in load_claims(ROOT / "claims.yaml") if c.kind == "finding"
               and _quantity(c) not in known}
    assert unnamed == {}


ABLATION_CLAIMS = [
    compare("a.rung", 'mean("a/second", "val_loss_batches")', 'mean("a/first", "val_loss_batches")'),
    Within(id="a.same", claim="words", kind="finding", rule="within",
           value='mean("a/second", "val_loss_batches") - mean("a/without", "val_loss_batches")', expected=0,
           tolerance=0.02),
    compare("a.bound", 'mean("a/second", "val_loss_batches")', "2.5"),  # one variant: not a difference of two
    compare("other.rung", 'mean("other/second", "val_loss")', 'mean("other/first", "val_loss")'),
]
ABLATION_VERDICTS = {"a.rung": {"verdict": "holds", "interval": [-0.04, -0.02]},
                     "a.same": {"verdict": "inconclusive", "interval": [-0.01, 0.03], "known_to_fail": True},
                     "a.bound": {"verdict": "holds", "interval": [-0.3, -0.1]},
                     "other.rung": {"verdict": "fails", "interval": [0.1, 0.2]}}


def kept_figures(monkeypatch) -> list:
    """The figures finding_plots saves, to read what was drawn on them."""
    from blocklab.analysis import finding_plots

    kept, original = [], finding_plots.save_figure

    def keeping(fig, path, **kwargs):
        kept.append(fig)
        return original(fig, path, **kwargs)

    monkeypatch.setattr(finding_plots, "save_figure", keeping)
    return kept


def test_an_ablations_findings_are_rows_of_paired_differences_on_one_axis(tmp_path, monkeypatch):
    """A row per finding that compares two of the ablation's variants, "A → B" in their labels, B − A with its
    interval in its verdict's colour; a finding of one variant against a number, a panel below the rows; a
    finding of another ablation, neither."""
    from blocklab.analysis.finding_plots import _pair, differences_figure

    assert [_pair(c, "a") for c in ABLATION_CLAIMS[:3]] == [["second", "first"], ["second", "without"], None]
    kept = kept_figures(monkeypatch)
    path = differences_figure(ABLATION_CLAIMS, ABLATION_VERDICTS,
                              {"first": "the first", "second": "+ the second", "without": "no third"}, "a",
                              "a: findings", tmp_path / "a_findings.png")
    assert path == tmp_path / "a_findings.png"
    ax, *panels = [a for a in kept[0].axes if a.get_visible()]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["the first → + the second", "no third → + the second"]
    low, high = ax.get_xlim()
    assert low < -0.04 and high > 0.03 and low < -0.02 < 0.02 < high  # every interval, zero and the band
    assert [p.get_title().split(":")[0] for p in panels] == ["bound"]  # a.bound, below the rows
    pixels = matplotlib.image.imread(path)[..., :3].reshape(-1, 3)
    for verdict in ("holds", "inconclusive"):
        assert (abs(pixels - matplotlib.colors.to_rgb(VERDICT_COLOURS[verdict])).max(axis=1) < 0.02).sum() > 50
    assert differences_figure(ABLATION_CLAIMS, ABLATION_VERDICTS, {}, "none", "t", tmp_path / "x.png") is None


def test_an_equivalence_of_one_variant_against_another_is_a_row_of_their_difference(tmp_path, monkeypatch):
    """`within` of one variant's mean against another's: value − expected is their paired difference, a row."""
    from blocklab.analysis.finding_plots import differences_figure

    same = Within(id="a.twins", claim="words", kind="finding", rule="within", value='mean("a/second", "val_loss")',
                  expected='mean("a/first", "val_loss")', tolerance=0.02)
    kept = kept_figures(monkeypatch)
    differences_figure([same], {"a.twins": {"verdict": "holds", "interval": [-0.01, 0.012]}}, {}, "a", "t",
                       tmp_path / "a.png")
    (ax,) = [a for a in kept[0].axes if a.get_visible()]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["first → second"]


def test_a_finding_decided_value_by_value_is_drawn_against_its_bound(tmp_path, monkeypatch):
    """No interval (each seed held to a bound, or one run to a band): its values as points, the bound or band on
    the axis; a relative band or a list it is held to is not drawn."""
    kept = kept_figures(monkeypatch)
    every = compare("m.below", 'seeds("m/a/l6", "attn_logit_max")', "100")
    band = Within(id="m.near", claim="words", kind="finding", rule="within", value='loss("m/a/l6/seed0")',
                  expected='published("t", "x")', tolerance=0.01)
    verdicts = {"m.below": {"verdict": "holds", "measured": [18.0, 15.3, 8.5], "expected": "< 100"},
                "m.near": {"verdict": "fails", "measured": 3.3412, "expected": "3.321 ± 0.01"}}
    path = findings_figure([every, band], verdicts, "m", tmp_path / "m.png")
    first, second = [a for a in kept[0].axes if a.get_visible()]
    assert list(first.lines[0].get_xdata()) == [18.0, 15.3, 8.5] and first.get_xlim()[1] > 100
    low, high = second.get_xlim()
    assert low < 3.311 and 3.3412 < high
    assert path is not None
    relative = {"m.below": {"verdict": "holds", "measured": [18.0], "expected": "100 ± 10%"}}
    assert findings_figure([every], relative, "m", tmp_path / "none.png") is None


def test_a_findings_figure_writes_the_verdict_after_holm_where_it_differs():
    from blocklab.analysis.finding_plots import verdict_words

    assert verdict_words({"verdict": "holds", "p_holm": 0.2, "verdict_holm": "inconclusive"}) == \
        "holds; after Holm inconclusive"
    assert verdict_words({"verdict": "holds", "p_holm": 0.001, "verdict_holm": "holds"}) == "holds"
    assert verdict_words({"verdict": "fails", "known_to_fail": True, "p_holm": None, "verdict_holm": "fails"}) == \
        "fails, known to fail"  # outside the family: nothing after it


def test_each_finding_names_the_findings_figure_that_draws_it():
    from blocklab.analysis.finding_plots import figure_of

    figures = {"m": ("heatmap", "findings"), "other": ("findings",)}
    named = {c.id: figure_of(c, VERDICTS[c.id], figures) for c in CLAIMS}
    assert named == {"m.lower": "m_findings.png", "m.grows": "m_findings.png", "m.same": "m_findings.png",
                     "m.counts": None,  # no interval, nothing it is held to: no panel
                     "other.lower": "other_findings.png"}
    assert figure_of(CLAIMS[0], VERDICTS["m.lower"], {"m": ("heatmap",)}) is None  # no findings figure
    counted = {"verdict": "holds", "measured": 17, "expected": "> 0"}
    assert figure_of(CLAIMS[3], counted, figures) == "m_findings.png"  # a count against its bound: a panel

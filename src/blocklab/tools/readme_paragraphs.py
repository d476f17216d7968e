"""The README's sentences about its figures, written from the resolved settings and the verdicts (`blocklab docs`'
`paragraph NAME` blocks): each says the settings its runs trained with and what their findings decided, so it can
neither restate a parameter a `dvc exp run -S ...` has since changed nor contradict the figure beside it."""

from __future__ import annotations

from collections.abc import Callable

from blocklab.analysis.run_table import PlanEntry, RunTable
from blocklab.analysis.setting_words import shared_settings
from blocklab.params.words import rate

# matplotlib's first colours, the order a figure draws its variants in
COLOURS = ["blue", "orange", "green", "red", "purple", "brown", "pink", "grey"]


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _axis(entry: PlanEntry, setting: str) -> tuple:
    return next(values for _, field, values in entry.axes if field == setting)


def _said(verdict: str, holds: str, fails: str, otherwise: str) -> str:
    return holds if verdict == "holds" else fails if verdict == "fails" else otherwise


def placement_figure(table: RunTable, verdicts: dict, maps: dict) -> str:
    """The first figure, table A's loss curves, and what it shows."""
    entry = table.ablations["placement"]
    post = table.spec("placement", "post")
    lr = rate(post.train.lr)
    image = (f"![placement: training loss of {_listed(list(entry.labels.values()))}, at lr {lr}]"
             f"(reports/figures/placement_loss.png)")
    stays = _said(verdicts["collapse.post_norm_without_warmup"]["verdict"],
                  "stays on the unigram baseline — it has learnt the character frequencies and nothing more —",
                  "does not stay on the unigram baseline —",
                  "ends near the unigram baseline on some seeds, not all —")
    learners = [entry.labels[variant] for cid, variant in (("collapse.pre_escapes", "pre"),
                                                           ("collapse.post_warmup_escapes", "post_warmup"),
                                                           ("collapse.post_warmup200_escapes", "post_warmup200"))
                if verdicts[cid]["verdict"] == "holds"]
    learns = f"while {_listed(learners)} learn{'s' * (len(learners) == 1)}" if learners else "and so does every variant"
    colour = COLOURS[entry.variants.index("post") % len(COLOURS)]
    return (f"{image}\n\n*Post-norm without warmup at learning rate {lr} ({colour}) {stays} {learns} "
            f"({shared_settings(entry.specs)}).*\n")


def stability_map(table: RunTable, verdicts: dict, maps: dict) -> str:
    """The stability map: its grid, and where post- and pre-norm train."""
    entry = table.maps["stability"]
    rates, warmups = _axis(entry, "lr"), _axis(entry, "warmup")
    warmup = (f"with and without a {max(warmups)}-step warmup" if len(warmups) == 2 and 0 in warmups
              else f"at warmups of {_listed([str(w) for w in warmups])} steps")

    def trains(variant: str, group: str) -> str:
        line = maps.get(f"stability/{variant}/{group}", {})
        if "trainable_lr_max" not in line:
            return f"{entry.labels[variant]} at no rate"
        low, high = rate(line["trainable_lr_min"]), rate(line["trainable_lr_max"])
        return f"{entry.labels[variant]} from {low} to {high}" if low != high else f"{entry.labels[variant]} at {low}"

    lower = _said(verdicts["stability.post_trains_at_lower_rates_than_pre"]["verdict"],
                  "post-norm's largest trainable rate is below pre-norm's on every seed",
                  "post-norm's largest trainable rate is not below pre-norm's",
                  "whether post-norm's largest trainable rate is below pre-norm's is undecided at these seeds")
    return (f"**Maps, not points.** One learning rate says little about a block, so the `stability` map trains each "
            f"block over learning rates {rate(min(rates))} to {rate(max(rates))}, {warmup} "
            f"({shared_settings(entry.specs)}). Without warmup every seed trains {trains('post', 'w0')}, "
            f"{trains('pre', 'w0')}: {lower}. A grey cell collapsed, a red one blew up:\n")


def placements_map(table: RunTable, verdicts: dict, maps: dict) -> str:
    """The placements map: what it trains, and what its findings decided."""
    entry = table.maps["placements"]
    depths, rates = _axis(entry, "n_layers"), _axis(entry, "lr")
    v = {cid.split(".", 1)[1]: found["verdict"] for cid, found in verdicts.items() if cid.startswith("placements.")}
    sentences = [
        _said(v["pre_stream_grows_with_depth"], "pre-norm's residual stream grows with depth, as Kim et al. report",
              "pre-norm's residual stream does not grow with depth, against Kim et al.",
              "whether pre-norm's residual stream grows with depth is undecided"),
        _said(v["post_fails_where_pre_trains"], "post-norm loses more seeds than pre-norm as the stack deepens",
              "post-norm loses no more seeds than pre-norm", "whether post-norm loses more seeds is undecided"),
        _said(v["peri_stream_grows_less_than_pre"], "Peri-LN's stream grows less than pre-norm's, as Kim et al. report",
              "Peri-LN's stream grows *more* than pre-norm's, not less",
              "whether Peri-LN's stream grows less than pre-norm's is undecided"),
    ]
    losses = {entry.labels[variant]: v[f"{claim}_lowers_loss"]
              for variant, claim in (("peri", "peri"), ("scaled", "scaling"), ("mix", "mix"))}
    below = [label for label, verdict in losses.items() if verdict == "holds"]
    undecided = [label for label, verdict in losses.items() if verdict == "inconclusive"]
    above = [label for label, verdict in losses.items() if verdict == "fails"]
    if below:
        sentences.append(f"{_listed(below)} end{'s' * (len(below) == 1)} below pre-norm's loss at the deepest stack")
    if above:
        sentences.append(f"{_listed(above)} end{'s' * (len(above) == 1)} above pre-norm's loss at the deepest stack")
    if undecided:
        sentences.append(f"whether {_listed(undecided)} end{'s' * (len(undecided) == 1)} below pre-norm's loss at the "
                         f"deepest stack is undecided at these seeds")
    return (f"**Where the norm goes, 2017 → 2025.** The `placements` map trains {len(entry.labels)} placements of the "
            f"norm — {_listed(list(entry.labels.values()))} — at {_listed([str(d) for d in depths])} blocks and learning "
            f"rates {_listed([rate(r) for r in rates])} ({shared_settings(entry.specs)}), and reads the residual stream "
            f"after every block (its size, its largest value, and how much each block changes it), the measurements "
            f"2025's papers argue from. At this setting {'; '.join(sentences)} (every placement's verdict, and why "
            f"those marked known to fail do, in [docs/claims.md](docs/claims.md)):\n")


# (claim, rung, what the claim expects of it): "lowers" the loss, or changes "nothing" measurable
LADDER_RUNGS = [("modern_ladder.rmsnorm_matches_layernorm", "rmsnorm", "nothing"),
                ("modern_ladder.swiglu_lowers", "swiglu", "lowers"),
                ("modern_ladder.rope_lowers", "rope", "lowers"),
                ("modern_ladder.no_bias_costs_nothing", "no_bias", "nothing"),
                ("modern_ladder.qk_norm_costs_nothing", "qk_norm", "nothing"),
                ("modern_ladder.peri_lowers", "peri", "lowers")]


def modern_ladder(table: RunTable, verdicts: dict, maps: dict) -> str:
    """Today's block, rung by rung: what each rung's finding decided."""
    entry = table.ablations["modern_ladder"]
    groups: dict[tuple[str, str], list[str]] = {}
    for cid, rung, expects in LADDER_RUNGS:
        verdict, name = verdicts[cid]["verdict"], entry.labels[rung].removeprefix("+ ")
        groups.setdefault((expects, verdict), []).append(name)
    said = {("lowers", "holds"): "{} each lower the loss", ("lowers", "fails"): "{} raise it",
            ("lowers", "inconclusive"): "whether {} lower it is undecided at these seeds",
            ("nothing", "holds"): "{} change nothing measurable (equivalence tests)",
            ("nothing", "fails"): "{} change it measurably",
            ("nothing", "inconclusive"): "whether {} change nothing is undecided at these seeds"}
    parts = [said[key].format(_listed(names)) for key in said if (names := groups.get(key))]
    parts[0] = parts[0][0].upper() + parts[0][1:]
    today = _said(verdicts["modern_ladder.todays_block_below_the_lectures"]["verdict"],
                  "today's block ends below the lecture's", "today's block does not end below the lecture's",
                  "whether today's block ends below the lecture's is undecided")
    rungs = [label.removeprefix("+ ") for label in list(entry.labels.values())[1:]]
    return (f"**Today's block, rung by rung.** The `modern_ladder` continues the lecture's ladder from its last rung "
            f"to the block Llama 3 and OLMo 2 build — {_listed(rungs)} — one rung at a time "
            f"({shared_settings(entry.specs)}), each rung's change paired by seed. {'; '.join(parts)}; and {today}:\n")


PARAGRAPHS: dict[str, Callable[[RunTable, dict, dict], str]] = {
    "placement-figure": placement_figure, "stability-map": stability_map, "placements-map": placements_map,
    "modern-ladder": modern_ladder}

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


# (claim, the variant it sets against pre-norm at the deepest stack): the placements' final-loss findings
PLACEMENT_LOSSES = [("placements.peri_lowers_loss", "peri"), ("placements.mix_lowers_loss", "mix"),
                    ("placements.scaling_lowers_loss", "scaled")]
# the same against pre-norm with the same warmup (the placements_warmup map)
WARMUP_LOSSES = [("placements_warmup.peri_lowers_loss", "peri"), ("placements_warmup.mix_lowers_loss", "mix")]


# (claim, what the placements paragraph says when it holds, when it fails, when it is undecided): the stream (Kim
# et al.) ...
STREAM_SENTENCES = [
    ("placements.pre_stream_grows_with_depth", "pre-norm's residual stream ends larger the deeper the stack",
     "pre-norm's residual stream does not end larger the deeper the stack",
     "whether pre-norm's residual stream ends larger the deeper the stack is undecided"),
    ("placements.peri_stream_smaller_than_pre", "Peri-LN's ends smaller than pre-norm's",
     "Peri-LN's ends *larger* than pre-norm's, not smaller",
     "whether Peri-LN's ends smaller than pre-norm's is undecided"),
    ("placements.peri_fewer_massive_activations_than_pre", "with a smaller largest value",
     "with a *larger* largest value", "and whether its largest value is smaller is undecided"),
]
# ... and depth (Sun et al.; {high}: the map's highest learning rate)
DEPTH_SENTENCES = [
    ("placements.pre_deep_blocks_matter_less_when_deeper",
     "skipping a deep block of pre-norm costs less in the deepest stack than in the shallowest",
     "skipping a deep block of pre-norm costs no less in the deepest stack than in the shallowest",
     "whether skipping a deep block of pre-norm costs less in the deepest stack is undecided"),
    ("placements.scaling_deep_blocks_matter_more", "LayerNorm scaling makes the deep blocks matter more",
     "LayerNorm scaling makes the deep blocks matter *less*",
     "whether LayerNorm scaling makes the deep blocks matter more is undecided"),
    ("placements.scaling_curbs_growth", "the scaling slows the stream's growth over the blocks",
     "the scaling does not slow the stream's growth over the blocks",
     "whether the scaling slows the stream's growth is undecided"),
    ("placements.scaling_curbs_growth_early", "it does so from the first evaluation on, not only at the end",
     "not yet at the first evaluation, only later", "whether it does so from the first evaluation on is undecided"),
    ("placements.scaling_gain_grows_with_depth", "the scaling's gain over pre-norm grows with depth",
     "the scaling's gain over pre-norm does not grow with depth",
     "whether the scaling's gain over pre-norm grows with depth is undecided"),
    ("placements.scaling_lowers_loss_high_lr", "at lr {high} the scaling ends below pre-norm at the deepest stack",
     "at lr {high} the scaling ends *above* pre-norm at the deepest stack",
     "whether the scaling ends below pre-norm at the deepest stack at lr {high} is undecided"),
]


def placements_map(table: RunTable, verdicts: dict, maps: dict) -> str:
    """The placements map: what it trains, and what its findings decided, paper by paper."""
    entry = table.maps["placements"]
    depths, rates = _axis(entry, "n_layers"), _axis(entry, "lr")
    v = {cid: found["verdict"] for cid, found in verdicts.items()}
    high = rate(max(rates))
    stream = [_said(v[cid], *words) for cid, *words in STREAM_SENTENCES]
    depth = [_said(v[cid], *(w.format(high=high) for w in words)) for cid, *words in DEPTH_SENTENCES]
    warmup = table.maps["placements_warmup"]
    groups: dict[str, list[str]] = {}
    for cid, variant in PLACEMENT_LOSSES:
        groups.setdefault(v[cid], []).append(entry.labels[variant])
    for cid, variant in WARMUP_LOSSES:
        groups.setdefault(v[cid], []).append(f"{warmup.labels[variant]} with a "
                                             f"{warmup.specs[0].train.warmup}-step warmup (pre-norm's the same)")
    losses = []
    for verdict, words in (("holds", "{} end{} below pre-norm"), ("fails", "{} end{} *above* pre-norm"),
                           ("inconclusive", "whether {} end{} below pre-norm is undecided at these seeds")):
        if names := groups.get(verdict):
            losses.append(words.format(_listed(names), "s" * (len(names) == 1)))
    olmo = _said(v["placements.reordered_steadier_gradients"],
                 f"at the high rate {entry.labels['reordered']}'s gradient norm grows less over training than "
                 f"pre-norm's",
                 f"at the high rate {entry.labels['reordered']}'s gradient norm grows no less over training than "
                 f"pre-norm's",
                 f"whether {entry.labels['reordered']}'s gradient norm grows less over training than pre-norm's is "
                 f"undecided")
    post = _said(v["placements.post_fails_where_pre_trains"], "post-norm loses more seeds than pre-norm",
                 "post-norm loses no more seeds than pre-norm", "whether post-norm loses more seeds is undecided")
    tuned, untuned = v["dyt_alpha.tuned_matches_layernorm"], v["dyt_alpha.untuned_matches_layernorm"]
    dyt = _said(tuned, "DyT matches LayerNorm at its best initial alpha", "DyT does not match LayerNorm at its best "
                "initial alpha", "whether DyT matches LayerNorm at its best initial alpha is undecided")
    dyt += {"holds": {"holds": ", and at the paper's own", "fails": ", but not at the paper's own",
                      "inconclusive": " (at the paper's own, undecided)"},
            "fails": {"holds": ", though it does at the paper's own", "fails": ", nor at the paper's own",
                      "inconclusive": " (at the paper's own, undecided)"},
            "inconclusive": {"holds": " (at the paper's own it does)", "fails": " (at the paper's own it does not)",
                             "inconclusive": ", and at the paper's own"}}[
        tuned if tuned in ("holds", "fails") else "inconclusive"][untuned if untuned in ("holds", "fails")
                                                                   else "inconclusive"]
    return (f"**Where the norm goes, 2017 → 2025.** The `placements` map trains {len(entry.labels)} placements of the "
            f"norm — {_listed(list(entry.labels.values()))} — at {_listed([str(d) for d in depths])} blocks and learning "
            f"rates {_listed([rate(r) for r in rates])} ({shared_settings(entry.specs)}), where the pilot finds that "
            f"pre-norm pays for depth, and measures each as its paper does. The stream (Kim et al.): "
            f"{', '.join(stream)}. Depth (Sun et al.): {'; '.join(depth)}. The loss at the deepest stack, lr {rate(min(rates))}: "
            f"{'; '.join(losses)}. Stability: {olmo}; {post}. {dyt[0].upper() + dyt[1:]} (every placement's verdict, "
            f"and why those marked known to fail do, in [docs/claims.md](docs/claims.md)):\n")


# (claim, the variant it sets against pre-norm, what the frontier paragraph says when it holds, when it fails, when it
# is undecided; {v}: the variant's label)
FRONTIER_SENTENCES = [
    ("lr_frontier.peri_trains_at_higher_rates_than_pre", "peri", "{v} trains at a higher rate than pre-norm",
     "{v} trains at no higher rate than pre-norm", "whether {v} trains at a higher rate than pre-norm is undecided"),
    ("lr_frontier.reordered_trains_at_higher_rates_than_pre", "reordered", "{v} trains at a higher rate than pre-norm",
     "{v} trains at no higher rate than pre-norm", "whether {v} trains at a higher rate than pre-norm is undecided"),
    ("lr_frontier.mix_trains_at_rates_no_lower_than_pre", "mix", "{v} loses none of pre-norm's rates",
     "{v} loses rates at which pre-norm trains", "whether {v} loses any of pre-norm's rates is undecided"),
    ("lr_frontier.scaling_trains_at_rates_no_lower_than_pre", "scaled", "{v} loses none of pre-norm's rates",
     "{v} loses rates at which pre-norm trains", "whether {v} loses any of pre-norm's rates is undecided"),
]


def lr_frontier(table: RunTable, verdicts: dict, maps: dict) -> str:
    """The learning-rate frontier: per depth, the largest rate at which each placement's every seed trains
    (reports/maps.json), and what the frontier's findings decided."""
    entry = table.maps["lr_frontier"]
    depths, rates = _axis(entry, "n_layers"), _axis(entry, "lr")

    def edge(variant: str, depth: int) -> str:
        line = maps.get(f"lr_frontier/{variant}/l{depth}", {})
        return f"{entry.labels[variant]} {rate(line['trainable_lr_max']) if 'trainable_lr_max' in line else 'none'}"

    edges = "; ".join(f"at {depth} blocks {', '.join(edge(variant, depth) for variant in entry.labels)}"
                      for depth in depths)
    found = [_said(verdicts[cid]["verdict"], *(w.format(v=entry.labels[variant]) for w in words))
             for cid, variant, *words in FRONTIER_SENTENCES]
    deepest = max(depths)  # the stack the findings read (tests/test_readme_paragraphs.py holds them to it)
    pre = [maps.get(f"lr_frontier/pre/l{depth}", {}).get("trainable_lr_max") for depth in depths]
    reach = ("from where pre-norm is healthy to past where it stops training" if all(
        edge is not None and edge < max(rates) for edge in pre) else "(pre-norm trains at its highest rate somewhere: "
        "the grid does not reach its edge)")
    return (f"**How far each placement's learning rate goes.** The `lr_frontier` map trains the same placements at "
            f"{_listed([str(d) for d in depths])} blocks over learning rates {_listed([rate(r) for r in rates])} "
            f"({shared_settings(entry.specs)}), {reach}. The largest "
            f"rate at which every seed trains: {edges}. Each seed's largest, paired with pre-norm's, at {deepest} "
            f"blocks (Kim et al., OLMo 2, Li et al., Sun et al.): {'; '.join(found)}. The loss at each rate, the mean "
            f"of the seeds that trained with its interval, and a triangle where none did:\n")


# Each piece of today's block: the rung that adds it, what its paper expects of it ("lowers" the loss, or changes
# "nothing" measurable), the finding of its rung and the finding of its removal from today's block (Peri-LN removed
# from today's block is the QK-norm rung, so its rung's finding is its removal's)
LADDER_PIECES = [("rmsnorm", "nothing", "modern_ladder.rmsnorm_matches_layernorm",
                  "modern_ladder.without_rmsnorm_the_same"),
                 ("swiglu", "lowers", "modern_ladder.swiglu_lowers", "modern_ladder.without_swiglu_higher"),
                 ("rope", "lowers", "modern_ladder.rope_lowers", "modern_ladder.without_rope_higher"),
                 ("no_bias", "nothing", "modern_ladder.no_bias_costs_nothing", "modern_ladder.biases_back_the_same"),
                 ("qk_norm", "nothing", "modern_ladder.qk_norm_costs_nothing",
                  "modern_ladder.without_qk_norm_the_same"),
                 ("peri", "lowers", "modern_ladder.peri_lowers", "modern_ladder.peri_lowers")]
# what a group of pieces did, said of several (each lower ...) or of one (lowers ...)
_LADDER_SAID = {("lowers", "holds"): ("{} each lower the loss", "{} lowers the loss"),
                ("lowers", "fails"): ("{} raise it", "{} raises it"),
                ("lowers", "inconclusive"): ("whether {} lower it is undecided at these seeds",
                                             "whether {} lowers it is undecided at these seeds"),
                ("nothing", "holds"): ("{} change nothing measurable (equivalence tests)",
                                       "{} changes nothing measurable (an equivalence test)"),
                ("nothing", "fails"): ("{} change it measurably", "{} changes it measurably"),
                ("nothing", "inconclusive"): ("whether {} change nothing is undecided at these seeds",
                                              "whether {} changes nothing is undecided at these seeds")}


def _piece(label: str) -> str:
    """A rung's piece in words: its label without the "+ " and what the last rung adds in brackets."""
    return label.removeprefix("+ ").split(" (")[0]


def _credited(removed: bool, labels: dict, verdicts: dict) -> str:
    """What each piece's rung finding (or, `removed`, its removal's) decided, the pieces grouped by verdict."""
    groups: dict[tuple[str, str], list[str]] = {}
    for rung, expects, *findings in LADDER_PIECES:
        groups.setdefault((expects, verdicts[findings[removed]]["verdict"]), []).append(_piece(labels[rung]))
    return "; ".join(_LADDER_SAID[key][len(names) == 1].format(_listed(names))
                     for key in _LADDER_SAID if (names := groups.get(key)))


def modern_ladder(table: RunTable, verdicts: dict, maps: dict) -> str:
    """Today's block, rung by rung and piece by piece: what each rung's and each removal's finding decided."""
    entry = table.ablations["modern_ladder"]
    today = _said(verdicts["modern_ladder.todays_block_below_the_lectures"]["verdict"],
                  "today's block ends below the lecture's", "today's block does not end below the lecture's",
                  "whether today's block ends below the lecture's is undecided")
    rungs = [_piece(entry.labels[rung]) for rung, *_ in LADDER_PIECES]
    return (f"**Today's block, rung by rung and piece by piece.** The `modern_ladder` continues the lecture's ladder "
            f"from its last rung to the block Llama 3 and OLMo 2 build — {_listed(rungs)} — one rung at a time, and "
            f"beside it removes each piece from today's block or swaps it back "
            f"({shared_settings(entry.specs)}), each change paired by seed. Added rung by rung: "
            f"{_credited(False, entry.labels, verdicts)}. Taken out of today's block: "
            f"{_credited(True, entry.labels, verdicts)}. And {today}:\n")


# The trend findings and what each compares, in words.
SCALE_TRENDS = (("scale.post_norm_deficit_grows", "post-norm's deficit to pre-norm without warmup at the high rate"),
                ("scale.warmup_gain_grows", "warmup's gain for post-norm"),
                ("scale.rmsnorm_gap_flat", "RMSNorm's gap to LayerNorm"),
                ("scale.swiglu_gap_flat", "SwiGLU's gap to the GELU MLP"),
                ("scale.peri_ln_gain_grows", "Peri-LN's gain over pre-norm at the high rate"),
                ("scale.dyt_deficit_grows", "DyT's deficit to LayerNorm"),
                ("scale.qk_layernorm_sensitivity_gain_grows",
                 "what qk-layernorm saves in learning-rate sensitivity (over the `proxies` map's widths)"),
                ("scale.residual_gain_grows_with_depth", "the residual connections' gain (over depth)"),
                ("scale.layernorm_scaling_gain_grows_with_depth", "LayerNorm scaling's gain over pre-norm (over depth)"))
DEPTH_MAPS = ("scale_residual", "scale_depth")  # the size axes over depth, beside the scale map's over width
AGREEMENT, RANKING = "scale.smallest_size_decides_as_the_largest", "scale.narrowest_ranks_the_blocks_as_the_widest"
_TREND_SAID = {"grows": ("{} grows with the compute", "{} does *not* grow with the compute",
                         "whether {} grows is undecided at these seeds"),
               "shrinks": ("{} shrinks with the compute", "{} does *not* shrink with the compute",
                           "whether {} shrinks is undecided at these seeds"),
               "flat": ("{} stays flat (within its margin)", "{} does *not* stay flat",
                        "whether {} stays flat is undecided at these seeds"),
               "flips": ("{} flips its sign", "{} keeps its sign", "whether {} flips its sign is undecided at these seeds")}


def _depths(table: RunTable) -> str:
    """`1 to 24 blocks (scale_residual) and 2 to 48 (scale_depth)`: each depth map's range."""
    return _listed([f"{min(_axis(table.maps[m], 'n_layers'))} to {max(_axis(table.maps[m], 'n_layers'))} blocks "
                    f"(`{m}`)" for m in DEPTH_MAPS if m in table.maps])


def _transfer(verdicts: dict) -> str:
    """What the two findings on whether the smallest size predicts the largest decided, in words."""
    agree, rank = verdicts[AGREEMENT], verdicts[RANKING]
    if agree.get("agreements"):
        count = f"{sum(a['agrees'] for a in agree['agreements'])} of {len(agree['agreements'])} comparisons"
        share = (f"The smallest size's verdict is the largest's in {count} (share {agree['measured']:.2f}, 95% "
                 f"interval [{agree['interval'][0]:.2f}, {agree['interval'][1]:.2f}]): "
                 + _said(agree["verdict"], "more often than not, decidedly", "decidedly less often than not",
                         "too few comparisons to say whether that is more often than not") + ". ")
    else:
        share = ""
    if rank.get("ranking"):
        ends = rank["ranking"]
        order = (f"Ranked by final loss, the `scale` map's blocks at {ends['smallest']} and at {ends['largest']} have "
                 f"Kendall's tau {rank['measured']:+.2f} (p {rank['p_value']:.2g}): "
                 + _said(rank["verdict"], "the narrowest width orders them as the widest does",
                         "the narrowest width orders them against the widest",
                         "the narrowest width's order does not decidedly predict the widest's") + ".")
    else:
        order = ""
    return share + order


def scale_trend(table: RunTable, verdicts: dict, maps: dict) -> str:
    """Does the verdict survive growth: the size axes and their compute, what each trend finding decided, and
    whether the smallest size predicts the largest."""
    entry = table.maps["scale"]
    widths = _listed([str(w) for w in _axis(entry, "d_model")])
    said = []
    for cid, what in SCALE_TRENDS:
        verdict = verdicts[cid]
        holds, fails, otherwise = _TREND_SAID[verdict["expected"].split(":")[0]]
        said.append(_said(verdict["verdict"], holds, fails, otherwise).format(what))
    sizes = next((verdicts[cid]["sizes"] for cid, _ in SCALE_TRENDS if verdicts[cid].get("sizes")), None)
    span = (f", {sizes[-1]['flops'] / sizes[0]['flops']:.0f}-fold from the narrowest to the widest" if sizes
            else "")
    depths = _depths(table)
    return (f"**Does the verdict survive growth?** The `scale` map trains the headline comparisons at widths "
            f"{widths} ({shared_settings(entry.specs)}), each in the setting of the ablation that first measured "
            f"it, with the steps held fixed so that the training compute grows with the parameters{span}"
            + (f"; the comparisons about depth grow the stack instead, {depths}" if depths else "") +
            f". Each effect is paired by seed at every size, and its slope fitted against the log of the compute: "
            f"{'; '.join(said)}. {_transfer(verdicts)} Each comparison's effect at each size with its interval, the "
            f"fitted slope dashed, then whether the smallest size predicts the largest (every number: the table in "
            f"[docs/claims.md](docs/claims.md)):\n")


PARAGRAPHS: dict[str, Callable[[RunTable, dict, dict], str]] = {
    "placement-figure": placement_figure, "stability-map": stability_map, "placements-map": placements_map,
    "lr-frontier": lr_frontier, "modern-ladder": modern_ladder, "scale-trend": scale_trend}

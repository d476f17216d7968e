"""reports/summary.md (stage `report`): the baselines, the claims' verdicts, a section per ablation with its table,
finding and figures, the maps, the gradient analysis and what the models write."""

from __future__ import annotations

import pandas as pd

from blocklab.analysis.intervals import half_width
from blocklab.analysis.reference import published, published_loss
from blocklab.analysis.run_table import RunTable
from blocklab.analysis.runs import BLOWN_UP_MARGIN, COLLAPSE_MARGIN, runs_frame
from blocklab.params.schema import RunSpec


def _mean_interval(values: pd.Series) -> str:
    """`mean ± half-width (n seeds)`, the half-width of the mean's 95% Student-t interval."""
    values = values.dropna()
    if len(values) == 0:
        return "–"
    if len(values) == 1:
        return f"{values.iloc[0]:.3f} (1 seed)"
    return f"{values.mean():.3f} ± {half_width(values):.3f} ({len(values)} seeds)"


def variant_table(runs: pd.DataFrame, reference: dict, ablation: str, baselines: dict, corpus: str) -> str:
    rows = []
    for variant, group in runs.groupby("variant", sort=False):
        by_seed = [published_loss(reference, f"{ablation}/{variant}/seed{s}", corpus) for s in group["seed"]]
        shown = [f"{p:.3f} (seed {s})" for p, s in zip(by_seed, group["seed"]) if p is not None]
        rung = published(reference, ablation, variant, corpus)  # the lecture's ladder: a validation figure per rung
        if rung is not None:
            shown.append(f"{rung:.2f} (validation)")
        collapsed = int(group["collapsed"].sum())
        rows.append({
            "variant": group["label"].iloc[0],
            "seeds": len(group),
            "final train loss": _mean_interval(group["train_loss_last25"]),
            "published": ", ".join(shown) or "–",
            "val loss": _mean_interval(group["val_loss"]),
            **({"val loss, 200 random batches": _mean_interval(group["val_loss_batches"])}
               if group.get("val_loss_batches") is not None and group["val_loss_batches"].notna().all() else {}),
            "parameters": f"{group['n_params'].iloc[0]:,}",
            "feed-forward share": f"{group['share_feed_forward'].iloc[0]:.0%}",
            "max grad norm": f"{group['max_grad_norm'].max():.1f}",
            "collapsed": f"{collapsed}/{len(group)}",
            "diverged": ", ".join(f"seed {s} at step {d}" for s, d, x in
                                  zip(group["seed"], group["diverged_at_step"], group["diverged"]) if x) or "no",
        })
    table = pd.DataFrame(rows)
    if (table["published"] == "–").all():  # nothing published for this ablation on this corpus
        table = table.drop(columns="published")
    return table.to_markdown(index=False)


def finding(runs: pd.DataFrame, baselines: dict, figures: list[str]) -> str:
    """The ablation's result in two or three sentences, written from the numbers."""
    by_variant = runs.groupby("label", sort=False)["train_loss_last25"].agg(["mean", "std", "count"])
    best, worst = by_variant["mean"].idxmin(), by_variant["mean"].idxmax()
    sentences = [
        f"Lowest final training loss: {best} ({by_variant.loc[best, 'mean']:.3f}); highest: {worst} "
        f"({by_variant.loc[worst, 'mean']:.3f}), {by_variant.loc[worst, 'mean'] - by_variant.loc[best, 'mean']:.3f} "
        f"nats apart (seed means)."
    ]
    collapsed = runs[runs["collapsed"]].groupby("label", sort=False).size()
    if len(collapsed):
        parts = [f"{label} ({n} of {int(by_variant.loc[label, 'count'])} seeds)" for label, n in collapsed.items()]
        sentences.append(
            f"Collapsed to the unigram baseline ({baselines['unigram']:.3f}, within {COLLAPSE_MARGIN}): "
            + ", ".join(parts) + "."
        )
    else:
        sentences.append(f"No run collapsed to the unigram baseline ({baselines['unigram']:.3f}).")
    blown = runs[runs["blown_up"] & ~runs["diverged"]]
    if len(blown):
        sentences.append(f"Blew up (final loss more than {BLOWN_UP_MARGIN} above the uniform guess): " + ", ".join(
            f"{r.label} seed {r.seed} ({r.train_loss_last25:,.1f})" for r in blown.itertuples()) + ".")
    diverged = runs[runs["diverged"]]
    if len(diverged):
        sentences.append("Diverged (loss or gradient not finite; stopped there): " + ", ".join(
            f"{r.label} seed {r.seed} at step {int(r.diverged_at_step)}" for r in diverged.itertuples()) + ".")
    if "depth" in figures:
        for residual, group in runs.groupby("residual", sort=False):
            by_depth = group.groupby("n_layers")["val_loss"].mean()
            listed = ", ".join(f"{d} layers {v:.3f}" for d, v in by_depth.items())
            sentences.append(f"Validation loss {'without' if residual == 'none' else 'with'} residuals: {listed}.")
    if "param_shares" in figures:
        shares = runs.groupby("label", sort=False)[["n_params", "share_feed_forward", "val_loss"]].mean()
        listed = ", ".join(f"{label} {row.n_params:,.0f} parameters ({row.share_feed_forward:.0%} feed-forward, "
                           f"validation {row.val_loss:.3f})" for label, row in shares.iterrows())
        sentences.append(f"By variant: {listed}.")
    return " ".join(sentences)


def _setting(spec: RunSpec) -> str:
    m, t = spec.model, spec.train
    training = (f"lr {t.lr:g}, {t.steps} steps, batch {t.batch_size}, warmup {t.warmup}; "
                f"seeds {', '.join(map(str, spec.seeds))}")
    if m.kind == "bigram":
        return f"a bigram (logits read from a V x V embedding); {training}"
    residual = {"plain": "residuals", "none": "no residuals"}.get(m.residual, f"{m.residual} residuals")
    ffn = "no feed-forward" if m.ffn == "none" else f"feed-forward {m.ffn} ({m.hidden_width} wide, {m.activation})"
    norms = "no norms" if m.norm_type == "none" else f"{m.placement}-norm ({m.norm_type})"
    return (f"d_model {m.d_model}, {m.n_heads} heads, context {m.context}, {norms}, {m.n_layers} layers, {ffn}, "
            f"{residual}; {training}")


def gradient_section(gradients: dict, reference: dict, figure: str) -> str:
    """Table B: our input gradients beside the published ones (in parentheses; the probe is untrained, so
    they apply on any corpus)."""
    depths = sorted({d for by_depth in gradients.values() for d in by_depth}, key=int)
    rows = []
    for key, by_depth in gradients.items():
        row = {"stack": key.replace("/", ", ") + " residuals"}
        for d in depths:
            value = by_depth.get(d)
            pub = published(reference, "table_b", f"{key}/{d}", None)
            row[f"{d} blocks"] = "–" if value is None else f"{value:.3g}" + (f" ({pub:.3g})" if pub else "")
        rows.append(row)
    table = pd.DataFrame(rows).to_markdown(index=False)
    with_res = gradients.get("pre/with", {})
    without = gradients.get("pre/without", {})
    sentence = ""
    if with_res and without:
        lo, hi = min(without.values()), max(without.values())
        sentence = (f"With residuals the gradient reaching the input grows from {with_res[depths[0]]:.3g} at "
                    f"{depths[0]} block to {with_res[depths[-1]]:.3g} at {depths[-1]}; without them it stays "
                    f"between {lo:.3g} and {hi:.3g}, about {with_res[depths[-1]] / without[depths[-1]]:.0f}x smaller "
                    f"at {depths[-1]} blocks.")
    return (f"## Gradient analysis\n\nThe norm of the gradient reaching the input of a stack of untrained pre-norm "
            f"blocks (loss = mean of the output squared; the lesson's table B in parentheses). Post-norm stacks are "
            f"not probed: they end in a unit-gain LayerNorm, whose output has mean square 1 whatever its input, so "
            f"this loss's gradient through them measures only the norm's eps.\n\n{table}\n\n"
            f"![input gradient vs depth]({figure})\n\n{sentence}\n")


def samples_section(samples: dict, table: RunTable) -> str:
    """What the models write (reports/samples.json): one sample per variant, beside its validation loss."""
    settings = samples["settings"]
    parts = [f"## What the models write\n\nEach variant's seed-0 model, {settings['tokens']} characters after a "
             f"newline, sampled as nanoGPT does (temperature {settings['temperature']:g}, top-k {settings['top_k']}, "
             f"seed {settings['seed']}): `blocklab sample <ablation>/<variant>` writes more.\n"]
    for key, sample in samples["samples"].items():
        ablation, variant = key.split("/")
        label = table.spec(ablation, variant).label if ablation in table.ablations else variant
        loss = "no finite loss" if sample["val_loss"] is None else f"validation loss {sample['val_loss']:.3f}"
        text = "(nothing: its weights are not finite)" if sample["text"] is None else sample["text"]
        parts.append(f"**{ablation}: {label}** ({sample['run']}, {loss})\n\n```text\n{text}\n```\n")
    return "\n".join(parts)


def summary_markdown(table: RunTable, metrics: dict, reference: dict, figures: dict[str, dict[str, str]],
                     gradients: dict | None = None, gradient_figure: str | None = None,
                     claims: str | None = None, samples: dict | None = None, maps: list[str] | None = None) -> str:
    """reports/summary.md: the baselines, the claims' verdicts (`claims`, from `claims.verdicts_markdown`), then one
    section per ablation, the gradient analysis, and what the models write (`samples`, reports/samples.json);
    `figures` paths are relative."""
    b = metrics["baselines"]
    parts = [
        "# blocklab: what each ingredient of the block does\n",
        "Losses are cross-entropy in nats per character. A run is *collapsed* when its final training loss "
        f"(mean of the last 25 steps) ends less than {COLLAPSE_MARGIN} below the unigram baseline, or above it: it "
        "has learnt the character frequencies and nothing more. A run *blew up* when its loss stopped being finite "
        f"(it *diverged*) or ends more than {BLOWN_UP_MARGIN} above the uniform guess, ln V: worse than knowing "
        "nothing, a different failure. A loss over seeds is the seed mean ± the half-width of its "
        "95% Student-t interval; *published* is the lesson's figure where there is one for this corpus.\n",
        "| baseline | loss |\n|---|---|\n"
        f"| unigram entropy (train) | {b['unigram']:.4f} |\n"
        f"| unigram cross-entropy (validation) | {b['unigram_val']:.4f} |\n"
        f"| uniform, ln V | {b['uniform']:.4f} |\n",
    ]
    if claims is not None:
        parts.append(claims)
    for name, ablation in table.ablations.items():
        runs = runs_frame(table, name, metrics)
        spec = ablation.specs[0]
        images = "\n\n".join(f"![{name} {kind}]({path})" for kind, path in figures[name].items())
        parts.append(
            f"## {name}\n\n{ablation.description}\n\nSetting of the first variant, {spec.label}: {_setting(spec)}.\n\n"
            f"{variant_table(runs, reference, name, b, table.corpus_sha256)}\n\n"
            f"**Finding.** {finding(runs, b, list(ablation.figures))}\n\n{images}\n"
        )
    parts += maps or []  # blocklab.analysis.maps.map_section: one per map
    if gradients is not None:
        parts.append(gradient_section(gradients, reference, gradient_figure))
    if samples is not None:
        parts.append(samples_section(samples, table))
    return "\n".join(parts)

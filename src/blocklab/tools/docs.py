"""The numbers of README.md and docs/ that the pipeline produces, written from reports/ (`blocklab docs`).

Hand-typed results drift ("37 of 43 findings hold" stood beside reports saying 45 of 57). So every such number
sits in a generated block,

    <!-- generated: findings collapse.post_norm_without_warmup residual.four_layers_apart -->
    ...
    <!-- end: findings -->

whose body `blocklab docs` writes from the committed reports (and claims.yaml, for the claims' words), and which
`blocklab docs --check` (a test, so CI) compares with what the reports say now. The kinds:

    findings ID...     a table: each claim in words, its verdict, what was measured and its 95% interval
    count              how many findings hold, fail, are inconclusive; how many invariants hold
    known-to-fail      every claim marked known_to_fail: its verdict, measured value and why
    sample RUN         what RUN's seed-0 model writes (reports/samples.json), with its validation loss
    records            the runs' records in reports/runs: how many, their files and size, and per run
    output FILE [N]    a command's real output, captured in FILE by `blocklab docs --walkthrough` (its first N lines)
    paragraph NAME     a figure's paragraph, written from the resolved settings and the verdicts
                       (blocklab.tools.readme_paragraphs)
    plan               every ablation and map of params.yaml: its variants' labels, the settings its runs share
                       and, for a map, its axes
    pilot NAME CHOSEN  pilot ablation NAME's rungs, each one's paired difference to the one before along the run,
                       and the length ablation CHOSEN trains
    trends             every trend finding: its effect at each size with its compute, its slope, its verdict;
                       and each one's verdict at its smallest and largest size
                       (blocklab.analysis.trend_plots.trend_table)
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

BLOCK = re.compile(r"<!-- generated: (?P<kind>[\w-]+)(?P<args>[^>]*?) -->\n(?P<body>.*?)<!-- end: (?P=kind) -->",
                   re.S)
DOCUMENTS = ("README.md", "docs/*.md")


@dataclass
class Sources:
    """What generated blocks are written from: the project's committed reports and claims."""

    root: Path

    def json(self, name: str) -> dict:
        return json.loads((self.root / "reports" / name).read_text())

    def claims(self) -> dict[str, dict]:
        """Each claim by id, its words written from params.yaml's resolved settings."""
        from blocklab.analysis.claims import load_claims
        from blocklab.analysis.run_table import read_run_table

        table = read_run_table(self.root / "params.yaml")
        return {c.id: c.model_dump() for c in load_claims(self.root / "claims.yaml", table)}


def _number(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) >= 1000 or (value and abs(value) < 0.001) else f"{value:.3f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _shown(value) -> str:
    """A measured value or interval as a table cell: numbers to three decimals, lists joined."""
    if isinstance(value, list):
        if value and isinstance(value[0], list):
            return "; ".join(_shown(v) for v in value)
        return "[" + ", ".join(_number(v) for v in value) + "]"
    return _number(value)


def findings_table(sources: Sources, ids: list[str]) -> str:
    verdicts, claims = sources.json("claims.json"), sources.claims()
    unknown = [cid for cid in ids if cid not in verdicts or cid not in claims]
    if unknown:
        raise KeyError(f"no claim {', '.join(unknown)} in claims.yaml and reports/claims.json")
    rows = ["| finding | verdict | after Holm (p, adjusted) | measured | expected | interval of measured − expected |",
            "|---|---|---|---|---|---|"]
    for cid in ids:
        v = verdicts[cid]
        verdict = v["verdict"] + (" (marked known to fail)" if v.get("known_to_fail") else "")
        level = " (90%: an equivalence test)" if (v.get("note") or "").startswith("90%") else ""
        interval = "–" if v["interval"] is None else f"{_shown(v['interval'])}{level}"
        expected = re.sub(r"-?\d+\.\d{4,}", lambda m: f"{float(m.group()):.3f}", str(v["expected"]))
        rows.append(f"| {claims[cid]['claim']} | **{verdict}** | {_family_cell(v)} | {_shown(v['measured'])} | "
                    f"{expected} | {interval} |")
    return "\n".join(rows) + "\n"


def _family_cell(verdict: dict) -> str:
    """A finding's verdict after Holm's correction, with its p-value and the adjusted one; – outside the family."""
    if verdict.get("p_holm") is None:
        return "– (no test)"
    return f"{verdict['verdict_holm']} ({verdict['p_value']:.2g}, {verdict['p_holm']:.2g})"


def count_sentence(sources: Sources) -> str:
    count = sources.json("claims_count.json")
    return (f"Of the {count['findings_total']} findings, {count['findings_hold']} hold, {count['findings_fail']} fail "
            f"and {count['findings_inconclusive']} are inconclusive at the seeds the budget allows; with Holm's "
            f"correction of the {count['findings_tested']} a test decides (the chance of even one false verdict among "
            f"them held at 5%), {count['findings_hold_holm']} hold and {count['findings_fail_holm']} fail; "
            f"{count['invariants_hold']} of {count['invariants_total']} invariants of the code's arithmetic hold "
            "exactly.\n")


def known_to_fail(sources: Sources) -> str:
    verdicts, claims = sources.json("claims.json"), sources.claims()
    lines = []
    for cid, claim in claims.items():
        if claim.get("known_to_fail"):
            v = verdicts.get(cid, {})
            lines.append(f"- `{cid}` ({v.get('verdict', 'not run')}, measured {_shown(v.get('measured'))}): "
                         f"{claim['claim']} *Why:* {claim['known_to_fail']}")
    return "\n".join(lines) + "\n"


def sample(sources: Sources, run: str) -> str:
    entry = sources.json("samples.json")["samples"][run]
    return f"`{entry['run']}`, validation loss {entry['val_loss']:.3f}:\n\n```text\n{entry['text'].strip()}\n```\n"


def records(sources: Sources) -> str:
    """The size of the committed records (reports/runs), in all and per run."""
    by_name: Counter[str] = Counter()  # bytes, by file name
    count: Counter[str] = Counter()
    for path in (sources.root / "reports" / "runs").rglob("*"):
        if path.is_file():
            count[path.name] += 1
            by_name[path.name] += path.stat().st_size
    runs, files = count["settings.json"], sum(count.values())
    if not runs:
        return "No run's record yet: `make repro` writes them.\n"
    size = sum(by_name.values())
    parts = ", ".join(f"`{name}` {total / runs / 1e3:.1f} kB" for name, total in
                      sorted(by_name.items(), key=lambda item: -item[1]))
    return (f"{runs:,} runs' records: {files:,} files, {size / 1e6:.1f} MB in all, {size / runs / 1e3:.1f} kB a "
            f"run on average ({parts}).\n")


def output(sources: Sources, file: str, lines: str | None = None) -> str:
    """A captured output, whole or its first `lines` lines with a count of the rest and where they are."""
    text = (sources.root / file).read_text().rstrip().splitlines()
    shown = text if lines is None else text[:int(lines)]
    rest = f"\n… {len(text) - len(shown)} more lines: {file}" if len(shown) < len(text) else ""
    return "```text\n" + "\n".join(shown) + rest + "\n```\n"


def paragraph(sources: Sources, name: str) -> str:
    from blocklab.analysis.run_table import read_run_table
    from blocklab.tools.readme_paragraphs import PARAGRAPHS

    if name not in PARAGRAPHS:
        raise KeyError(f"no paragraph '{name}' (known: {', '.join(PARAGRAPHS)})")
    return PARAGRAPHS[name](read_run_table(sources.root / "params.yaml"), sources.json("claims.json"),
                            sources.json("maps.json"))


def plan(sources: Sources) -> str:
    """The plan as a table, written from params.yaml's resolved runs: what each ablation and map compares, and the
    settings its runs share (what differs between them is in its variants' labels and its axes)."""
    from blocklab.analysis.run_table import read_run_table
    from blocklab.analysis.setting_words import shared_settings
    from blocklab.params.words import in_words

    table = read_run_table(sources.root / "params.yaml")
    rows = ["| ablation or map | compares | what its runs share | axes |", "|---|---|---|---|"]
    for entry in [*table.ablations.values(), *table.maps.values()]:
        axes = "; ".join(f"{field} {', '.join(in_words(field, v) for v in values)}" for _, field, values in entry.axes) or "–"
        plan = " (extended plan: `make repro-extended`)" if entry.plan == "extended" else ""
        rows.append(f"| `{entry.name}`{plan} | {', '.join(entry.labels.values())} | {shared_settings(entry.specs)} | "
                    f"{axes} |")
    return "\n".join(rows) + "\n"


def _count(value) -> str:
    return f"{int(value):,}"


SETTLED = 0.01  # a rung's difference has settled once it stays this close (nats) to its value at the end


def pilot(sources: Sources, name: str, chosen: str) -> str:
    """What pilot ablation `name`'s records say of its rungs' lengths: each rung's validation loss (the fixed
    sample) minus the rung before's, paired by seed, at every tenth of the run; the evaluation from which each keeps
    its last sign, and from which it stays within SETTLED of its last value; and the length `chosen` trains."""
    from blocklab.analysis.run_table import read_run_table
    from blocklab.analysis.runs import curves_frame

    table = read_run_table(sources.root / "params.yaml")
    curves = curves_frame(table, name, sources.root / "reports" / "runs").dropna(subset=["val_loss"])
    wide = curves.pivot_table(index=["seed", "step"], columns="variant", values="val_loss")
    order = list(dict.fromkeys(curves["variant"]))
    labels = dict(zip(curves["variant"], curves["label"]))
    steps = sorted(curves["step"].unique())  # a step's index: the evaluation after step s + 1
    every = max(1, len(steps) // 10)
    shown = steps[every - 1::every]

    def since(means, stays) -> int:
        """The first evaluation step from which every later one satisfies `stays`."""
        broken = [s for s in means.index if not stays(means[s])]
        return next(s for s in means.index if not broken or s > broken[-1]) + 1

    rows = [f"| rung | {' | '.join(_count(s + 1) for s in shown)} | keeps its sign from | within {SETTLED:g} of its end from |",
            "|---" * (len(shown) + 3) + "|"]
    signed, settled = {}, {}
    for before, rung in zip(order, order[1:]):
        means = (wide[rung] - wide[before]).groupby("step").mean()
        end = means.iloc[-1]
        signed[rung] = since(means, lambda v: (v > 0) == (end > 0))
        settled[rung] = since(means, lambda v: abs(v - end) <= SETTLED)
        rows.append(f"| {labels[rung]} | {' | '.join(f'{means[s]:+.3f}' for s in shown)} | {_count(signed[rung])} | "
                    f"{_count(settled[rung])} |")
    late_sign, late_settle = max(signed, key=signed.get), max(settled, key=settled.get)
    seeds = curves["seed"].nunique()
    length = table.ablations[chosen].specs[0].train.steps
    return ("\n".join(rows) + f"\n\nEach rung's validation loss (the fixed sample) minus the rung before's, the mean "
            f"over the pilot's {seeds} seeds (paired by seed), at every tenth of its {_count(steps[-1] + 1)} steps; "
            f"negative: the rung lowers the loss. The last to keep its sign is {labels[late_sign]}, from step "
            f"{_count(signed[late_sign])}; the last to come within {SETTLED:g} nats of its value at the end is "
            f"{labels[late_settle]}, from step {_count(settled[late_settle])}. `{chosen}` trains {_count(length)} "
            f"steps.\n")


def trains_definition(sources: Sources) -> str:
    """What "a run trains" means, written from the margins blocklab.analysis.runs decides it by."""
    from blocklab.analysis.runs import BLOWN_UP_MARGIN, COLLAPSE_MARGIN
    from blocklab.run.training import LAST_STEPS

    return (f"A run **trains** when it neither collapsed nor blew up. It *collapsed* when its final training loss (the "
            f"mean of its last {LAST_STEPS} steps) ends less than {COLLAPSE_MARGIN:g} nats below the unigram baseline, or "
            f"above it: it learnt the character frequencies and nothing more. It *blew up* when that loss ends more "
            f"than {BLOWN_UP_MARGIN:g} nats above the uniform guess ln V, or is not finite (it *diverged*): worse than "
            f"knowing nothing. Every finding, figure and table that says a run, a seed or a cell trains means this "
            f"(`blocklab.analysis.runs.outcome`, `blocklab.analysis.maps.trains`).\n")


def trends(sources: Sources) -> str:
    from blocklab.analysis.claims import load_claims
    from blocklab.analysis.run_table import read_run_table
    from blocklab.analysis.trend_plots import trend_table

    table = read_run_table(sources.root / "params.yaml")
    return trend_table(load_claims(sources.root / "claims.yaml", table), sources.json("claims.json"),
                       {name: entry.labels for name, entry in table.maps.items()}) + "\n"


def render(kind: str, args: list[str], sources: Sources) -> str:
    writers = {"findings": lambda: findings_table(sources, args), "count": lambda: count_sentence(sources),
               "known-to-fail": lambda: known_to_fail(sources), "sample": lambda: sample(sources, *args),
               "records": lambda: records(sources),
               "output": lambda: output(sources, *args), "paragraph": lambda: paragraph(sources, *args),
               "plan": lambda: plan(sources), "trains": lambda: trains_definition(sources),
               "pilot": lambda: pilot(sources, *args), "trends": lambda: trends(sources)}
    if kind not in writers:
        raise KeyError(f"no generated block of kind '{kind}' (known: {', '.join(writers)})")
    return writers[kind]()


def regenerate(text: str, sources: Sources) -> str:
    """`text` with every generated block's body written anew."""
    def fill(match: re.Match) -> str:
        kind, args = match["kind"], match["args"].split()
        return f"<!-- generated: {kind}{match['args']} -->\n{render(kind, args, sources)}<!-- end: {kind} -->"

    return BLOCK.sub(fill, text)


def documents(root: Path) -> list[Path]:
    return [path for pattern in DOCUMENTS for path in sorted(root.glob(pattern))]


def stale(root: Path) -> list[str]:
    """The documents whose generated blocks differ from what the reports say now."""
    sources = Sources(root)
    return [str(path.relative_to(root)) for path in documents(root)
            if regenerate(path.read_text(), sources) != path.read_text()]


def write(root: Path) -> list[str]:
    """Write every generated block anew; the documents that changed."""
    sources, changed = Sources(root), []
    for path in documents(root):
        text = path.read_text()
        new = regenerate(text, sources)
        if new != text:
            path.write_text(new)
            changed.append(str(path.relative_to(root)))
    return changed


WALKTHROUGH = "docs/walkthrough"
EXPERIMENT = ("ablations.placement.train.lr=0.003", "readme-walkthrough")  # the README's knob, and a name for it
# What the README's walk-through shows after its experiment, each captured to docs/walkthrough/<file>.
WALKTHROUGH_COMMANDS = {
    "exp_show.txt": ["dvc", "exp", "show", "--drop", ".*", "--keep",
                     r"Experiment|findings_hold|placement/p(ost|re)\.val_loss_mean|ablations\.placement\.train\.lr",
                     "--no-pager"],
    "metrics_diff.txt": ["dvc", "metrics", "diff"],
    "blocklab_diff.txt": ["blocklab", "diff"],
}


def capture_walkthrough(root: Path, echo=print) -> dict[str, str]:
    """Run the README's experiment in the workspace at `root` (reproduced, committed, clean), capture what the
    walk-through's commands print into docs/walkthrough/, and restore the workspace (`git checkout`, `dvc
    checkout`, the experiment removed)."""
    import os
    import shlex
    import subprocess

    def run(*command: str, check: bool = True) -> str:
        env = {**os.environ, "COLUMNS": "170"}  # DVC's tables take the terminal's width; a file has none
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, env=env)
        if check and done.returncode:
            raise RuntimeError(f"`{' '.join(command)}` failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    if run("git", "status", "--porcelain").strip():
        raise RuntimeError("the workspace has uncommitted changes: commit them first (the walk-through compares the "
                           "experiment with HEAD)")
    knob, name = EXPERIMENT
    echo(f"dvc exp run -S {knob} (the README's experiment; a few minutes)")
    captured = {}
    timings = root / "reports/timings.json"  # an output DVC does not cache: `dvc checkout` cannot restore it
    kept = timings.read_bytes() if timings.exists() else None
    try:
        # --allow-missing, as the README runs it: a clone has the runs' records, not their weights
        run("dvc", "exp", "run", "--allow-missing", "-S", knob, "--name", name)
        for file, command in WALKTHROUGH_COMMANDS.items():
            shown = " ".join(shlex.quote(c) for c in command)
            captured[file] = f"$ {shown}\n{run(*command)}"
    finally:
        run("git", "checkout", "--", ".", check=False)
        run("dvc", "checkout", "--force", check=False)
        run("dvc", "exp", "remove", name, check=False)
        if kept is not None:
            timings.write_bytes(kept)
    out = root / WALKTHROUGH
    out.mkdir(parents=True, exist_ok=True)
    for file, text in captured.items():
        (out / file).write_text(text)
    echo(f"captured {', '.join(captured)} in {WALKTHROUGH}/")
    return captured

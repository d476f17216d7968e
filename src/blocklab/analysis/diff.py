"""`blocklab diff`: what a change did to the findings, between two revisions.

A reviewer's first question about a pull request to a fork is which findings it moved. `dvc metrics diff`
shows numbers moving; this says it in blocklab's terms: each claim whose verdict differs between revision A
and revision B, in words, with both verdicts and both intervals; then the parameters that differ, the
variants whose seed-mean validation loss left A's 95% interval, and the figures that changed. A revision
is a git revision, a DVC experiment's name, or the workspace; everything is read through DVC's API
(`dvc.api.read`, `dvc.api.params_show`, `DVCFileSystem`), so an experiment never checked out compares too.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field

import yaml

from blocklab.errors import BlocklabError

CLAIMS_JSON = "reports/claims.json"
CLAIMS_YAML = "claims.yaml"
VARIANTS_JSON = "reports/variants.json"
FIGURES = "reports/figures"
WORKSPACE = "workspace"
SHOWN_CHARACTERS = 80  # of a parameter's value (a description) in the list of changed parameters


class DiffError(BlocklabError):
    """A revision that cannot be compared: unknown, without verdicts, or a workspace not reproduced."""


@dataclass
class Revision:
    """What one revision holds of the findings: its verdicts, the claims in words, its parameters, its
    variants' seed statistics and its figures (by content digest)."""

    name: str
    verdicts: dict
    words: dict[str, str]
    params: dict
    variants: dict
    figures: dict[str, str] = field(default_factory=dict)


def read_revision(rev: str | None, repo: str = ".") -> Revision:
    """Revision `rev` (None: the workspace) as DVC's API reads it."""
    import dvc.api
    from dvc.api import DVCFileSystem

    name = rev or WORKSPACE
    if rev is not None:
        _resolve(rev, repo)
    fs = DVCFileSystem(repo, rev=rev)
    if not fs.exists(CLAIMS_JSON):
        if rev is None:
            raise DiffError(f"the workspace has no {CLAIMS_JSON}: run `dvc repro` first, then compare")
        raise DiffError(f"revision '{rev}' has no {CLAIMS_JSON} (from before blocklab recorded its verdicts?): "
                        f"compare a later revision")
    # One file system for the revision's files (each `dvc.api.read` would open the repository at `rev` anew).
    verdicts = json.loads(fs.read_text(CLAIMS_JSON))
    claims = yaml.safe_load(fs.read_text(CLAIMS_YAML)) if fs.exists(CLAIMS_YAML) else {}
    params = dvc.api.params_show(repo=repo, rev=rev)
    words = _words((claims or {}).get("claims", []), params)
    variants = json.loads(fs.read_text(VARIANTS_JSON)) if fs.exists(VARIANTS_JSON) else {}
    figures = {}
    if fs.exists(FIGURES):
        for path in sorted(fs.find(FIGURES)):
            figures[path.lstrip("/")] = hashlib.sha256(fs.read_bytes(path)).hexdigest()
    return Revision(name, verdicts, words, params, variants, figures)


def _words(claims: list[dict], params: dict) -> dict[str, str]:
    """Each claim's words, written from the revision's own resolved settings (as `blocklab check` writes them
    there); as the claims file has them where the revision's params.yaml does not resolve."""
    from blocklab.analysis.run_table import run_table_of
    from blocklab.analysis.setting_words import written

    try:
        table = run_table_of(params)
    except BlocklabError:
        return {c["id"]: c.get("claim", "") for c in claims}
    words = {}
    for c in claims:
        try:
            words[c["id"]] = written(c.get("claim", ""), table, c)
        except BlocklabError:
            words[c["id"]] = c.get("claim", "")
    return words


def _resolve(rev: str, repo: str) -> str:
    """The commit `rev` names, as DVC resolves it: a git revision, or an experiment's name."""
    from dvc.repo import Repo
    from dvc.scm import RevError, resolve_rev

    with Repo(repo) as dvc_repo:
        try:
            return resolve_rev(dvc_repo.scm, rev)
        except RevError as err:
            reason = (str(err).strip().splitlines() or ["not found"])[0]
            raise DiffError(f"unknown revision '{rev}' ({reason}): give a git revision (HEAD, main, a commit) or "
                            f"a DVC experiment's name (`dvc exp show` lists them)") from None


@dataclass
class Change:
    claim: str
    words: str
    before: dict
    after: dict


@dataclass
class Diff:
    a: Revision
    b: Revision
    changed: list[Change]
    unchanged: int
    only_in: dict[str, list[str]]  # claims one revision has and the other not
    params: list[tuple[str, object, object]]  # (key, value in A, value in B); a missing value is `Missing`
    moved: list[tuple[str, dict, dict]]  # variants whose validation loss left A's interval
    figures: list[str]  # changed, added or removed


class _Missing:
    def __repr__(self) -> str:
        return "(none)"


Missing = _Missing()


def compare(a: Revision, b: Revision) -> Diff:
    common = [c for c in a.verdicts if c in b.verdicts]
    changed = [Change(c, b.words.get(c) or a.words.get(c, ""), a.verdicts[c], b.verdicts[c])
               for c in common if a.verdicts[c]["verdict"] != b.verdicts[c]["verdict"]]
    only_in = {a.name: [c for c in a.verdicts if c not in b.verdicts],
               b.name: [c for c in b.verdicts if c not in a.verdicts]}
    flat_a, flat_b = _flat(a.params), _flat(b.params)
    params = [(k, flat_a.get(k, Missing), flat_b.get(k, Missing)) for k in sorted(set(flat_a) | set(flat_b))
              if flat_a.get(k, Missing) != flat_b.get(k, Missing)]
    moved = [(v, a.variants[v], b.variants[v]) for v in a.variants if v in b.variants
             and _moved(a.variants[v], b.variants[v])]
    figures = sorted(p for p in set(a.figures) | set(b.figures) if a.figures.get(p) != b.figures.get(p))
    return Diff(a, b, changed, len(common) - len(changed), only_in, params, moved, figures)


def _flat(tree, prefix: str = "") -> dict:
    """params_show's {file: {key: ...}} as dotted keys (the file's name dropped when it is params.yaml)."""
    flat = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flat(value, "" if key == "params.yaml" and not prefix else f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def _moved(before: dict, after: dict) -> bool:
    """Whether the seed-mean validation loss left the earlier 95% interval (one seed, no interval: any change)."""
    mean_a, mean_b = before.get("val_loss_mean"), after.get("val_loss_mean")
    if mean_a is None or mean_b is None:
        return (mean_a is None) != (mean_b is None)
    return abs(mean_b - mean_a) > (before.get("val_loss_ci95") or 0.0)


def _verdict(entry: dict) -> str:
    interval = entry.get("interval")
    shown = f"{entry['verdict']}, measured {_short(entry.get('measured'))}"
    if interval:
        shown += f", interval {_short(interval)}"
    return shown + (" (marked known_to_fail)" if entry.get("known_to_fail") else "")


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    text = str(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS - 1] + "…"


def _loss(entry: dict) -> str:
    mean, ci = entry.get("val_loss_mean"), entry.get("val_loss_ci95")
    if mean is None:
        return "none"
    return f"{mean:.3f}" + (f" ± {ci:.3f}" if ci is not None and not math.isnan(ci) else "")


def as_text(diff: Diff) -> str:
    a, b = diff.a.name, diff.b.name
    lines = [f"blocklab diff {a} -> {b}: {len(diff.changed)} claims changed verdict, {diff.unchanged} unchanged"]
    for change in diff.changed:
        lines += [f"  - {change.claim}: {change.before['verdict']} -> {change.after['verdict']}",
                  f"      {change.words}",
                  f"      {a}: {_verdict(change.before)}",
                  f"      {b}: {_verdict(change.after)}"]
    for name, claims in diff.only_in.items():
        if claims:
            lines.append(f"  only in {name}: {', '.join(claims)}")
    lines.append(f"parameters changed: {len(diff.params)}")
    lines += [f"  {key}: {_short(va)} -> {_short(vb)}" for key, va, vb in diff.params]
    lines.append(f"variants whose validation loss left {a}'s 95% interval: {len(diff.moved)}")
    lines += [f"  {variant}: {_loss(ea)} -> {_loss(eb)}" for variant, ea, eb in diff.moved]
    lines.append(f"figures changed: {len(diff.figures)}" + (f" ({', '.join(diff.figures)})" if diff.figures else ""))
    return "\n".join(lines)


def as_markdown(diff: Diff) -> str:
    a, b = diff.a.name, diff.b.name
    out = [f"### blocklab diff: `{a}` → `{b}`", "",
           f"**{len(diff.changed)} claims changed verdict**, {diff.unchanged} unchanged.", ""]
    if diff.changed:
        out += [f"| claim | {a} | {b} | the claim |", "|---|---|---|---|"]
        out += [f"| `{c.claim}` | {_verdict(c.before)} | {_verdict(c.after)} | {c.words} |" for c in diff.changed]
        out.append("")
    for name, claims in diff.only_in.items():
        if claims:
            out += [f"Only in `{name}`: " + ", ".join(f"`{c}`" for c in claims), ""]
    out += [f"#### Parameters changed ({len(diff.params)})", ""]
    if diff.params:
        out += [f"| parameter | {a} | {b} |", "|---|---|---|"]
        out += [f"| `{key}` | {_short(va)} | {_short(vb)} |" for key, va, vb in diff.params]
    out += ["", f"#### Validation loss left `{a}`'s 95% interval ({len(diff.moved)} variants)", ""]
    if diff.moved:
        out += [f"| variant | {a} | {b} |", "|---|---|---|"]
        out += [f"| `{variant}` | {_loss(ea)} | {_loss(eb)} |" for variant, ea, eb in diff.moved]
    out += ["", f"#### Figures changed ({len(diff.figures)})", ""]
    out += [f"- [{path.rsplit('/', 1)[-1]}]({path})" for path in diff.figures]
    return "\n".join(out) + "\n"

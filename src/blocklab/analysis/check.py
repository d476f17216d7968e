"""`blocklab check`: every claim's verdict over what is here, recorded and shown.

The DVC stage `check` runs it on a whole run's reports. Anywhere else it takes what there is: on a fresh clone,
the committed reports without the runs' curves; after `make demo`, a few ablations' runs. A claim whose runs
params.yaml plans but that have not run here is listed as "not run yet" with the command that would run them,
and never counts as failing."""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import click

from blocklab.analysis.claims import (
    NOT_RUN, MissingResult, Evidence, check_claims, claims_count, count_in_words, decided_alone_in_words,
    failing_in_words, holding_alone, load_claims, marked_in_words,
)
from blocklab.analysis.maps import lr_groups
from blocklab.analysis.reference import load_reference
from blocklab.analysis.run_table import RunTable, read_run_table
from blocklab.errors import BlocklabError

STYLES = {"holds": {"fg": "green"}, "fails": {"fg": "red", "bold": True},
          "inconclusive": {"fg": "yellow", "bold": True}, "not comparable": {"fg": "blue"},
          NOT_RUN: {"fg": "bright_black"}}


class BrokenPipeline(BlocklabError):
    """The claims cannot be evaluated: a malformed claims file, or a claim naming a run params.yaml does not
    plan. Says nothing about the findings (exit status 2)."""


def seeds_command(claim, needed: int, table: RunTable) -> str | None:
    """The `dvc exp run` that raises every ablation and map `claim` reads to `needed` seeds (its seeds kept, the
    next ones added); None when each already has them."""
    settings = []
    for name in dict.fromkeys(re.findall(r"[\"']([A-Za-z0-9_]+)/", claim.rule_text())):
        entry, section = (table.ablations[name], "ablations") if name in table.ablations else \
            (table.maps[name], "maps") if name in table.maps else (None, None)
        if entry is None or len(entry.seeds) >= needed:
            continue
        added = [max(entry.seeds) + 1 + k for k in range(needed - len(entry.seeds))]
        settings.append(f"-S '{section}.{name}.seeds=[{', '.join(map(str, [*entry.seeds, *added]))}]'")
    return f"dvc exp run {' '.join(settings)}" if settings else None


@dataclass
class Checked:
    claims: list
    verdicts: dict[str, dict]
    table: RunTable | None = None

    @property
    def count(self) -> dict[str, int]:
        return claims_count(self.verdicts)

    @property
    def not_run(self) -> dict[str, list[str]]:
        """{command: the claims it would let run}, for the claims not run yet."""
        by_command: dict[str, list[str]] = {}
        for cid, verdict in self.verdicts.items():
            if verdict["verdict"] == NOT_RUN:
                by_command.setdefault(verdict["command"], []).append(cid)
        return by_command

    @property
    def to_decide(self) -> dict[str, list[str]]:
        """{command: `<id> (<n> seeds)` of each inconclusive finding it would decide}: the seeds that would decide
        each at its measured spread and effect (`seeds_needed`), as a `dvc exp run` that trains them."""
        by_command: dict[str, list[str]] = {}
        for claim in self.claims:
            verdict = self.verdicts.get(claim.id, {})
            needed = verdict.get("seeds_needed")
            if self.table is None or verdict.get("verdict") != "inconclusive" or not needed:
                continue
            if command := seeds_command(claim, needed, self.table):
                by_command.setdefault(command, []).append(f"{claim.id} ({needed} seeds)")
        return by_command

    @property
    def failing(self) -> list[str]:
        """The unmarked claims that ran and that `--strict` counts against the defaults (a finding Holm's
        correction tests: fails after it, or is inconclusive even on its own), in words."""
        return failing_in_words(self.claims, self.verdicts)


def verdicts_over(claims_file: str | Path, metrics: dict, gradients: dict | None, runs_dir: Path | None,
                  reference_file: str | Path, table: RunTable | None) -> Checked:
    """Every claim of `claims_file` evaluated over `metrics` (reports/metrics.json's shape), `gradients` (None:
    not run here) and the runs' curves under `runs_dir`. Raises BrokenPipeline."""
    try:
        claims = load_claims(claims_file, table)
        reference = load_reference(reference_file)
        evidence = Evidence(metrics, gradients, reference, None if table is None else table.corpus_sha256,
                          runs_dir if runs_dir is not None and runs_dir.is_dir() else None,
                          {} if table is None else lr_groups(table), {} if table is None else table.training_stages())
        return Checked(claims, check_claims(claims, evidence), table)
    except MissingResult as err:  # a run params.yaml does not plan
        raise BrokenPipeline(f"cannot check the claims: {err}") from None
    except BlocklabError as err:  # a malformed claims file, reference or params, or an expression that cannot be evaluated
        raise BrokenPipeline(str(err)) from None


def check_reports(claims_file: str, metrics_file: str, gradients_file: str, runs_dir: str, reference_file: str,
                  params_file: str) -> Checked:
    """verdicts_over the pipeline's report files, as `blocklab check` reads them."""
    table = read_run_table(params_file) if Path(params_file).exists() else None
    if not Path(metrics_file).exists():
        raise BrokenPipeline(f"{metrics_file} does not exist: run `dvc repro` first (a clone of blocklab has it "
                             f"committed)")
    gradients = json.loads(Path(gradients_file).read_text()) if Path(gradients_file).exists() else None
    return verdicts_over(claims_file, json.loads(Path(metrics_file).read_text()), gradients, Path(runs_dir),
                         reference_file, table)


def recorded(verdicts: dict[str, dict]) -> dict[str, dict]:
    """reports/claims.json's entries: a verdict without its words (claims.yaml has them)."""
    return {cid: {field: value for field, value in verdict.items() if field != "claim"}
            for cid, verdict in verdicts.items()}


def show(checked: Checked, echo: Callable[..., None] = click.secho, not_run_details: bool = True) -> None:
    """What `blocklab check` prints: the claims that fail first, in words; the marked ones; the table of every
    claim that ran; the claims not run yet, with the commands that would run them (`not_run_details`; else
    how many); the count."""
    failing = checked.failing
    known, now_hold = marked_in_words(checked.claims, checked.verdicts)
    alone = decided_alone_in_words(checked.claims, checked.verdicts)
    for lines, heading, colour in (
            (failing, f"{len(failing)} claims fail or are inconclusive:", "red"),
            (alone, f"{len(alone)} findings fail on their own, not after Holm's correction (--strict does not count "
                    f"them):", "yellow"),
            (known, f"{len(known)} claims marked known_to_fail do not hold, as expected:", "yellow"),
            (now_hold, f"{len(now_hold)} claims marked known_to_fail now hold (remove the mark?):", "yellow")):
        if lines:
            echo(heading, fg=colour, bold=True)
            for line in lines:
                echo(f"  - {line}")
            echo()
    if held := holding_alone(checked.verdicts):
        echo(f"{held} findings hold on their own and are inconclusive after Holm's correction (the 'after Holm' "
             f"column): more seeds would decide them for the family; --strict does not count them.\n", fg="yellow")
    if decide := checked.to_decide:
        echo(f"{sum(map(len, decide.values()))} inconclusive findings would be decided by more seeds (at the paired "
             f"spread and effect measured); what trains them:", fg="yellow", bold=True)
        for command, ids in decide.items():
            echo(f"  {command}")
            echo(f"      decides {', '.join(ids)}")
        echo()
    ran = {cid: v for cid, v in checked.verdicts.items() if v["verdict"] != NOT_RUN}
    if ran:
        width = max(len(k) for k in ran)
        echo(f"{'id':<{width}}  {'kind':<7}  {'verdict':<14}  {'after Holm':<14}  {'measured':<28}  "
             f"{'expected':<24}  {'interval':<22}  claim")
        for cid, v in ran.items():
            interval = "" if v["interval"] is None else str(v["interval"])
            family = v.get("verdict_holm") if v.get("p_holm") is not None else None
            echo(f"{cid:<{width}}  {v['kind']:<7}  " + click.style(f"{v['verdict']:<14}", **STYLES[v["verdict"]])
                 + "  " + (click.style(f"{family:<14}", **STYLES[family]) if family else f"{'–':<14}")
                 + f"  {str(v['measured']):<28.28}  {str(v['expected']):<24.24}  {interval:<22.22}  "
                   f"{textwrap.shorten(v['claim'], 80)}")
    if checked.not_run:
        total = sum(map(len, checked.not_run.values()))
        echo(f"\n{total} claims not run yet here" + ("; what would run them:" if not_run_details else
                                                      " (`make repro` runs them all)"), fg="bright_black", bold=True)
        if not_run_details:
            for command, ids in checked.not_run.items():
                echo(f"  {command:<48}  {len(ids)} claims: {textwrap.shorten(', '.join(ids), 60)}")
            echo("  (`make repro` runs the whole plan: every claim)")
    echo(f"\n{count_in_words(checked.count)}")

"""Do the committed results reproduce? Retrain committed runs from nothing and compare them, bit for bit.

`blocklab audit` trains the runs it is given (or a sample of the plan chosen from the commit) without the run
store, and compares each with its committed record (reports/runs/<run key>/, `blocklab.run.results.write_record`):
every file the retrained run writes there, byte for byte (its metrics field by field, its curve, per-block
diagnostics, weights' digest and sample), and its settings. The landing gate audits a sample that covers every
ablation and map (`sample`), a different one for every commit.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from blocklab.errors import BlocklabError
from blocklab.params.schema import Params, RunSpec
from blocklab.schedule.train_stages import RECORDS_DIR
# A sampled run is one of the cheaper of its ablation or map: at most this many estimated seconds of training
# (or its ablation's cheapest, where none is that cheap), so that a sample of every ablation and map trains in
# a few minutes on two cores.
SAMPLE_SECONDS = 12.0


@dataclass(frozen=True)
class AuditedRun:
    spec: RunSpec
    seed: int

    @property
    def key(self) -> str:
        return self.spec.key(self.seed)


@dataclass
class Verdict:
    key: str
    differences: list[str]  # empty: bit for bit the committed run


def committed_runs(params: Params) -> dict[str, AuditedRun]:
    """Every run of the plan, by run key."""
    return {spec.key(seed): AuditedRun(spec, seed) for spec, seed in params.runs()}


def named(params: Params, keys: list[str]) -> list[AuditedRun]:
    runs = committed_runs(params)
    unknown = [key for key in keys if key not in runs]
    if unknown:
        raise BlocklabError(f"{', '.join(unknown)}: not a run of the plan (a run key is <ablation>/<variant>/seed<k> "
                            f"or <map>/<variant>/<cell>/seed<k>; `blocklab params` lists them)")
    return [runs[key] for key in keys]


def commit_of(cwd: Path | None = None) -> str:
    """HEAD's commit, which seeds the sample ('' outside a git repository)."""
    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=cwd)
    return done.stdout.strip() if done.returncode == 0 else ""


def sample(params: Params, n: int | None, seed_text: str) -> list[AuditedRun]:
    """`n` runs chosen by `seed_text` (a commit): one of every ablation and map first (while `n` lasts; n None:
    exactly that), each one of the cheaper runs of its ablation or map (SAMPLE_SECONDS), then more of those."""
    from blocklab.schedule.plan import estimated_seconds

    rng = random.Random(seed_text)
    groups: dict[str, list[AuditedRun]] = {}
    for run in committed_runs(params).values():
        groups.setdefault(run.spec.ablation, []).append(run)
    cheap = {}
    for name, runs in groups.items():
        cost = {run.key: estimated_seconds(run.spec) for run in runs}
        limit = max(SAMPLE_SECONDS, min(cost.values()))
        cheap[name] = [run for run in runs if cost[run.key] <= limit]
    names = sorted(groups)
    rng.shuffle(names)
    n = len(names) if n is None else n
    chosen = [rng.choice(cheap[name]) for name in names[:n]]
    rest = [run for name in sorted(cheap) for run in cheap[name] if run not in chosen]
    chosen += rng.sample(rest, min(max(n - len(chosen), 0), len(rest)))
    return chosen


def compare(run: AuditedRun, written: Path, record: Path, settings: dict) -> Verdict:
    """How the files a retrained run wrote in `written` differ from its committed `record` (every recorded file,
    byte for byte; its metrics field by field), and whether the record is of `settings`."""
    from blocklab.run.results import RECORDED_FILES, SETTINGS_FILE

    if not (record / SETTINGS_FILE).is_file():
        return Verdict(run.key, [f"{record} holds no record of it (run `make repro` and commit reports/runs)"])
    differences = []
    if json.loads((record / SETTINGS_FILE).read_text()) != json.loads(json.dumps(settings)):
        differences.append(f"{record / SETTINGS_FILE} records other settings than params.yaml's (the record is "
                           f"not this commit's: run `make repro` and commit reports/runs)")
    for name in RECORDED_FILES:
        here, were = written / name, record / name
        if here.exists() != were.exists():
            differences.append(f"{name} {'written here' if here.exists() else 'not written here'}, "
                               f"{'committed' if were.exists() else 'not committed'}")
        elif here.exists() and here.read_bytes() != were.read_bytes():
            if name == "metrics.json":
                new, old = json.loads(here.read_text()), json.loads(were.read_text())
                differences += [f"{field} {new.get(field)!r} here, {old.get(field)!r} committed"
                                for field in sorted(set(new) | set(old)) if new.get(field) != old.get(field)]
            else:
                differences.append(f"{name} differs from the committed one")
    return Verdict(run.key, differences)


def audit(runs: list[AuditedRun], encoded: Path, workers: int | None = None, progress: bool = True,
          records: Path = RECORDS_DIR) -> list[Verdict]:
    """Retrain `runs` from nothing (no run store, no checkpoint) and compare each with its committed record."""
    from blocklab.run.job import Job
    from blocklab.run.data import load_corpus
    from blocklab.run.numerics import vendor_family
    from blocklab.run.results import write_run
    from blocklab.schedule.plan import record_settings
    from blocklab.schedule.pool import train_runs

    family = vendor_family()
    jobs = [Job(run.key, run.spec.model.canonical(), run.spec.train, run.seed, None, family) for run in runs]
    results = train_runs(jobs, load_corpus(encoded), workers=workers or os.cpu_count(), progress=progress)
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="blocklab-audit-") as scratch:
        for run in runs:
            written = Path(scratch) / run.key
            write_run(written, results[run.key], tokens_per_step=run.spec.train.batch_size * run.spec.model.context)
            verdicts.append(compare(run, written, Path(records) / run.key, record_settings(run.spec, run.seed)))
    return verdicts


def reported(runs: list[AuditedRun], encoded: Path, other_family: str, echo) -> int:
    """`blocklab audit`: the audit, printed; its exit status (0: every run reproduces, 1: not, or another family)."""
    from blocklab.run.numerics import vendor_family
    from blocklab.schedule.train_stages import require_encoded
    from blocklab.tools.fingerprint import FINGERPRINT_FILE, read_committed

    require_encoded(encoded, "the audit retrains runs on the encoded corpus")
    for needed in (RECORDS_DIR, FINGERPRINT_FILE):
        if not needed.exists():
            raise BlocklabError(f"{needed} does not exist: there are no committed results to audit here")
    here, committed = vendor_family(), read_committed()["family"]
    if here != committed:
        echo(f"this machine computes in the numeric family '{here}'; the committed results were made in "
             f"'{committed}', whose bits it does not compute (docs/reproducibility.md): nothing to compare"
             + (" - skipped" if other_family == "skip" else ""))
        return 0 if other_family == "skip" else 1
    echo(f"auditing {len(runs)} committed run{'s' * (len(runs) != 1)}: retrained from nothing, compared with "
         f"its record in {RECORDS_DIR}/")
    verdicts = audit(runs, Path(encoded))
    for verdict in verdicts:
        if verdict.differences:
            echo(f"  DIFFERS  {verdict.key}: " + "; ".join(verdict.differences[:4])
                 + (f"; and {len(verdict.differences) - 4} more" if len(verdict.differences) > 4 else ""))
        else:
            echo(f"  same     {verdict.key}")
    same = sum(not v.differences for v in verdicts)
    echo(f"{same} of {len(verdicts)} runs reproduce the committed ones bit for bit (every recorded file: "
         f"metrics, curves, weights' digest, sample)")
    return 0 if same == len(verdicts) else 1

"""Whether a workspace's reports are its pipeline's, as `dvc status` tells it.

In a fresh clone nothing has been reproduced, so `dvc status` reports every output missing ("deleted", "not in
cache"), and as missing every input of a stage that is another stage's output: the committed reports are then
still the commit's own. Anything else it reports (a source file, a parameter or a dependency changed since
`dvc.lock` was written, or missing though no stage makes it) means the reports describe other code or
parameters: `blocklab diff` refuses to compare such a workspace, and CI's gate refuses to land such a commit."""

from __future__ import annotations

from pathlib import Path

from blocklab.analysis.diff import DiffError

EXPECTED_IN_A_FRESH_CLONE = {"deleted", "not in cache"}


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def changes(status: dict, outputs: set[str]) -> list[str]:
    """Each stage, path (and parameter) of `dvc status --json`'s `status` that a fresh clone does not explain,
    as one line each; `outputs`: the paths the stages write (missing here, as is anything under them)."""

    def made_by_a_stage(path: str) -> bool:  # an output, in one, or a folder of outputs (data/runs)
        return any(_inside(path, out) or _inside(out, path) for out in outputs)

    found = []
    for stage, entries in status.items():
        for entry in entries:
            if entry == "always changed":  # a stage that runs every time (track): not a change to the reports
                continue
            if not isinstance(entry, dict):
                found.append(f"{stage}: {entry}")
                continue
            for kind, paths in entry.items():
                for path, state in paths.items():
                    if isinstance(state, dict):  # a params file: {parameter: state}
                        found += [f"{stage}: {kind} {path} {name} {value}" for name, value in state.items()]
                    elif state not in EXPECTED_IN_A_FRESH_CLONE or not made_by_a_stage(path):
                        found.append(f"{stage}: {kind} {path} {state}")
    return found


def left_after_repro(status: dict, outputs: set[str], extended: set[str]) -> dict:
    """`dvc status --json`'s `status` less what `make repro` leaves as it is: a stage that always runs (track), and
    a stage of the extended plan (`extended`: its DVC names) whose only changes are its missing outputs, as in a
    fresh clone (`changes` explains them): its records are committed and `make repro-extended` trains it. Anything
    else of an extended stage (a changed dependency) stays: its records would be stale."""
    return {stage: entries for stage, entries in status.items()
            if entries != ["always changed"] and not (stage in extended and not changes({stage: entries}, outputs))}


def stage_outputs(lock_file: str | Path = "dvc.lock") -> set[str]:
    """Every output path dvc.lock records."""
    import yaml

    lock = yaml.safe_load(Path(lock_file).read_text())
    return {out["path"] for stage in lock["stages"].values() for out in stage.get("outs", [])}


def unexplained_changes(repo: str | Path = ".") -> tuple[list[str], int]:
    """(the changes of `changes`, how many stages `dvc status` lists) for the project at `repo`."""
    from dvc.repo import Repo

    with Repo(str(repo)) as dvc_repo:
        status = dvc_repo.status()
    return changes(status, stage_outputs(Path(repo) / "dvc.lock")), len(status)


def check_reproduced(repo: str = ".") -> None:
    """`blocklab diff`'s refusal: the workspace's reports must be its pipeline's, nothing `dvc status` reports out of
    date but outputs a fresh clone has not made (its committed reports are then the commit's own)."""
    stale, _ = unexplained_changes(repo)
    if stale:
        names = sorted({line.split(":")[0] for line in stale})
        raise DiffError(f"the workspace's reports are out of date with its dvc.lock, code or params ("
                        f"{', '.join(names[:3])}{'…' if len(names) > 3 else ''}: `dvc status`): run `dvc repro` "
                        f"first, then compare (or compare two commits: `blocklab diff HEAD~1 HEAD`)")

"""Are the committed results this code's and these parameters'? In a fresh clone nothing has been reproduced,
so `dvc status` reports every output missing ("deleted", "not in cache"), and as missing every input of a
stage that is another stage's output: that is expected. Anything else it reports (a source file, a parameter
or a dependency changed since `dvc.lock` was written, or missing though no stage makes it) means `dvc.lock`
and `reports/` describe other code or parameters than the commit's: exits 1 naming each, and what to do.

Usage (in the project, after `make install`): .venv/bin/python .ci/results_current.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXPECTED_IN_A_FRESH_CLONE = {"deleted", "not in cache"}


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def changes(status: dict, outputs: set[str]) -> list[str]:
    """Each stage, path (and parameter) whose status is not one a fresh clone expects, as one line each;
    `outputs`: the paths the stages write (missing here, as is anything under them)."""

    def made_by_a_stage(path: str) -> bool:  # an output, in one, or a folder of outputs (data/runs)
        return any(_inside(path, out) or _inside(out, path) for out in outputs)

    found = []
    for stage, entries in status.items():
        for entry in entries:
            if not isinstance(entry, dict):  # e.g. "always changed"
                found.append(f"{stage}: {entry}")
                continue
            for kind, paths in entry.items():
                for path, state in paths.items():
                    if isinstance(state, dict):  # a params file: {parameter: state}
                        found += [f"{stage}: {kind} {path} {name} {value}" for name, value in state.items()]
                    elif state not in EXPECTED_IN_A_FRESH_CLONE or not made_by_a_stage(path):
                        found.append(f"{stage}: {kind} {path} {state}")
    return found


def stage_outputs(lock_file: Path) -> set[str]:
    """Every output path dvc.lock records."""
    import yaml

    lock = yaml.safe_load(lock_file.read_text())
    return {out["path"] for stage in lock["stages"].values() for out in stage.get("outs", [])}


def main() -> int:
    dvc = Path(sys.executable).with_name("dvc")
    status = json.loads(subprocess.run([str(dvc), "status", "--json"], check=True, capture_output=True,
                                       text=True).stdout)
    found = changes(status, stage_outputs(Path("dvc.lock")))
    if found:
        print(f"ci: dvc.lock and reports/ are not this commit's results: {len(found)} changes since dvc.lock was "
              "written:", file=sys.stderr)
        print("\n".join(f"  {line}" for line in found[:40]), file=sys.stderr)
        if len(found) > 40:
            print(f"  ... and {len(found) - 40} more", file=sys.stderr)
        print("Run `make repro` and commit dvc.lock and reports/ with the change.", file=sys.stderr)
        return 1
    print(f"ci: dvc.lock is this commit's: {len(status)} stages not reproduced here, none with a changed source, "
          "parameter or dependency")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Are the committed results this code's and these parameters'? In a fresh clone `dvc status` may report missing
outputs only (blocklab.tools.pipeline_status); anything else means `dvc.lock` and `reports/` describe other code or
parameters than the commit's: exits 1 naming each, and what to do.

Usage (in the project, after `make install`): .venv/bin/python .ci/results_current.py
"""

from __future__ import annotations

import sys

from blocklab.tools.pipeline_status import unexplained_changes


def main() -> int:
    found, stages = unexplained_changes()
    if found:
        print(f"ci: dvc.lock and reports/ are not this commit's results: {len(found)} changes since dvc.lock was "
              "written:", file=sys.stderr)
        print("\n".join(f"  {line}" for line in found[:40]), file=sys.stderr)
        if len(found) > 40:
            print(f"  ... and {len(found) - 40} more", file=sys.stderr)
        print("Run `make repro` and commit dvc.lock and reports/ with the change.", file=sys.stderr)
        return 1
    print(f"ci: dvc.lock is this commit's: {stages} stages not reproduced here, none with a changed source, "
          "parameter or dependency")
    return 0


if __name__ == "__main__":
    sys.exit(main())

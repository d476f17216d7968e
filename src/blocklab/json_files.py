"""Writing a JSON report: indented, keys sorted, one trailing newline, so that equal data are equal bytes."""

from __future__ import annotations

import json
from pathlib import Path


def write_json(path: Path, data: dict, sort_keys: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=sort_keys) + "\n")

"""Runs kept by what determines their results, so that no run is trained twice.

Variants of different ablations often train the same runs: post-norm without warmup is both
`norm_order/post` and `warmup/w0`, the default 6-layer model is `activation/gelu`, `norm_type/layernorm`
and `ffn_type/mlp`. Every CPU run trains at one thread from its seed, so equal settings give equal
results, bit for bit. The first train stage to train such a run leaves a copy in the store
(`data/run_store/<key>/`); a later stage whose run has the same key copies it instead of training.

The key hashes everything a run's results depend on: its resolved model and training settings, its
seed, the encoded corpus, the torch version, and the source of the code that trains it (every blocklab
module the stage has loaded, and the stage's own script). A change to any of them trains afresh, so a
stale copy is never used; `dvc exp run -S` still re-runs exactly the stages a change touches, and DVC
tracks each stage's own copy (its cache keeps one file for both). The store lies outside DVC's outputs
and is never committed: a fresh clone, or a queued experiment's temporary copy, trains each run once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from blocklab.config import RunSpec

STORE_DIR = Path("data/run_store")
ORIGIN_FILE = "origin.json"


def _code_digest(extra_files: list[Path]) -> str:
    digest = hashlib.sha256()
    modules = sorted((name, module) for name, module in sys.modules.items()
                     if (name == "blocklab" or name.startswith("blocklab.")) and getattr(module, "__file__", None))
    for name, module in modules:
        digest.update(name.encode() + b"\0" + Path(module.__file__).read_bytes() + b"\0")
    for path in extra_files:
        digest.update(Path(path).name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return digest.hexdigest()


def _corpus_digest(encoded: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(encoded).iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class RunStore:
    """Finished runs under `root`, one folder per key: the run's files and where it was first trained."""

    def __init__(self, root: Path = STORE_DIR):
        self.root = Path(root)

    @staticmethod
    def keys(spec: RunSpec, encoded: Path, code_files: list[Path]) -> dict[int, str]:
        """Each of `spec`'s seeds' key."""
        import torch

        shared = {"model": asdict(spec.model), "train": asdict(spec.train), "corpus": _corpus_digest(encoded),
                  "torch": torch.__version__, "code": _code_digest(code_files)}
        return {seed: hashlib.sha256(json.dumps({**shared, "seed": seed}, sort_keys=True).encode()).hexdigest()
                for seed in spec.seeds}

    def origin(self, key: str) -> str | None:
        """The run key that first trained `key`'s run, if the store has it."""
        path = self.root / key / ORIGIN_FILE
        return json.loads(path.read_text())["run"] if path.exists() else None

    def copy_to(self, key: str, directory: Path) -> None:
        source = self.root / key
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for path in source.iterdir():
            if path.name != ORIGIN_FILE:
                shutil.copyfile(path, directory / path.name)

    def put(self, key: str, directory: Path, run: str) -> None:
        """Keep a copy of the finished run in `directory`, first trained as `run`; written whole or not at all."""
        self.root.mkdir(parents=True, exist_ok=True)
        if (self.root / key).exists():
            return
        staging = Path(tempfile.mkdtemp(dir=self.root, prefix=".incoming-"))
        try:
            for path in Path(directory).iterdir():
                if path.is_file():
                    shutil.copyfile(path, staging / path.name)
            (staging / ORIGIN_FILE).write_text(json.dumps({"run": run}) + "\n")
            os.rename(staging, self.root / key)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not (self.root / key).exists():
                raise

"""Runs kept by what determines their results, so that no run is trained twice.

Variants of different ablations often train the same runs: post-norm without warmup is both
`placement/post` and `warmup/w0`, the default 6-layer model is `activation/gelu`, `norm_type/layernorm`
and `ffn_type/mlp`. Every CPU run trains at one thread from its seed, so equal settings give equal
results, bit for bit. Whoever trains a run first (a train stage, or `blocklab prefetch` for the whole
plan at once) leaves it in the store (`data/run_store/<key>/`); a stage whose run has that key copies it
instead of training (`blocklab.schedule.plan`).

The key hashes everything a run's results depend on: its resolved model and training settings (in their
canonical spelling: two settings that build the same computation share a key), its seed, the encoded corpus,
the torch version, the source of the package that trains it and writes its files, `blocklab.run` (every
file of it, whatever process computes the key), and the numeric path: the pins and the family of CPU the
keying machine computes in (`blocklab.run.numerics`; a worker of another family refuses the run). A change to any of them
trains afresh, so a stale copy is never used; `blocklab store --prune` removes what no setting of the
current plan needs. The store lies outside DVC's outputs and is never committed.

An entry is trusted only whole: its files are written to a staging folder with a manifest of their
sha256 (`manifest.json`) and where the run was first trained (`origin.json`), then the folder is renamed
into place in one step, so a reader sees all of it or nothing (two processes putting one key: the
first rename wins, the second finds the entry there and discards its own). A copy checks every file
against the manifest as it reads it; a file changed or missing, or no manifest, discards the entry
(`DamagedEntry`, naming the run), so that its run is trained afresh: a broken result is never handed on.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import blocklab.run
from blocklab.params.schema import RunSpec
from blocklab.run.numerics import PINS, vendor_family
from blocklab.schedule.train_stages import STORE_DIR, require_encoded


ORIGIN_FILE = "origin.json"
MANIFEST_FILE = "manifest.json"
STAGING_PREFIX = ".incoming-"  # a put in progress, or one a killed process left: never read, pruned
BIN_PREFIX = ".discarded-"  # a damaged entry on its way out
# The package whose every file decides a run's numbers (and is every train stage's code dependency in dvc.yaml).
RUN_CODE = Path(blocklab.run.__file__).resolve().parent


class DamagedEntry(Exception):
    """A store entry whose files do not match its manifest (or that has none): it has been discarded."""


def code_digest(package: Path | None = None) -> str:
    """The sha256 of the source of `blocklab.run` (or of the package folder given), file by file: its Python
    and the MKL shim's C."""
    digest = hashlib.sha256()
    folder = package or RUN_CODE
    for path in sorted([*folder.glob("*.py"), *folder.glob("*.c")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def corpus_digest(encoded: Path) -> str:
    """The sha256 of the encoded corpus's files."""
    digest = hashlib.sha256()
    for path in sorted(Path(encoded).iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class RunKeys:
    """Run keys for one corpus, with today's training code and torch: compute the digests once, key many."""

    def __init__(self, encoded: Path):
        # torch's installed version, read without importing torch (2-3 s), the same string as torch.__version__
        self.family = vendor_family()
        self.shared = {"corpus": corpus_digest(encoded), "torch": importlib.metadata.version("torch"),
                       "code": code_digest(), "numerics": {"pins": PINS, "family": self.family}}

    def of(self, spec: RunSpec) -> dict[int, str]:
        """Each of `spec`'s seeds' key (names and labels do not enter it: equal settings, equal key)."""
        shared = {**self.shared, "model": asdict(spec.model.canonical()), "train": asdict(spec.train)}
        return {seed: hashlib.sha256(json.dumps({**shared, "seed": seed}, sort_keys=True).encode()).hexdigest()
                for seed in spec.seeds}


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class RunStore:
    """Finished runs under `root`, one folder per key: the run's files, their manifest, and where it was
    first trained."""

    def __init__(self, root: Path = STORE_DIR):
        self.root = Path(root)

    def keys(self) -> list[str]:
        """The keys of every visible entry (staging and discarded folders excluded)."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def verified(self, key: str) -> str | None:
        """The origin of `key`'s entry if it is whole (every file matches its manifest); None if there is
        none. A damaged entry is discarded and raises `DamagedEntry`."""
        entry = self.root / key
        if not entry.is_dir():
            return None
        manifest, origin = self._read(entry)
        if manifest is None or origin is None:
            self._discard(key, "it has no readable manifest or origin")
        for name, digest in manifest.items():
            path = entry / name
            if not path.is_file():
                self._discard(key, f"its {name} is missing", origin)
            if _sha256(path) != digest:
                self._discard(key, f"its {name} does not match its manifest", origin)
        return origin

    def copy_to(self, key: str, directory: Path) -> str:
        """Copy `key`'s run files into `directory`, each checked against the manifest as it is copied; returns
        the run's origin. On a mismatch the copies are removed and the entry discarded (`DamagedEntry`)."""
        entry, directory = self.root / key, Path(directory)
        manifest, origin = self._read(entry)
        if manifest is None or origin is None:
            self._discard(key, "it has no readable manifest or origin")
        directory.mkdir(parents=True, exist_ok=True)
        for name, digest in manifest.items():
            try:
                data = (entry / name).read_bytes()
            except OSError:
                self._unwrite(directory, manifest)
                self._discard(key, f"its {name} is missing", origin)
            if hashlib.sha256(data).hexdigest() != digest:
                self._unwrite(directory, manifest)
                self._discard(key, f"its {name} does not match its manifest", origin)
            (directory / name).write_bytes(data)
        return origin

    def put(self, key: str, directory: Path, run: str) -> None:
        """Keep the run files in `directory` (first trained as `run`) under `key`, whole or not at all."""
        def copy(staging: Path) -> None:
            for path in Path(directory).iterdir():
                if path.is_file():
                    shutil.copyfile(path, staging / path.name)

        self.put_written(key, run, copy)

    def put_written(self, key: str, run: str, write: Callable[[Path], None]) -> None:
        """Keep under `key` the run files that `write(folder)` writes into an empty folder (first trained as
        `run`), whole or not at all; if another process put `key` first, theirs stays."""
        self.root.mkdir(parents=True, exist_ok=True)
        if (self.root / key).exists():
            return
        staging = Path(tempfile.mkdtemp(dir=self.root, prefix=STAGING_PREFIX))
        try:
            write(staging)
            manifest = {p.name: _sha256(p) for p in sorted(staging.iterdir()) if p.is_file()}
            (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
            (staging / ORIGIN_FILE).write_text(json.dumps({"run": run}) + "\n")
            os.rename(staging, self.root / key)  # fails if another process put the key first: theirs stays
        except OSError:
            if not (self.root / key).exists():
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def size(self, keys: list[str] | None = None) -> int:
        """Bytes held by the entries `keys` (default: every entry)."""
        return sum(p.stat().st_size for key in (self.keys() if keys is None else keys)
                   for p in (self.root / key).iterdir() if p.is_file())

    def leftovers(self, older_than: float = 0.0) -> list[Path]:
        """Staging folders of puts that never finished (a killed process) and discarded entries not yet gone,
        untouched for `older_than` seconds (a put in progress takes milliseconds)."""
        if not self.root.is_dir():
            return []
        now = time.time()
        return sorted(p for p in self.root.iterdir()
                      if p.name.startswith((STAGING_PREFIX, BIN_PREFIX)) and now - p.stat().st_mtime >= older_than)

    def remove(self, key: str) -> None:
        """Take `key`'s entry out of the store: renamed out of sight in one step, then deleted."""
        bin_dir = Path(tempfile.mkdtemp(dir=self.root, prefix=BIN_PREFIX))
        try:
            os.rename(self.root / key, bin_dir / key)
        except FileNotFoundError:  # someone else removed it first
            pass
        shutil.rmtree(bin_dir, ignore_errors=True)

    @staticmethod
    def _read(entry: Path) -> tuple[dict | None, str | None]:
        try:
            manifest = json.loads((entry / MANIFEST_FILE).read_text())
            origin = json.loads((entry / ORIGIN_FILE).read_text())["run"]
        except (OSError, ValueError, KeyError, TypeError):
            return None, None
        return manifest, origin

    def _discard(self, key: str, why: str, origin: str | None = None) -> None:
        self.remove(key)
        run = f"{origin}'s run" if origin else "the run"
        raise DamagedEntry(f"the run store's entry {key[:12]}… ({run}) was damaged ({why}): discarded, the run "
                           f"trains afresh")

    @staticmethod
    def _unwrite(directory: Path, manifest: dict) -> None:
        for name in manifest:
            (directory / name).unlink(missing_ok=True)


LEFTOVER_SECONDS = 600  # `blocklab store --prune`: a staging folder this old is no put in progress


def store_reported(store_dir: Path, encoded: Path, params_file: str, prune: bool) -> None:
    """`blocklab store`: what the store holds, how much of it the plan in `params_file` uses with today's code,
    corpus and torch, and (`prune`) the rest removed."""
    import click

    from blocklab.params.schema import load_params

    if not Path(store_dir).is_dir():
        click.echo(f"{store_dir}: no run store yet, nothing trained here (`make demo` or `make repro` trains into it)")
        return
    require_encoded(encoded, "the runs' keys hash the encoded corpus")
    params = load_params(params_file)
    runs_store = RunStore(store_dir)
    keys = RunKeys(encoded)
    needed = {key for spec in params.all_specs() for key in keys.of(spec).values()}
    held = runs_store.keys()
    used, unused = [k for k in held if k in needed], [k for k in held if k not in needed]
    leftovers = runs_store.leftovers(older_than=LEFTOVER_SECONDS)

    def mb(n: int) -> str:
        return f"{n / 1e6:,.1f} MB"

    click.echo(f"{store_dir}: {len(held)} entries, {mb(runs_store.size())}\n"
               f"  used by params.yaml's plan: {len(used)} ({mb(runs_store.size(used))}) of the plan's "
               f"{len(needed)} distinct runs\n"
               f"  needed by no current setting: {len(unused)} ({mb(runs_store.size(unused))})"
               + (f"\n  left by interrupted writes: {len(leftovers)}" if leftovers else ""))
    if prune:
        for key in unused:
            runs_store.remove(key)
        for path in leftovers:
            shutil.rmtree(path, ignore_errors=True)
        click.echo(f"pruned {len(unused)} entries" + (f" and {len(leftovers)} leftovers" if leftovers else ""))
    elif unused or leftovers:
        click.echo("`blocklab store --prune` removes them.")

"""The corpus: download it (or take it from a mirror), verify it, encode it character by character."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from blocklab.errors import BlocklabError

MIRROR_ENV = "BLOCKLAB_DATA_MIRROR"
VOCAB_FILE = "vocab.json"
TRAIN_FILE = "train.bin"
VAL_FILE = "val.bin"

if TYPE_CHECKING:
    import torch


class DataError(BlocklabError):
    """A problem with the corpus, worded as what happened and what to do."""


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same folder and rename it, so `path` is all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _fetch(source: str, timeout: float = 60) -> bytes:
    if "://" not in source or source.startswith("file://"):
        local = Path(source.removeprefix("file://")).expanduser()
        if not local.is_file():
            raise DataError(
                f"mirror file {local} does not exist: point {MIRROR_ENV} at a copy of the corpus, "
                f"or unset it to download from the canonical URL"
            )
        return local.read_bytes()
    try:
        with urllib.request.urlopen(source, timeout=timeout) as response:
            return response.read()
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise DataError(
            f"could not download {source} ({reason}). On an offline machine set {MIRROR_ENV} "
            f"to a local copy of the file (or a reachable URL)"
        ) from None


def download(url: str, sha256: str, out: Path) -> str:
    """Fetch the corpus from `url` (or the mirror in $BLOCKLAB_DATA_MIRROR), verify, write atomically.

    Returns the source actually used."""
    source = os.environ.get(MIRROR_ENV) or url
    data = _fetch(source)
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise DataError(
            f"checksum mismatch for {source}: got sha256 {digest}, params.yaml expects {sha256}. "
            f"The file is truncated, altered or a different corpus: fetch it again, or, if you meant "
            f"to change the corpus, set data.sha256 to its checksum"
        )
    atomic_write(Path(out), data)
    return source


@dataclass(frozen=True)
class Corpus:
    chars: list[str]
    train: torch.Tensor | np.ndarray  # (N_train,) int64 character ids; NumPy with load_corpus(as_tensors=False)
    val: torch.Tensor | np.ndarray

    @property
    def vocab_size(self) -> int:
        return len(self.chars)


def _id_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint8 if vocab_size <= 2**8 else np.uint16 if vocab_size <= 2**16 else np.uint32)


def encode(text_path: Path, out_dir: Path, val_fraction: float) -> dict:
    """Vocabulary = sorted set of characters; train = first (1 - val_fraction), validation = the rest."""
    raw = Path(text_path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(
            f"{text_path} is not UTF-8 text (byte {err.start}: {raw[err.start:err.start + 1]!r}): "
            f"convert it, e.g. `iconv -f latin1 -t utf-8`"
        ) from None
    if not text:
        raise DataError(f"{text_path} is empty: the corpus needs text to learn from")
    chars = sorted(set(text))
    lookup = {c: i for i, c in enumerate(chars)}
    dtype = _id_dtype(len(chars))
    ids = np.fromiter((lookup[c] for c in text), dtype=dtype, count=len(text))
    n_train = int((1 - val_fraction) * len(ids))
    out_dir = Path(out_dir)
    meta = {"chars": chars, "dtype": dtype.name, "n_train": n_train, "n_val": len(ids) - n_train}
    atomic_write(out_dir / TRAIN_FILE, ids[:n_train].tobytes())
    atomic_write(out_dir / VAL_FILE, ids[n_train:].tobytes())
    atomic_write(out_dir / VOCAB_FILE, json.dumps(meta, ensure_ascii=False, indent=1).encode())
    return meta


def load_corpus(encoded_dir: Path, as_tensors: bool = True) -> Corpus:
    """The encoded splits as int64 torch tensors; with `as_tensors=False`, as NumPy arrays, for work that
    needs no torch (2 s to import)."""
    encoded_dir = Path(encoded_dir)
    meta = json.loads((encoded_dir / VOCAB_FILE).read_text())
    dtype = np.dtype(meta["dtype"])
    train, val = (np.fromfile(encoded_dir / name, dtype=dtype).astype(np.int64) for name in (TRAIN_FILE, VAL_FILE))
    if as_tensors:
        import torch  # here, not at the top

        train, val = torch.from_numpy(train), torch.from_numpy(val)
    return Corpus(chars=meta["chars"], train=train, val=val)

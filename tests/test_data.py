import functools
import hashlib
import http.server
import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from blocklab.analysis.baselines import unigram_baselines
from blocklab.run import data
from blocklab.run.data import MIRROR_ENV, DataError, download, encode, load_corpus

from conftest import SHARED_CORPUS, small_corpus

TINY_SHAKESPEARE_SHA = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


@pytest.fixture
def text(tmp_path) -> Path:
    return small_corpus(tmp_path / "mirror.txt")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_mirror_file_is_used_and_verified(tmp_path, text, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(text))
    out = tmp_path / "raw" / "input.txt"
    assert download("http://127.0.0.1:9/never-used", sha(text), out) == str(text)
    assert out.read_bytes() == text.read_bytes()
    assert leftovers(out.parent) == ["input.txt"]


def test_wrong_checksum_fails_and_leaves_nothing_at_the_output(tmp_path, text, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(text))
    out = tmp_path / "raw" / "input.txt"
    with pytest.raises(DataError, match="checksum mismatch.*truncated, altered"):
        download("http://unused", "0" * 64, out)
    assert leftovers(out.parent) == []


def test_truncated_copy_is_rejected(tmp_path, text, monkeypatch):
    truncated = tmp_path / "truncated.txt"
    truncated.write_bytes(text.read_bytes()[:-100])
    monkeypatch.setenv(MIRROR_ENV, str(truncated))
    with pytest.raises(DataError, match="checksum mismatch"):
        download("http://unused", sha(text), tmp_path / "out.txt")
    assert not (tmp_path / "out.txt").exists()


def test_missing_mirror_file_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "nope.txt"))
    with pytest.raises(DataError, match=f"mirror file .*nope.txt does not exist: point {MIRROR_ENV}"):
        download("http://unused", "0" * 64, tmp_path / "out.txt")


def test_unreachable_url_says_so_and_suggests_the_mirror(tmp_path, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    with pytest.raises(DataError, match=f"could not download http://127.0.0.1:9/x.*set {MIRROR_ENV}"):
        download("http://127.0.0.1:9/x", "0" * 64, tmp_path / "out.txt")
    assert leftovers(tmp_path) == []


@pytest.fixture
def http_server(text):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(text.parent))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_real_http_download_from_a_url(tmp_path, text, http_server, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    out = tmp_path / "out" / "input.txt"
    download(f"{http_server}/{text.name}", sha(text), out)
    assert out.read_bytes() == text.read_bytes()


def test_mirror_may_be_a_url(tmp_path, text, http_server, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, f"{http_server}/{text.name}")
    download("http://127.0.0.1:9/canonical", sha(text), tmp_path / "input.txt")
    assert (tmp_path / "input.txt").read_bytes() == text.read_bytes()


def test_a_crash_while_writing_leaves_neither_a_partial_file_nor_a_temporary(tmp_path, text, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(text))

    def crash(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(data.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        download("http://unused", sha(text), tmp_path / "raw" / "input.txt")
    assert leftovers(tmp_path / "raw") == []


@pytest.mark.skipif(not SHARED_CORPUS.exists(), reason="needs the shared Tiny Shakespeare copy")
def test_tiny_shakespeare_encodes_to_65_characters_split_90_10(tmp_path, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(SHARED_CORPUS))
    raw = tmp_path / "input.txt"
    download("http://unused", TINY_SHAKESPEARE_SHA, raw)
    meta = encode(raw, tmp_path / "encoded", val_fraction=0.1)
    assert len(meta["chars"]) == 65
    assert meta["n_train"] + meta["n_val"] == 1_115_394
    assert meta["n_train"] == int(0.9 * 1_115_394)
    assert (tmp_path / "encoded" / "train.bin").stat().st_size == meta["n_train"]  # one byte per id


def test_encoding_round_trips_any_utf8_text_and_splits_by_fraction(tmp_path, text):
    meta = encode(text, tmp_path / "enc", val_fraction=0.25)
    source = text.read_text(encoding="utf-8")
    corpus = load_corpus(tmp_path / "enc")
    assert corpus.chars == sorted(set(source)) and "ü" in corpus.chars
    assert corpus.vocab_size == 28
    decoded = "".join(corpus.chars[i] for i in torch.cat([corpus.train, corpus.val]).tolist())
    assert decoded == source
    assert len(corpus.train) == int(0.75 * len(source)) == meta["n_train"]
    assert json.loads((tmp_path / "enc" / "vocab.json").read_text(encoding="utf-8"))["chars"] == corpus.chars


def test_the_same_corpus_loads_as_numpy_arrays_for_work_without_torch(tmp_path, text):
    encode(text, tmp_path / "enc", val_fraction=0.25)
    tensors, arrays = load_corpus(tmp_path / "enc"), load_corpus(tmp_path / "enc", as_tensors=False)
    assert arrays.train.dtype == "int64" and not isinstance(arrays.train, torch.Tensor)
    assert arrays.train.tolist() == tensors.train.tolist() and arrays.val.tolist() == tensors.val.tolist()


def test_the_unigram_baseline_is_the_entropy_of_the_training_characters():
    train, val = np.array([0, 0, 0, 1]), np.array([1, 2])  # character 2 never occurs in training
    baselines = unigram_baselines(train, val, vocab_size=3)
    assert baselines["unigram"] == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    # add-one smoothing: p(1) = 2/7, p(2) = 1/7
    assert baselines["unigram_val"] == pytest.approx(-(math.log(2 / 7) + math.log(1 / 7)) / 2)
    assert baselines["uniform"] == pytest.approx(math.log(3))


def test_a_vocabulary_beyond_256_characters_is_stored_in_16_bits(tmp_path):
    path = tmp_path / "wide.txt"
    path.write_text("".join(chr(0x4E00 + i) for i in range(300)) * 3, encoding="utf-8")
    encode(path, tmp_path / "enc", val_fraction=0.5)
    corpus = load_corpus(tmp_path / "enc")
    assert corpus.vocab_size == 300
    assert corpus.train.max().item() == 299


def test_non_utf8_file_fails_with_a_clear_message(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("café au lait".encode("latin-1"))
    with pytest.raises(DataError, match="is not UTF-8 text .*iconv"):
        encode(path, tmp_path / "enc", val_fraction=0.1)
    assert leftovers(tmp_path / "enc") == []


def test_empty_file_fails_with_a_clear_message(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    with pytest.raises(DataError, match="is empty"):
        encode(path, tmp_path / "enc", val_fraction=0.1)

"""Which package index `make install` takes torch from, so that a machine gets the right build by itself.

PyPI's Linux wheel of torch is the CUDA build (several GB of NVIDIA libraries); PyTorch's own CPU index has the
CPU build (under 1 GB). So: a machine with an NVIDIA GPU takes PyPI's (pip's configured index); a Linux machine
without one takes the CPU index, unless pip's own configuration already offers a CPU build of the version asked
for (a local wheel house or a mirror, as on CI's machines, which reach no other index); macOS and Windows take
PyPI's, whose wheels there are CPU builds. `make install TORCH_INDEX=...` overrides the choice.

Run by the Makefile before blocklab is installed, so the standard library only:
    python src/blocklab/tools/torch_index.py 'torch==2.13.0' [--index-url URL]
prints the index to pass to pip (an empty line: pip's configured one) and, on stderr, why.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")  # one folder per GPU the NVIDIA driver sees


def choose_index(system: str, has_nvidia_gpu: bool, configured_build: str | None) -> tuple[str, str]:
    """(the index to take torch from, "" for pip's configured one; why). `configured_build`: the version pip's
    own configuration would install (e.g. "2.13.0+cpu"; None: none found)."""
    if has_nvidia_gpu:
        return "", "an NVIDIA GPU is present: PyPI's CUDA build"
    if system != "Linux":
        return "", f"{system}: PyPI's build, which is the CPU one there"
    if configured_build is not None and configured_build.endswith("+cpu"):
        return "", f"no NVIDIA GPU, and pip's own configuration offers the CPU build ({configured_build})"
    return CPU_INDEX, "no NVIDIA GPU: the CPU build, from PyTorch's CPU index (PyPI's is the CUDA build, several GB)"


def has_nvidia_gpu(gpus: Path = NVIDIA_GPUS) -> bool:
    """Whether the NVIDIA driver sees a GPU (its /proc entries, else `nvidia-smi -L`)."""
    if gpus.is_dir() and any(gpus.iterdir()):
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listed.returncode == 0 and "GPU" in listed.stdout


def version_in_report(report: dict) -> str | None:
    """The version of torch in a `pip install --dry-run --report` report."""
    for item in report.get("install", []):
        if item.get("metadata", {}).get("name", "").lower() == "torch":
            return item["metadata"]["version"]
    return None


def configured_build(requirement: str, index_url: str | None = None) -> str | None:
    """The torch version pip's own configuration would install for `requirement`, resolved without installing
    (`pip install --dry-run --report`); None when pip finds none."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "--quiet",
                   "--report", str(report), *(["--index-url", index_url] if index_url else []), requirement]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PIP_NO_INPUT": "1"})
        if done.returncode or not report.exists():
            return None
        return version_in_report(json.loads(report.read_text()))


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python src/blocklab/tools/torch_index.py 'torch==X.Y.Z' [--index-url URL]", file=sys.stderr)
        return 2
    requirement, index_url = argv[0], argv[2] if argv[1:2] == ["--index-url"] and len(argv) > 2 else None
    gpu = has_nvidia_gpu()
    found = None if gpu or platform.system() != "Linux" else configured_build(requirement, index_url)
    index, why = choose_index(platform.system(), gpu, found)
    print(f"torch: {why}" + (f" ({index})" if index else ""), file=sys.stderr)
    print(index)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

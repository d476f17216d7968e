"""The CPU's numeric path, pinned: which kernels round a run's sums, whatever the machine.

Three libraries under torch choose their kernels from the CPU they find, and each choice rounds differently:
ATen's own kernels (LayerNorm, softmax, the element-wise ops) by its CPU capability, MKL's matrix products by
its code branch, oneDNN's (GELU) by its instruction set. Left to choose, an AVX-512 machine and an AVX2 one
train different weights from the same seed. Each library has a switch that fixes its choice; `PINS` sets all
three in this process's environment before torch loads them: `pin()` runs when the `blocklab` package is
imported, so any process that imports blocklab before torch (a stage, the local pool's workers, a Dask worker
running blocklab's task, a benchmark) computes on the pinned path, and so does every process it starts.

A process that loaded torch before blocklab (a Dask worker that imported torch for another task, a notebook)
may already have fixed its kernels: `check_pinned()` asks the libraries what they actually use and refuses to
train on anything else, naming what differs, rather than store other bits under the same key.
docs/reproducibility.md has the measurements behind every choice here.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
from functools import cache

# What every CPU run computes with: the instruction set every x86-64 CPU since 2013 has. ATen's and oneDNN's AVX2
# kernels are the same code on every such CPU. MKL's AVX2 branch exists on Intel CPUs only: on another vendor's
# MKL ignores it and takes the branch it has for that vendor (`CNR:AUTO`), whose matrix products round
# differently from Intel's. So the x86-64 machines make two numeric families, Intel's and the others'
# (`vendor_family`), each the same bits across its CPUs' generations (MKL documents it for Intel's; measured for
# AMD's: an EPYC Genoa and an emulated EPYC Rome). MKL's COMPATIBLE branch (SSE2) is the same code on both but
# makes a run 2.1x slower (docs/reproducibility.md has the measurements).
PINS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
# Which pins `pin()` applies: all unless this names some (comma-separated) or `none`. For measuring what each
# pin costs and changes (`blocklab bench --numerics`), never for a run that is kept: `check_pinned` refuses a
# run whose process did not apply them all.
PINS_ENV = "BLOCKLAB_NUMERIC_PINS"

# What each library reports on the pinned path, as `numeric_path()` reads it (MKL: its Intel branch on an Intel
# CPU, its own choice elsewhere).
PINNED_PATH = {"aten": ("AVX2",), "mkl": ("CNR:AVX2", "CNR:AUTO"), "onednn": ("Intel AVX2",)}
X86_64 = ("x86_64", "AMD64")
MKL_FAMILIES = {"CNR:AVX2": "x86-64 AVX2, Intel", "CNR:AUTO": "x86-64 AVX2, not Intel"}


class NumericPathError(RuntimeError):
    """This process computes on another numeric path than the pinned one."""


def applied_pins(environ=os.environ) -> dict[str, str]:
    """The pins `pin()` applies in a process with this environment."""
    chosen = environ.get(PINS_ENV)
    if chosen is None:
        return dict(PINS)
    names = [n.strip() for n in chosen.split(",") if n.strip() and n.strip() != "none"]
    unknown = sorted(set(names) - set(PINS))
    if unknown:
        raise ValueError(f"{PINS_ENV}={chosen!r}: {', '.join(unknown)} is not a pin ({', '.join(PINS)}, or none)")
    return {name: PINS[name] for name in names}


def pin(environ=os.environ) -> None:
    """Set the pins in `environ` (this process's environment, inherited by every process it starts). Has no
    effect on a library torch has already loaded and used: `check_pinned` finds that out."""
    if "torch" in sys.modules:
        return  # too late to matter here; check_pinned says so where a run would train
    environ.update(applied_pins(environ))


def _captured_stdout(fn) -> str:
    """What `fn` writes to file descriptor 1 (the libraries' verbose lines are C-level output)."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as out:
        os.dup2(out.fileno(), 1)
        try:
            fn()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        out.seek(0)
        return out.read().decode(errors="replace")


def _field(lines: str, prefix: str, marker: str) -> str:
    """The value after `marker` on the first line starting with `prefix` ('' if none)."""
    for line in lines.splitlines():
        if line.startswith(prefix) and marker in line:
            return line.split(marker, 1)[1].split()[0].rstrip(",") if marker != "isa:" else line.split(marker, 1)[1]
    return ""


@cache
def numeric_path() -> dict:
    """What this process's torch actually computes with on the CPU: ATen's capability, MKL's code branch
    (from its verbose line: `CNR:OFF` when none is pinned, `CNR:AUTO` when MKL ignored the pin) and the CPUs
    MKL dispatches for, oneDNN's instruction set; with the CPU, the versions, and the family these make."""
    import torch

    path = {"cpu": cpu_name(), "machine": platform.machine(), "torch": torch.__version__,
            "aten": torch.backends.cpu.get_cpu_capability(), "mkl": "", "mkl_dispatch": "", "mkl_version": "",
            "onednn": "", "pins": {name: os.environ.get(name, "") for name in PINS}}
    if torch.backends.mkl.is_available():
        def product():
            with torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
                a = torch.ones(4, 4)
                a @ a
        lines = _captured_stdout(product)
        path["mkl"] = _field(lines, "MKL_VERBOSE SGEMM", " CNR:") and "CNR:" + _field(lines, "MKL_VERBOSE SGEMM", " CNR:")
        header = next((line for line in lines.splitlines() if line.startswith("MKL_VERBOSE oneMKL")), "")
        if " for Intel(R) 64 architecture " in header:
            path["mkl_version"] = header.split("MKL_VERBOSE ", 1)[1].split(" Product build")[0]
            path["mkl_dispatch"] = header.split(" for Intel(R) 64 architecture ", 1)[1].split(", Lnx")[0]
    if torch.backends.mkldnn.is_available():
        def gelu():
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                torch.nn.functional.gelu(torch.ones(4, 4))
        path["onednn"] = _field(_captured_stdout(gelu), "onednn_verbose", "isa:").strip()
    path["family"] = family(path)
    return path


def family(path: dict) -> str:
    """The numeric family `path` belongs to: the runs of one family are the same bits."""
    if path["machine"] not in X86_64:
        return f"{path['machine']}, not pinned (the pins are x86-64's)"
    differs = differences(path)
    return MKL_FAMILIES[path["mkl"]] if not differs else "x86-64, not pinned: " + "; ".join(differs)


def vendor_family() -> str:
    """The family this machine's CPU computes in when pinned, read from the CPU alone (no torch): what a run
    key records, and what a worker that trains the run must compute in."""
    machine = platform.machine()
    if machine not in X86_64:
        return f"{machine}, not pinned (the pins are x86-64's)"
    vendor, flags = "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id") and not vendor:
                    vendor = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        return "x86-64, CPU unknown"
    if "avx2" not in flags or "fma" not in flags:
        return "x86-64 without AVX2, not pinned"
    return MKL_FAMILIES["CNR:AVX2" if vendor == "GenuineIntel" else "CNR:AUTO"]


def differences(path: dict) -> list[str]:
    """How `path` differs from the pinned path, one phrase per library."""
    names = {"aten": "ATen's CPU capability", "mkl": "MKL's code branch", "onednn": "oneDNN's instruction set"}
    return [f"{names[lib]} is {path[lib] or 'unknown'}, not {' or '.join(want)}" for lib, want in PINNED_PATH.items()
            if path[lib] not in want]


def check_pinned(expected_family: str | None = None) -> None:
    """Refuse to train on the CPU unless this process computes on the pinned path (and, given one, in the
    family the run was keyed for: a worker of another vendor than the machine that keyed the run)."""
    path = numeric_path()
    differs = differences(path) if path["machine"] in X86_64 else []  # elsewhere nothing is pinned
    if differs and "without AVX2" in vendor_family():
        raise NumericPathError(f"this CPU ({path['cpu']}) has no AVX2, the instruction set blocklab pins every "
                               f"x86-64 run to: it cannot compute blocklab's bits (train on a GPU, or another machine)")
    if differs:
        raise NumericPathError(
            f"this process does not compute on blocklab's pinned numeric path ({'; '.join(differs)}), so its "
            f"runs would not have the bits their run keys promise. torch was loaded before blocklab set "
            f"{', '.join(f'{k}={v}' for k, v in PINS.items())}: import blocklab before torch (a Dask worker: "
            f"start it with those variables set, or with `--preload blocklab`), and unset {PINS_ENV}.")
    if expected_family is not None and path["family"] != expected_family:
        raise NumericPathError(
            f"this worker ({path['cpu']}) computes in the numeric family '{path['family']}', the run was keyed for "
            f"'{expected_family}': its bits would differ from what its key promises. Train it on a machine of that "
            f"family (MKL rounds differently on Intel and other CPUs: docs/reproducibility.md).")


def cpu_name() -> str:
    """The CPU's model name (lscpu's), '' where it cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()

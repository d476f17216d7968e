"""The CPU's numeric path, pinned: which kernels round a run's sums, whatever the machine.

Three libraries under torch choose their kernels from the CPU they find, and each choice rounds differently:
ATen's own kernels (LayerNorm, softmax, the element-wise ops) by its CPU capability, MKL's matrix products by
its code branch, oneDNN's (GELU) by its instruction set. Left to choose, an AVX-512 machine and an AVX2 one
train different weights from the same seed. Each library has a switch that fixes its choice; `PINS` sets all
three in this process's environment before torch loads them: `pin()` runs when the `blocklab` package is
imported, so any process that imports blocklab before torch (a stage, the local pool's workers, a Dask worker
running blocklab's task, a benchmark) computes on the pinned path, and so does every process it starts. MKL
honours its switch on Intel CPUs only; `pin()` also loads a one-function shim (mkl_intel_branch.c) that makes
it honour it on every x86-64 CPU, so that an AMD EPYC computes the bits an Intel Xeon does.

A process that loaded torch before blocklab (a Dask worker that imported torch for another task, a notebook)
may already have fixed its kernels: `check_pinned()` asks the libraries what they actually use and refuses to
train on anything else, naming what differs, rather than store other bits under the same key.
docs/reproducibility.md has the measurements behind every choice here.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import sys
import tempfile
from functools import cache
from pathlib import Path

# What every CPU run computes with: the instruction set every x86-64 CPU since 2013 has. ATen's and oneDNN's AVX2
# kernels are the same code on every such CPU; so are MKL's, but MKL takes its AVX2 branch only where it finds an
# Intel CPU: on another vendor's it ignores MKL_CBWR and takes a branch of its own (`CNR:AUTO`), whose matrix
# products round differently. The shim `pin()` loads makes MKL find an Intel CPU on every x86-64 machine, so all
# of them make one numeric family. Where the shim is not built (no C compiler at install) a non-Intel CPU
# computes in a family of its own, which a run key records (`vendor_family`). MKL's COMPATIBLE branch (SSE2)
# would be the same everywhere without a shim but makes a run 2.1x slower (docs/reproducibility.md).
PINS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
# Which pins `pin()` applies: all unless this names some (comma-separated) or `none`. For measuring what each
# pin costs and changes (`blocklab bench --numerics`), never for a run that is kept: `check_pinned` refuses a
# run whose process did not apply them all.
PINS_ENV = "BLOCKLAB_NUMERIC_PINS"

# What each library reports on the pinned path, as `numeric_path()` reads it (MKL: its Intel branch on an Intel
# CPU, its own choice elsewhere).
PINNED_PATH = {"aten": ("AVX2",), "mkl": ("CNR:AVX2", "CNR:AUTO"), "onednn": ("Intel AVX2",)}
X86_64 = ("x86_64", "AMD64")
FAMILY = "x86-64 AVX2"
MKL_FAMILIES = {"CNR:AVX2": FAMILY, "CNR:AUTO": FAMILY + ", MKL's own branch (non-Intel CPU without blocklab's MKL shim)"}
# The shim, built next to this file by `pip install` (setup.py); loaded by `pin()` in this process.
SHIM_GLOB = "_mkl_intel_branch*.so"
_shim_loaded = False


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
    pins = applied_pins(environ)
    environ.update(pins)
    if "MKL_CBWR" in pins:
        load_shim()


def load_shim() -> bool:
    """Load the MKL shim into this process, ahead of torch (whose MKL then asks it, not the CPU, whether the
    CPU is Intel's). False where there is none: not x86-64 Linux, or no C compiler when blocklab was installed."""
    global _shim_loaded
    if not _shim_loaded and platform.machine() in X86_64:
        built = sorted(Path(__file__).parent.glob(SHIM_GLOB))
        if built:
            ctypes.CDLL(str(built[0]), mode=ctypes.RTLD_GLOBAL)
            _shim_loaded = True
    return _shim_loaded


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


def _field(lines: str, pattern: str) -> str:
    """The first match of `pattern`'s group in `lines` ('' if none)."""
    found = re.search(pattern, lines, re.MULTILINE)
    return found.group(1).strip() if found else ""


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
        path["mkl"] = _field(lines, r"^MKL_VERBOSE SGEMM.* (CNR:[^\s,]+)")
        path["mkl_version"] = _field(lines, r"^MKL_VERBOSE (oneMKL.*?) Product build")
        path["mkl_dispatch"] = _field(lines, r"^MKL_VERBOSE oneMKL.* for Intel\(R\) 64 architecture (.*?), Lnx")
    if torch.backends.mkldnn.is_available():
        def gelu():
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                torch.nn.functional.gelu(torch.ones(4, 4))
        path["onednn"] = _field(_captured_stdout(gelu), r"^onednn_verbose.*isa:(.*)$")
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
    return MKL_FAMILIES["CNR:AVX2" if vendor == "GenuineIntel" or _shim_loaded else "CNR:AUTO"]


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
            f"family (without blocklab's MKL shim, MKL rounds differently on non-Intel CPUs: build it with a C "
            f"compiler installed, `make install`; docs/reproducibility.md).")


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

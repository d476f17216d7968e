"""The pinned numeric path (blocklab.run.numerics), the fingerprint and the audit: every process that trains
computes on the pinned path or refuses to, and a machine of the committed results' family computes their bits."""

from __future__ import annotations

import json
import shutil
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from blocklab.run.job import Job, run_job
from blocklab.run.numerics import FAMILY, MKL_FAMILIES, PINS, PINS_ENV, SHIM_GLOB, NumericPathError, vendor_family
from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.tools import fingerprint
from blocklab.tools.fingerprint import FINGERPRINT_FILE, first_difference, read_committed

from conftest import ROOT, SHARED_CORPUS, copy_project
from test_cluster import dask_cluster, small_corpus

PINNABLE = vendor_family().startswith("x86-64 AVX2")
needs_pins = pytest.mark.skipif(not PINNABLE, reason=f"this machine's numeric family is '{vendor_family()}': the pins "
                                                     f"are x86-64 AVX2's")
COMMITTED_FAMILY = read_committed(ROOT / FINGERPRINT_FILE)["family"]
same_family = pytest.mark.skipif(
    vendor_family() != COMMITTED_FAMILY,
    reason=f"this machine computes in the family '{vendor_family()}', the committed results were made in "
           f"'{COMMITTED_FAMILY}': their bits are not expected here (docs/reproducibility.md)")
BLOCKLAB = str(Path(sys.executable).with_name("blocklab"))
UNPINNED = {name: "" for name in PINS}  # an environment in which nothing is pinned (torch loaded before blocklab)
TINY = Job("t/post/seed0", ModelConfig(d_model=16, n_heads=2, n_layers=1, context=8, placement="post"),
           TrainConfig(steps=3, eval_interval=3, eval_windows=8, device="cpu"), 0)


def python(code: str, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in PINS and k != PINS_ENV}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**environ, **env},
                          cwd=ROOT, timeout=300)


@needs_pins
def test_a_process_that_imports_blocklab_computes_on_the_pinned_path_whatever_its_environment():
    done = python("import json, blocklab\nfrom blocklab.run.numerics import numeric_path\n"
                  "print(json.dumps(numeric_path()))")
    assert done.returncode == 0, done.stderr
    path = json.loads(done.stdout)
    assert path["aten"] == "AVX2" and path["onednn"] == "Intel AVX2", path
    assert path["mkl"] == ("CNR:AVX2" if vendor_family() == FAMILY else "CNR:AUTO"), path
    assert path["family"] == vendor_family() and path["pins"] == PINS


SHIM_BUILT = any((ROOT / "src/blocklab/run").glob(SHIM_GLOB))


@needs_pins
@pytest.mark.skipif(not SHIM_BUILT, reason="the MKL shim was not built (no C compiler when blocklab was installed)")
def test_with_the_shim_mkl_takes_its_avx2_branch_on_any_x86_64_cpu_and_without_it_only_on_intels():
    script = ("import json, os, ctypes, sys\n"
              "if sys.argv[1] == 'shim':\n"
              "    import blocklab\n"
              "else:\n"
              "    os.environ.update(MKL_CBWR='AVX2', ATEN_CPU_CAPABILITY='avx2', ONEDNN_MAX_CPU_ISA='AVX2')\n"
              "import torch\n"
              "from blocklab.run.numerics import numeric_path\n"
              "print(numeric_path()['mkl'])\n")
    runs = {how: subprocess.run([sys.executable, "-c", script, how], capture_output=True, text=True, cwd=ROOT,
                                timeout=300, env={k: v for k, v in os.environ.items() if k not in PINS})
            for how in ("shim", "no shim")}
    assert all(done.returncode == 0 for done in runs.values()), [done.stderr for done in runs.values()]
    assert runs["shim"].stdout.split() == ["CNR:AVX2"]
    intel = open("/proc/cpuinfo").read().count("GenuineIntel") > 0
    assert runs["no shim"].stdout.split() == ["CNR:AVX2" if intel else "CNR:AUTO"]


@needs_pins
def test_a_process_that_loaded_torch_before_blocklab_refuses_to_train_naming_what_differs():
    script = ("import torch\n(torch.ones(4, 4) @ torch.ones(4, 4)).sum()\n"
              "import blocklab\nfrom blocklab.run.numerics import check_pinned\ncheck_pinned()\n")
    refused = python(script)
    assert refused.returncode == 1
    assert "NumericPathError: this process does not compute on blocklab's pinned numeric path" in refused.stderr
    assert "MKL's code branch is CNR:OFF" in refused.stderr and "import blocklab before torch" in refused.stderr


def test_a_worker_of_another_family_than_the_run_was_keyed_for_refuses_it():
    other = next(name for name in MKL_FAMILIES.values() if name != vendor_family())
    job = Job(TINY.key, TINY.model, TINY.train, TINY.seed, family=other)
    with pytest.raises(NumericPathError, match=re.escape(f"keyed for '{other}'")):
        run_job(job, small_corpus())
    assert run_job(Job(TINY.key, TINY.model, TINY.train, TINY.seed, family=vendor_family()), small_corpus()).weights


@needs_pins
def test_a_dask_worker_that_loaded_torch_first_refuses_the_run_and_a_pinned_one_trains_it():
    from blocklab.schedule.cluster import train_on_cluster

    job = Job(TINY.key, TINY.model, TINY.train, TINY.seed, family=vendor_family())
    with dask_cluster(kinds=[(["--preload", "torch", "--no-nanny"], UNPINNED)]) as (address, _):
        with pytest.raises(Exception, match="MKL's code branch is CNR:OFF"):
            train_on_cluster([job], small_corpus(), address, echo=lambda _: None)
    with dask_cluster(workers=1) as (address, _):
        remote = train_on_cluster([job], small_corpus(), address, echo=lambda _: None)
    assert remote[job.key].metrics == run_job(job, small_corpus()).metrics


@pytest.fixture(scope="module")
def here() -> dict:
    return fingerprint.recorded(fingerprint.digests())


@same_family
def test_this_machine_computes_the_committed_fingerprint(here):
    assert first_difference(here, read_committed(ROOT / FINGERPRINT_FILE)) is None


def test_the_documented_fingerprints_of_the_pinned_family_are_the_committed_ones():
    """docs/reproducibility.md's table of fingerprints measured on other CPUs: every row on MKL's AVX2 branch (the
    family's) shows reports/fingerprint.json's digests, run by run (a first 8 hex digits each)."""
    committed = [digest[:8] for digest in read_committed(ROOT / FINGERPRINT_FILE)["runs"].values()]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in (ROOT / "docs/reproducibility.md").read_text().splitlines()
            if line.startswith("| ") and "| `CNR:AVX2` |" in line and "table A" not in line]
    family = [row for row in rows if len(row) >= 7]
    assert len(family) >= 2, rows
    for row in family:
        assert all(a == b for a, b in zip(row[3:], committed)), (row, committed)


def test_the_fingerprint_names_the_first_run_whose_weights_differ(here):
    committed = json.loads(json.dumps(here))
    name = list(committed["runs"])[2]
    committed["runs"][name] = "0" * 64
    assert first_difference(here, committed) == f"run '{name}': weights {here['runs'][name][:16]} here, " \
                                                f"0000000000000000 committed"
    assert first_difference(here, {**here, "torch": "2.0.0"}).startswith("torch: this machine has")


@same_family
def test_blocklab_fingerprint_exits_0_on_the_committed_bits_and_1_naming_a_difference(tmp_path):
    done = subprocess.run([BLOCKLAB, "fingerprint"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"numeric family {vendor_family()}" in done.stdout and "the same bits as" in done.stdout
    changed = read_committed(ROOT / FINGERPRINT_FILE)
    changed["runs"][next(iter(changed["runs"]))] = "f" * 64
    (tmp_path / "f.json").write_text(json.dumps(changed))
    differs = subprocess.run([BLOCKLAB, "fingerprint", "--committed",
                              str(tmp_path / "f.json")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert differs.returncode == 1 and "differs from" in differs.stdout and "ffffffffffffffff committed" in differs.stdout


@pytest.mark.slow
@same_family
def test_blocklab_audit_retrains_committed_runs_and_names_each_that_differs_and_how(tmp_path):
    project = copy_project(tmp_path / "project", SHARED_CORPUS)
    runs = ["depth/l1/seed0", "proxies/standard/d32_lr0.01/seed1"]
    (project.root / "reports").mkdir(exist_ok=True)
    (project.root / "reports/fingerprint.json").write_bytes((ROOT / "reports/fingerprint.json").read_bytes())
    for run in runs:
        shutil.copytree(ROOT / "reports/runs" / run, project.root / "reports/runs" / run)
    project.run("dvc", "repro", "encode")
    args = ["blocklab", "audit", *(a for run in runs for a in ("--run", run))]
    same = project.run(*args, check=False)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "2 of 2 runs reproduce the committed ones bit for bit" in same.stdout
    record = project.root / "reports/runs" / runs[0] / "metrics.json"
    metrics = json.loads(record.read_text())
    metrics["val_loss"] += 1e-9
    record.write_text(json.dumps(metrics))
    (project.root / "reports/runs" / runs[1] / "weights.sha256").write_text("0" * 64 + "\n")
    differs = project.run(*args, check=False)
    assert differs.returncode == 1
    assert f"DIFFERS  {runs[0]}: val_loss" in differs.stdout and "committed" in differs.stdout
    assert f"DIFFERS  {runs[1]}: weights.sha256 differs" in differs.stdout and "0 of 2 runs reproduce" in differs.stdout


@pytest.mark.slow
@needs_pins
def test_bench_numerics_trains_each_path_in_a_process_of_its_own_and_says_what_each_computed_with(tmp_path):
    from blocklab.tools.bench.numerics import PATHS, measure

    project = copy_project(tmp_path / "project", SHARED_CORPUS)
    project.run("dvc", "repro", "encode")
    paths = {name: PATHS[name] for name in ("unpinned", "ATen avx2", "blocklab's pins")}
    cwd = os.getcwd()
    os.chdir(project.root)
    try:
        figures = measure("placement", "post", 0, 5, "data/encoded", "params.yaml", repeats=1, paths=paths)
    finally:
        os.chdir(cwd)
    rows = figures["paths"]
    assert rows["unpinned"]["mkl"] == "CNR:OFF" and rows["unpinned"]["train_ratio"] == 1.0
    assert rows["ATen avx2"]["aten"] == "AVX2" and rows["ATen avx2"]["mkl"] == "CNR:OFF"
    pinned = rows["blocklab's pins"]
    assert (pinned["aten"], pinned["onednn"]) == ("AVX2", "Intel AVX2") and pinned["mkl"] in ("CNR:AVX2", "CNR:AUTO")
    if rows["unpinned"]["aten"] != "AVX2":  # an AVX-512 machine: the pins change its bits
        assert rows["unpinned"]["digest"] != pinned["digest"]

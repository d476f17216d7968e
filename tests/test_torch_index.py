"""`make install` takes the right torch by itself (blocklab.tools.torch_index): decided, not downloaded."""

import subprocess
import sys

import pytest

from blocklab.tools.torch_index import CPU_INDEX, choose_index, has_nvidia_gpu, version_in_report

from conftest import ROOT


@pytest.mark.parametrize("system, gpu, configured, index", [
    ("Linux", True, None, ""),  # PyPI's CUDA build
    ("Linux", True, "2.13.0+cpu", ""),  # a GPU wins over a local CPU wheel
    ("Linux", False, "2.13.0", CPU_INDEX),  # a laptop: PyPI would give the CUDA build
    ("Linux", False, None, CPU_INDEX),
    ("Linux", False, "2.13.0+cpu", ""),  # CI's machines: their configured wheel house has the CPU build
    ("Darwin", False, "2.13.0", ""),  # PyPI's macOS wheels are CPU builds
    ("Windows", False, "2.13.0", ""),
])
def test_the_index_follows_the_gpu_and_what_pip_already_offers(system, gpu, configured, index):
    chosen, why = choose_index(system, gpu, configured)
    assert chosen == index and why


def test_a_gpu_is_seen_in_the_nvidia_drivers_proc_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no nvidia-smi
    gpus = tmp_path / "gpus"
    gpus.mkdir()
    assert not has_nvidia_gpu(gpus)
    (gpus / "0000:01:00.0").mkdir()
    assert has_nvidia_gpu(gpus)


def test_pips_report_names_the_version_it_would_install():
    report = {"install": [{"metadata": {"name": "torch", "version": "2.13.0+cpu"},
                           "download_info": {"url": "file:///opt/wheels/torch-2.13.0%2Bcpu-cp311-cp311.whl"}}]}
    assert version_in_report(report) == "2.13.0+cpu"
    assert version_in_report({"install": []}) is None


def test_the_makefile_asks_the_script_unless_torch_index_is_given():
    makefile = (ROOT / "Makefile").read_text()
    assert "TORCH_INDEX ?= auto" in makefile and "src/blocklab/tools/torch_index.py" in makefile
    dry = subprocess.run(["make", "-n", "-B", "install", "TORCH_INDEX=https://example.invalid/whl"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert 'index="https://example.invalid/whl"' in dry


def test_the_script_prints_one_line_and_says_why():
    done = subprocess.run([sys.executable, str(ROOT / "src/blocklab/tools/torch_index.py")], capture_output=True, text=True)
    assert done.returncode == 2 and "usage:" in done.stderr

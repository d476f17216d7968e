"""Builds blocklab's one C file (everything else is in pyproject.toml): the shim that lets MKL take its
reproducible AVX2 branch on every x86-64 CPU (src/blocklab/run/mkl_intel_branch.c). Optional: without a C
compiler the install goes on, and a non-Intel CPU computes in a numeric family of its own (blocklab fingerprint)."""

import platform
import sys

from setuptools import Extension, setup

X86_64_LINUX = sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")
shim = Extension("blocklab.run._mkl_intel_branch", sources=["src/blocklab/run/mkl_intel_branch.c"], optional=True)
setup(ext_modules=[shim] if X86_64_LINUX else [])

# Two commands do all the set-up on a fresh machine:  make repro  and  make test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Put the venv first on PATH so DVC stages' `python` is the project's.
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: repro test test-fast install clean

$(BIN)/blocklab: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU build of torch first: an unpinned torch would pull several GB of CUDA wheels.
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

install: $(BIN)/blocklab

repro: install    ## run the whole default pipeline
	dvc repro

test: install     ## the full test suite, slow end-to-end reproductions included
	python -m pytest

test-fast: install  ## the suite without the slow reproductions
	python -m pytest -m "not slow"

clean:            ## remove pipeline outputs (keeps the venv, and the committed reports of the default run)
	rm -rf data reports/timings.json dvc_plots

# Two commands do all the set-up on a fresh machine:  make repro  and  make test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch comes first, on its own, and by itself the right build: on a machine with an NVIDIA GPU PyPI's (the CUDA
# build); on Linux without one PyTorch's CPU index, unless pip's own configuration already offers the CPU build
# (src/blocklab/tools/torch_index.py). Override: TORCH_INDEX=<index URL>, or TORCH_INDEX= for pip's configured index.
TORCH       ?= torch==2.13.0
TORCH_INDEX ?= auto
# Where everything else comes from (default: pip's own configuration, normally PyPI).
INDEX_URL   ?=
# The versions that produced the committed dvc.lock and reports/ (regenerate: see its first lines).
LOCK        ?= requirements.lock
# Put the venv first on PATH so DVC stages' `python` is the project's.
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: demo repro repro-extended test test-fast install clean

$(BIN)/blocklab: pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	index="$(TORCH_INDEX)"; \
	if [ "$$index" = auto ]; then index=$$($(BIN)/python src/blocklab/tools/torch_index.py "$(TORCH)" $(if $(INDEX_URL),--index-url $(INDEX_URL))); fi; \
	$(BIN)/python -m pip install --quiet $${index:+--index-url $$index} "$(TORCH)"
	$(BIN)/python -m pip install --quiet $(if $(INDEX_URL),--index-url $(INDEX_URL)) -c $(LOCK) -e ".[test,team,cluster]"
	touch $@

install: $(BIN)/blocklab

demo: install     ## the way in: the lesson's table A trained through the pipeline, checked, drawn, sampled (~2 min)
	blocklab demo

# The default plan: its runs trained at once (prefetch), copied and recorded by their stages, then the rest of the
# pipeline; the extended plan's stages (params.yaml's `plan: extended`), whose records are committed, are read, not
# retrained (--allow-missing skips a stage whose only change is its missing runs).
repro: install    ## run the whole default plan: every run it needs trained at once, then dvc repro copies them
	blocklab prefetch
	dvc repro --single-item $$(blocklab params --stages default)
	dvc repro --allow-missing

repro-extended: install  ## the default plan and the extended one (what does not fit make repro's budget: docs/performance.md)
	blocklab prefetch --extended
	dvc repro

# One pytest worker per logical CPU (pytest-xdist): most of the suite's time is single-threaded DVC, MLflow and server
# start-up, and the end-to-end tests share one reproduced small project made once (tests/conftest.py).
PYTEST_WORKERS ?= logical

test: install     ## the full test suite, slow end-to-end reproductions included
	python -m pytest -n $(PYTEST_WORKERS) --dist worksteal

test-fast: install  ## the suite without the slow reproductions
	python -m pytest -n $(PYTEST_WORKERS) --dist worksteal -m "not slow"

clean:            ## remove pipeline outputs (keeps the venv, and the committed reports of the default run)
	rm -rf data reports/timings.json dvc_plots

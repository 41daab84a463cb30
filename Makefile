# Two commands set everything up on a fresh machine:
#   make demo   creates .venv, installs segrl with everything it needs, runs the main job
#   make test   the same install, then the whole test suite (slow tests included)

VENV      := .venv
PYTHON    := $(VENV)/bin/python
PIP       := $(PYTHON) -m pip --disable-pip-version-check
STAMP     := $(VENV)/.segrl-installed
# The CPU build of PyTorch is installed first; pyproject's range keeps pip from replacing it.
TORCH     ?= torch==2.13.0
# A CUDA build instead: make install TORCH_INDEX=https://download.pytorch.org/whl/cu128 (your CUDA's).
TORCH_INDEX ?=
# Runtime caches (trained Morfessor models) stay inside the checkout.
export SEGRL_CACHE_DIR ?= $(CURDIR)/.cache/segrl

.PHONY: install demo test test-fast lint format ui ui-check clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip "setuptools>=77" wheel
	$(PIP) install --quiet "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	@# youtokentome is source-only and needs Cython at build time: the optional yttm-bpe backend.
	$(PIP) install --quiet Cython
	$(PIP) install --quiet --no-build-isolation "youtokentome>=1.0.6,<1.1" \
		|| echo "warning: youtokentome did not build; the yttm-bpe segmenter will be unavailable"
	$(PIP) install --quiet -e ".[dev,wordfreq,cluster,server]"
	@touch $(STAMP)

# The demo: the classic segmenters, then an agent rewarded by a co-trained segmental LM (a fixed
# 1,000 updates on one thread, so that its result does not depend on the machine's load), then
# every segmenter in one table, and the time it all took.
demo: $(STAMP)
	@started=$$(date +%s); \
	$(VENV)/bin/segrl baseline --method all && \
	$(VENV)/bin/segrl train --evaluator lm --reward per-action --steps 1000 --threads 1 && \
	$(VENV)/bin/segrl compare --latest && \
	echo "make demo took $$(( $$(date +%s) - started )) seconds"

test: $(STAMP)
	$(PYTHON) -m pytest

test-fast: $(STAMP)
	$(PYTHON) -m pytest -m "not slow"

# Screenshots of the MLflow UI in headless Chromium (apt-get install chromium): the runs table,
# a comparison of three runs, a run's page and its picture, the logged models; into ui-check/. Of
# your store where MLFLOW_TRACKING_URI is set, else of a sample store (runs on two corpora, an
# agent run).
ui-check: $(STAMP)
	$(PYTHON) tools/ui_check.py --out ui-check

# ruff, and the import contracts that keep the layers (pyproject's [tool.importlinter];
# docs/architecture.md)
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache --no-logo

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

ui: $(STAMP)
	$(VENV)/bin/segrl ui

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache

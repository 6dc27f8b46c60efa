# The README's commands. Each target creates/refreshes .venv and installs the project first.
# EXTRAS=dev,ray (what CI uses) adds Ray for `--executor ray` and its tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
ARGS   ?=
EXTRAS ?= dev
STAMP  := $(VENV)/.installed-$(EXTRAS)

.PHONY: setup audit smoke test bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "privacy-audit needs Python >= 3.11 (set PYTHON=python3.11)")'
	$(PYTHON) -m venv $(VENV)
	@# torch 2.13.0 first: where a CPU build of it is cached locally pip takes that (fast, small);
	@# elsewhere pip takes the normal build for the platform (CUDA on Linux GPUs).
	$(BIN)/python -m pip install -q torch==2.13.0 || echo "torch==2.13.0 unavailable: the project's torch>= range decides"
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	@touch $(STAMP)

setup: $(STAMP)

audit: $(STAMP)  ## the main job on the default config: make audit ARGS="--epsilons 1,8,inf"
	$(BIN)/privacy-audit run $(ARGS)

smoke: $(STAMP)
	$(BIN)/privacy-audit run --preset smoke $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q $(ARGS)

bench: $(STAMP)
	$(BIN)/privacy-audit bench $(ARGS)

clean:
	rm -rf $(VENV) runs mlflow.db mlartifacts .pytest_cache

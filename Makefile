# The README's commands. Each target creates/refreshes .venv and installs the project first.
# EXTRAS defaults to dev,ray: the whole test suite's needs (Ray for `--executor ray` and its tests), so a
# developer's `make test` and CI's are the same suite. `make setup EXTRAS=` installs the package alone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
ARGS   ?=
EXTRAS ?= dev,ray
JOBS   ?= 2
STAMP  := $(VENV)/.installed-$(EXTRAS)
# What every `run` and most other commands import (the tests' preloaded CLI, tests/cli_server.py, preloads a subset of it).
WARM_IMPORTS := import torch, torch._dynamo, opacus, mlflow, sklearn.linear_model, sklearn.ensemble, scipy.stats, \
	pandas, matplotlib.pyplot, dp_accounting, audit.sweep.runner

.PHONY: setup audit smoke lint test test-fast bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "privacy-audit needs Python >= 3.11 (set PYTHON=python3.11)")'
	$(PYTHON) -m venv $(VENV)
	@# torch 2.13.0 pinned in the same install: where a CPU build of it is cached locally pip takes that (fast,
	@# small); elsewhere pip takes the normal build for the platform (CUDA on Linux GPUs); where 2.13.0 is not to
	@# be had at all, the project's torch>= range decides (the second command).
	@# --no-compile: pip byte-compiled every installed .py (24,400 files; torch, ray, transformers, pandas ship
	@# thousands each, most never imported): ~110 s of a fresh clone's setup CPU for files of which the whole suite
	@# imports about a third. Python compiles a module when it is first imported and keeps the .pyc.
	$(BIN)/python -m pip install -q --no-compile torch==2.13.0 -e '.[$(EXTRAS)]' \
		|| { echo "torch==2.13.0 unavailable: the project's torch>= range decides"; \
		     $(BIN)/python -m pip install -q --no-compile -e '.[$(EXTRAS)]'; }
	@# ...except where PYTHONDONTWRITEBYTECODE=1 (common in containers): there every process would compile again
	@# what it imports. So what every audit imports is compiled here, once, by importing it (~4,000 files): a run
	@# never compiles torch or MLflow, and the test suite's two workers do not both compile them at once.
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -c '$(WARM_IMPORTS)'
	@touch $(STAMP)

setup: $(STAMP)

# The anonymeter cross-check (tests/test_synthetic_risks.py) in a side venv: anonymeter pins numpy < 1.27
# but runs on the project's numpy 2, so its venv sees the project's packages (a .pth line) and gets
# anonymeter and its compiled helpers with --no-deps; the project's venv stays consistent (pip check).
ANON_VENV  := .venv-anonymeter
ANON_STAMP := $(ANON_VENV)/.installed
$(ANON_STAMP): $(STAMP)
	rm -rf $(ANON_VENV)
	$(BIN)/python -m venv --without-pip $(ANON_VENV)
	$(BIN)/python -c 'import site, sysconfig; print("import site; site.addsitedir(%r)" % sysconfig.get_paths()["purelib"])' \
		> "$$($(ANON_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/project-venv.pth"
	$(BIN)/python -m pip --python $(ANON_VENV)/bin/python install -q --no-deps --no-compile \
		anonymeter==1.1.0 numba llvmlite polars polars-runtime-32
	@touch $(ANON_STAMP)

audit: $(STAMP)  ## the main job on the default config: make audit ARGS="--epsilons 1,8,inf"
	$(BIN)/privacy-audit run $(ARGS)

smoke: $(STAMP)
	$(BIN)/privacy-audit run --preset smoke $(ARGS)

# The habits (pyproject.toml [tool.ruff], [tool.mypy]): lint, formatting and types of the library, first
# in both test targets so a style or type error fails in seconds rather than after the suite.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The whole suite on JOBS cores (pytest-xdist; loadfile keeps a file, and its module-scoped fixtures, on one
# worker; --no-loadscope-reorder keeps tests/conftest.py's order, the costliest files first, so the workers
# finish together). docs/test-suite.md: per-file times, markers, conventions.
# On a fresh clone the side venv's build (mostly downloading ~120 MB of wheels) and the first, uncached
# `make lint` (mypy without its cache: about a minute of CPU) each take a minute or so: they run side by
# side (-j2), and the suite starts only once both are done (a lint error still stops it first).
# Compiled bytecode is written (an environment with PYTHONDONTWRITEBYTECODE=1 would otherwise have every xdist
# worker recompile the project and pytest re-rewrite every test module on each run): collecting the suite took
# 23-24 s of CPU with the __pycache__ folders (git-ignored) against 32-34 s without (docs/test-suite.md, wave 7).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

test: $(STAMP)
	@$(MAKE) --no-print-directory -j2 $(ANON_STAMP) lint
	PRIVACY_AUDIT_REQUIRE_RAY=1 PRIVACY_AUDIT_ANONYMETER_PYTHON=$(CURDIR)/$(ANON_VENV)/bin/python \
		$(PYTEST) -q -n $(JOBS) --dist loadfile --no-loadscope-reorder $(ARGS)

# The fast loop (≤ 2 min on 2 idle cores): no end-to-end training, no browser, no wheel building.
test-fast: $(STAMP) lint
	$(PYTEST) -q -n $(JOBS) --dist loadfile --no-loadscope-reorder -m "not slow and not browser and not packaging" $(ARGS)

bench: $(STAMP)
	$(BIN)/privacy-audit bench $(ARGS)

# The GPU check, first thing on a machine with a GPU: the GPU training path, the text preset, bench on
# GPU and CPU, a one-run white-box audit; each timed under one budget (docs/benchmarks.md "On a GPU").
.PHONY: gpu-check
gpu-check: $(STAMP)
	PYTHON=$(CURDIR)/$(BIN)/python bash benchmarks/gpu_check.sh

clean:
	rm -rf $(VENV) $(ANON_VENV) runs mlflow.db mlartifacts .pytest_cache

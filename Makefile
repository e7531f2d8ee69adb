# gputop — make help lists the targets.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PEERS_VENV ?= .venv-peers

.PHONY: help install run demo test test-quick test-tools lint typecheck import-layers pytest docs-check docs reference dist snapshot-update screenshots bench bench-peers clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

# What running needs (make run, make demo): gputop and its dependencies, no dev tools.
$(BIN)/gputop: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	@touch $@

# What testing needs besides (make test and the other developer targets).
$(VENV)/.dev: $(BIN)/gputop pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev,export]'
	@touch $@

install: $(VENV)/.dev ## create .venv and install gputop with its dev tools

run: $(BIN)/gputop ## start gputop: real GPUs when the driver is there, else the demo (DEMO marker)
	$(BIN)/gputop

demo: $(BIN)/gputop ## start gputop on the simulated 4-GPU demo box
	$(BIN)/gputop --demo

lint: install ## ruff format --check and ruff check
	$(BIN)/ruff format --check gputop tests bench scripts
	$(BIN)/ruff check gputop tests bench scripts

typecheck: install ## mypy (strict) on gputop/
	$(BIN)/mypy gputop

test-tools: ## best effort: Debian's prometheus and chromium for the integration tests (root + apt only)
	@sh scripts/install-prometheus.sh
	@sh scripts/install-chromium.sh

pytest: install test-tools ## the test suite only
	$(BIN)/pytest

import-layers: install ## lint-imports: the layers and contracts in pyproject.toml
	$(BIN)/lint-imports --no-cache  # 0.3 s: no cache folder to keep out of git

docs-check: install ## the docs site builds with no warning (mkdocs --strict); the reference pages match the code
	$(BIN)/python scripts/gen_reference.py --check
	$(BIN)/mkdocs build --strict --quiet --site-dir $$(mktemp -d)

docs: install ## build the documentation site into site/ (open site/index.html)
	$(BIN)/mkdocs build --strict --site-dir site

reference: install ## regenerate docs/reference/ and man/gputop.1 from the code
	$(BIN)/python scripts/gen_reference.py

dist: install ## build the sdist and wheel into dist/ and check them with twine
	$(BIN)/python -m build --no-isolation --outdir dist
	$(BIN)/twine check --strict dist/*

test: lint typecheck import-layers docs-check pytest ## everything CI runs: lint, types, import layers, docs, tests

test-quick: install ## the quick loop: the tests not marked slow (tests/slow_tests.txt)
	$(BIN)/pytest -m "not slow"

snapshot-update: install ## re-record the SVG snapshots of the UI
	$(BIN)/pytest tests/ui --snapshot-update

screenshots: install ## regenerate screenshots/ from fixed frames (the same files every run)
	$(BIN)/python -m tests.ui.scenes screenshots
	$(BIN)/python -m tests.web.screenshot screenshots/web.png

bench: install ## measure snapshot, sampler, holder-scan and UI costs
	$(BIN)/python -m bench

$(PEERS_VENV)/bin/nvitop:
	$(PY) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install --quiet nvitop

bench-peers: install $(PEERS_VENV)/bin/nvitop ## dashboard CPU vs nvitop's on the dgx sim, +0/2,000/10,000 processes (nvitop in .venv-peers)
	GPUTOP_BENCH_NVITOP=$(PEERS_VENV)/bin/python $(BIN)/python -m bench peers

clean: ## remove the venv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site dist build

.PHONY: real-gpu-check
real-gpu-check: install ## on a box with an NVIDIA GPU: gputop vs nvidia-smi and real processes, one report (< 5 min)
	GPUTOP_PYTHON=$(BIN)/python sh scripts/real-gpu-check.sh

# Conversation Workbench: set-up, tests and running.
# `make run` and `make test` work from a fresh clone: they build .venv on first use.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Touched after a successful install; older than pyproject.toml means "install again".
STAMP := $(VENV)/.installed-stamp
# Touched after PyInstaller (the `package` extra) is installed too.
PACKAGE_STAMP := $(VENV)/.package-stamp
BUNDLE := dist/conversation-workbench
PYTEST_ARGS ?=
# Options for packaging/build.sh, e.g. PACKAGE_ARGS=--no-tarball.
PACKAGE_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help venv syslibs run test lint bench package screenshots clean

help:
	@echo "make run     start the workbench GUI"
	@echo "make test    ruff, import contracts, then the test suite (offscreen Qt)"
	@echo "make lint    ruff, import contracts and mypy"
	@echo "make bench   run every bench/bench_*.py script"
	@echo "make screenshots  write PNGs of the window's main states and each panel and"
	@echo "                  dialog at 1024x700 to docs/screenshots/"
	@echo "make package build the desktop bundle in $(BUNDLE)/ and self-test it"
	@echo "make venv    create .venv and install the project with its dev extra"
	@echo "make clean   remove .venv and caches"

venv: $(STAMP)

# pip is the target rather than python: a venv created without ensurepip has python but no pip.
$(BIN)/pip:
	@PYTHON=$(PYTHON) scripts/ensure-system-libs.sh venv
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "error: Python 3.11 or newer is needed ($(PYTHON) is older)" >&2; exit 1; }
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml setup.py | $(BIN)/pip
	$(BIN)/pip install --disable-pip-version-check -q -e '.[dev,team]'
	@touch $@

syslibs:
	@scripts/ensure-system-libs.sh test

run: venv
	@scripts/ensure-system-libs.sh run
	$(BIN)/workbench

test: venv syslibs
	$(BIN)/ruff check workbench tests bench
	$(BIN)/lint-imports
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check workbench tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy

bench: venv syslibs
	@shopt -s nullglob; scripts=(bench/bench_*.py); \
	if [ $${#scripts[@]} -eq 0 ]; then echo "no bench/bench_*.py scripts"; exit 0; fi; \
	for script in "$${scripts[@]}"; do \
		echo "== $$script"; \
		QT_QPA_PLATFORM=offscreen $(BIN)/python "$$script" || exit 1; \
	done

# Offscreen, over a temporary database: never the user's own sessions or settings.
screenshots: venv syslibs
	QT_QPA_PLATFORM=offscreen $(BIN)/python scripts/screenshots.py

$(PACKAGE_STAMP): $(STAMP)
	$(BIN)/pip install --disable-pip-version-check -q -e '.[dev,team,package]'
	@touch $@

# The one-folder Linux bundle (PyInstaller, packaging/), then its own --version and --selftest.
package: venv $(PACKAGE_STAMP)
	@scripts/ensure-system-libs.sh package
	PYTHON=$(BIN)/python bash packaging/build.sh $(PACKAGE_ARGS)
	$(BUNDLE)/workbench --version
	$(BUNDLE)/workbench --selftest

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache \
		.import_linter_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

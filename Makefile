# Both targets build .venv from nothing with python3 -m venv, then install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed-run

demo: $(VENV)/.installed-run
	$(BIN)/lantern demo

# lint (ruff), format check, the import layers (import-linter, pyproject.toml), then the suite
test: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks docs
	$(BIN)/ruff format --check src tests benchmarks docs
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/bench_archive.py
	$(BIN)/python benchmarks/bench_recover.py
	$(BIN)/python benchmarks/bench_cold_start.py
	$(BIN)/python benchmarks/bench_redact.py
	$(BIN)/python benchmarks/bench_hook.py
	$(BIN)/python benchmarks/bench_facts.py
	$(BIN)/python benchmarks/bench_reinforce.py
	$(BIN)/python benchmarks/bench_ingest.py
	$(BIN)/python benchmarks/bench_proxy.py

clean:
	rm -rf $(VENV)

# Both targets build .venv from nothing with python3 -m venv, then install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench clean browser

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

# the inspector's browser tests (tests/test_ui_browser.py) drive Debian's Chromium through chromium-driver, and a
# CJK font lets its pages show Chinese text: installed with apt when missing; where there is no apt-get those tests
# are skipped, saying why
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && fc-list :lang=zh 2>/dev/null | grep -q .; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q \
			chromium chromium-driver fonts-wqy-zenhei; \
	else echo "no apt-get: the browser tests (tests/test_ui_browser.py) will be skipped"; fi

# lint (ruff), format check, the import layers (import-linter, pyproject.toml), then the suite
test: $(VENV)/.installed-test browser
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
	$(BIN)/python benchmarks/bench_postgres.py

clean:
	rm -rf $(VENV)

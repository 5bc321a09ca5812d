PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup setup-test browser demo test lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

setup: $(BIN)/python
	$(BIN)/pip install --quiet -e .

setup-test: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'

# The Chromium the explorer's browser tests drive: already there, else Debian's chromium (apt,
# as root or with passwordless sudo), else Playwright's download. When none can be had it says
# what to install on one line and the tests still run, so lint, types and every other test report
# and `make test` fails on the browser tests' own message rather than stopping here.
browser: setup-test
	scripts/ensure-browser.sh $(BIN)/python || true

demo: setup
	$(BIN)/memoryquest generate --count 3 --output output/demo

test: setup-test browser
	$(BIN)/ruff check memoryquest tests flows benchmarks
	$(BIN)/ruff format --check memoryquest tests flows benchmarks
	$(BIN)/mypy
	$(BIN)/pytest -q

lint: setup-test
	$(BIN)/ruff check memoryquest tests flows benchmarks
	$(BIN)/ruff format --check memoryquest tests flows benchmarks
	$(BIN)/mypy

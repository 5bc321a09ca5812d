PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup setup-test demo test lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

setup: $(BIN)/python
	$(BIN)/pip install --quiet -e .

setup-test: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'

demo: setup
	$(BIN)/memoryquest generate --count 3 --output output/demo --allow-failed-audit

test: setup-test
	$(BIN)/ruff check memoryquest tests flows benchmarks
	$(BIN)/ruff format --check memoryquest tests flows benchmarks
	$(BIN)/mypy
	$(BIN)/pytest -q

lint: setup-test
	$(BIN)/ruff check memoryquest tests flows benchmarks
	$(BIN)/ruff format --check memoryquest tests flows benchmarks
	$(BIN)/mypy

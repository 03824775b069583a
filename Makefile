# The two commands of the README. Both build .venv from scratch on a fresh machine.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[dev,profile,ray]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/specplan demo --out out/demo

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -n 2

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/mypy simulator policies hwprofiles traces reports

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/sim_speed.py

clean:
	rm -rf $(VENV) out

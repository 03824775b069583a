# The two commands of the README (make demo, make test). Both build .venv from scratch on a fresh machine.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast docs browser lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# pip's own notices (setuptools' editable-install banner) go to .venv/install.log, printed if pip fails,
# so a first `make demo` shows its answer, not the installer's chatter.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@echo "installing specplan into $(VENV) (pip's log: $(VENV)/install.log)"
	@$(BIN)/pip install -q -e . > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	touch $@

# torch is pinned to the CPU build that lies on this project's machines.
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[dev,profile,ray,aic,docs]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/specplan demo --out out/demo

# The report test renders report.html in a real headless Chromium. Install it
# where we can (root with apt-get); elsewhere that one test says it is skipped.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1; } \
	  || echo "chromium not installed: the report's browser check will be skipped"

# The suite, and the linters that CI enforces through it (ruff, mypy); the suite builds the manual
# strictly (tests/test_docs.py) and runs its runnable examples.
test: $(VENV)/.installed-dev browser lint
	RAY_AUTH_MODE=disabled $(BIN)/python -m pytest -q -n 2

# The inner loop: the suite without the tests marked slow (each mark says why: a real process,
# SIGINT, Chromium, Ray, torch forwards, benchmarks, long statistical checks, whole plans).
test-fast: $(VENV)/.installed-dev
	RAY_AUTH_MODE=disabled $(BIN)/python -m pytest -q -n 2 -m "not slow"

# The manual alone needs only the docs extra (no torch, no Ray): the reference pages are committed
# (python -m docs.gen.hooks rewrites them; tests/test_docs.py holds them to the code).
$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[docs]"
	touch $@

# The manual (mkdocs.yml): strict, every warning an error.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# mypy reads the package as it installs (specplan.<folder>, pyproject's package-dir):
# build/typecheck/specplan is a tree of links to the repository's folders.
FOLDERS := engines simulator policies hwprofiles traces reports scenarios validation
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	rm -rf build/typecheck && mkdir -p build/typecheck/specplan
	ln -s $(CURDIR)/specplan/*.py $(CURDIR)/specplan/py.typed $(CURDIR)/specplan/cli build/typecheck/specplan/
	for d in $(FOLDERS); do ln -s $(CURDIR)/$$d build/typecheck/specplan/$$d; done
	$(BIN)/mypy build/typecheck/specplan

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/sim_speed.py --repeats 3
	$(BIN)/python benchmarks/demo_time.py

clean:
	rm -rf $(VENV) out site build

# The two commands of the README: `make demo` and `make test`. Each creates (or
# reuses) a local virtual environment in .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test bench lint docs venv clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,examples,bench,openspiel,docs]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m examples.demo

# Lint first: CI runs `make test`, so style problems fail CI too. Two pytest workers,
# one test file each at a time (module-level jitted helpers stay shared): the suite is
# dominated by XLA compiles, which use one core each.
TEST_WORKERS ?= 2
test: lint docs
	$(PY) -m pytest tests -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile

bench: $(STAMP)
	$(PY) -m benchmarks.compare_mctx

# The documentation site into site/ (open site/index.html, or `mkdocs serve`). Strict:
# a broken link, a missing reference or a docstring that fails to render fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: $(STAMP)
	$(VENV)/bin/ruff check jaxpuct tests examples benchmarks

clean:
	rm -rf $(VENV)

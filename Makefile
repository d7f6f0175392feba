# The two commands of the README: `make demo` and `make test`. Each creates (or
# reuses) a local virtual environment in .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml .ci/dev_constraints.txt | cksum | cut -d' ' -f1)
LOWEST_VENV := .venv-lowest
LOWEST_STAMP := $(LOWEST_VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test bench lint docs venv clean
.PHONY: typecheck test-lowest suite test-all

# uv installs the package and its extras (pip only installs uv itself): it downloads
# and unpacks in parallel. Into a new venv on this machine: 70 s wall, 22 CPU-s,
# against pip's 310 s and 85 CPU-s.
# --compile-bytecode writes every installed module's .pyc at install time. Python
# writes them itself on a first import, but not where PYTHONDONTWRITEBYTECODE is set
# (as on this project's machines): there every process compiled jax, flax and the
# rest from source again, 2 of the 4.4 s that `import examples.selfplay` took, in
# each of the suite's workers and the dozens of processes its tests start. (Not in the
# lowest-versions venv: one process, which imports less than compiling all would cost.)
# .ci/dev_constraints.txt holds this environment's own constraints (ml_dtypes below
# 0.7, whose import costs every jax process 0.85 s more CPU): the suite on 2 cores
# went from 608 to 548 s in one measurement (945 tests, 2026-12-06; part of that is
# the machine's noise, about 8% between runs), its test-started processes from 174
# to 150 CPU-s.
$(STAMP): pyproject.toml .ci/dev_constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check "uv>=0.13.9"
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) \
		--constraint .ci/dev_constraints.txt -e ".[test,examples,bench,openspiel,docs]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m examples.demo

# Lint first: CI runs `make test`, so style problems fail CI too. Then the site, the
# type check, the lowest-versions tests and the suite run side by side (each is one
# process, or two for the suite, mostly on one core: run one after another they left
# a core idle for two minutes); their outputs are printed whole, one after another.
# The lowest-versions venv is built in that phase too (mostly downloads, beside the
# compiles), not before it.
# Two pytest workers, one test file each at a time (module-level jitted helpers stay
# shared): the suite is dominated by XLA compiles, which use one core each.
TEST_WORKERS ?= 2
test: lint
	$(MAKE) --no-print-directory -j4 --output-sync=target docs typecheck test-lowest suite

# The tests run with jemalloc in place of glibc's malloc where the machine has it
# (Debian's libjemalloc2; .ci/run installs it): XLA's compiles and JAX's tracing
# allocate millions of small objects, and on one core the same files took 7-11% less
# CPU time with it (test_composition.py 74.0 -> 65.5 CPU-s; test_search.py with
# test_muzero_2048.py 58.8 and 60.2 -> 55.1). Without it they run as before. The
# processes the tests start inherit it.
JEMALLOC := $(shell PATH="$$PATH:/sbin:/usr/sbin" ldconfig -p 2>/dev/null | awk '/libjemalloc\.so\.2 /{print $$NF; exit}')
WITH_JEMALLOC := $(if $(JEMALLOC),LD_PRELOAD=$(JEMALLOC))

# After the site: tests/test_docs_site.py opens the built site/.
suite: $(STAMP) docs
	$(WITH_JEMALLOC) $(PY) -m pytest tests -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile \
		-m "$(SUITE_MARKS)"

# Two tiers. `make test` (the README's command, which CI runs) leaves out the tests
# marked `slow`: whole example runs (train, evaluate, resume, arena), a process killed or
# signalled at every point of a save but one, the heavier guide pages, the composition
# matrix's feature-with-graph cells and second parameters of checks whose first stays in.
# Every feature keeps a quicker test in the quick tier. Three examples that the suite runs
# whole (distributed_selfplay, known_chance_2048, known_chance_backgammon) do so only in
# the slow tier; their search functions and argument checks stay quick.
# `make test-all` runs everything, and is run before each submission (README).
SUITE_MARKS ?= not slow
test-all:
	$(MAKE) --no-print-directory test SUITE_MARKS=

bench: $(STAMP)
	$(PY) -m benchmarks.compare_mctx

# The documentation site into site/ (open site/index.html, or `mkdocs serve`). Strict:
# a broken link, a missing reference or a docstring that fails to render fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: $(STAMP)
	$(VENV)/bin/ruff check jaxpuct tests examples benchmarks tools

# pyright over jaxpuct/: the settings and the strict modules are [tool.pyright] in
# pyproject.toml.
typecheck: $(STAMP)
	$(VENV)/bin/pyright --pythonpath $(PY)

# The lowest versions pyproject.toml declares for the core (jax, jaxlib, chex, numpy, and
# pytest/hypothesis to run; .ci/lowest_requirements.py reads the bounds), in a second
# venv made by uv and rebuilt only when pyproject.toml changes. jaxpuct is not installed
# there: tests/conftest.py puts the checkout first on sys.path. A few core tests, chosen
# to cover each search mode with an oracle in about 30 s of CPU time (README); the
# selection formulas' variants run there through test_selection.py, not as whole searches.
LOWEST_TESTS := tests/test_selection.py tests/test_indexing.py \
	"tests/test_search.py::test_tree_invariants[alphazero]" \
	"tests/test_search.py::test_tree_invariants[mctx-full-tree]" \
	tests/test_search.py::test_batch_equals_each_element_alone \
	tests/test_search.py::test_root_value_converges_to_backward_induction \
	"tests/test_graph.py::test_graph_equals_tree_without_transpositions[selection0]" \
	tests/test_solver.py::test_random_games_dense_rewards_exact_minimax \
	tests/test_reuse.py::test_subtree_matches_numpy_walk

$(LOWEST_STAMP): pyproject.toml .ci/lowest_requirements.py | $(STAMP)
	rm -rf $(LOWEST_VENV)
	$(VENV)/bin/uv venv -q --python $(PY) $(LOWEST_VENV)
	$(PY) .ci/lowest_requirements.py > $(LOWEST_VENV)/requirements.txt
	$(VENV)/bin/uv pip install -q --python $(LOWEST_VENV)/bin/python \
		--resolution lowest-direct -r $(LOWEST_VENV)/requirements.txt
	touch $(LOWEST_STAMP)

test-lowest: $(LOWEST_STAMP)
	$(WITH_JEMALLOC) $(LOWEST_VENV)/bin/python -m pytest $(LOWEST_TESTS) -p no:cacheprovider

clean:
	rm -rf $(VENV) $(LOWEST_VENV)

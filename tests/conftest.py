"""Test-session setup.

* Makes the checkout's ``jaxpuct`` importable when ``pytest`` runs without it on
  ``sys.path`` (plain ``pytest``, unlike ``python -m pytest``, does not add the
  current directory).
* Compiles at low optimisation: the suite's time is dominated by XLA compiles of
  small shapes, which LLVM's expensive passes slow down far more than they speed
  up. Set in the environment before JAX is imported, so the subprocesses the
  tests start inherit it (they add their own flags with :func:`xla_flags`).
"""

import gc
import importlib.metadata
import os
import sys
from pathlib import Path

# Measured on the suite's searches (XLA compile seconds of four B = 2, S = 8 policies,
# one idle core, two runs each): XLA's defaults 22-24, low backend optimisation
# 16-18, and without the CPU fusion emitters, whose code generation is the costly
# part at these sizes, 6-8; one code-generation split (no thread-pool hand-off per
# module) 5.7-6.0. The legacy (non-thunk) CPU runtime gains nothing more.
# Each flag with the oldest jaxlib checked to know it (its name is in that release's XLA
# library; 0.4.30 knows only the first): an older XLA aborts on a flag it does not know,
# and the lowest-versions environment (``make test-lowest``) runs on such a jaxlib.
_FLAG_SINCE = (("--xla_backend_optimization_level=0", (0, 4, 30)),
               ("--xla_llvm_disable_expensive_passes=true", (0, 4, 31)),
               ("--xla_cpu_parallel_codegen_split_count=1", (0, 4, 33)),
               ("--xla_cpu_use_fusion_emitters=false", (0, 5, 3)))


def _jaxlib_version() -> tuple[int, ...]:
    # From the metadata: importing jaxlib here could start XLA before the flags are set.
    release = importlib.metadata.version("jaxlib").split(".")[:3]
    return tuple(int("".join(c for c in part if c.isdigit()) or 0) for part in release)


FAST_XLA_FLAGS = " ".join(flag for flag, since in _FLAG_SINCE if _jaxlib_version() >= since)


def xla_flags(*extra: str) -> str:
    """``XLA_FLAGS`` for a subprocess: the suite's fast-compile flags plus ``extra``."""
    return " ".join((os.environ.get("XLA_FLAGS", ""),) + extra).strip()


def run_on_host_devices(script: str, devices: int, done: str, timeout: int) -> None:
    """Runs ``script`` in a fresh Python on ``devices`` CPU devices (the device count
    is fixed when JAX starts) from the repository root; fails the test unless it
    exits 0 and prints ``done``."""
    import subprocess

    import pytest
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=root,
               XLA_FLAGS=xla_flags(f"--xla_force_host_platform_device_count={devices}"))
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=root,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or done not in proc.stdout:
        pytest.fail(f"exit {proc.returncode}:\n{proc.stderr[-3000:]}")


# Tried for the whole suite and not kept (2026-12-05, one core, the same files run
# with and without): a persistent compilation cache shared by every test process
# (test_composition, test_search, test_testing, test_bad_values, test_muzero: 176 CPU-s
# without, 190 with; 1,626 entries written and almost none read again, since a jitted
# function compiled twice in one process is already cached in memory and the two
# workers run different files), and no Python tracebacks in the lowered programs'
# locations (JAX_TRACEBACK_IN_LOCATIONS_LIMIT=0: 109.1 against 109.8 CPU-s;
# JAX_INCLUDE_FULL_TRACEBACKS_IN_LOCATIONS=0 saved about 3% but shortens every op_name
# to its last component, which the HLO checks of test_policy.py read). Subprocesses that
# compile the same programs share a cache of their own (test_reliability.py).
# Also tried and not kept (2026-12-05, one core): optimisation level 1 for every compile
# (eight example-heavy files: 478.5 CPU-s against 319.1 at level 0; compiles 2.5x
# dearer, and only pgx's backgammon rules ran enough to repay it: that test compiles
# them optimised itself), Shardy off (JAX_USE_SHARDY_PARTITIONER=false: 75.4 against
# 74.0 CPU-s on test_composition.py), glibc malloc tunables (75.0), and XLA's CPU
# scheduler, copy-insertion region analysis or XNNPACK off (within the 70-77 CPU-s that
# three runs of the unchanged file gave). What was kept
# lives in the Makefile: jemalloc as malloc, and .pyc files written at install.
# Measured (2026-12-06, the whole suite in one process, a plugin counting compiles under
# 80 ms and their lowering per test and call site): 6,001 such small programs, 87.7 s of
# XLA compile and 77.3 s of lowering, about a sixth of the suite's in-process CPU. They
# are op-by-op calls spread over hundreds of tests: the largest are deliberate (the
# guide's pages run as a user runs them, 532; test_jit_and_eager_agree, 332), the next
# are refusal tests calling a policy outside jit (about 100 each, a second of CPU each).
# Also tried: XLA_FLAGS --xla_cpu_max_isa=SSE4_2 and --xla_cpu_prefer_vector_width=128
# (within the +-15% of two runs); six other xla_cpu_* names abort jaxlib 0.10.2.
# 2026-12-06, later (four typical suite programs, compile CPU-s summed, 3.3-4.0 at
# these flags): the concurrency-optimised scheduler off 4.1-4.5, the legacy runtime
# 3.7-3.9, XNNPACK off 3.6-4.0, LLVM's alias/noalias/invariant-load metadata off 3.7,
# the HLO verifier disabled (--xla_disable_hlo_passes=hlo-verifier) 3.1-3.2 (within the
# noise, and it checks XLA's own passes: not kept); disable_loop_unrolling,
# disable_slp_vectorizer, use_multi_output_fusion, optimize_for_size,
# flatten_after_fusion, fold_all_constants and disable_tiled_emitter abort jaxlib
# 0.10.2. A program's compile is about 40% XLA's HLO passes and 60% LLVM at these
# flags; a one-op program costs about 20 ms (7.5 lowering, of which 4 is JAX's new
# MLIR context, and 13 compiling). jemalloc with page decay off
# (MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1): no change (test_gumbel.py 24.0 and
# 25.6 CPU-s). What paid: ml_dtypes below 0.7 in the development environment (the
# Makefile), about 0.85 CPU-s less in every process that imports jax. Collecting the
# suite costs each worker about 9 s (assertion rewriting of every test module, which
# PYTHONDONTWRITEBYTECODE keeps from being cached, and about 4 s of module-level jax
# work in a few files).
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + FAST_XLA_FLAGS).strip()

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


# Python's cyclic garbage collector: tracing allocates millions of short-lived
# objects, and with the default thresholds the collector took 5% of a test file's
# CPU (test_gumbel.py: 2.3 of 46 s, 12 full collections of a heap holding all of
# JAX). Rarer collections, and the objects alive once the tests are collected
# (modules, jitted helpers) frozen out of every later full collection: 0.9 s.
gc.set_threshold(10_000, 50, 50)


def pytest_collection_finish(session) -> None:
    gc.freeze()


# ------------------------------------------------------ the order files are handed out
# Under `-n 2 --dist loadfile` a worker takes the next file when it is free, so a heavy
# file handed out last runs alone on one core at the end. xdist's default order (most
# tests first) did that to the heaviest few-test files: test_distributed.py (2 tests,
# about 39 CPU-s) and the MuZero connect-four example's file came last. The files
# below go first, heaviest first (CPU seconds of one profile, JAXPUCT_TEST_PROFILE
# below, rounded: an order, not a measurement to keep exact; the quick tier's files'
# test durations on two workers, 2026-12-06, tests marked slow left out); the rest follow
# in collection order.
_HEAVY_FILES = {"test_composition.py": 97, "test_reliability.py": 40, "test_gumbel.py": 35,
                "test_bad_values.py": 34, "test_multileaf.py": 30, "test_selfplay.py": 27,
                "test_search.py": 27, "test_sampled.py": 25, "test_testing.py": 24,
                "test_solver.py": 19, "test_stochastic_muzero.py": 16, "test_muzero.py": 16,
                "test_graph.py": 16, "test_stochastic.py": 15, "test_muzero_connect_four.py": 15}


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "slow: in the whole suite only (make test-all), not in make test's quick tier")
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's own reordering: off
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items) -> None:
    items.sort(key=lambda item: -_HEAVY_FILES.get(item.path.name, 0))  # stable


# ------------------------------------------------------------- where the time goes
# JAXPUCT_TEST_PROFILE=FILE appends, per test, its CPU seconds (its subprocesses'
# included), JAX's own trace / lowering / XLA-compile seconds, the number of XLA
# compiles, the xdist worker and the test's end time (tab-separated), to see what a
# slow test spends its time on before shrinking it, and where the workers sat idle.
_PROFILE = os.environ.get("JAXPUCT_TEST_PROFILE")
if _PROFILE:
    import time

    import pytest

    _EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
               "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
               "/jax/core/compile/backend_compile_duration": "compile"}
    _totals: dict[str, float] = {}

    def _listen(event: str, duration: float, **_: object) -> None:
        name = _EVENTS.get(event)
        if name is not None:
            _totals[name] = _totals.get(name, 0.0) + duration
            if name == "compile":
                _totals["compiles"] = _totals.get("compiles", 0.0) + 1

    import jax.monitoring

    jax.monitoring.register_event_duration_secs_listener(_listen)

    def _children_cpu() -> float:
        # Subprocesses' CPU (counted once they are waited for).
        times = os.times()
        return times.children_user + times.children_system

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        _totals.clear()
        start = time.process_time() + _children_cpu()
        yield
        cpu = time.process_time() + _children_cpu() - start
        with open(_PROFILE, "a") as out:
            fields = [f"{_totals.get(k, 0.0):.2f}" for k in ("trace", "lower", "compile")]
            fields.append(str(int(_totals.get("compiles", 0))))
            # Which worker ran it and when it ended: the suite's idle tail shows there.
            fields += [os.environ.get("PYTEST_XDIST_WORKER", "-"), f"{time.time():.1f}"]
            out.write(f"{item.nodeid}\t{cpu:.2f}\t" + "\t".join(fields) + "\n")

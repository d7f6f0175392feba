"""Test-session setup.

* Makes the checkout's ``jaxpuct`` importable when ``pytest`` runs without it on
  ``sys.path`` (plain ``pytest``, unlike ``python -m pytest``, does not add the
  current directory).
* Compiles at low optimisation: the suite's time is dominated by XLA compiles of
  small shapes, which LLVM's expensive passes slow down far more than they speed
  up. Set in the environment before JAX is imported, so the subprocesses the
  tests start inherit it (they add their own flags with :func:`xla_flags`).
"""

import os
import sys
from pathlib import Path

FAST_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def xla_flags(*extra: str) -> str:
    """``XLA_FLAGS`` for a subprocess: the suite's fast-compile flags plus ``extra``."""
    return " ".join((os.environ.get("XLA_FLAGS", ""),) + extra).strip()


if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + FAST_XLA_FLAGS).strip()

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

"""The package itself: what ``import jaxpuct`` loads, and that every public name
is exported and documented."""

from __future__ import annotations

import inspect
import subprocess
import sys

import jaxpuct

HEAVY = ("flax", "optax", "orbax", "pgx", "mctx", "matplotlib", "tqdm", "open_spiel")


def test_import_jaxpuct_loads_no_training_game_or_plotting_library():
    code = ("import sys, jaxpuct; "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_subpackages_are_attributes_loaded_on_first_use():
    code = ("import sys, jaxpuct\n"
            "subs = ('alphazero', 'envs', 'memory', 'muzero', 'testing', 'visualize')\n"
            "print(sorted(s for s in subs if 'jaxpuct.' + s in sys.modules))\n"
            "print(callable(jaxpuct.testing.check_tree), 'jaxpuct.testing' in sys.modules)\n"
            "print(callable(jaxpuct.memory.trees_that_fit), callable(jaxpuct.visualize.to_dot))\n"
            "print(jaxpuct.envs.__name__, 'testing' in dir(jaxpuct))\n"
            "print(jaxpuct.muzero.__name__, 'flax' in sys.modules, 'muzero' in dir(jaxpuct))\n"
            "try:\n"
            "    jaxpuct.no_such_name\n"
            "except AttributeError as err:\n"
            "    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.splitlines() == [
        "[]", "True True", "True True", "jaxpuct.envs True", "jaxpuct.muzero True True",
        "module 'jaxpuct' has no attribute 'no_such_name'"]


def test_every_public_name_is_exported_and_documented():
    for name in jaxpuct.__all__:
        obj = getattr(jaxpuct, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert inspect.getdoc(obj), f"jaxpuct.{name} has no docstring"


def test_version_matches_the_project_metadata():
    from importlib.metadata import version

    assert jaxpuct.__version__ == version("jaxpuct")

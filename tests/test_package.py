"""The package itself: what ``import jaxpuct`` loads, and that every public name
is exported and documented."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import jaxpuct

HEAVY = ("flax", "optax", "orbax", "pgx", "mctx", "matplotlib", "tqdm", "open_spiel")


def test_import_jaxpuct_loads_no_training_game_or_plotting_library():
    # Then, with Flax made unimportable (as in a core-only install), the training
    # subpackages name the extra to install instead of failing deep inside.
    code = ("import sys, jaxpuct\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
            "sys.modules['flax'] = None\n"
            "for sub in ('alphazero', 'muzero'):\n"
            "    try:\n"
            "        getattr(jaxpuct, sub)\n"
            "    except ImportError as err:\n"
            "        print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.splitlines() == ["[]"] + [
        f"jaxpuct.{sub} needs flax, which the core install does not include: "
        "pip install 'jaxpuct[train]'" for sub in ("alphazero", "muzero")]


def test_subpackages_are_attributes_loaded_on_first_use():
    # One interpreter for every check that a fresh import needs (each costs seconds):
    # drawing loads matplotlib, not importing jaxpuct.visualize; the training networks
    # and the game adapters load pgx only when a game is made.
    code = ("import sys, jaxpuct\n"
            "subs = ('alphazero', 'envs', 'memory', 'muzero', 'testing', 'visualize')\n"
            "print(sorted(s for s in subs if 'jaxpuct.' + s in sys.modules))\n"
            "print(callable(jaxpuct.testing.check_tree), 'jaxpuct.testing' in sys.modules)\n"
            "print(callable(jaxpuct.memory.trees_that_fit), callable(jaxpuct.visualize.to_dot))\n"
            "print('matplotlib' in sys.modules)\n"
            "print(jaxpuct.envs.__name__, 'testing' in dir(jaxpuct))\n"
            "print(jaxpuct.muzero.__name__, 'flax' in sys.modules, 'muzero' in dir(jaxpuct))\n"
            "import jaxpuct.envs.adapter, jaxpuct.alphazero.networks, jaxpuct.envs.pgx_games\n"
            "print('pgx' in sys.modules)\n"
            "try:\n"
            "    jaxpuct.no_such_name\n"
            "except AttributeError as err:\n"
            "    print(err)\n")
    # From the checkout's root, so that this checkout's jaxpuct is the one imported.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.splitlines() == [
        "[]", "True True", "True True", "False", "jaxpuct.envs True",
        "jaxpuct.muzero True True", "False",
        "module 'jaxpuct' has no attribute 'no_such_name'"]


def test_every_public_name_is_exported_and_documented():
    for name in jaxpuct.__all__:
        obj = getattr(jaxpuct, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert inspect.getdoc(obj), f"jaxpuct.{name} has no docstring"


def test_version_matches_the_project_metadata():
    from importlib.metadata import version

    assert jaxpuct.__version__ == version("jaxpuct")


def test_pytree_dataclasses_keep_chex_behaviour():
    # jaxpuct._dataclass only retypes chex.dataclass: a frozen pytree, a Mapping,
    # with a replace that returns the same class.
    import collections.abc
    import dataclasses

    import jax
    import numpy as np
    import pytest

    root = jaxpuct.RootFnOutput(prior_logits=np.zeros((2, 3)), value=np.ones(2),
                                embedding=np.arange(2))
    leaves, treedef = jax.tree.flatten(root)
    assert len(leaves) == 3
    again = jax.tree.unflatten(treedef, leaves)
    assert type(again) is jaxpuct.RootFnOutput
    moved = root.replace(value=np.full(2, 5.0))
    assert type(moved) is jaxpuct.RootFnOutput
    assert moved.value.tolist() == [5.0, 5.0] and root.value.tolist() == [1.0, 1.0]
    assert isinstance(root, collections.abc.Mapping) and sorted(root) == [
        "embedding", "legal_action_mask", "prior_logits", "state_hash", "value"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        root.value = None  # frozen: this must fail


def test_present_returns_the_value_or_names_the_missing_field():
    import pytest

    from jaxpuct.tree import present

    value = object()
    assert present(value, "tree.hash_table") is value
    with pytest.raises(ValueError, match=r"tree\.hash_table is None"):
        present(None, "tree.hash_table")


def test_typing_marker_ships_with_the_package():
    from pathlib import Path

    root = Path(jaxpuct.__file__).resolve().parent
    assert (root / "py.typed").is_file()
    pyproject = (root.parent / "pyproject.toml").read_text()
    assert '[tool.setuptools.package-data]\njaxpuct = ["py.typed"]' in pyproject


def test_every_example_is_named_by_a_test():
    """Each module of ``examples/`` is imported or run by some test file (quick or
    slow tier), so no example the README points to can rot unseen. A static check:
    it reads the tests' text for the module's name after ``examples``."""
    root = Path(__file__).resolve().parents[1]
    tests = "\n".join(p.read_text() for p in (root / "tests").glob("test_*.py"))
    untested = []
    for path in sorted((root / "examples").glob("*.py")):
        name = path.stem
        if name == "__init__":
            continue
        named = re.search(rf"examples\.{name}\b|from examples import [\w, ()]*\b{name}\b",
                          tests)
        if named is None:
            untested.append(name)
    assert untested == [], f"examples no test names: {untested}"


def test_every_benchmark_is_named_by_a_test():
    """The same for ``benchmarks/``: each module is imported by a test file or run by
    ``tests/test_benchmark_quick_modes.py`` (a key of its ``CASES``); ``timing`` is
    the other benchmarks' helper, run through them."""
    root = Path(__file__).resolve().parents[1]
    tests = "\n".join(p.read_text() for p in (root / "tests").glob("test_*.py"))
    runs = (root / "tests" / "test_benchmark_quick_modes.py").read_text()
    untested = []
    for path in sorted((root / "benchmarks").glob("*.py")):
        name = path.stem
        if name in ("__init__", "timing"):
            continue
        named = (re.search(rf"benchmarks\.{name}\b|from benchmarks import [\w, ()]*\b{name}\b",
                           tests)
                 or re.search(rf'^    "{name}": \(', runs, re.MULTILINE))
        if named is None:
            untested.append(name)
    assert untested == [], f"benchmarks no test names: {untested}"

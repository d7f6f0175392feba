"""The engine's features together, in ``alphazero_policy``: every pair, and all at
once.

``tests/test_composition.py`` crosses each policy with one feature at a time; here
the features of one policy are crossed with each other: graph search, tree reuse,
several leaves per step, the MCTS-solver, the LCB move and early stopping, the pairs
and the two largest sets that go together (early stopping refuses the LCB move).
``B = 2`` random games (no transpositions), ``S = 16``, under ``jit``. Oracles: the
tree's invariants (:func:`jaxpuct.testing.check_tree`); every proof against backward
induction; with graph search, the same search without it (no transpositions: the
same visits and moves); with early stopping, the same search without it keeps the
most visited root action, and the simulations saved are the budget its root did not
use (where the solver does not end the search first).
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc

import jaxpuct
from jaxpuct.testing import check_tree, random_games

B, S = 2, 32
FEATURES = ("graph", "reuse", "leaves", "solver", "lcb", "early_stop")
# Games whose first two plies end nothing, so a continued root still has moves.
_FOREST, _ROOTS, _GAMES = sc.game_forest((1, 8))
_RF = random_games.make_recurrent_fn(with_hash=True)


def _keywords(features: frozenset) -> dict:
    kw: dict = {"dirichlet_fraction": 0.0}
    if "graph" in features:
        kw["graph"] = jaxpuct.GraphConfig()
    if "leaves" in features:
        kw.update(leaves_per_step=2, virtual_loss=jaxpuct.VirtualLoss())
    if "solver" in features:
        kw["solver"] = True
    if "lcb" in features:
        kw["final_move"] = "lcb"
    if "early_stop" in features:
        kw["early_stop"] = True
    return kw


@functools.partial(sc.jit, static_argnames=("features",))
def _run(key, *, features: frozenset):
    """``(first search, the search checked)``: with ``reuse``, a second search
    continues the first's subtree under its move; otherwise both are the one search."""
    kw = _keywords(features)
    root = random_games.root(_FOREST, jnp.asarray(_ROOTS), with_hash=True)
    if "reuse" not in features:
        out = jaxpuct.alphazero_policy(_FOREST, key, root, _RF, S, **kw)
        return out, out
    first = jaxpuct.alphazero_policy(_FOREST, key, root, _RF, S, max_nodes=2 * S + 1, **kw)
    tree, _ = jaxpuct.subtree(first.search_tree, first.action, graph=kw.get("graph"))
    second = jaxpuct.alphazero_policy(_FOREST, jax.random.fold_in(key, 1), None, _RF, S,
                                      tree=tree, **kw)
    return first, second


def _sets() -> list:
    """make test runs every feature but early stopping at once (9 CPU-s here, five
    features in one program); the set with early stopping instead of the LCB move
    (15 CPU-s: it compiles three programs) and each pair run in make test-all
    (early stopping with several leaves and the solver is also in
    tests/test_early_stop.py, each feature alone in tests/test_composition.py)."""
    pairs = [frozenset(p) for p in itertools.combinations(FEATURES, 2)]
    quick = frozenset(FEATURES) - {"early_stop"}
    slow = [frozenset(FEATURES) - {"lcb"}, *pairs]
    return ([pytest.param(quick, id="+".join(sorted(quick)))]
            + [pytest.param(f, id="+".join(sorted(f)), marks=pytest.mark.slow)
               for f in slow])


@pytest.mark.parametrize("features", _sets())
def test_features_together(features):
    key = jax.random.PRNGKey(3)
    if {"lcb", "early_stop"} <= features:
        with pytest.raises(ValueError, match="early_stop needs a move that is the most visited"):
            _run(key, features=features)
        return
    first, out = _run(key, features=features)
    tree = out.search_tree
    assert tree.kind == ("graph" if "graph" in features else "tree")
    check_tree(tree, None if features & {"reuse", "leaves", "solver", "early_stop"} else S)
    legal = np.asarray(tree.children_index[:, 0]) != jaxpuct.ILLEGAL
    action, weights = np.asarray(out.action), np.asarray(out.action_weights)
    for b in range(B):
        assert legal[b, action[b]], (b, action[b])
        np.testing.assert_allclose(weights[b].sum(), 1.0, rtol=1e-5)
        assert np.all(weights[b][~legal[b]] == 0)
    if "solver" in features:
        for searched in {id(first): first, id(out): out}.values():
            sc.check_game_proofs(searched.search_tree, _FOREST)
    if "lcb" in features:
        assert tree.node_sq_values is not None
    if "reuse" in features:
        # The continued root starts from its subtree's visits and adds this search's
        # (all S of them unless a stop ends it sooner: a root the first search
        # proved takes none).
        played = np.asarray(first.action)
        before = np.asarray(first.search_tree.edge_visits)[np.arange(B), 0, played]
        after = np.asarray(tree.node_visits[:, 0])
        if features & {"early_stop", "solver"}:
            assert np.all((after >= before) & (after <= before + S)), (before, after)
        else:
            np.testing.assert_array_equal(after, before + S)
    if "graph" in features:
        _, as_tree = _run(key, features=features - {"graph"})
        np.testing.assert_array_equal(np.asarray(as_tree.search_tree.edge_visits),
                                      np.asarray(tree.edge_visits))
        np.testing.assert_array_equal(np.asarray(as_tree.action), action)
    if "early_stop" in features:
        # The first search of each run (with reuse, the second continues different
        # subtrees): the most visited root action is kept, with no more visits.
        full, _ = _run(key, features=features - {"early_stop"})
        visits = np.asarray(first.search_tree.edge_visits[:, 0])
        full_visits = np.asarray(full.search_tree.edge_visits[:, 0])
        np.testing.assert_array_equal(np.argmax(np.where(legal, visits, -1), -1),
                                      np.argmax(np.where(legal, full_visits, -1), -1))
        assert np.all(visits <= full_visits)
        if "solver" not in features:
            # (A proven root ends the loop by itself: the solver's stop, not counted.)
            saved = np.asarray(first.search_tree.summary().simulations_saved)
            np.testing.assert_array_equal(saved, S - visits.sum(-1))
            assert saved.sum() > 0  # these games let it stop

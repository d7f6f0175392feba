"""The engine's features together: every pair a policy supports, and all at once.

``tests/test_composition.py`` crosses each policy with one feature at a time; here
each policy's features are crossed with each other: graph search, tree reuse,
several leaves per step, the MCTS-solver, the LCB move and early stopping, as far as
the policy takes them (Gumbel roots: no several leaves nor early stopping; sampled
actions: no graph nor solver; those refusals are the composition matrix's). ``B =
2``, ``S = 32``, under ``jit``; random games for the policies without chance nodes
(no transpositions), a hashed stochastic game (ids never repeat) for the two with.

Oracles: the tree's invariants (:func:`jaxpuct.testing.check_tree`); the move legal
and the target a distribution over the legal moves; every proof against backward
induction (random games); with graph search, the same search without it (no
transpositions: the same visits and moves); with early stopping, the same search
without it keeps the most visited root action and the simulations saved are the
budget its root did not use (where the solver does not end the search first); with
reuse, the continued root holds the first tree's visits of that node plus this
search's.
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
from jaxpuct.testing import check_tree, random_games, stochastic_games

B, S = 2, 32
POLICY_FEATURES = {
    "alphazero": ("graph", "reuse", "leaves", "solver", "lcb", "early_stop"),
    "gumbel": ("graph", "reuse", "solver", "lcb"),
    "stochastic": ("graph", "reuse", "leaves", "solver", "lcb", "early_stop"),
    "stochastic_gumbel": ("graph", "reuse", "solver", "lcb"),
    "sampled": ("reuse", "leaves", "lcb", "early_stop"),
}
# Games whose first two plies end nothing, so a continued root still has moves.
_FOREST, _ROOTS, _ = sc.game_forest((1, 8))
_RF = random_games.make_recurrent_fn(with_hash=True)
_STOCH_ROOT, _DECISION, _CHANCE = stochastic_games.hashed_game(B, 3, 2, with_hash=True)
_CHANCE_POLICIES = ("stochastic", "stochastic_gumbel")


def _keywords(policy: str, features: frozenset) -> dict:
    kw: dict = {} if "gumbel" in policy else {"dirichlet_fraction": 0.0}
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


def _call(policy: str, key, kw: dict, tree=None):
    if policy in _CHANCE_POLICIES:
        fn = (jaxpuct.stochastic_policy if policy == "stochastic"
              else jaxpuct.stochastic_gumbel_policy)
        return fn(None, key, None if tree is not None else _STOCH_ROOT, _DECISION, _CHANCE, S,
                  tree=tree, **kw)
    root = None if tree is not None else random_games.root(_FOREST, jnp.asarray(_ROOTS),
                                                          with_hash=True)
    fn = {"alphazero": jaxpuct.alphazero_policy, "gumbel": jaxpuct.gumbel_policy,
          "sampled": functools.partial(jaxpuct.sampled_policy, num_samples=2)}[policy]
    return fn(_FOREST, key, root, _RF, S, tree=tree, **kw)


def _path(policy: str, out) -> jax.Array:
    """``[B, k]`` the moves from the first root to the node a continued search starts
    at: the move (a sampled search's slot), then, over chance nodes, the outcome 0."""
    if policy == "sampled":
        return out.action_slot[:, None]
    if policy in _CHANCE_POLICIES:
        return jnp.stack([out.action, jnp.zeros_like(out.action)], axis=1)
    return out.action[:, None]


@functools.partial(sc.jit, static_argnames=("policy", "features"))
def _run(key, *, policy: str, features: frozenset):
    """``(first search, the search checked)``: with ``reuse``, a second search
    continues the first's subtree under its move; otherwise both are the one search."""
    kw = _keywords(policy, features)
    if "reuse" not in features:
        out = _call(policy, key, kw)
        return out, out
    first = _call(policy, key, {**kw, "max_nodes": 2 * S + 1})
    tree, _ = jaxpuct.subtree_path(first.search_tree, _path(policy, first),
                                   graph=kw.get("graph"))
    return first, _call(policy, jax.random.fold_in(key, 1), kw, tree=tree)


def _cells() -> list:
    """make test runs AlphaZero's every feature but early stopping at once (9 CPU-s
    here, five features in one program) and the refusals of the LCB move with early
    stopping (raised while tracing, before any compile); the rest run in make
    test-all (each feature alone with every policy: tests/test_composition.py; early
    stopping with several leaves and the solver: tests/test_early_stop.py)."""
    cells = []
    for policy, features in POLICY_FEATURES.items():
        sets = [frozenset(p) for p in itertools.combinations(features, 2)]
        sets += [frozenset(features) - {"lcb"}, frozenset(features) - {"early_stop"}]
        for f in dict.fromkeys(sets):  # Gumbel's two largest sets are one
            quick = ((policy == "alphazero" and f == frozenset(features) - {"early_stop"})
                     or {"lcb", "early_stop"} <= f)
            cells.append(pytest.param(policy, f, id=f"{policy}-{'+'.join(sorted(f))}",
                                      marks=[] if quick else [pytest.mark.slow]))
    return cells


@pytest.mark.parametrize("policy, features", _cells())
def test_features_together(policy, features):
    key = jax.random.PRNGKey(3)
    if {"lcb", "early_stop"} <= features:
        with pytest.raises(ValueError, match="early_stop needs") as info:
            _run(key, policy=policy, features=features)
        # One message for every policy (jaxpuct.frame.check_early_stop_move).
        assert "got final_move='lcb'" in str(info.value)
        assert "Use final_move='visits', or no early_stop." in str(info.value)
        return
    first, out = _run(key, policy=policy, features=features)
    tree = out.search_tree
    check_tree(tree, None if features & {"reuse", "leaves", "solver", "early_stop"} else S)
    width = out.action_weights.shape[1]
    legal = np.asarray(tree.children_index[:, 0, :width]) != jaxpuct.ILLEGAL
    action = np.asarray(out.action_slot if policy == "sampled" else out.action)
    weights = np.asarray(out.action_weights)
    for b in range(B):
        assert legal[b, action[b]], (b, action[b])
        np.testing.assert_allclose(weights[b].sum(), 1.0, rtol=1e-5)
        assert np.all(weights[b][~legal[b]] == 0)
    if "solver" in features and policy not in _CHANCE_POLICIES:  # (the stochastic game
        # has no terminal; proofs through chance nodes: tests/test_stochastic.py)
        proven = [sc.check_game_proofs(s.search_tree, _FOREST) for s in (first, out)]
        assert any(p.any() for p in proven)
    if "lcb" in features:
        assert tree.node_sq_values is not None
    if "reuse" in features:
        _check_continued(policy, features, first, tree)
    if "graph" in features:
        _, as_tree = _run(key, policy=policy, features=features - {"graph"})
        np.testing.assert_array_equal(np.asarray(as_tree.search_tree.edge_visits),
                                      np.asarray(tree.edge_visits))
        np.testing.assert_array_equal(np.asarray(as_tree.action), np.asarray(out.action))
    if "early_stop" in features:
        _check_early_stop(key, policy, features, first, width, legal)


def _check_continued(policy: str, features: frozenset, first, tree) -> None:
    """The continued root starts from the first tree's visits of that node and adds
    this search's (all ``S`` unless a stop ends it sooner: a root the first search
    proved takes none)."""
    children = np.asarray(first.search_tree.children_index)
    visits = np.asarray(first.search_tree.node_visits)
    path = np.asarray(_path(policy, first))
    before = np.zeros(B, np.int64)
    for b in range(B):
        node = 0
        for move in path[b]:
            node = children[b, node, move]
            assert node > 0, (b, path[b])
        before[b] = visits[b, node]
    after = np.asarray(tree.node_visits[:, 0])
    if features & {"early_stop", "solver"}:
        assert np.all((after >= before) & (after <= before + S)), (before, after)
    else:
        np.testing.assert_array_equal(after, before + S)


def _check_early_stop(key, policy, features, first, width, legal) -> None:
    """The first search of each run (with reuse, the second continues different
    subtrees): the most visited root action is kept, with no more visits."""
    full, _ = _run(key, policy=policy, features=features - {"early_stop"})
    visits = np.asarray(first.search_tree.edge_visits[:, 0, :width])
    full_visits = np.asarray(full.search_tree.edge_visits[:, 0, :width])
    np.testing.assert_array_equal(np.argmax(np.where(legal, visits, -1), -1),
                                  np.argmax(np.where(legal, full_visits, -1), -1))
    assert np.all(visits <= full_visits)
    if "solver" not in features:
        # (A proven root ends the loop by itself: the solver's stop, not counted.)
        saved = np.asarray(first.search_tree.summary().simulations_saved)
        np.testing.assert_array_equal(saved, S - visits.sum(-1))
        assert saved.sum() > 0, policy  # these games let it stop

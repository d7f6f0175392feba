"""Every policy with every engine feature: supported, or refused with a named
``ValueError``.

One cell per (policy, feature, tree or graph): ``B = 2``, ``S = 8``, under ``jit``.
A supported cell's tree passes :func:`jaxpuct.testing.check_tree`, its move is a
legal root action and its target a distribution over the legal actions; where an
oracle exists it is checked too (solver proofs against backward induction;
graph search without transpositions against tree search; early stopping keeps
the plain search's most visited action and counts the simulations it saved). A
refused cell raises a ``ValueError`` whose message names the argument and says why.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc

import jaxpuct
from jaxpuct.testing import check_tree, random_games, stochastic_games

B, S = 2, 8
POLICIES = ("alphazero", "gumbel", "stochastic", "stochastic_gumbel", "sampled")
FEATURES = ("plain", "reuse", "leaves", "solver", "lcb", "dirichlet", "early_stop",
            "tree_bounds", "chance_ties", "tie_break")
MODES = ("tree", "graph")

# (policy, feature, mode) -> the words a refusal's message must contain.
REFUSED = {
    **{("gumbel", "leaves", m): ["leaves_per_step", "sequential halving"] for m in MODES},
    # A Gumbel move is not the most visited action, which is all early stopping keeps.
    **{(p, "early_stop", m): ["early_stop", "sequential halving"]
       for p in ("gumbel", "stochastic_gumbel") for m in MODES},
    # Sampled actions: a node's K actions are drawn from its own key and path, so one
    # state reached by two paths has two action sets (no graph); a proof over K of A
    # actions proves nothing (no solver).
    **{("sampled", f, "graph"): ["graph=", "sampled actions"] for f in FEATURES},
    ("sampled", "solver", "tree"): ["solver=", "sampled actions"],
}
# Gumbel's root noise is its Gumbel draw: it takes no Dirichlet noise by design, and
# no PUCT selection (its completed Q is rescaled by its own transform); the
# Gumbel root over chance nodes takes no leaves_per_step= keyword (sequential halving
# refuses several leaves, as the gumbel-leaves cells show).
NOT_APPLICABLE = {(p, f, m) for p in ("gumbel", "stochastic_gumbel") for m in MODES
                  for f in ("dirichlet", "tree_bounds")}
NOT_APPLICABLE |= {("stochastic_gumbel", "leaves", m) for m in MODES}
# chance_ties is the chance quota rule's: only the policies with chance nodes take it.
NOT_APPLICABLE |= {(p, "chance_ties", m) for p in ("alphazero", "gumbel", "sampled")
                   for m in MODES}
# tie_break is the PUCT rule's: the Gumbel roots and their interiors take none.
NOT_APPLICABLE |= {(p, "tie_break", m) for p in ("gumbel", "stochastic_gumbel") for m in MODES}
STOCHASTIC = ("stochastic", "stochastic_gumbel")

_FOREST, _ROOTS, _ = sc.game_forest(range(B))
_GAME_RF = random_games.make_recurrent_fn(with_hash=True)
_STOCH_ROOT, _DECISION, _CHANCE = stochastic_games.hashed_game(B, 3, 2, with_hash=True)


def _keywords(policy: str, feature: str, mode: str) -> dict:
    kw: dict = {}
    if mode == "graph":
        kw["graph"] = jaxpuct.GraphConfig()
    if feature == "leaves":
        kw.update(leaves_per_step=2, virtual_loss=jaxpuct.VirtualLoss())
    if feature == "solver":
        kw["solver"] = True
    if feature == "lcb":
        kw["final_move"] = "lcb"
    if feature == "early_stop":
        kw["early_stop"] = True
    if feature == "chance_ties":
        kw["chance_ties"] = "random"
    if policy in ("alphazero", "stochastic", "sampled"):
        kw["dirichlet_fraction"] = 0.25 if feature == "dirichlet" else 0.0
    if feature == "reuse":
        kw["max_nodes"] = 2 * S + 1
    if feature == "tree_bounds":  # MuZero's one pair of min-max Q bounds per search
        kw["selection"] = jaxpuct.PUCTConfig.mctx_muzero(minmax_bounds="tree")
    if feature == "tie_break":  # UCT, whose untried actions all tie
        kw["selection"] = jaxpuct.PUCTConfig.uct(tie_break="random")
    return kw


def _call(policy: str, key, kw: dict, tree=None):
    if policy in STOCHASTIC:
        fn = (jaxpuct.stochastic_policy if policy == "stochastic"
              else jaxpuct.stochastic_gumbel_policy)
        return fn(None, key, None if tree is not None else _STOCH_ROOT, _DECISION, _CHANCE,
                  S, tree=tree, **kw)
    root = None if tree is not None else random_games.root(_FOREST, jnp.asarray(_ROOTS),
                                                          with_hash=True)
    if policy == "sampled":
        return jaxpuct.sampled_policy(_FOREST, key, root, _GAME_RF, S, tree=tree,
                                      num_samples=2, **kw)
    fn = jaxpuct.alphazero_policy if policy == "alphazero" else jaxpuct.gumbel_policy
    return fn(_FOREST, key, root, _GAME_RF, S, tree=tree, **kw)


@functools.partial(sc.jit, static_argnames=("policy", "feature", "mode"))
def _run(key, *, policy, feature, mode):
    kw = _keywords(policy, feature, mode)
    out = _call(policy, key, kw)
    if feature != "reuse":
        return out, out
    if policy in STOCHASTIC:
        # The child under an action is a chance node: reuse walks the action and
        # an outcome (here 0) down to a decision node.
        outcome = jnp.zeros_like(out.action)
        tree, _ = jaxpuct.subtree_path(out.search_tree, jnp.stack([out.action, outcome], 1))
    elif policy == "sampled":
        tree, _ = jaxpuct.subtree(out.search_tree, out.action_slot)  # slots, not ids
    else:
        tree, _ = jaxpuct.subtree(out.search_tree, out.action)
    kw.pop("max_nodes")
    return out, _call(policy, jax.random.fold_in(key, 1), kw, tree=tree)


CELLS = [(p, f, m) for p in POLICIES for f in FEATURES for m in MODES
         if (p, f, m) not in NOT_APPLICABLE]


def _tier(policy: str, feature: str, mode: str) -> list:
    """make test runs every tree cell, every refusal and each policy's plain graph
    search (equal to its tree search); a feature's graph cell is in make test-all only
    (graph storage with the features has its own quicker tests: test_graph.py,
    test_reuse.py, test_solver.py, test_multileaf.py)."""
    searched = (policy, feature, mode) not in REFUSED
    return [pytest.mark.slow] if mode == "graph" and feature != "plain" and searched else []


@pytest.mark.parametrize("policy, feature, mode", [
    pytest.param(p, f, m, id=f"{p}-{f}-{m}", marks=_tier(p, f, m)) for p, f, m in CELLS])
def test_policy_with_feature(policy, feature, mode):
    key = jax.random.PRNGKey(7)
    if (policy, feature, mode) in REFUSED:
        with pytest.raises(ValueError) as info:
            _run(key, policy=policy, feature=feature, mode=mode)
        for word in REFUSED[policy, feature, mode]:
            assert word in str(info.value), (word, str(info.value))
        return
    first, out = _run(key, policy=policy, feature=feature, mode=mode)
    tree = out.search_tree
    continued = feature == "reuse"
    assert tree.kind == ("stochastic" if policy in STOCHASTIC
                         else "sampled" if policy == "sampled" else mode)
    check_tree(tree, None if continued or feature in ("leaves", "solver", "early_stop")
               else S)
    num_actions = out.action_weights.shape[1]
    legal = np.asarray(tree.children_index[:, 0, :num_actions]) != jaxpuct.ILLEGAL
    # A sampled search's weights and legal edges are over its K root slots.
    action = np.asarray(out.action_slot if policy == "sampled" else out.action)
    weights = np.asarray(out.action_weights)
    for b in range(B):
        if legal[b].any():
            assert 0 <= action[b] < num_actions and legal[b, action[b]], (b, action[b])
            np.testing.assert_allclose(weights[b].sum(), 1.0, rtol=1e-5)
            assert np.all(weights[b][~legal[b]] == 0)
    if feature == "solver" and policy not in STOCHASTIC:
        # Every proof against backward induction (chance nodes: the expectimax
        # oracle in test_stochastic).
        assert sc.check_game_proofs(tree, _FOREST).any()
    if feature == "lcb":
        assert tree.node_sq_values is not None
    if feature == "tree_bounds":
        _check_tree_bounds(tree)
    if feature == "early_stop":
        _check_early_stop(tree, _run(key, policy=policy, feature="plain", mode=mode)[1],
                          num_actions)
    if feature == "plain" and mode == "graph":
        # No transpositions in a random game tree (nor in the hashed stochastic
        # game, whose ids never repeat): graph search is tree search.
        plain, _ = _run(key, policy=policy, feature="plain", mode="tree")
        np.testing.assert_array_equal(np.asarray(plain.search_tree.edge_visits),
                                      np.asarray(tree.edge_visits))


def _check_tree_bounds(tree) -> None:
    """The tree-wide bounds hold every visited edge's final ``Q = r + d V(child)``
    (recomputed in NumPy from the stored nodes): they are the extremes over every
    value a backup wrote, the final ones among them."""
    children = np.asarray(tree.children_index)
    visited = (children >= 0) & (np.asarray(tree.edge_visits) > 0)
    child = np.maximum(children, 0)
    rows = np.arange(B)[:, None, None]
    if tree.edge_rewards is not None:
        reward, discount = np.asarray(tree.edge_rewards), np.asarray(tree.edge_discounts)
    else:
        reward = np.asarray(tree.node_rewards)[rows, child]
        discount = np.asarray(tree.node_discounts)[rows, child]
    q = reward + discount * np.asarray(tree.node_values)[rows, child]
    low, high = np.asarray(tree.minmax_low), np.asarray(tree.minmax_high)
    for b in range(B):
        assert visited[b].any(), b
        assert low[b] <= q[b][visited[b]].min() + 1e-5, (b, low[b], q[b][visited[b]].min())
        assert high[b] >= q[b][visited[b]].max() - 1e-5, (b, high[b], q[b][visited[b]].max())


def _check_early_stop(tree, plain, num_actions: int) -> None:
    """The plain search's most visited legal root action is kept; the simulations
    saved are the budget the root's visits did not use (one walk per step)."""
    visits = np.asarray(tree.edge_visits[:, 0, :num_actions])
    plain_visits = np.asarray(plain.search_tree.edge_visits[:, 0, :num_actions])
    legal = np.asarray(tree.children_index[:, 0, :num_actions]) != jaxpuct.ILLEGAL
    np.testing.assert_array_equal(np.argmax(np.where(legal, visits, -1), -1),
                                  np.argmax(np.where(legal, plain_visits, -1), -1))
    saved = np.asarray(tree.summary().simulations_saved)
    np.testing.assert_array_equal(saved, np.where(legal.any(-1), S - visits.sum(-1), 0))
    assert np.all(visits <= plain_visits)


def test_continued_tree_refuses_another_kind_or_capacity():
    """A tree knows what it is: a stochastic tree is not continued by alphazero, a
    capacity or a graph layout cannot change under a continued search."""
    stoch, _ = _run(jax.random.PRNGKey(0), policy="stochastic", feature="plain", mode="tree")
    with pytest.raises(ValueError, match="expectation"):
        jaxpuct.stochastic_policy(None, jax.random.PRNGKey(0), _STOCH_ROOT, _DECISION,
                                  _CHANCE, S, graph=jaxpuct.GraphConfig(),
                                  chance_backup="expectation")
    with pytest.raises(ValueError, match="chance"):
        jax.jit(lambda t: jaxpuct.alphazero_policy(
            _FOREST, jax.random.PRNGKey(0), None, _GAME_RF, S, tree=t))(stoch.search_tree)
    with pytest.raises(ValueError, match="subtree_path"):
        jaxpuct.subtree(stoch.search_tree, stoch.action)
    plain, _ = _run(jax.random.PRNGKey(0), policy="alphazero", feature="plain", mode="graph")
    tree = plain.search_tree
    with pytest.raises(ValueError, match="max_nodes=99"):
        jaxpuct.search(_FOREST, jax.random.PRNGKey(0), None, _GAME_RF, S, tree=tree,
                       max_nodes=99)
    with pytest.raises(ValueError, match="max_probes"):
        jaxpuct.search(_FOREST, jax.random.PRNGKey(0), None, _GAME_RF, S, tree=tree,
                       graph=jaxpuct.GraphConfig(max_probes=4))
    with pytest.raises(ValueError, match="max_probes"):
        jaxpuct.subtree(tree, plain.action, graph=jaxpuct.GraphConfig(max_probes=4))
    with pytest.raises(ValueError, match="leaves_per_step"):
        jaxpuct.search(_FOREST, jax.random.PRNGKey(0), None, _GAME_RF, S, tree=tree,
                       virtual_loss=jaxpuct.VirtualLoss())


# ------------------------------------------------- sampled_gumbel_policy's cells
# Appended apart from the table above (same features and modes, same checks), so
# the table's own edits and these merge apart. The Gumbel root over K sampled
# actions takes no Dirichlet noise (its noise is the Gumbel draw that chose the
# samples, as for gumbel_policy); it refuses several leaves and early stopping as
# every Gumbel root does, a continued tree because sequential halving ranks the
# root's samples by the draw that chose them, and graph search and the solver as
# every sampled-action search does.
SAMPLED_GUMBEL_REFUSED = {
    **{("sampled_gumbel", f, "graph"): ["graph=", "sampled actions"]
       for f in FEATURES if f not in ("dirichlet", "tree_bounds")},
    ("sampled_gumbel", "reuse", "tree"): ["tree=", "sequential halving"],
    ("sampled_gumbel", "leaves", "tree"): ["leaves_per_step", "sequential halving"],
    ("sampled_gumbel", "solver", "tree"): ["solver=", "sampled actions"],
    ("sampled_gumbel", "early_stop", "tree"): ["early_stop", "sequential halving"],
}
# No Dirichlet noise and no PUCT selection at a Gumbel root (as for gumbel_policy).
SAMPLED_GUMBEL_CELLS = [("sampled_gumbel", f, m) for f in FEATURES for m in MODES
                        if f not in ("dirichlet", "tree_bounds", "chance_ties", "tie_break")]


@functools.partial(sc.jit, static_argnames=("feature", "mode"))
def _run_sampled_gumbel(key, *, feature, mode):
    """One cell's search (a refused cell raises while tracing: nothing compiled)."""
    kw = _keywords("gumbel", feature, mode)
    root = random_games.root(_FOREST, jnp.asarray(_ROOTS), with_hash=True)
    out = jaxpuct.sampled_gumbel_policy(_FOREST, key, root, _GAME_RF, S, num_samples=2, **kw)
    if feature != "reuse":
        return out
    tree, _ = jaxpuct.subtree(out.search_tree, out.action_slot)
    kw.pop("max_nodes")
    return jaxpuct.sampled_gumbel_policy(_FOREST, jax.random.fold_in(key, 1), None, _GAME_RF,
                                         S, tree=tree, num_samples=2, **kw)


@pytest.mark.parametrize("policy, feature, mode", SAMPLED_GUMBEL_CELLS,
                         ids=[f"{p}-{f}-{m}" for p, f, m in SAMPLED_GUMBEL_CELLS])
def test_sampled_gumbel_with_feature(policy, feature, mode):
    key = jax.random.PRNGKey(7)
    if (policy, feature, mode) in SAMPLED_GUMBEL_REFUSED:
        with pytest.raises(ValueError) as info:
            _run_sampled_gumbel(key, feature=feature, mode=mode)
        for word in SAMPLED_GUMBEL_REFUSED[policy, feature, mode]:
            assert word in str(info.value), (word, str(info.value))
        return
    out = jax.device_get(_run_sampled_gumbel(key, feature=feature, mode=mode))
    tree = out.search_tree
    assert tree.kind == "sampled" and tree.num_actions == 2
    check_tree(tree, S)
    legal = np.asarray(tree.children_index[:, 0]) != jaxpuct.ILLEGAL
    root_actions = np.asarray(out.sampled_actions)
    for b in range(B):
        assert legal[b].any()
        slot = out.action_slot[b]
        assert 0 <= slot < 2 and legal[b, slot], (b, slot)
        assert out.action[b] == root_actions[b, slot]
        np.testing.assert_allclose(out.action_weights[b].sum(), 1.0, rtol=1e-5)
        assert np.all(out.action_weights[b][~legal[b]] == 0)
        # Drawn without replacement: the root's valid slots hold distinct actions.
        assert len(set(root_actions[b, legal[b]])) == legal[b].sum()
    if feature == "lcb":
        assert tree.node_sq_values is not None
        # KataGo's LCB move is a visited root slot (the Gumbel move need not be).
        assert np.all(tree.edge_visits[np.arange(B), 0, out.action_slot] > 0)


def test_sampled_gumbel_takes_no_dirichlet_noise():
    """Not applicable by design, not forgotten: the Gumbel root's noise is the Gumbel
    draw that chose the samples, and the policy has no Dirichlet arguments."""
    import inspect

    params = inspect.signature(jaxpuct.sampled_gumbel_policy).parameters
    assert "dirichlet_fraction" not in params and "dirichlet_alpha" not in params
    assert "dirichlet_fraction" in inspect.signature(jaxpuct.sampled_policy).parameters
    # Nor a PUCT rule (so no tree-wide min-max bounds): the Gumbel policies select
    # by their completed-Q transform.
    for policy in (jaxpuct.gumbel_policy, jaxpuct.sampled_gumbel_policy,
                   jaxpuct.stochastic_gumbel_policy):
        assert "selection" not in inspect.signature(policy).parameters, policy

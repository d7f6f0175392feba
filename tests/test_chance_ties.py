"""Ties under the chance quota rule (``chance_ties`` of the stochastic policies).

One root action leads to a chance node of ``C = 6`` outcomes whose probabilities
are the search's ``params`` (so one compile serves every distribution); outcome
``c`` leads to a state of value ``c / 5``. Oracles: which outcomes the quota rule
may take (lowest indices for ``"first"``; any tied one, each about equally often,
for ``"random"``), Jefferson apportionment ``N(c) >= floor(n p(c))`` either way,
and the expectimax value: with ``chance_backup="expectation"`` the chance node's
value after three of six equally likely outcomes is ``(1/6) sum v_c + (1/2) U``,
whose mean over random ties is the exact ``0.5`` and which ``"first"`` pins at
``0.35``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc

import jaxpuct
from jaxpuct.stochastic import ChanceRecurrentFnOutput, DecisionRecurrentFnOutput

C = 6
UNIFORM = jnp.zeros((C,), jnp.float32)
AFTERSTATE_VALUE = 0.5  # the exact mean of c / 5 over six equally likely outcomes


def _root(batch: int) -> jaxpuct.RootFnOutput:
    return jaxpuct.RootFnOutput(prior_logits=jnp.zeros((batch, 1)), value=jnp.zeros((batch,)),
                                embedding=jnp.zeros((batch,), jnp.int32))


def _decision(logits, key, action, state):
    del key, action
    batch = state.shape[0]
    return DecisionRecurrentFnOutput(
        chance_logits=jnp.broadcast_to(logits, (batch, C)),
        afterstate_value=jnp.full((batch,), AFTERSTATE_VALUE)), state


def _chance(logits, key, outcome, afterstate):
    del logits, key
    batch = afterstate.shape[0]
    return ChanceRecurrentFnOutput(
        action_logits=jnp.zeros((batch, 1)), value=outcome.astype(jnp.float32) / 5.0,
        reward=jnp.zeros((batch,)), discount=jnp.ones((batch,))), outcome


@functools.partial(sc.jit, static_argnames=("ties", "backup", "simulations"))
def _search(logits, keys, *, ties, backup="visits", simulations=4):
    tree, _ = jaxpuct.stochastic_search(logits, keys, _root(keys.shape[0]), _decision, _chance,
                                        simulations, chance_ties=ties, chance_backup=backup)
    return tree


def _chance_node(tree) -> tuple[np.ndarray, np.ndarray]:
    """``([B, C] visits of the root action's chance node, [B] its value)``."""
    node = np.asarray(tree.children_index[:, 0, 0])
    rows = np.arange(node.shape[0])
    assert not np.asarray(jaxpuct.stochastic.is_decision_node(tree))[rows, node].any()
    return (np.asarray(tree.edge_visits)[rows, node, :C],
            np.asarray(tree.node_values)[rows, node])


_KEYS = jax.random.split(jax.random.PRNGKey(0), 240)


def test_first_takes_the_lowest_indices():
    visits, value = _chance_node(_search(UNIFORM, _KEYS[:8], ties="first", backup="expectation"))
    np.testing.assert_array_equal(visits, np.tile([1, 1, 1, 0, 0, 0], (8, 1)))
    np.testing.assert_allclose(value, (0.0 + 0.2 + 0.4) / 6 + 0.5 * AFTERSTATE_VALUE, atol=1e-6)


@pytest.mark.parametrize("ties", ["random", "shared"])
def test_random_spreads_the_ties_and_removes_the_bias(ties):
    visits, value = _chance_node(_search(UNIFORM, _KEYS, ties=ties, backup="expectation"))
    # Three distinct outcomes once each: the quota rule's apportionment still holds.
    assert set(np.unique(visits)) <= {0, 1}
    np.testing.assert_array_equal(visits.sum(axis=1), 3)
    # Each outcome in about half the trees (binomial sd 0.032 over 240 trees).
    share = visits.mean(axis=0)
    assert np.all(np.abs(share - 0.5) < 0.15), share
    assert len({tuple(row) for row in visits}) >= 15  # of the C(6, 3) = 20 sets
    # The mean over trees is the expectimax value 0.5 (sd of the mean 0.005).
    expected = (visits * np.arange(C) / 5.0).sum(axis=1) / 6 + 0.5 * AFTERSTATE_VALUE
    np.testing.assert_allclose(value, expected, atol=1e-6)
    assert abs(value.mean() - 0.5) < 0.02, value.mean()


@pytest.mark.parametrize("ties", ["first", "random", "shared"])
def test_apportionment_with_unequal_probabilities(ties):
    probs = np.array([0.4, 0.2, 0.2, 0.2, 0.0, 0.0])
    logits = jnp.log(jnp.asarray(probs, jnp.float32))
    visits, _ = _chance_node(_search(logits, _KEYS[:16], ties=ties, simulations=21))
    # 20 walks through the chance node: floor(20 p) sums to 20, so it is exact.
    np.testing.assert_array_equal(visits, np.tile([8, 4, 4, 4, 0, 0], (16, 1)))


@pytest.mark.parametrize("ties", ["random", "shared"])
def test_random_ties_batch_equals_single(ties):
    keys = _KEYS[:3]
    together = _search(UNIFORM, keys, ties=ties, simulations=9)
    for i in range(3):
        alone = _search(UNIFORM, keys[i:i + 1], ties=ties, simulations=9)
        for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(together), strict=True):
            np.testing.assert_array_equal(np.asarray(a)[0], np.asarray(b)[i])


def test_policies_take_it_and_refuse_an_unknown_choice():
    out = jaxpuct.stochastic_gumbel_policy(UNIFORM, _KEYS[:32], _root(32), _decision, _chance, 4,
                                           chance_ties="random")
    visits, _ = _chance_node(out.search_tree)
    assert len({tuple(row) for row in visits}) > 1
    with pytest.raises(ValueError, match="chance_ties"):
        jaxpuct.stochastic_policy(UNIFORM, _KEYS[:2], _root(2), _decision, _chance, 4,
                                  chance_ties="lowest")


# Two root moves, each to its own chance node of the same six equally likely
# outcomes: "shared" shows both the same outcomes in the same order.
def _two_move_decision(key, action, state):
    del key, action
    batch = state.shape[0]
    return DecisionRecurrentFnOutput(
        chance_logits=jnp.zeros((batch, C)),
        afterstate_value=jnp.full((batch,), AFTERSTATE_VALUE)), state


def _two_move_chance(key, outcome, afterstate):
    del key
    batch = afterstate.shape[0]
    return ChanceRecurrentFnOutput(
        action_logits=jnp.zeros((batch, 2)), value=outcome.astype(jnp.float32) / 5.0,
        reward=jnp.zeros((batch,)), discount=jnp.ones((batch,))), outcome


@functools.partial(sc.jit, static_argnames=("ties",))
def _two_move_search(keys, *, ties):
    batch = keys.shape[0]
    root = jaxpuct.RootFnOutput(prior_logits=jnp.zeros((batch, 2)), value=jnp.zeros((batch,)),
                                embedding=jnp.zeros((batch,), jnp.int32))
    tree, _ = jaxpuct.stochastic_search(
        None, keys, root, lambda p, k, a, s: _two_move_decision(k, a, s),
        lambda p, k, c, a: _two_move_chance(k, c, a), 8, chance_ties=ties,
        selection=jaxpuct.PUCTConfig.uct())
    return tree


@pytest.mark.parametrize("ties", ["random", "shared"])
def test_shared_ties_show_sibling_chance_nodes_the_same_outcomes(ties):
    tree = _two_move_search(_KEYS[:120], ties=ties)
    rows = np.arange(120)
    seen = []
    for move in (0, 1):
        node = np.asarray(tree.children_index[:, 0, move])
        assert (node > 0).all()
        seen.append(np.asarray(tree.edge_visits)[rows, node, :C] > 0)
    counts = np.stack([s.sum(axis=1) for s in seen])
    assert counts.min() >= 2  # each chance node took at least two outcomes
    # One order per tree: the node with fewer outcomes has seen a subset of the other's.
    fewer = np.where(counts[0] <= counts[1], 0, 1)
    subset = np.array([not (seen[f][b] & ~seen[1 - f][b]).any()
                       for b, f in enumerate(fewer)])
    if ties == "shared":
        assert subset.all()
        # ... and the order changes from tree to tree: every outcome comes first somewhere.
        assert (np.stack(seen).any(axis=0).sum(axis=0) > 0).all()
        assert len({tuple(row) for row in seen[0]}) >= 15  # of the C(6, 3) = 20 sets
    else:  # drawn at every visit, the siblings' outcomes differ in most trees (0.1 here)
        assert subset.mean() < 0.3, subset.mean()

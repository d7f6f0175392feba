"""Ties of the selection score (``PUCTConfig.tie_break``).

The game: ``A = 6`` root actions, four of them legal (0, 2, 3 and 5), every child
a non-terminal leaf of value 0 with no reward. Under UCT (:meth:`PUCTConfig.uct`)
every unvisited action scores the same, so the first visits are all ties.
Oracles: ``"first"`` visits the legal actions in index order; ``"random"`` visits
them in a uniformly random order (OpenSpiel's ``MCTSBot`` shuffles a node's
actions), so after ``k`` simulations each tree has visited ``k`` distinct legal
actions, and each of the six pairs is the first two about one time in six; a
batch searched together equals its trees searched alone.
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
from jaxpuct.selection import best_action

A = 6
LEGAL = np.array([True, False, True, True, False, True])
PAIRS = list(itertools.combinations(np.flatnonzero(LEGAL), 2))


def _recurrent(params, key, action, embedding):
    del params, key
    batch = action.shape[0]
    return jaxpuct.RecurrentFnOutput(
        reward=jnp.zeros(batch), discount=jnp.ones(batch),
        prior_logits=jnp.zeros((batch, A)), value=jnp.zeros(batch)), embedding + 1


def _root(batch: int) -> jaxpuct.RootFnOutput:
    return jaxpuct.RootFnOutput(prior_logits=jnp.zeros((batch, A)), value=jnp.zeros(batch),
                                embedding=jnp.zeros(batch, jnp.int32))


@functools.partial(sc.jit, static_argnames=("tie_break", "solver", "simulations"))
def _root_visits(keys, *, tie_break, solver=False, simulations=2):
    invalid = jnp.broadcast_to(jnp.asarray(~LEGAL), (keys.shape[0], A))
    out = jaxpuct.alphazero_policy(
        None, keys, _root(keys.shape[0]), _recurrent, simulations, invalid,
        selection=jaxpuct.PUCTConfig.uct(tie_break=tie_break), dirichlet_fraction=0.0,
        solver=solver)
    return out.search_tree.edge_visits[:, 0]


_KEYS = jax.random.split(jax.random.PRNGKey(3), 600)


def test_first_visits_the_legal_actions_in_index_order():
    visits = np.asarray(_root_visits(_KEYS[:4], tie_break="first"))
    np.testing.assert_array_equal(visits, np.tile([1, 0, 1, 0, 0, 0], (4, 1)))


@pytest.mark.parametrize("solver", [False, True], ids=["puct_rule", "solver_rule"])
def test_random_visits_the_legal_actions_in_a_uniform_random_order(solver):
    visits = np.asarray(_root_visits(_KEYS, tie_break="random", solver=solver))
    # Two simulations, two distinct legal actions in every tree.
    assert (visits[:, ~LEGAL] == 0).all()
    np.testing.assert_array_equal(visits.max(axis=1), 1)
    np.testing.assert_array_equal(visits.sum(axis=1), 2)
    counts = [int(((visits[:, a] == 1) & (visits[:, b] == 1)).sum()) for a, b in PAIRS]
    # 600 trees, each pair with probability 1/6: mean 100, standard deviation 9.1.
    assert min(counts) > 100 - 40 and max(counts) < 100 + 40, counts


def test_random_ties_are_per_tree():
    batch = np.asarray(_root_visits(_KEYS[:6], tie_break="random", simulations=3))
    for b in range(6):
        alone = np.asarray(_root_visits(_KEYS[b:b + 1], tie_break="random", simulations=3))
        np.testing.assert_array_equal(alone[0], batch[b])


def test_best_action_against_numpy():
    scores = np.array([[1.0, 3.0, 3.0, -np.inf], [-np.inf] * 4, [2.0, 0.0, 2.0, 2.0]],
                      np.float32)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    first = np.asarray(best_action(jaxpuct.PUCTConfig(), jnp.asarray(scores), keys))
    np.testing.assert_array_equal(first, [1, 0, 0])
    draws = np.stack([np.asarray(best_action(jaxpuct.PUCTConfig(tie_break="random"),
                                             jnp.asarray(scores),
                                             jax.random.split(jax.random.PRNGKey(s), 3)))
                      for s in range(40)])
    assert set(draws[:, 0]) == {1, 2}
    np.testing.assert_array_equal(draws[:, 1], 0)  # no legal action: 0, as "first"
    assert set(draws[:, 2]) == {0, 2, 3}


def test_tie_break_is_checked_by_name():
    with pytest.raises(ValueError, match="PUCTConfig.tie_break"):
        jaxpuct.PUCTConfig(tie_break="last")

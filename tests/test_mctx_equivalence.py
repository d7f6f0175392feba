"""Equality with ``mctx.muzero_policy`` under ``PUCTConfig.mctx_muzero()``.

The same mctx-style ``recurrent_fn`` (returning ``mctx.RecurrentFnOutput``, so
jaxpuct sees no legal mask and no terminal flag and, like mctx, expands terminal
states into absorbing ones) drives both searches, on random games where every
action is legal: mctx masks illegal actions only at the root, so that is where the
two rules coincide. Root noise is off (``dirichlet_fraction=0``).

mctx adds ``1e-7 * uniform`` to every selection score to break ties; jaxpuct breaks
ties by the lowest index. Games with uniform priors and zero leaf values are full
of exact ties, so the main test removes mctx's noise (see ``_no_mctx_tie_noise``)
and then asserts equality of the whole trees. A second test compares un-patched
mctx at the root, on games whose priors and values are random.
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc

import jaxpuct
from jaxpuct.testing import random_games

mctx = pytest.importorskip("mctx")
from mctx._src import action_selection as mctx_action_selection  # noqa: E402

B, SIMS = 8, 48


def _mctx_recurrent_fn(params, rng_key, action, embedding):
    """The random-game oracle as a plain mctx ``recurrent_fn``."""
    out, new_embedding = random_games.recurrent_fn(params, rng_key, action, embedding)
    return mctx.RecurrentFnOutput(reward=out.reward, discount=out.discount,
                                  prior_logits=out.prior_logits, value=out.value), new_embedding


def _mctx_root(forest, roots):
    root = random_games.root(forest, roots)
    return mctx.RootFnOutput(prior_logits=root.prior_logits, value=root.value,
                             embedding=root.embedding)


@sc.jit
def _jaxpuct_policy(forest, roots, key):
    return jaxpuct.alphazero_policy(
        forest, key, _mctx_root(forest, roots), _mctx_recurrent_fn, SIMS,
        selection=jaxpuct.PUCTConfig.mctx_muzero(), dirichlet_fraction=0.0, temperature=1.0)


@sc.jit
def _jaxpuct_policy_with_terminals(forest, roots, key):
    """The same search given jaxpuct's extra fields (legal mask, terminal flag)."""
    return jaxpuct.alphazero_policy(
        forest, key, random_games.root(forest, roots), random_games.recurrent_fn,
        SIMS, selection=jaxpuct.PUCTConfig.mctx_muzero(), dirichlet_fraction=0.0,
        temperature=1.0)


def _mctx_policy(forest, roots, key):
    return mctx.muzero_policy(forest, key, _mctx_root(forest, roots), _mctx_recurrent_fn, SIMS,
                              dirichlet_fraction=0.0, temperature=1.0)


@sc.jit
def _mctx_plain(forest, roots, key):
    """mctx as it is (traced only outside the patch)."""
    return _mctx_policy(forest, roots, key)


def _no_mctx_tie_noise(monkeypatch):
    """Makes ``jax.random.uniform`` return zeros inside mctx's action selection only.

    ``mctx.muzero_action_selection`` adds ``1e-7 * jax.random.uniform(...)`` to its
    scores. Where two actions tie exactly (common with uniform priors and zero leaf
    values), that noise picks one at random while jaxpuct takes the lowest index, and
    the two trees diverge from there on. With zeros, mctx's ``argmax`` also takes the
    lowest index, and its rule is exactly ``PUCTConfig.mctx_muzero()``. The module's
    ``jax`` is replaced by a proxy so that nothing else (jaxpuct, mctx's search, the
    test) is affected.
    """

    def zeros(key, shape=(), dtype=jnp.float32, minval=0.0, maxval=1.0):
        del key, minval, maxval
        return jnp.zeros(shape, dtype)

    proxy = types.SimpleNamespace(**{name: getattr(jax, name) for name in dir(jax)
                                     if not name.startswith("__")})
    proxy.random = types.SimpleNamespace(**{name: getattr(jax.random, name)
                                            for name in dir(jax.random)
                                            if not name.startswith("__")})
    proxy.random.uniform = zeros
    monkeypatch.setattr(mctx_action_selection, "jax", proxy)


def _all_legal_forest(seeds, **kwargs):
    forest, roots, games = sc.game_forest(seeds, legal_prob=1.0, **kwargs)
    assert all((np.asarray(g.children)[~np.asarray(g.terminal)] >= 0).all() for g in games)
    return forest, roots


def _assert_same_trees(ours, theirs):
    t, m = ours.search_tree, theirs.search_tree
    # Every simulation expands one new node in both (terminal states included), in
    # the same order, so the trees can be compared slot by slot.
    np.testing.assert_array_equal(t.num_nodes, SIMS + 1)
    np.testing.assert_array_equal(t.summary().visit_counts, m.summary().visit_counts)
    np.testing.assert_array_equal(t.node_visits, m.node_visits)
    np.testing.assert_array_equal(t.edge_visits, m.children_visits)
    np.testing.assert_array_equal(t.children_index, m.children_index)
    np.testing.assert_array_equal(t.embeddings, m.embeddings)
    # Same running means in the same order: the values agree to the last bit.
    np.testing.assert_array_equal(t.node_values, m.node_values)
    np.testing.assert_array_equal(t.summary().value, m.summary().value)
    np.testing.assert_array_equal(t.summary().qvalues, m.summary().qvalues)
    # mctx's weights are N / sum N; jaxpuct's N^(1/tau) normalised (one rounding more).
    np.testing.assert_allclose(ours.action_weights, theirs.action_weights, rtol=1e-6)


def test_equal_to_mctx_without_its_tie_noise(monkeypatch):
    _no_mctx_tie_noise(monkeypatch)
    # Uniform priors, leaf value 0, outcomes in {-1, 0, 1}: exact ties everywhere.
    forest, roots = _all_legal_forest(range(200, 200 + B))
    key = jax.random.PRNGKey(0)
    # A fresh function object, so that no cached trace is reused: traced now, while the
    # patch is in place.
    def mctx_patched(forest, roots, key):
        return _mctx_policy(forest, roots, key)

    theirs = sc.jit(mctx_patched)(forest, roots, key)
    ours = _jaxpuct_policy(forest, roots, key)
    _assert_same_trees(ours, theirs)
    # Not vacuous: the searches are not all alike.
    counts = np.asarray(ours.search_tree.summary().visit_counts)
    assert len({tuple(c) for c in counts}) > B // 2

    # jaxpuct given the terminal flags stops at terminal states instead of expanding
    # them into absorbing states worth 0; the root statistics are the same.
    ours_terminal = _jaxpuct_policy_with_terminals(forest, roots, key)
    np.testing.assert_array_equal(ours_terminal.search_tree.summary().visit_counts,
                                  theirs.search_tree.summary().visit_counts)
    np.testing.assert_allclose(ours_terminal.search_tree.summary().value,
                               theirs.search_tree.summary().value, rtol=1e-6, atol=1e-7)


def test_equal_to_plain_mctx_at_the_root():
    """Un-patched mctx, random priors and values, dense rewards.

    Above the terminal states nothing ties, so mctx's 1e-7 noise changes no decision
    there and the root statistics are equal. (Below a terminal state, both searches
    expand absorbing "dead" states with uniform priors and value 0: exact ties, which
    mctx breaks at random; that reorders the node slots, so the trees are not
    compared slot by slot here.)
    """
    forest, roots = _all_legal_forest(range(300, 300 + B), prior_scale=1.0, value_noise=0.3,
                                      reward_mode="dense")
    key = jax.random.PRNGKey(1)
    theirs = _mctx_plain(forest, roots, key)
    ours = _jaxpuct_policy(forest, roots, key)
    t, m = ours.search_tree.summary(), theirs.search_tree.summary()
    np.testing.assert_array_equal(t.visit_counts, m.visit_counts)
    np.testing.assert_allclose(t.value, m.value, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(t.qvalues, m.qvalues, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.action_weights, theirs.action_weights, rtol=1e-6)
    assert len({tuple(c) for c in np.asarray(t.visit_counts)}) > B // 2


def _mctx_dirichlet(key, alpha=0.3):
    """mctx.muzero_policy's root noise for ``key``: its second of three keys."""
    return jax.random.dirichlet(jax.random.split(key, 3)[1], jnp.full([A_ROOT], alpha), (B,))


A_ROOT = sc.NUM_ACTIONS


@sc.jit
def _jaxpuct_policy_with_mctx_noise(forest, roots, key):
    return jaxpuct.alphazero_policy(
        forest, key, _mctx_root(forest, roots), _mctx_recurrent_fn, SIMS,
        selection=jaxpuct.PUCTConfig.mctx_muzero(), dirichlet_fraction=0.25,
        dirichlet_alpha=0.3, dirichlet=_mctx_dirichlet(key), temperature=1.0)


def test_equal_to_mctx_with_its_default_noise_given_its_draw(monkeypatch):
    """``dirichlet=`` takes mctx's draw: the trees are then equal with mctx's default
    root noise (fraction 0.25, alpha 0.3) as they are without noise."""
    _no_mctx_tie_noise(monkeypatch)
    forest, roots = _all_legal_forest(range(200, 200 + B))
    key = jax.random.PRNGKey(5)

    def mctx_noised(forest, roots, key):
        return mctx.muzero_policy(forest, key, _mctx_root(forest, roots), _mctx_recurrent_fn,
                                  SIMS, temperature=1.0)  # default noise

    theirs = sc.jit(mctx_noised)(forest, roots, key)
    ours = _jaxpuct_policy_with_mctx_noise(forest, roots, key)
    assert ours.search_tree.num_actions == A_ROOT
    # The noised root prior: the same formula as mctx's, to float32 rounding (the two
    # programs fuse it differently, which may move the last bit).
    np.testing.assert_allclose(
        ours.search_tree.root_prior,
        jax.nn.softmax(theirs.search_tree.children_prior_logits[:, 0]), rtol=1e-6)
    _assert_same_trees(ours, theirs)
    # Not vacuous: without the draw (each tree's own noise) the searches differ.
    own = _jaxpuct_policy(forest, roots, key)
    assert not np.array_equal(np.asarray(own.search_tree.summary().visit_counts),
                              np.asarray(theirs.search_tree.summary().visit_counts))


def test_mctx_tie_noise_is_what_differs():
    """Without the patch, the tie-heavy games of the first test do differ: the patch
    is needed, and the first test is not comparing mctx with itself."""
    forest, roots = _all_legal_forest(range(200, 200 + B))
    key = jax.random.PRNGKey(0)
    theirs = _mctx_plain(forest, roots, key)
    ours = _jaxpuct_policy(forest, roots, key)
    assert not np.array_equal(np.asarray(ours.search_tree.summary().visit_counts),
                              np.asarray(theirs.search_tree.summary().visit_counts))

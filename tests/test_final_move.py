"""The second moment, LCB move selection, KataGo's variance-scaled cPUCT and
policy-target pruning, each against formulas recomputed in NumPy."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import search_cases as sc

import jaxpuct
from jaxpuct import PUCTConfig
from jaxpuct.final_move import lcb_action, lcb_choice, prune_policy_target
from jaxpuct.selection import exploration_weight, utility_stdev_factor
from jaxpuct.testing import random_games

_RF = random_games.make_recurrent_fn(with_hash=True)


@sc.jit(static_argnames=("config", "graph", "k", "final_move"))
def _policy(forest, roots, keys, *, config, graph=None, k=1, final_move="visits"):
    root = random_games.root(forest, roots, with_hash=graph is not None)
    return jaxpuct.alphazero_policy(forest, keys, root, _RF, 40, selection=config, graph=graph,
                                    leaves_per_step=k, final_move=final_move,
                                    dirichlet_fraction=0.25)


def _edge_moments(t, b, i):
    """NumPy ``(Q, E[X**2])`` ``[A]`` of node ``i``'s edges (0 without a child)."""
    kids = t.children_index[b, i]
    safe = np.maximum(kids, 0)
    if t.edge_rewards is not None:
        r, d = t.edge_rewards[b, i].astype(np.float64), t.edge_discounts[b, i].astype(np.float64)
    else:
        r = t.node_rewards[b, safe].astype(np.float64)
        d = t.node_discounts[b, safe].astype(np.float64)
    v = t.node_values[b, safe].astype(np.float64)
    s = t.node_sq_values[b, safe].astype(np.float64)
    return np.where(kids >= 0, r + d * v, 0.0), np.where(kids >= 0, r * r + 2 * r * d * v
                                                         + d * d * s, 0.0)


@pytest.mark.parametrize("case", ["tree", "tree-K4", "graph"])
def test_second_moment_is_the_mean_of_squared_returns(case):
    """``N(n) E[X**2](n) = U(n)**2 + Σ_a N(n, a) E[(r + d Y)**2](child)`` at every
    searched node (the same identity check_tree checks for Q), and the second
    moment is never below ``Q**2``."""
    graph = jaxpuct.GraphConfig() if case == "graph" else None
    forest, roots, _ = sc.game_forest([3, 4, 5, 6], reward_mode="dense", value_noise=0.5,
                                      prior_scale=1.0)
    out = _policy(forest, roots, sc.element_keys(1, 4), config=sc.DEFAULT, graph=graph,
                  k=4 if case == "tree-K4" else 1, final_move="lcb")
    t = jax.tree.map(np.asarray, out.search_tree)
    assert t.node_sq_values is not None
    checked = 0
    for b in range(4):
        for i in range(int(t.num_nodes[b])):
            visits = t.edge_visits[b, i].astype(np.float64)
            kids = t.children_index[b, i]
            if t.node_terminal[b, i] or visits.sum() == 0 or np.any((kids < 0) & (visits > 0)):
                np.testing.assert_allclose(t.node_sq_values[b, i], t.raw_values[b, i] ** 2,
                                           rtol=1e-5, atol=1e-6)
                continue
            _, sq = _edge_moments(t, b, i)
            weight = 1.0 + visits.sum() if graph else float(t.node_visits[b, i])
            expected = (float(t.raw_values[b, i]) ** 2 + np.sum(visits * sq)) / weight
            np.testing.assert_allclose(t.node_sq_values[b, i], expected, rtol=1e-4, atol=1e-5)
            checked += 1
        used = slice(0, int(t.num_nodes[b]))
        assert np.all(t.node_sq_values[b, used] >= t.node_values[b, used] ** 2 - 1e-5)
    assert checked >= 8


def test_no_second_moment_unless_asked():
    forest, roots, _ = sc.game_forest([3, 4, 5, 6])
    out = _policy(forest, roots, sc.element_keys(1, 4), config=sc.DEFAULT)
    assert out.search_tree.node_sq_values is None
    assert "node_sq_values" not in out.search_tree.bytes_per_node()


def _lcb_numpy(visits, q, sq, stdevs=5.0, share=0.15):
    n = np.asarray(visits, np.float64)
    var = np.maximum(np.asarray(sq, np.float64) - np.asarray(q, np.float64) ** 2, 0.0)
    lcb = np.where(n > 0, q - stdevs * np.sqrt(var / np.maximum(n, 1)), -np.inf)
    ok = (n > 0) & (n >= share * n.max(-1, keepdims=True))
    lcb = np.where(ok, lcb, -np.inf)
    return np.where(ok.any(-1), np.argmax(lcb, -1), -1)


def test_lcb_choice_by_hand():
    # Row 0: move 0 is the most visited but noisy (Q 0.3, sd 0.8, N 100: LCB -0.1);
    #        move 1 has 60 visits, Q 0.25, sd 0.1: LCB 0.25 - 5 * 0.1 / sqrt(60) = 0.185.
    # Row 1: move 2 has a great, certain value but 10 < 0.15 * 100 visits: not eligible;
    #        move 0 (LCB 0.3 - 5 * 0.1 / 10 = 0.25) beats move 1 (0.2 - 0.5/sqrt(50)).
    # Row 2: no visits at all.
    visits = np.array([[100, 60, 0], [100, 50, 10], [0, 0, 0]])
    q = np.array([[0.3, 0.25, 0.0], [0.3, 0.2, 0.9], [0.0, 0.0, 0.0]])
    sd = np.array([[0.8, 0.1, 0.0], [0.1, 0.1, 0.0], [0.0, 0.0, 0.0]])
    sq = q ** 2 + sd ** 2
    got = np.asarray(lcb_choice(visits, q.astype(np.float32), sq.astype(np.float32)))
    np.testing.assert_array_equal(got, [1, 0, -1])
    np.testing.assert_array_equal(got, _lcb_numpy(visits, q, sq))
    rng = np.random.default_rng(0)
    visits = rng.integers(0, 50, (64, 6))
    q = rng.uniform(-1, 1, (64, 6))
    sq = q ** 2 + rng.uniform(0, 0.5, (64, 6))
    np.testing.assert_array_equal(
        lcb_choice(visits, q.astype(np.float32), sq.astype(np.float32), 2.0, 0.3),
        _lcb_numpy(visits, q, sq, 2.0, 0.3))


def test_policy_plays_the_lcb_move_of_its_tree():
    forest, roots, _ = sc.game_forest([7, 8, 9, 10], reward_mode="dense", value_noise=0.5)
    out = _policy(forest, roots, sc.element_keys(2, 4), config=sc.DEFAULT, final_move="lcb")
    t = jax.tree.map(np.asarray, out.search_tree)
    q, sq = zip(*(_edge_moments(t, b, 0) for b in range(4)), strict=True)
    np.testing.assert_array_equal(out.action, _lcb_numpy(t.edge_visits[:, 0], np.array(q),
                                                         np.array(sq)))
    np.testing.assert_array_equal(out.action, lcb_action(out.search_tree))
    with pytest.raises(ValueError, match="final_move"):
        jaxpuct.alphazero_policy(forest, sc.element_keys(2, 4),
                                 random_games.root(forest, roots), _RF, 8,
                                 final_move="robust")


def _stdev_factor_numpy(value, sq, weight, scale=0.85, prior=0.40, prior_weight=2.0):
    if weight <= 1:
        return 1.0
    sq = max(sq, value * value)
    var = (((value * value + prior * prior) * prior_weight + sq * weight)
           / (prior_weight + weight - 1.0) - value * value)
    return 1.0 + scale * (np.sqrt(max(var, 0.0)) / prior - 1.0)


def test_utility_stdev_factor_by_hand():
    config = PUCTConfig(utility_stdev_scale=0.85)
    rng = np.random.default_rng(1)
    value = rng.uniform(-1, 1, 200)
    sq = value ** 2 + rng.uniform(0, 1, 200) * rng.integers(0, 2, 200)
    weight = rng.integers(0, 30, 200)
    got = np.asarray(utility_stdev_factor(config, value.astype(np.float32),
                                          sq.astype(np.float32), weight))
    expected = [_stdev_factor_numpy(*args) for args in zip(value, sq, weight, strict=True)]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert np.all(got[weight <= 1] == 1.0)
    # A node whose returns vary like the prior keeps c; a quiet one explores less:
    # Var = ((0.25 + 0.16) * 2 + 0.25 * 1000) / 1001 - 0.25 = 0.57 / 1001.
    assert float(utility_stdev_factor(config, np.float32(0), np.float32(0.16), 1000)) == \
        pytest.approx(1.0, abs=2e-3)
    assert float(utility_stdev_factor(config, np.float32(0.5), np.float32(0.25), 1000)) == \
        pytest.approx(1.0 - 0.85 * (1.0 - np.sqrt(0.57 / 1001) / 0.4), rel=1e-4)


def test_variance_scaled_search_keeps_the_tree_invariants():
    config = PUCTConfig(utility_stdev_scale=0.85)
    forest, roots, _ = sc.game_forest([11, 12, 13, 14], reward_mode="dense", value_noise=0.5)
    out = _policy(forest, roots, sc.element_keys(3, 4), config=config)
    assert out.search_tree.node_sq_values is not None
    sc.check_tree(out.search_tree, forest, roots, 40)
    plain = _policy(forest, roots, sc.element_keys(3, 4), config=sc.DEFAULT)
    assert not np.array_equal(out.search_tree.edge_visits, plain.search_tree.edge_visits)
    with pytest.raises(ValueError, match="utility_stdev_prior"):
        PUCTConfig(utility_stdev_prior=0.0)


def test_prune_policy_target_by_hand():
    config = PUCTConfig()
    rng = np.random.default_rng(2)
    visits = rng.integers(0, 200, (50, 5)).astype(np.float64)
    visits[:, 0] += 300  # move 0 is the most visited
    prior = rng.dirichlet(np.ones(5), 50)
    q = rng.uniform(-0.6, 0.4, (50, 5))
    got = np.asarray(prune_policy_target(visits.astype(np.int32), prior.astype(np.float32),
                                         q.astype(np.float32), config), np.float64)
    total = visits.sum(-1, keepdims=True)
    c = np.asarray(exploration_weight(config, total[:, 0].astype(np.float32)),
                   np.float64)[:, None]

    def puct(n):
        return q + c * prior * np.sqrt(total) / (1.0 + n)

    best = puct(visits)[:, :1]
    forced = np.sqrt(2.0 * prior * total)
    np.testing.assert_array_equal(got[:, 0], visits[:, 0])
    other = np.zeros_like(visits, bool)
    other[:, 1:] = visits[:, 1:] > 0
    kept = other & (got > 0)
    assert np.all(got <= visits + 1e-6)
    assert np.all(got[kept] >= visits[kept] - forced[kept] - 1e-3)
    # Not limited by the forced playouts: pruned exactly to PUCT(c) = PUCT(i*).
    exact = kept & (got > visits - forced + 1e-3) & (got < visits - 1e-3)
    assert exact.sum() >= 5  # (8 with this seed)
    np.testing.assert_allclose(puct(got)[exact], np.broadcast_to(best, got.shape)[exact],
                               rtol=1e-4, atol=1e-4)
    # Pruned moves sit at or below 1 visit after pruning.
    gone = other & (got == 0)
    assert np.all(np.maximum(visits - forced, c * prior * np.sqrt(total)
                             / np.maximum(best - q, 1e-9) - 1.0)[gone & (best > q)] <= 1.0 + 1e-4)

"""Tree-wide min-max bounds (``PUCTConfig(minmax_bounds="tree")``) against a NumPy
recomputation of every selection of a small search, one simulation at a time."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpuct
from jaxpuct.extensions import TreeMinMax
from jaxpuct.selection import PUCTConfig, node_scores
from jaxpuct.testing import tictactoe as ttt
from jaxpuct.tree import ILLEGAL

TREE = PUCTConfig.mctx_muzero(minmax_bounds="tree")
_RECURRENT = ttt.make_recurrent_fn(exact_value=True)
_POSITIONS = ("X.O.X....", "XO..X.O..")


@jax.jit
def _one_more_simulation(tree):
    # One compiled simulation that continues the given tree (no noise, greedy).
    root = ttt.root(ttt.batch([ttt.parse(p) for p in _POSITIONS]), exact_value=True)
    return jaxpuct.alphazero_policy(None, jax.random.key(0), root, _RECURRENT, 1,
                                    tree=tree, selection=TREE, dirichlet_fraction=0.0,
                                    temperature=0.0).search_tree


def _edge_q(t, b, n):
    """``[A]`` Q(n, a) and visited mask of tree ``b`` (NumPy arrays of a Tree)."""
    child = t["children_index"][b, n]
    safe = np.maximum(child, 0)
    q = t["node_rewards"][b, safe] + t["node_discounts"][b, safe] * t["node_values"][b, safe]
    return q, (child >= 0) & (t["edge_visits"][b, n] > 0)


def _numpy_action(t, b, n, bounds):
    """The PUCT argmax of ``mctx_muzero`` at node ``n``, min-max bounds widened by
    ``bounds`` (``None``: the node's own)."""
    child = t["children_index"][b, n]
    visits = t["edge_visits"][b, n].astype(np.float32)
    prior = t["root_prior"][b] if n == 0 else t["children_prior"][b, n]
    count = np.float32(t["node_visits"][b, n])
    value = t["node_values"][b, n]
    q, has_q = _edge_q(t, b, n)
    lo = min(value, np.min(np.where(has_q, q, value)))
    hi = max(value, np.max(np.where(has_q, q, value)))
    if bounds is not None:
        lo, hi = min(lo, bounds[0]), max(hi, bounds[1])
    q = np.where(has_q, q, lo)
    q = (q - lo) / max(hi - lo, 1e-8)
    c = 1.25 + np.log((count + 19652.0 + 1.0) / 19652.0)
    u = c * prior * np.sqrt(count) / (visits + 1.0)
    return int(np.argmax(np.where(child != ILLEGAL, q + u, -np.inf)))


def _numpy_path(t, b, bounds):
    """The edges the next walk takes: down to an unexpanded edge or a terminal node."""
    node, path, differs = 0, [], False
    while True:
        action = _numpy_action(t, b, node, bounds)
        differs |= action != _numpy_action(t, b, node, None)
        path.append((node, action))
        child = t["children_index"][b, node, action]
        if child < 0 or t["node_terminal"][b, child]:
            return path, differs
        node = child


def _arrays(tree):
    return {k: np.asarray(getattr(tree, k)) for k in (
        "children_index", "edge_visits", "root_prior", "children_prior", "node_visits",
        "node_values", "node_rewards", "node_discounts", "node_terminal", "minmax_low",
        "minmax_high")}


def test_each_selection_and_the_bounds_equal_a_numpy_recomputation():
    root = ttt.root(ttt.batch([ttt.parse(p) for p in _POSITIONS]), exact_value=True)
    tree = TreeMinMax().prepare(jaxpuct.init_tree(root, max_nodes=16), False)
    disagreements = 0
    for _ in range(14):
        before = _arrays(tree)
        tree = _one_more_simulation(tree)
        after = _arrays(tree)
        for b in range(len(_POSITIONS)):
            # The bounds the walk reads: prepare's, over the visited edges of the tree.
            edges = [_edge_q(before, b, n) for n in range(16)]
            known = np.concatenate([q[m] for q, m in edges])
            bounds = ((known.min(), known.max()) if known.size else (np.inf, -np.inf))
            path, differs = _numpy_path(before, b, bounds)
            disagreements += differs
            added = after["edge_visits"][b] - before["edge_visits"][b]
            expected = np.zeros_like(added)
            for node, action in path:
                expected[node, action] = 1
            np.testing.assert_array_equal(added, expected)
            # After the backup: widened by the new mean Q of every edge on the path.
            path_q = [_edge_q(after, b, node)[0][action] for node, action in path]
            np.testing.assert_allclose(after["minmax_low"][b], min(bounds[0], *path_q),
                                       rtol=1e-6)
            np.testing.assert_allclose(after["minmax_high"][b], max(bounds[1], *path_q),
                                       rtol=1e-6)
    # The tree-wide bounds changed some selection here (else the test would not
    # tell them from the per-node bounds).
    assert disagreements > 0


def test_tree_bounds_need_a_normalisation_and_a_tree_that_keeps_them():
    with pytest.raises(ValueError, match="minmax_bounds='tree'.*q_normalization"):
        PUCTConfig(minmax_bounds="tree")
    with pytest.raises(ValueError, match="minmax_bounds"):
        PUCTConfig(minmax_bounds="graph")  # pyright: ignore[reportArgumentType]
    root = ttt.root(ttt.initial(2))
    bare = jaxpuct.init_tree(root, max_nodes=4)
    with pytest.raises(ValueError, match="tree.minmax_low"):
        node_scores(bare, TREE, jnp.zeros((2,), jnp.int32), True, jnp.zeros((2,)))

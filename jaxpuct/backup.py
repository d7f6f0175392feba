"""Tree mode: store the evaluated leaves and back their values up the paths.

Both work on a stack of ``K`` walks (``[K, B]`` path records: the walks of one
step of a multi-leaf search; ``K = 1`` otherwise), with O(K * B) work per depth
step and no tree-sized copy: the backup's ``while_loop`` carries only the
statistics arrays it scatters into, which XLA updates in place.

A node's search value is the running mean of the returns backed up through it
(``Q(n) = mean of r + discount * ...``); the tree's second moment
(``Tree.node_sq_values``, when stored) is the running mean of the squared
returns, folded in the same pass.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxpuct.indexing import row_add, row_set, row_take, row_take_once
from jaxpuct.tree import UNEXPANDED, NodeData, Tree, write_nodes
from jaxpuct.walk import Walk


class _BackupState(NamedTuple):
    """The backup's carry: the statistics arrays are updated in place."""

    depth: jax.Array  # scalar int32, counts down
    leaf_return: jax.Array  # [B] (or [K, B]) return seen from the node at ``depth``
    node_visits: jax.Array  # [B, N]
    node_values: jax.Array  # [B, N]
    edge_visits: jax.Array  # [B, N, A]
    node_sq_values: jax.Array | None  # [B, N] second moment, when stored


def store_leaves(tree: Tree, walks: Walk, leaves: NodeData) -> tuple[Tree, jax.Array]:
    """Stores each walk's evaluated leaf where there is room and returns the values
    to back up into each last edge's parent, ``[K, B]`` ``r + discount * v``.

    ``walks`` are ``[K, B]``, ``leaves`` ``[K, B, ...]``. Walk ``k`` gets the
    ``k``-th free slot among the walks that expand (as if stored one after
    another); the scatter that links the stored children also releases the
    claims of leaves that found no room (:mod:`jaxpuct.virtual_loss`). A walk that
    ended on an existing node (terminal, proven, or at ``max_depth``) backs up
    that node's stored value and counts one more visit to it.
    """
    parents, actions = walks.leaf_edge()
    expand = walks.expand
    taken = jnp.cumsum(expand.astype(jnp.int32), axis=0) - expand.astype(jnp.int32)
    slot = tree.num_nodes + taken
    store = expand & (slot < tree.max_nodes)
    slot = jnp.where(store, slot, tree.max_nodes)
    tree = write_nodes(tree, slot, leaves)
    edge_parent = jnp.where(expand, parents, tree.max_nodes)
    tree = tree.replace(
        num_nodes=tree.num_nodes + jnp.sum(store, axis=0, dtype=jnp.int32),
        children_index=row_set(tree.children_index, (edge_parent, actions),
                               jnp.where(store, slot, UNEXPANDED), tree_axis=1))
    leaf_node = walks.leaf_node()
    stopped = (walks.num_edges > 0) & ~expand
    stopped_return = (row_take(tree.node_rewards, leaf_node, tree_axis=1)
                      + row_take(tree.node_discounts, leaf_node, tree_axis=1)
                      * row_take(tree.node_values, leaf_node, tree_axis=1))
    tree = tree.replace(node_visits=row_add(
        tree.node_visits, jnp.where(stopped, leaf_node, tree.max_nodes), 1, tree_axis=1))
    leaf_return = jnp.where(expand, leaves.reward + leaves.discount * leaves.value,
                            stopped_return)
    return tree, leaf_return


def backup_visits(tree: Tree, walks: Walk, leaf_return: jax.Array) -> Tree:
    """Bottom-up along each path: one visit more for each node and edge, and the
    discounted return folded into each node's running mean.

    ``walks`` ``[K, B]``, ``leaf_return [K, B]`` the return seen from the parent
    of each last edge (from :func:`store_leaves`). One walk (``K = 1``) takes
    :func:`backup_path`; several take :func:`backup_paths`.
    """
    if walks.num_walks == 1:
        return backup_path(tree, walks.one(0), leaf_return[0])
    return backup_paths(tree, walks, leaf_return)


def _final(tree: Tree, state: _BackupState) -> Tree:
    return tree.replace(node_visits=state.node_visits, node_values=state.node_values,
                        edge_visits=state.edge_visits, node_sq_values=state.node_sq_values)


def backup_path(tree: Tree, walk: Walk, leaf_return: jax.Array) -> Tree:
    """One walk per tree (``[B]`` path records, ``leaf_return [B]``). Paths never
    repeat a node, so each step's scatters are duplicate-free. The loop runs
    ``max(num_edges)`` times; its work per step is O(B)."""

    def body(state: _BackupState) -> _BackupState:
        depth, ret = state.depth, state.leaf_return
        on_path = depth < walk.num_edges
        node = walk.path_nodes[:, depth]
        action = walk.path_actions[:, depth]
        added = on_path.astype(jnp.int32)
        # A set of the gathered count (not a scatter-add) lets XLA update the
        # carried array in place. The statistics below read the count back from
        # the updated array: a read of the old array that does not feed this
        # write could run after it, so XLA would copy the [B, N] counts twice
        # per depth step to keep the old ones (it did at B = 1).
        visits = row_set(state.node_visits, node, row_take(state.node_visits, node) + added)
        count = (row_take(visits, node) - added).astype(jnp.float32)
        value = row_take(state.node_values, node)
        new_value = (value * count + ret) / (count + 1.0)
        values = row_set(state.node_values, node, jnp.where(on_path, new_value, value))
        edge_visits = row_add(state.edge_visits, (node, action), on_path.astype(jnp.int32))
        sq_values = state.node_sq_values
        if sq_values is not None:
            sq = row_take(sq_values, node)
            new_sq = (sq * count + ret * ret) / (count + 1.0)
            sq_values = row_set(sq_values, node, jnp.where(on_path, new_sq, sq))
        parent_ret = (row_take(tree.node_rewards, node)
                      + row_take(tree.node_discounts, node) * ret)
        return _BackupState(depth - 1, jnp.where(on_path, parent_ret, ret), visits, values,
                            edge_visits, sq_values)

    init = _BackupState(jnp.max(walk.num_edges) - 1, leaf_return, tree.node_visits,
                        tree.node_values, tree.edge_visits, tree.node_sq_values)
    return _final(tree, jax.lax.while_loop(lambda s: s.depth >= 0, body, init))


def backup_paths(tree: Tree, walks: Walk, leaf_return: jax.Array) -> Tree:
    """``K`` walks per tree in one loop over depth (``[K, B]`` records).

    Several walks may pass through a node (at the same depth: this is a tree),
    so each depth step folds all their returns in at once: with ``m`` walks
    through a node of count ``n`` and value ``q``, ``n += m`` and
    ``q = (q * n_old + sum of returns) / (n_old + m)``, the same mean as ``m``
    one-walk backups (to rounding). The sums are scatter-adds, so duplicates are
    fine; O(K * B) per depth step.
    """
    def fold(array, node, scaled, added, count_after):
        # (q * n_old + sum of added) / n_new at every node on a path at this depth.
        array = row_set(array, node, scaled, tree_axis=1)
        array = row_add(array, node, added, tree_axis=1)
        total = row_take(array, jnp.minimum(node, tree.max_nodes - 1), tree_axis=1)
        return row_set(array, node, total / count_after, tree_axis=1)

    def body(state: _BackupState) -> _BackupState:
        depth, ret = state.depth, state.leaf_return
        on_path = depth < walks.num_edges
        safe = walks.path_nodes[:, :, depth]
        node = jnp.where(on_path, safe, tree.max_nodes)
        action = walks.path_actions[:, :, depth]
        count_int = row_take_once(depth, state.node_visits, safe, tree_axis=1)
        count = count_int.astype(jnp.float32)
        # Counts are >= 0, so this adds exactly 1; reading ``count_int`` in the
        # update orders the read before the in-place scatter-add (else XLA copies
        # the [B, N] counts to read them after it).
        visits = row_add(state.node_visits, node, 1 + jnp.minimum(count_int, 0), tree_axis=1)
        count_after = row_take(visits, safe, tree_axis=1).astype(jnp.float32)
        values = fold(state.node_values, node,
                      row_take(state.node_values, safe, tree_axis=1) * count, ret, count_after)
        edge_visits = row_add(state.edge_visits, (node, action), 1, tree_axis=1)
        sq_values = state.node_sq_values
        if sq_values is not None:
            sq_values = fold(sq_values, node, row_take(sq_values, safe, tree_axis=1) * count,
                             ret * ret, count_after)
        parent_ret = (row_take(tree.node_rewards, safe, tree_axis=1)
                      + row_take(tree.node_discounts, safe, tree_axis=1) * ret)
        return _BackupState(depth - 1, jnp.where(on_path, parent_ret, ret), visits, values,
                            edge_visits, sq_values)

    init = _BackupState(jnp.max(walks.num_edges) - 1, leaf_return, tree.node_visits,
                        tree.node_values, tree.edge_visits, tree.node_sq_values)
    return _final(tree, jax.lax.while_loop(lambda s: s.depth >= 0, body, init))

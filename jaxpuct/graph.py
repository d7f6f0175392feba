"""Monte-Carlo Graph Search: one node per state, found through a transposition table.

Follows KataGo's graph search (David Wu, "Monte-Carlo Graph Search from First
Principles", KataGo documentation, 2021):

* the tree arrays stay as they are, but a child index may point to a node that
  other edges point to as well;
* selection uses *edge* visits ``N(n, a)``, kept apart from the child's own
  count, so visits that reached a child through other parents do not change
  how this parent explores;
* the backup is idempotent: walking the path bottom-up, each node increments
  the edge it took and recomputes itself from its children's current values::

      N(n) = 1 + Σ_a N(n, a)
      Q(n) = (U(n) + Σ_a N(n, a) · Q(n, a)) / N(n),   Q(n, a) = r + γ · Q(child)

  so a node visited once is consistent with its children whatever happened
  through other paths; nodes off the path may be stale, which is sound.

Transposition table: per tree, an open-addressing table ``[B, T]`` of node
indices (``T`` a power of two, at least twice the node capacity), probed
linearly over at most ``max_probes`` slots from the hash's low bits. Lookups
and inserts touch ``max_probes`` slots per tree: bounded work, no host
round-trip, no dynamic shape. A state whose probe window is full is stored but
not inserted (a lost transposition, never a wrong one).

Hash collisions: two different states with the same 64-bit hash share a node.
Among ``M`` distinct states in one tree the probability of any collision is
about ``M**2 / 2**65`` (1e6 states: 3e-8). A collision mixes the statistics of
the two states in that tree only; it cannot crash the search or touch another
tree of the batch (tested with a deliberately bad hash).

Rewards: a child can be reached through edges with different rewards and
discounts (an MDP's ``r(s, a)``), so by default graph search stores them per
edge (8 more bytes per edge). ``GraphConfig(edge_rewards=False)`` keeps them on
the child node, as tree search does, which is right when they are a function
of the state reached (games scored by the final position; then include the
player to move in the hash).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxpuct import validation
from jaxpuct.indexing import row_add, row_set, row_take
from jaxpuct.numerics import gather_rows
from jaxpuct.tree import (
    UNEXPANDED,
    NodeData,
    Tree,
    edge_qvalues,
    link_children,
    present,
    store_nodes,
)

if TYPE_CHECKING:
    from jaxpuct.walk import Walk

EMPTY_SLOT = -1


@dataclasses.dataclass(frozen=True)
class GraphConfig:
    """Graph-search options (static; hashable).

    Attributes:
      stop_at_transposition: when the chosen edge's child already has more
        visits than the edge (other paths visited it), count the edge visit and
        end the playout there instead of descending (KataGo's default).
      edge_rewards: store reward and discount per edge (default; general
        MDPs) rather than on the child node (saves 8 bytes per edge; right when
        they depend only on the state reached).
      max_probes: slots probed per lookup/insert in the transposition table.
      table_factor: table size is the next power of two >= this times
        ``max_nodes``.
      hash_fn: optional ``embedding [B, ...] -> [B, 2] uint32``. When ``None``
        the hash is read from the ``state_hash`` field of ``RootFnOutput`` and
        ``RecurrentFnOutput``.
    """

    stop_at_transposition: bool = True
    edge_rewards: bool = True
    max_probes: int = 16
    table_factor: int = 2
    hash_fn: Callable[[Any], jax.Array] | None = None

    def __post_init__(self):
        if not (isinstance(self.max_probes, int) and self.max_probes >= 1):
            raise ValueError(f"GraphConfig.max_probes must be an int >= 1, got {self.max_probes}.")
        if not (isinstance(self.table_factor, int) and self.table_factor >= 1):
            raise ValueError(
                f"GraphConfig.table_factor must be an int >= 1, got {self.table_factor}.")

    def same_storage(self, other: GraphConfig) -> bool:
        """Whether a graph built with ``other`` can be searched with this config: the
        fields that shape what the graph stores (edge rewards, table size, probe
        count, hash) agree; ``stop_at_transposition`` only steers the walk."""
        return (self.edge_rewards, self.max_probes, self.table_factor, self.hash_fn) == (
            other.edge_rewards, other.max_probes, other.table_factor, other.hash_fn)

    def table_size(self, max_nodes: int) -> int:
        size = 1
        while size < self.table_factor * max_nodes:
            size *= 2
        return max(size, self.max_probes)


def state_hash(config: GraphConfig, output: Any, embedding: Any, what: str) -> jax.Array:
    """``[B, 2]`` uint32 hash of a state, from ``hash_fn`` or the output's field."""
    if config.hash_fn is not None:
        # Not cast: an int32 or float "hash" is a mistake to report, not to hide.
        value = jnp.asarray(config.hash_fn(embedding))
        batch_size = jax.tree.leaves(embedding)[0].shape[0]
        validation.check_hash(f"GraphConfig.hash_fn({what} embedding)", value, batch_size)
        return value
    value = getattr(output, "state_hash", None)
    if value is None:
        raise ValueError(
            f"graph search needs a state hash: {what}.state_hash is None and "
            "GraphConfig.hash_fn is not set.")
    return value.astype(jnp.uint32)


def _probe_slots(table_size: int, max_probes: int, hashes: jax.Array) -> jax.Array:
    """``[B, P]`` table slots to probe for ``hashes [B, 2]`` (linear probing)."""
    start = (hashes[:, 0] & jnp.uint32(table_size - 1)).astype(jnp.int32)
    return (start[:, None] + jnp.arange(max_probes)[None, :]) & (table_size - 1)


def lookup(tree: Tree, max_probes: int, hashes: jax.Array) -> jax.Array:
    """``[B]`` node index holding ``hashes [B, 2]`` in each tree, or -1."""
    table = present(tree.hash_table, "tree.hash_table")
    slots = _probe_slots(table.shape[1], max_probes, hashes)
    nodes = row_take(table, slots)
    stored = row_take(present(tree.node_hash, "tree.node_hash"), jnp.maximum(nodes, 0))
    match = (nodes >= 0) & jnp.all(stored == hashes[:, None, :], axis=-1)
    first = jnp.argmax(match, axis=-1)
    return jnp.where(jnp.any(match, axis=-1), row_take(nodes, first), -1)


def insert(tree: Tree, max_probes: int, hashes: jax.Array, nodes: jax.Array,
           do_insert: jax.Array) -> Tree:
    """Writes ``nodes [B]`` under ``hashes [B, 2]`` where ``do_insert [B]``, in the
    first empty slot of the probe window (skipped if the window is full)."""
    table = present(tree.hash_table, "tree.hash_table")
    table_size = table.shape[1]
    slots = _probe_slots(table_size, max_probes, hashes)
    empty = row_take(table, slots) == EMPTY_SLOT
    first = row_take(slots, jnp.argmax(empty, axis=-1))
    ok = do_insert & jnp.any(empty, axis=-1)
    target = jnp.where(ok, first, table_size)
    return tree.replace(hash_table=row_set(table, target, nodes))


def empty_table(batch_size: int, table_size: int) -> jax.Array:
    """``[B, T]`` int32 transposition table with every slot empty."""
    return jnp.full((batch_size, table_size), EMPTY_SLOT, jnp.int32)


def with_graph_arrays(tree: Tree, config: GraphConfig, root_hash: jax.Array) -> Tree:
    """Adds the graph-search arrays to a tree that holds only its roots, and
    enters each root's ``root_hash [B, 2]`` in its transposition table."""
    batch_size, max_nodes = tree.batch_size, tree.max_nodes
    tree = tree.replace(
        node_hash=jnp.zeros((batch_size, max_nodes, 2), jnp.uint32)
        .at[:, Tree.ROOT_INDEX].set(root_hash),
        hash_table=empty_table(batch_size, config.table_size(max_nodes)), graph=config)
    if config.edge_rewards:
        edge_shape = (batch_size, max_nodes, tree.num_actions)
        tree = tree.replace(edge_rewards=jnp.zeros(edge_shape, jnp.float32),
                            edge_discounts=jnp.zeros(edge_shape, jnp.float32))
    return insert(tree, config.max_probes, root_hash,
                  jnp.full((batch_size,), Tree.ROOT_INDEX, jnp.int32),
                  jnp.ones((batch_size,), jnp.bool_))


def add_leaves(tree: Tree, config: GraphConfig, parent: jax.Array, action: jax.Array,
               evaluated: jax.Array, leaf: NodeData) -> Tree:
    """Graph-mode storage of the leaves evaluated at edges ``(parent [B], action [B])``
    (where ``evaluated [B]``).

    A state already in the transposition table is linked to its node (its new
    evaluation is not used: the node already has one); a new state is stored
    in the next free slot and entered in the table, where there is room. With
    ``edge_rewards`` every evaluated edge keeps its own reward and discount,
    also when the graph is full.
    """
    hashes = present(leaf.state_hash, "the new nodes' state_hash")
    known = lookup(tree, config.max_probes, hashes)
    transposition = evaluated & (known >= 0)
    store = evaluated & ~transposition & (tree.num_nodes < tree.max_nodes)
    slot = tree.num_nodes
    tree = store_nodes(tree, parent, action, store, leaf)
    tree = insert(tree, config.max_probes, hashes, slot, store)
    tree = link_children(tree, parent, action, known, transposition)
    if tree.edge_rewards is not None:
        edge_parent = jnp.where(evaluated, parent, tree.max_nodes)
        tree = tree.replace(
            edge_rewards=row_set(tree.edge_rewards, (edge_parent, action), leaf.reward),
            edge_discounts=row_set(present(tree.edge_discounts, "tree.edge_discounts"),
                                   (edge_parent, action), leaf.discount))
    return tree


def rebuild_hash_table(tree: Tree, max_probes: int | None = None) -> Tree:
    """Rebuilds the transposition table from ``node_hash`` for the used nodes
    (after compaction by tree reuse). A ``fori_loop`` over node slots: O(N * P).
    ``max_probes`` defaults to the tree's own ``GraphConfig``'s."""
    if not tree.is_graph:
        return tree
    if max_probes is None:
        max_probes = present(tree.graph, "tree.graph").max_probes
    table_size = present(tree.hash_table, "tree.hash_table").shape[1]
    table = tree.replace(hash_table=empty_table(tree.batch_size, table_size))

    def body(index, t):
        hashes = t.node_hash[:, index]
        used = index < t.num_nodes
        known = lookup(t, max_probes, hashes) >= 0
        return insert(t, max_probes, hashes, jnp.full((t.batch_size,), index, jnp.int32),
                      used & ~known)

    return jax.lax.fori_loop(0, tree.max_nodes, body, table)


def recompute_nodes(tree: Tree, node: jax.Array, on_path: jax.Array,
                    visits: jax.Array, values: jax.Array,
                    edge_visits: jax.Array, sq_values: jax.Array | None = None,
                    ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """Idempotent update of ``node [B]`` (where ``on_path``): returns the new
    ``visits``, ``values`` and (when given) second-moment ``sq_values`` arrays.

    Terminal nodes keep ``N = 1`` and ``Q = U``. Edges that were visited but
    have no child (a full graph) count towards ``N(n)`` but cannot contribute
    a value, so the average runs over the edges with a child. The second moment
    is recomputed the same way: ``E[(r + d X)**2] = r**2 + 2 r d Q(child) +
    d**2 E[X**2](child)`` per edge, ``U**2`` for the node's own evaluation.
    """
    children = gather_rows(tree.children_index, node)
    counts = gather_rows(edge_visits, node)
    view = tree.replace(node_values=values)
    q = edge_qvalues(view, node, children)
    weighted = jnp.where(children >= 0, counts, 0).astype(jnp.float32)
    raw = row_take(tree.raw_values, node)
    terminal = row_take(tree.node_terminal, node)
    new_visits = jnp.where(terminal, 1, 1 + jnp.sum(counts, axis=-1, dtype=jnp.int32))
    weight = 1.0 + jnp.sum(weighted, axis=-1)
    new_value = (raw + jnp.sum(weighted * q, axis=-1)) / weight
    new_value = jnp.where(terminal, raw, new_value)
    visits = row_set(visits, node, jnp.where(on_path, new_visits, row_take(visits, node)))
    values = row_set(values, node, jnp.where(on_path, new_value, row_take(values, node)))
    if sq_values is not None:
        safe = jnp.maximum(children, 0)
        reward, discount = edge_reward_discount(tree, node, safe)
        child_q = row_take(values, safe)
        child_sq = row_take(sq_values, safe)
        edge_sq = reward * reward + 2.0 * reward * discount * child_q + discount ** 2 * child_sq
        edge_sq = jnp.where(children >= 0, edge_sq, 0.0)
        new_sq = (raw * raw + jnp.sum(weighted * edge_sq, axis=-1)) / weight
        new_sq = jnp.where(terminal, raw * raw, new_sq)
        sq_values = row_set(sq_values, node,
                            jnp.where(on_path, new_sq, row_take(sq_values, node)))
    return visits, values, sq_values


def edge_reward_discount(tree: Tree, node: jax.Array, children: jax.Array
                         ) -> tuple[jax.Array, jax.Array]:
    """``(reward [B, A], discount [B, A])`` of the edges of ``node [B]`` whose
    children are ``children [B, A]`` (non-negative indices)."""
    if tree.edge_rewards is not None:
        discounts = present(tree.edge_discounts, "tree.edge_discounts")
        return gather_rows(tree.edge_rewards, node), gather_rows(discounts, node)
    return row_take(tree.node_rewards, children), row_take(tree.node_discounts, children)


class _GraphBackupState(NamedTuple):
    """The graph backup's carry."""

    depth: jax.Array
    node_visits: jax.Array
    node_values: jax.Array
    edge_visits: jax.Array
    node_sq_values: jax.Array | None


def backup_graph(tree: Tree, walk: Walk) -> Tree:
    """Graph-mode backup of one walk per tree (``[B]`` records): bottom-up along
    each path, count the edge taken and recompute the node from its children
    (:func:`recompute_nodes`). The leaf node itself is not changed. O(B * A) per
    depth step."""
    def body(state: _GraphBackupState) -> _GraphBackupState:
        on_path = state.depth < walk.num_edges
        node = walk.path_nodes[:, state.depth]
        action = walk.path_actions[:, state.depth]
        edge_visits = row_add(state.edge_visits, (node, action), on_path.astype(jnp.int32))
        visits, values, sq_values = recompute_nodes(
            tree, node, on_path, state.node_visits, state.node_values, edge_visits,
            state.node_sq_values)
        return _GraphBackupState(state.depth - 1, visits, values, edge_visits, sq_values)

    init = _GraphBackupState(jnp.max(walk.num_edges) - 1, tree.node_visits, tree.node_values,
                             tree.edge_visits, tree.node_sq_values)
    final = jax.lax.while_loop(lambda s: s.depth >= 0, body, init)
    return tree.replace(node_visits=final.node_visits, node_values=final.node_values,
                        edge_visits=final.edge_visits, node_sq_values=final.node_sq_values)


def store_and_backup(tree: Tree, walks: Walk, leaves: NodeData,
                     after_walk: Callable[[Tree, Walk], Tree] | None) -> Tree:
    """Graph mode: walk by walk (a leaf may be a transposition of one stored by an
    earlier walk of the same step), store the leaf (:func:`add_leaves`), back up
    its path (:func:`backup_graph`) and call ``after_walk`` (the extensions' hook).
    ``walks`` ``[K, B]``, ``leaves`` ``[K, B, ...]``."""

    def one(k, tree):
        walk = walks.one(k)
        leaf = jax.tree.map(lambda x: x[k], leaves)
        parent, action = walk.leaf_edge()
        tree = backup_graph(add_leaves(tree, tree.graph, parent, action, walk.expand, leaf),
                            walk)
        return tree if after_walk is None else after_walk(tree, walk)

    if walks.num_walks == 1:
        return one(0, tree)
    # Claims of the step's walks (jaxpuct.virtual_loss) are released first: a
    # transposition is linked instead of stored.
    parents, actions = walks.leaf_edge()
    tree = tree.replace(children_index=row_set(
        tree.children_index, (jnp.where(walks.expand, parents, tree.max_nodes), actions),
        UNEXPANDED, tree_axis=1))
    return jax.lax.fori_loop(0, walks.num_walks, one, tree)

"""The walk down: from each root to a leaf edge, recording the path.

One simulation walks every tree of the batch from its root until it takes an
edge with no child (to be expanded), reaches a terminal node or ``max_depth``,
or a node an extension says not to enter (the solver's proven nodes); graph
search also stops at a transposition and before re-entering a node of its own
path (a cycle).

Why it is fast: the loop is a ``while_loop`` over *depth* whose carry holds only
``[B]`` and ``[B, D]`` arrays (and graph search's ``[B, N]`` marks, updated in
place). Nothing is ``vmap`` ped over the batch, so no loop turns into a select
over whole ``[B, N, A]`` arrays (mctx vmaps a ``while_loop`` that carries the
tree, which is where its time goes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxpuct import prng
from jaxpuct._dataclass import Replaceable, pytree_dataclass
from jaxpuct.indexing import row_set, row_take, row_take_once
from jaxpuct.selection import SelectionRule
from jaxpuct.tree import Tree, present

# ``(tree, node [B]) -> [B] bool``: the walk does not enter those nodes (it stops
# on the edge into them and backs up their stored value).
StopFn = Callable[[Tree, jax.Array], jax.Array]


@pytree_dataclass
class Walk(Replaceable):
    """Where one simulation's walk ended, for every tree.

    The arrays may carry a leading ``[K]`` axis (the ``K`` walks of one step of
    a multi-leaf search, see :mod:`jaxpuct.virtual_loss`).

    Attributes:
      path_nodes: ``[B, D + 1]`` node at each depth (column 0 is the root).
      path_actions: ``[B, D]`` action taken at each depth.
      num_edges: ``[B]`` edges walked, the last one included (0: not searched).
      expand: ``[B]`` the last edge had no child: evaluate and store one.
    """

    path_nodes: jax.Array
    path_actions: jax.Array
    num_edges: jax.Array
    expand: jax.Array

    def leaf_edge(self) -> tuple[jax.Array, jax.Array]:
        """``(parent, action)`` of the last edge walked, ``[B]`` (or ``[K, B]``)."""
        last = jnp.maximum(self.num_edges - 1, 0)[..., None]
        return (_take_column(self.path_nodes, last), _take_column(self.path_actions, last))

    def leaf_node(self) -> jax.Array:
        """The node at the end of the path, ``[B]`` (or ``[K, B]``): the last edge's
        child where it has one (else its parent; not read by the callers then)."""
        return _take_column(self.path_nodes, self.num_edges[..., None])

    def one(self, k: int | jax.Array) -> Walk:
        """Walk ``k`` of a stack of ``[K, B]`` walks."""
        return Walk(path_nodes=self.path_nodes[k], path_actions=self.path_actions[k],
                    num_edges=self.num_edges[k], expand=self.expand[k])

    @property
    def num_walks(self) -> int:
        """``K`` (1 for a walk without the leading axis)."""
        return 1 if self.num_edges.ndim == 1 else self.num_edges.shape[0]


def _take_column(path: jax.Array, column: jax.Array) -> jax.Array:
    """``path [..., C]`` at ``column [..., 1]``, in range by construction (``0 <=
    num_edges <= D``): promised to the gather, which then needs no clamping or
    negative-index wrapping (92 lowered operations for the two reads of
    :meth:`Walk.leaf_edge` became 38, and the search calls it at every step)."""
    return jnp.take_along_axis(path, column, axis=-1, mode="promise_in_bounds")[..., 0]


class _WalkState(NamedTuple):
    """The walk's loop carry: ``[B]`` and ``[B, D]`` arrays (and graph marks)."""

    depth: jax.Array  # scalar int32: edges walked so far
    node: jax.Array  # [B] current node
    active: jax.Array  # [B] still walking
    path_nodes: jax.Array  # [B, D + 1]
    path_actions: jax.Array  # [B, D]
    num_edges: jax.Array  # [B]
    expand: jax.Array  # [B]
    marks: jax.Array | None  # [B, N] graph search: simulation that last entered a node


def _set_column(array: jax.Array, column: jax.Array, value: jax.Array) -> jax.Array:
    """``array [B, C]`` with ``array[:, column] = value [B]``, for a scalar ``column`` in
    range (a dynamic slice: no scatter, no index arrays).

    Written in every tree, walking or not: a column a walk does not reach (at or past
    its ``num_edges`` in ``path_actions``, past it in ``path_nodes``) is never read,
    and neither is the entry after an expanding walk's last edge (it has no child).
    Masking the write would read the old column first: two more kernels per depth
    step."""
    return jax.lax.dynamic_update_index_in_dim(array, value, column, axis=1)


def _advance(tree: Tree, state: _WalkState, action: jax.Array, max_depth: int,
             stop_fn: StopFn | None, sim: jax.Array | int) -> _WalkState:
    """Takes ``action [B]`` from ``state.node`` in every active walk."""
    depth, node, active = state.depth, state.node, state.active
    child = row_take(tree.children_index, node, action)
    safe_child = jnp.maximum(child, 0)
    path_actions = _set_column(state.path_actions, depth, action)
    num_edges = jnp.where(active, depth + 1, state.num_edges)
    descend = active & (child >= 0)
    expand = jnp.where(active, child < 0, state.expand)
    stop = (depth + 1 >= max_depth) | row_take(tree.node_terminal, safe_child)
    if stop_fn is not None:
        stop = stop | stop_fn(tree, safe_child)
    marks = state.marks
    if tree.graph is not None:
        marks = present(marks, "the walk's graph marks")
        seen = row_take_once(sim, marks, safe_child)
        # The root is on every path: it needs no mark (a write of it before the
        # walk made XLA copy the [B, N] marks on every simulation).
        cycle = (seen == sim) | (child == Tree.ROOT_INDEX)
        stop = stop | cycle
        if tree.graph.stop_at_transposition:
            stop = stop | (row_take(tree.edge_visits, node, action)
                           < row_take(tree.node_visits, safe_child))
        marks = row_set(marks, jnp.where(descend & ~cycle, child, tree.max_nodes), sim)
    path_nodes = _set_column(state.path_nodes, depth + 1, child)
    return _WalkState(depth=depth + 1, node=jnp.where(descend, child, node),
                      active=descend & ~stop, path_nodes=path_nodes,
                      path_actions=path_actions, num_edges=num_edges, expand=expand,
                      marks=marks)


def select(tree: Tree, rule: SelectionRule, max_depth: int, rng_keys: jax.Array,
           marks: jax.Array | None, sim: jax.Array | int, path_nodes: jax.Array,
           path_actions: jax.Array, stop_fn: StopFn | None = None,
           ) -> tuple[Walk, jax.Array | None]:
    """Walks every tree from the root and records the path (module docstring).

    The root step runs once, outside the loop, with ``rule.root``; the loop then
    uses ``rule.interior``. ``path_nodes [B, D + 1]`` (column 0 holding the root)
    and ``path_actions [B, D]`` are the buffers to record into (entries past a
    walk's length are never read, so they are reused without clearing);
    ``rng_keys [B]`` are folded with the depth for each step's rule; ``marks
    [B, N]`` (graph search) hold the simulation number ``sim`` that last entered
    each node. ``stop_fn`` also applies to the root: a root it stops at is not
    searched. Returns the walk and the updated marks.
    """
    batch_size = tree.batch_size
    root = jnp.full((batch_size,), Tree.ROOT_INDEX, jnp.int32)

    def step_keys(depth):
        return prng.fold_in(rng_keys, depth)

    active = ~tree.node_terminal[:, Tree.ROOT_INDEX]
    if stop_fn is not None:
        active = active & ~stop_fn(tree, root)
    state = _WalkState(
        depth=jnp.int32(0), node=root, active=active,
        path_nodes=path_nodes, path_actions=path_actions,
        num_edges=jnp.zeros((batch_size,), jnp.int32),
        expand=jnp.zeros((batch_size,), jnp.bool_),
        marks=marks)
    action = rule.root(tree, root, state.depth, step_keys(state.depth))
    state = _advance(tree, state, action, max_depth, stop_fn, sim)

    def cond(state: _WalkState):
        return jnp.any(state.active) & (state.depth < max_depth)

    def body(state: _WalkState) -> _WalkState:
        action = rule.interior(tree, state.node, state.depth, step_keys(state.depth))
        return _advance(tree, state, action, max_depth, stop_fn, sim)

    state = jax.lax.while_loop(cond, body, state)
    walk = Walk(path_nodes=state.path_nodes, path_actions=state.path_actions,
                num_edges=state.num_edges, expand=state.expand)
    return walk, state.marks

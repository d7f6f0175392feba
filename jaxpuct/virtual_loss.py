"""Virtual loss: several walks per tree in one search step.

With ``leaves_per_step = K`` a search step walks ``K`` paths in every tree
before it calls the network once on all ``B * K`` leaves. To keep the ``K``
walks apart, each walk leaves a *pending* mark on the path it took that the
next walks of the same step see (the standard trick of parallel MCTS):

* ``"loss"`` mode (AlphaGo, Silver et al. 2016, with ``n_vl = 3``): every edge
  on the path counts ``n_vl`` more visits, each returning ``value`` (a loss,
  -1, by default) for the player who chose the edge::

      Q_eff(s, a) = (N(s, a) Q(s, a) + n_vl * pend * value) / (N(s, a) + n_vl * pend)

* ``"visit"`` mode (WU-UCT, Liu et al., ICLR 2020): only the visit counts grow
  by ``n_vl * pend``; the values are left alone, so only the exploration term
  sees the pending walks.

The marks are *temporary changes of the tree itself*: ``edge_visits`` of each
walked edge, ``node_visits`` of each node a walk leaves from, and (``"loss"``)
the ``node_values`` of each child, chosen so that ``r + discount * Q(child)``
reads as ``Q_eff``. Every ``SelectionRule`` therefore sees them without knowing
about them. Applying and undoing cost O(depth) scatters per walk (never a copy
of the tree); the undo restores the exact bits (counts are integers and the
child values are restored from the path record, in reverse order).

An unexpanded edge that a walk of the step has claimed is marked ``ILLEGAL``
for the rest of the step (every rule gives illegal edges ``-inf``), so no two
walks evaluate the same edge. A walk that finds no selectable edge (it picked
an ``ILLEGAL`` one) is invalid: it changes nothing and its slot of the network
call is wasted. The claims are undone with the marks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Literal, NamedTuple, get_args

import jax
import jax.numpy as jnp

from jaxpuct import validation
from jaxpuct.indexing import row_add, row_set, row_take, row_take_once
from jaxpuct.tree import ILLEGAL, UNEXPANDED, Tree, present
from jaxpuct.walk import Walk

Mode = Literal["loss", "visit"]


@dataclasses.dataclass(frozen=True)
class VirtualLoss:
    """How pending walks of one search step mark the tree (static; hashable).

    Attributes:
      mode: ``"loss"`` (pending visits return ``value``; AlphaGo) or
        ``"visit"`` (pending visits count only in the exploration term; WU-UCT).
      size: ``n_vl``, visits added per pending walk (AlphaGo: 3).
      value: the return of a pending visit, seen by the player choosing the
        edge (``"loss"`` mode only; -1 is a loss for values in [-1, 1]).
    """

    mode: Mode = "loss"
    size: int = 3
    value: float = -1.0

    def __post_init__(self):
        validation.check_choice("VirtualLoss.mode", self.mode, get_args(Mode))
        validation.check_int("VirtualLoss.size", self.size, 0)
        if not math.isfinite(self.value):
            raise ValueError(f"VirtualLoss.value must be finite, got {self.value}.")


class _Marks(NamedTuple):
    """The arrays virtual loss changes, carried through its depth loop."""

    depth: jax.Array  # scalar int32
    node_visits: jax.Array  # [B, N]
    node_values: jax.Array  # [B, N]
    edge_visits: jax.Array  # [B, N, A]
    saved_values: jax.Array  # [B, D + 1] child values before the change
    stamp: jax.Array | None = None  # [B, N] step that last overwrote each node's value
    first: jax.Array | None = None  # [B, D + 1] this walk overwrote the child first


def _edge_reward_discount(tree: Tree, node: jax.Array, action: jax.Array,
                          child: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(reward [B], discount [B])`` of edge ``(node, action)`` leading to ``child``."""
    if tree.edge_rewards is not None:
        return (row_take(tree.edge_rewards, node, action),
                row_take(present(tree.edge_discounts, "tree.edge_discounts"), node, action))
    return row_take(tree.node_rewards, child), row_take(tree.node_discounts, child)


def _shift_visits(state: _Marks, node: jax.Array, action: jax.Array, count: jax.Array,
                  delta: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(node_visits, edge_visits)`` with ``delta [B]`` added to ``node [B]`` and to its
    edge ``action [B]`` (whose gathered count is ``count [B]``: a set of the gathered
    value, not a scatter-add, lets XLA update the carried array in place)."""
    return (row_add(state.node_visits, node, delta),
            row_set(state.edge_visits, (node, action), count + delta))


def _path_child(path_nodes: jax.Array, depth: jax.Array, on_path: jax.Array,
                num_edges: jax.Array, expand: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(child [B], has_child [B])`` of the edge at ``depth`` of each walk, read from
    the path record (not from ``children_index``, which the step changes: reading
    it inside these loops would make XLA copy it). The last edge of an expanding
    walk has no child."""
    has_child = on_path & ((depth < num_edges - 1) | ~expand)
    return path_nodes[:, depth + 1], has_child


def mark_walk(tree: Tree, config: VirtualLoss, path_nodes: jax.Array,
                  path_actions: jax.Array, num_edges: jax.Array, expand: jax.Array,
                  saved_values: jax.Array, stamp: jax.Array | None, step: jax.Array | None,
                  first: jax.Array | None,
                  ) -> tuple[Tree, jax.Array, jax.Array | None, jax.Array | None]:
    """Marks one walk per tree as pending (module docstring).

    Args:
      tree: the tree (with the marks of earlier walks of the step).
      config: the virtual loss.
      path_nodes: ``[B, D + 1]`` the walk's nodes (column 0 the root).
      path_actions: ``[B, D]`` its actions.
      num_edges: ``[B]`` edges walked (0: nothing to mark).
      expand: ``[B]`` the last edge has no child yet.
      saved_values: ``[B, D + 1]`` buffer for the child values this overwrites
        (``"loss"`` mode), indexed by the child's position on the path.
      stamp: ``[B, N]`` per node, the step that last overwrote its value, so
        that :func:`unmark_step` restores each value from the step's *first*
        overwrite (``None`` in ``"visit"`` mode).
      step: this step's number.
      first: ``[B, D + 1]`` buffer for the first-overwrite flags (by the child's
        position on the path; ``None`` in ``"visit"`` mode).

    Returns:
      ``(tree, saved_values, stamp, first)``; pass them to :func:`unmark_step`.
    """
    n_vl = jnp.int32(config.size)
    track = stamp is not None and config.mode == "loss"

    def body(state: _Marks) -> _Marks:
        depth = state.depth
        on_path = depth < num_edges
        node = path_nodes[:, depth]
        action = path_actions[:, depth]
        count = row_take_once(depth, state.edge_visits, node, action)
        node_visits, edge_visits = _shift_visits(state, node, action, count,
                                                 jnp.where(on_path, n_vl, 0))
        values, saved = state.node_values, state.saved_values
        stamps, firsts = state.stamp, state.first
        if config.mode == "loss":
            safe, has_child = _path_child(path_nodes, depth, on_path, num_edges, expand)
            reward, discount = _edge_reward_discount(tree, node, action, safe)
            old = row_take_once(depth, values, safe)
            n = count.astype(jnp.float32)
            pending = jnp.float32(config.size)
            q = reward + discount * old
            q_eff = (n * q + pending * config.value) / jnp.maximum(n + pending, 1.0)
            # The edge's Q is read through its child: store the child value that
            # makes ``r + discount * Q(child)`` equal ``q_eff``.
            new = jnp.where(discount != 0, (q_eff - reward) / jnp.where(discount != 0,
                                                                        discount, 1.0), old)
            saved = saved.at[:, depth + 1].set(old)
            written = jnp.where(has_child, safe, tree.max_nodes)
            values = row_set(values, written, new)
            if track:
                # Only the step's first overwrite of a node saved its original value.
                stamps = present(stamps, "the virtual-loss stamps")
                step_now = present(step, "the virtual-loss step")
                seen = row_take_once(depth, stamps, safe)
                firsts = present(firsts, "the step's first overwrites").at[:, depth + 1].set(
                    seen != step_now)
                # ``max(seen, step)`` is ``step`` (stamps are earlier steps); writing
                # it makes the write depend on the read, so XLA updates the [B, N]
                # stamps in place instead of copying them to read them afterwards.
                stamps = row_set(stamps, written, jnp.maximum(seen, step_now))
        return _Marks(depth + 1, node_visits, values, edge_visits, saved, stamps, firsts)

    init = _Marks(jnp.int32(0), tree.node_visits, tree.node_values, tree.edge_visits,
                  saved_values, stamp if track else None, first if track else None)
    final = jax.lax.while_loop(lambda s: s.depth < jnp.max(num_edges), body, init)
    return (tree.replace(node_visits=final.node_visits, node_values=final.node_values,
                         edge_visits=final.edge_visits), final.saved_values,
            final.stamp if track else stamp, final.first if track else first)


def unmark_step(tree: Tree, config: VirtualLoss, path_nodes: jax.Array,
              path_actions: jax.Array, num_edges: jax.Array, expand: jax.Array,
              saved_values: jax.Array, first: jax.Array | None) -> Tree:
    """Removes the marks of all ``K`` walks of a step at once (arguments of
    :func:`mark_walk`, stacked ``[K, B, ...]``).

    One loop over depth handles the ``K`` walks together: the counts fall back by
    a scatter-add (duplicate nodes simply add up) and each overwritten child
    value is restored from the walk that overwrote it *first* in the step (one
    writer per node, so the scatter has no duplicates). Cost O(K * B) per depth
    step, against ``K`` loops of O(B) for walk-by-walk restores in reverse order;
    the result is the same, bit for bit.
    """
    n_vl = jnp.int32(config.size)

    def body(state: _Marks) -> _Marks:
        depth = state.depth
        on_path = depth < num_edges  # [K, B]
        node = jnp.where(on_path, path_nodes[:, :, depth], tree.max_nodes)
        action = path_actions[:, :, depth]
        node_visits = row_add(state.node_visits, node, -n_vl, tree_axis=1)
        edge_visits = row_add(state.edge_visits, (node, action), -n_vl, tree_axis=1)
        values = state.node_values
        if config.mode == "loss":
            has_child = on_path & ((depth < num_edges - 1) | ~expand)
            restore = has_child & present(first, "the step's first overwrites")[:, :, depth + 1]
            child = jnp.where(restore, path_nodes[:, :, depth + 1], tree.max_nodes)
            values = row_set(values, child, saved_values[:, :, depth + 1], tree_axis=1)
        return _Marks(depth + 1, node_visits, values, edge_visits, state.saved_values)

    init = _Marks(jnp.int32(0), tree.node_visits, tree.node_values, tree.edge_visits,
                  saved_values)
    final = jax.lax.while_loop(lambda s: s.depth < jnp.max(num_edges), body, init)
    return tree.replace(node_visits=final.node_visits, node_values=final.node_values,
                        edge_visits=final.edge_visits)


def set_claims(tree: Tree, parent: jax.Array, action: jax.Array, claimed: jax.Array,
               code: int) -> Tree:
    """Sets edge ``(parent [B], action [B])`` to ``code`` where ``claimed [B]``:
    ``ILLEGAL`` to claim an unexpanded edge, ``UNEXPANDED`` to release it."""
    parent = jnp.where(claimed, parent, tree.max_nodes)
    return tree.replace(children_index=row_set(tree.children_index, (parent, action), code))


CLAIMED = ILLEGAL
RELEASED = UNEXPANDED


class StepWalks(NamedTuple):
    """The ``K`` walks of one step and what the step's walk loop carries."""

    walks: Walk  # [K, B] path records; num_edges 0 for an invalid (no-op) walk
    saved_values: jax.Array  # [K, B, D + 1] values virtual loss overwrote
    first: jax.Array | None  # [K, B, D + 1] the step's first overwrites ("loss" mode)


class _WalkLoop(NamedTuple):
    tree: Tree
    marks: jax.Array | None  # [B, N] graph search
    stamp: jax.Array | None  # [B, N] "loss" mode
    step: StepWalks


def empty_step(config: VirtualLoss, num_walks: int, batch_size: int, depth_limit: int
               ) -> StepWalks:
    """The ``[K, B, ...]`` buffers of :func:`walk_step` (reused from step to step)."""
    path_len = depth_limit + 1
    return StepWalks(
        walks=Walk(path_nodes=jnp.full((num_walks, batch_size, path_len), Tree.ROOT_INDEX,
                                       jnp.int32),
                   path_actions=jnp.zeros((num_walks, batch_size, depth_limit), jnp.int32),
                   num_edges=jnp.zeros((num_walks, batch_size), jnp.int32),
                   expand=jnp.zeros((num_walks, batch_size), jnp.bool_)),
        saved_values=jnp.zeros((num_walks, batch_size, path_len), jnp.float32),
        first=(jnp.zeros((num_walks, batch_size, path_len), jnp.bool_)
               if config.mode == "loss" else None))


def empty_stamp(config: VirtualLoss, tree: Tree) -> jax.Array | None:
    """``[B, N]`` stamps of :func:`mark_walk` (``"loss"`` mode), or ``None``."""
    return jnp.full(tree.node_visits.shape, -1, jnp.int32) if config.mode == "loss" else None


def walk_step(tree: Tree, config: VirtualLoss, select_one: Callable, step: jax.Array,
              buffers: StepWalks, marks: jax.Array | None, stamp: jax.Array | None,
              ) -> tuple[Tree, StepWalks, jax.Array | None, jax.Array | None]:
    """The ``K`` walks of one search step, each under the marks of the earlier ones.

    ``select_one(tree, k, path_nodes, path_actions, marks) -> (Walk, marks)`` walks
    once (walk ``k`` of the step, ``[B, D + 1]``/``[B, D]`` buffers). Each walk
    marks its path and claims its unexpanded edge; then the marks of all ``K``
    are undone at once (:func:`unmark_step`, bit for bit). The claims stay (the
    storage links or releases them). Returns ``(tree, walks, marks, stamp)``.
    """
    def walk_one(k, state: _WalkLoop) -> _WalkLoop:
        buf = state.step
        walk, marks = select_one(state.tree, k, buf.walks.path_nodes[k],
                                 buf.walks.path_actions[k], state.marks)
        parent, action = walk.leaf_edge()
        # An ILLEGAL last edge: every edge the rule could pick was illegal or
        # claimed by an earlier walk of this step. The walk does nothing.
        invalid = walk.expand & (row_take_once(k, state.tree.children_index, parent, action)
                                 == ILLEGAL)
        num_edges = jnp.where(invalid, 0, walk.num_edges)
        expand = walk.expand & ~invalid
        tree, saved, stamp, first = mark_walk(
            state.tree, config, walk.path_nodes, walk.path_actions, num_edges, expand,
            buf.saved_values[k], state.stamp, step, None if buf.first is None else buf.first[k])
        tree = set_claims(tree, parent, action, expand, CLAIMED)
        walks = Walk(path_nodes=buf.walks.path_nodes.at[k].set(walk.path_nodes),
                     path_actions=buf.walks.path_actions.at[k].set(walk.path_actions),
                     num_edges=buf.walks.num_edges.at[k].set(num_edges),
                     expand=buf.walks.expand.at[k].set(expand))
        return _WalkLoop(tree, marks, stamp, StepWalks(
            walks=walks, saved_values=buf.saved_values.at[k].set(saved),
            first=None if first is None else present(buf.first, "buf.first").at[k].set(first)))

    num_walks = buffers.walks.num_walks
    state = jax.lax.fori_loop(0, num_walks, walk_one, _WalkLoop(tree, marks, stamp, buffers))
    walks = state.step.walks
    tree = unmark_step(state.tree, config, walks.path_nodes, walks.path_actions,
                       walks.num_edges, walks.expand, state.step.saved_values, state.step.first)
    return tree, state.step, state.marks, state.stamp

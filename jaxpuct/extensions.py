"""Extensions: what rides along the tree, through hooks the engine calls.

The engine (:mod:`jaxpuct.engine`) names no optional feature. Each one is an
:class:`Extension` whose hooks the engine calls at fixed points, in the spirit
of optax's ``(init, update)`` pairs:

* ``prepare(tree, continued)``: once, before the search; adds the extension's
  optional ``Tree`` fields (or brings a continued tree's up to date);
* ``wrap_rule(rule, selection)``: the selection rule the walk uses;
* ``stop(tree, node [B]) -> [B] bool``: the walk does not enter these nodes (it
  stops on the edge into them and backs up their stored value); a root it
  returns ``True`` for is not searched;
* ``after_walk(tree, walk, several)``: after a walk's leaf is stored and its
  path backed up (``several``: the walk is one of ``K > 1`` walks of a step);
* ``done(tree) -> [B] bool``: these trees need no more simulations; the loop
  ends when every tree is done.

The base class has every hook at its neutral value; a ``stop`` or ``done`` that
a subclass does not override costs nothing. The solver (:class:`jaxpuct.solver.Solver`),
early stopping (:class:`jaxpuct.early_stop.EarlyStop`), the second moment
(:class:`SecondMoment`) and the tree-wide min-max bounds (:class:`TreeMinMax`) are
extensions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from jaxpuct.indexing import row_take
from jaxpuct.selection import SelectionRule
from jaxpuct.tree import Tree, present, with_second_moment
from jaxpuct.walk import StopFn, Walk


@dataclasses.dataclass(frozen=True)
class Extension:
    """An optional feature of the search (static; hashable). Every hook is neutral."""

    def prepare(self, tree: Tree, continued: bool) -> Tree:
        del continued
        return tree

    def wrap_rule(self, rule: SelectionRule, selection: Any) -> SelectionRule:
        del selection
        return rule

    def stop(self, tree: Tree, node: jax.Array) -> jax.Array | None:
        del tree, node
        return None

    def after_walk(self, tree: Tree, walk: Walk, several: bool) -> Tree:
        del walk, several
        return tree

    def done(self, tree: Tree) -> jax.Array | None:
        del tree
        return None


@dataclasses.dataclass(frozen=True)
class SecondMoment(Extension):
    """Stores ``Tree.node_sq_values``, the running mean of the squared returns of
    each node (the backups fold it next to ``node_values``): the variance that
    LCB move selection and variance-scaled cPUCT read."""

    def prepare(self, tree: Tree, continued: bool) -> Tree:
        del continued
        return with_second_moment(tree)


@dataclasses.dataclass(frozen=True)
class TreeMinMax(Extension):
    """Keeps ``Tree.minmax_low``/``minmax_high`` ``[B]``: the lowest and highest
    ``Q(s, a) = r + discount * V(child)`` of the tree, one pair per search as the
    MuZero pseudocode's ``MinMaxStats`` (Schrittwieser et al. 2020, appendix B),
    read by ``PUCTConfig(minmax_bounds="tree")``.

    ``prepare`` takes them over the visited edges of the tree it is given
    (``+inf``/``-inf`` for a new tree: nothing is backed up yet; a continued tree
    or a ``subtree`` gets the bounds of what it holds, O(N * A) once). After each
    walk's backup, ``after_walk`` folds in the new mean ``Q`` of every edge on
    the walk's path (the values that backup wrote): O(depth) per walk, O(1) per
    backed-up edge, ``[B]`` carries only. Edge means that change only through
    other paths (a graph's transpositions) are folded in when a walk next
    crosses that edge.
    """

    def prepare(self, tree: Tree, continued: bool) -> Tree:
        if not continued:  # only the root: nothing backed up yet
            empty = jnp.full((tree.batch_size,), jnp.inf, jnp.float32)
            return tree.replace(minmax_low=empty, minmax_high=-empty)
        visited = (tree.children_index >= 0) & (tree.edge_visits > 0)  # [B, N, A]
        q = _all_edge_q(tree)
        low = jnp.min(jnp.where(visited, q, jnp.inf), axis=(1, 2))
        high = jnp.max(jnp.where(visited, q, -jnp.inf), axis=(1, 2))
        return tree.replace(minmax_low=low.astype(jnp.float32),
                            minmax_high=high.astype(jnp.float32))

    def after_walk(self, tree: Tree, walk: Walk, several: bool) -> Tree:
        del several
        depth = walk.path_actions.shape[-1]
        parent = walk.path_nodes[:, :depth]  # [B, D]
        action = walk.path_actions
        on_path = jnp.arange(depth)[None, :] < walk.num_edges[:, None]
        q = _edge_q(tree, parent, action)
        low = jnp.minimum(present(tree.minmax_low, "tree.minmax_low"),
                          jnp.min(jnp.where(on_path, q, jnp.inf), axis=-1))
        high = jnp.maximum(present(tree.minmax_high, "tree.minmax_high"),
                           jnp.max(jnp.where(on_path, q, -jnp.inf), axis=-1))
        return tree.replace(minmax_low=low, minmax_high=high)


def _all_edge_q(tree: Tree) -> jax.Array:
    """``[B, N, A]`` ``Q(n, a)`` of every edge (garbage where there is no child)."""
    b, n, a = tree.children_index.shape
    parent = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32)[None, :, None], (b, n, a))
    action = jnp.broadcast_to(jnp.arange(a, dtype=jnp.int32)[None, None, :], (b, n, a))
    return _edge_q(tree, parent.reshape(b, n * a), action.reshape(b, n * a)).reshape(b, n, a)


def _edge_q(tree: Tree, parent: jax.Array, action: jax.Array) -> jax.Array:
    """``[B, M]`` ``Q(parent, action)`` for ``[B, M]`` edges, from the edge arrays
    when the tree stores them, else from the child node (as
    :func:`jaxpuct.tree.edge_qvalues`)."""
    child = jnp.maximum(row_take(tree.children_index, parent, action), 0)
    if tree.edge_rewards is not None:
        reward = row_take(tree.edge_rewards, parent, action)
        discount = row_take(present(tree.edge_discounts, "tree.edge_discounts"), parent, action)
    else:
        reward = row_take(tree.node_rewards, child)
        discount = row_take(tree.node_discounts, child)
    return reward + discount * row_take(tree.node_values, child)


# ---------------------------------------------------------------- combined hooks


def prepare(extensions: Sequence[Extension], tree: Tree, continued: bool) -> Tree:
    for extension in extensions:
        tree = extension.prepare(tree, continued)
    return tree


def wrap_rule(extensions: Sequence[Extension], rule: SelectionRule,
              selection: Any) -> SelectionRule:
    for extension in extensions:
        rule = extension.wrap_rule(rule, selection)
    return rule


def stop_fn(extensions: Sequence[Extension], tree: Tree) -> StopFn | None:
    """The walk's ``stop`` (the OR of the extensions'), or ``None`` if none stops."""
    del tree
    active = [e for e in extensions if overrides(e, "stop")]
    if not active:
        return None

    # An extension that overrides a hook returns an array from it (``None`` is the
    # base class's "no opinion", and only overriding extensions are called).
    def stop(tree: Tree, node: jax.Array) -> jax.Array:
        result = present(active[0].stop(tree, node), "Extension.stop's result")
        for extension in active[1:]:
            result = result | present(extension.stop(tree, node), "Extension.stop's result")
        return result

    return stop


def after_walk(extensions: Sequence[Extension], tree: Tree, walk: Walk,
               several: bool) -> Tree:
    for extension in extensions:
        tree = extension.after_walk(tree, walk, several)
    return tree


def has_done(extensions: Sequence[Extension]) -> bool:
    """Whether some extension can end a tree's search early."""
    return any(overrides(e, "done") for e in extensions)


def done(extensions: Sequence[Extension], tree: Tree) -> jax.Array:
    """``[B]`` bool: some extension says the tree needs no more simulations."""
    result = jnp.zeros((tree.batch_size,), jnp.bool_)
    for extension in extensions:
        if overrides(extension, "done"):
            result = result | present(extension.done(tree), "Extension.done's result")
    return result


def overrides(extension: Extension, hook: str) -> bool:
    return getattr(type(extension), hook) is not getattr(Extension, hook)

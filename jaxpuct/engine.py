"""The engine: one simulation loop for every policy, node kind and option.

A search step walks ``K`` paths per tree (``K = leaves_per_step``; the walks of
one step keep apart by virtual loss, :mod:`jaxpuct.virtual_loss`), calls the
expander **once** on all ``B * K`` leaf edges, stores the new nodes and backs
their values up the paths. What varies is passed in, never named here:

* the **rule** (:class:`jaxpuct.selection.SelectionRule`): how the walk picks
  an action at the root and below it (PUCT, Gumbel's sequential halving, the
  chance-node quota);
* the **expander** (:mod:`jaxpuct.expanders`): what a leaf edge becomes (an mctx
  ``recurrent_fn``, Stochastic MuZero's two functions, a learned model);
* the **extensions** (:mod:`jaxpuct.extensions`): what rides along the tree
  (solver proofs, second moments), through hooks at fixed points;
* the **tree** itself says how it stores and backs up: a tree keeps running
  means (:mod:`jaxpuct.backup`), a graph recomputes nodes idempotently
  (:func:`jaxpuct.graph.store_and_backup`); ``EngineConfig.backup`` may replace
  that (the exact chance expectation of :mod:`jaxpuct.stochastic`).

Cost per step: the walks and the backups are loops over depth with ``[B]`` /
``[B, D]`` carries, so a simulation costs O(B * depth * A), never O(tree size);
no loop carries a tree-sized copy (an HLO test checks it).

Keys: the expander's key is ``fold_in(keys.shared, step)``; walk ``k`` of step
``t`` is simulation ``t * K + k``, whose number folds each tree's own key
(``keys.elements [B]``) for the rule's noise and marks graph nodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxpuct import extensions as ext_lib
from jaxpuct import graph as graph_lib
from jaxpuct import prng, validation
from jaxpuct import virtual_loss as vl_lib
from jaxpuct.backup import backup_visits, store_leaves
from jaxpuct.expanders import Expander, evaluate_walks
from jaxpuct.extensions import Extension
from jaxpuct.selection import SelectionRule
from jaxpuct.tree import NodeData, Tree
from jaxpuct.virtual_loss import VirtualLoss
from jaxpuct.walk import Walk, select

# ``(tree, walk [B]) -> tree``: the extensions' hook after each walk's backup.
AfterWalk = Callable[[Tree, Walk], Tree]
# ``(tree, walks [K, B], leaves [K, B, ...], after_walk or None) -> tree``: storage
# of the evaluated leaves and the backup of the paths.
Backup = Callable[[Tree, Walk, NodeData, AfterWalk | None], Tree]


class SearchKeys(NamedTuple):
    """The keys of one search: ``shared`` seeds the expander (folded with the step),
    ``elements [B]`` each tree's own selection noise (folded with the simulation)."""

    shared: jax.Array
    elements: jax.Array


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """The loop's static configuration (hashable).

    Attributes:
      num_simulations: walks per tree in all (a multiple of ``leaves_per_step``).
      max_depth: longest path walked from the root (>= 1).
      leaves_per_step: ``K``, walks per tree per expander call.
      virtual_loss: how the ``K`` walks of a step keep apart (``K > 1`` only).
      backup: storage and backup to use instead of the tree's own (``None``).
    """

    num_simulations: int
    max_depth: int
    leaves_per_step: int = 1
    virtual_loss: VirtualLoss = VirtualLoss()
    backup: Backup | None = None

    def __post_init__(self):
        validation.check_int("num_simulations", self.num_simulations, 1)
        validation.check_int("max_depth", self.max_depth, 1)
        validation.check_int("leaves_per_step", self.leaves_per_step, 1)
        validation.check_instance("virtual_loss", self.virtual_loss, VirtualLoss)
        if self.num_simulations % self.leaves_per_step:
            raise ValueError(
                "num_simulations must be a multiple of leaves_per_step: expected "
                f"num_simulations % leaves_per_step == 0, got {self.num_simulations} % "
                f"{self.leaves_per_step} == {self.num_simulations % self.leaves_per_step}.")

    @property
    def num_steps(self) -> int:
        return self.num_simulations // self.leaves_per_step


class _LoopState(NamedTuple):
    tree: Tree
    marks: jax.Array | None  # [B, N] graph search: simulation that last entered a node
    stamp: jax.Array | None  # [B, N] virtual loss ("loss" mode, K > 1)
    buffers: Any  # path records reused between steps: Walk [B] or StepWalks [K, B]
    counts: Any  # the expander's counts, summed


def store_and_backup_tree(tree: Tree, walks: Walk, leaves: NodeData,
                          after_walk: AfterWalk | None) -> Tree:
    """Tree mode: :func:`jaxpuct.backup.store_leaves`, then
    :func:`jaxpuct.backup.backup_visits`, then ``after_walk`` for each walk."""
    tree, leaf_return = store_leaves(tree, walks, leaves)
    return each_walk(backup_visits(tree, walks, leaf_return), walks, after_walk)


def each_walk(tree: Tree, walks: Walk, after_walk: AfterWalk | None) -> Tree:
    """``after_walk`` for each of the ``[K, B]`` walks, in order."""
    if after_walk is None:
        return tree
    if walks.num_walks == 1:
        return after_walk(tree, walks.one(0))
    return jax.lax.fori_loop(0, walks.num_walks, lambda k, t: after_walk(t, walks.one(k)), tree)


def run(params: Any, keys: SearchKeys, tree: Tree, expander: Expander, rule: SelectionRule,
        extensions: Sequence[Extension], config: EngineConfig) -> tuple[Tree, Any]:
    """Runs ``config.num_simulations`` simulations on a prepared tree (module
    docstring); returns the tree and the expander's summed counts.

    ``tree`` has every extension's fields (their ``prepare`` ran) and ``rule`` is
    already wrapped by them. A root that is terminal, or that an extension stops
    at, is not searched.
    """
    k_total, depth_limit = config.leaves_per_step, config.max_depth
    stop = ext_lib.stop_fn(extensions, tree)
    several = k_total > 1
    def each_after_walk(t: Tree, walk: Walk) -> Tree:
        return ext_lib.after_walk(extensions, t, walk, several)

    after_walk: AfterWalk | None = None
    if any(ext_lib.overrides(e, "after_walk") for e in extensions):
        after_walk = each_after_walk
    if config.backup is not None:
        backup = config.backup
    elif tree.is_graph:
        backup = graph_lib.store_and_backup
    else:
        backup = store_and_backup_tree

    def walk_once(t, sim, path_nodes, path_actions, marks):
        tie_keys = prng.fold_in(keys.elements, sim)
        return select(t, rule, depth_limit, tie_keys, marks, sim, path_nodes, path_actions,
                      stop)

    def step_fn(step, state: _LoopState) -> _LoopState:
        if several:
            def select_one(t, k, path_nodes, path_actions, marks):
                return walk_once(t, step * k_total + k, path_nodes, path_actions, marks)
            tree, buffers, marks, stamp = vl_lib.walk_step(
                state.tree, config.virtual_loss, select_one, step, state.buffers,
                state.marks, state.stamp)
            walks = buffers.walks
        else:
            walk, marks = walk_once(state.tree, step, state.buffers.path_nodes,
                                    state.buffers.path_actions, state.marks)
            tree, buffers, stamp = state.tree, walk, state.stamp
            walks = jax.tree.map(lambda x: x[None], walk)
        leaves, counts = evaluate_walks(params, step_keys[step], tree, walks, expander, step)
        tree = backup(tree, walks, leaves, after_walk)
        counts = jax.tree.map(jnp.add, state.counts, counts)
        return _LoopState(tree, marks, stamp, buffers, counts)

    batch_size = tree.batch_size
    # The expander's keys ``fold_in(keys.shared, step)`` of every step, folded at
    # once before the loop (the same keys): on CPU JAX lowers each threefry call
    # to a five-round loop of its own, which a B = 1 search step paid again on
    # every step (with a rollout expander: 124 kernels per step before, 111
    # after). Dropped by XLA when the expander ignores its key.
    step_keys = prng.fold_in(keys.shared, jnp.arange(config.num_steps, dtype=jnp.uint32))
    # Graph search marks each node it enters with the simulation's number, which
    # finds cycles in O(1) per step instead of scanning the path.
    marks = jnp.full(tree.node_visits.shape, -1, jnp.int32) if tree.is_graph else None
    if several:
        buffers = vl_lib.empty_step(config.virtual_loss, k_total, batch_size, depth_limit)
        stamp = vl_lib.empty_stamp(config.virtual_loss, tree)
    else:
        # Entries past a walk's length are never read, so the buffers need no
        # clearing between simulations (which would cost O(B * max_depth) each).
        buffers = Walk(
            path_nodes=jnp.full((batch_size, depth_limit + 1), Tree.ROOT_INDEX, jnp.int32),
            path_actions=jnp.zeros((batch_size, depth_limit), jnp.int32),
            num_edges=jnp.zeros((batch_size,), jnp.int32),
            expand=jnp.zeros((batch_size,), jnp.bool_))
        stamp = None
    init = _LoopState(tree, marks, stamp, buffers, expander.initial_counts())
    if not ext_lib.has_done(extensions):
        final = jax.lax.fori_loop(0, config.num_steps, step_fn, init)
        return final.tree, final.counts

    def cond(carry):
        step, state = carry
        return (step < config.num_steps) & ~jnp.all(ext_lib.done(extensions, state.tree))

    def body(carry):
        step, state = carry
        return step + 1, step_fn(step, state)

    final = jax.lax.while_loop(cond, body, (jnp.int32(0), init))[1]
    return final.tree, final.counts

"""Early stopping: a tree takes no more simulations once its move is decided.

The rule (Lc0's "smart pruning", the ``SmartPruningFactor`` option of the Lc0
options documentation, at factor 1; requested for mctx as "early stopping"):
with ``R`` simulations of the budget left for a tree, its most visited legal
root action ``b`` is *decided* when every other legal root action ``a`` has

    N(a) + R < N(b)        (and N(b) >= 1).

Each simulation adds exactly one visit to exactly one root edge, so after the
``R`` simulations ``N'(a) <= N(a) + R < N(b) <= N'(b)``: ``b`` stays the strict
maximum whatever the selection rule does with them. The inequality is strict
on purpose: with ``<=`` an action could end level with ``b``, and the argmax's
tie-break (lowest index, :func:`jaxpuct.final_move.visit_policy`) could then
pick it in the full search but not in the stopped one. With ``<`` the most
visited action is unique in both, so it is the same action, bit for bit, for
any tie-break. ``N(b) >= 1`` keeps a root with a single legal action searching
until that action has a visit (an argmax of all-zero counts is no move).

What is *not* kept: the visit counts themselves (a stopped tree's counts are
those of fewer simulations), so the sampled move at temperature > 0, the
visit-distribution training target, the value-weighted and LCB moves, and
Gumbel's move (which is not the most visited action) can all differ from the
full search's. The policies refuse the moves that are not the most visited
action and document the rest.

How it rides along (:mod:`jaxpuct.extensions`): :class:`EarlyStop` stores a
:class:`StopState` in ``Tree.early_stop`` at ``prepare``; ``after_walk``
counts the walks and, at the end of each step, checks the rule (O(B * A),
next to the O(B * D * A) walk); ``stop`` at the root keeps a decided tree's
walks from leaving it, and ``done`` ends the loop when every tree is decided
(or its root is terminal). The decision is read from the stored state, never
from the visit counts inside a step: the pending walks of a step
(:mod:`jaxpuct.virtual_loss`) mark the root's counts while the step's walks
are selected.

Counting ``R``: the loop gives every tree ``K = leaves_per_step`` walks per
step, and ``after_walk`` runs once per walk for the whole batch, so the walks
left, ``R = num_simulations - walks so far``, are counted there (the same for
every tree; a continued tree counts only this search's walks, whatever visits
it inherited). The rule is checked when ``R`` is a multiple of ``K``: after
the step's last backup, when the visits hold all its walks (a tree backup
calls ``after_walk`` once the ``K`` backups are done, a graph backup after
each). A decided tree stops between steps and skips ``R`` walks. ``R`` is
not read from the root's visits: a walk that finds no selectable edge (a
step of ``K > 1`` walks can claim every one) adds no visit, and would count
as a walk still to come.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxpuct._dataclass import Replaceable, pytree_dataclass
from jaxpuct.extensions import Extension
from jaxpuct.solver import root_proven
from jaxpuct.tree import ILLEGAL, Tree, present
from jaxpuct.walk import Walk


@pytree_dataclass
class StopState(Replaceable):
    """The early-stopping state of one search, per tree (``Tree.early_stop``).

    Attributes:
      walks_left: ``[B]`` int32 walks the loop will still give each tree (the
        budget ``num_simulations`` minus the walks so far).
      enabled: ``[B]`` bool, the trees that may stop early.
      saved: ``[B]`` int32 the walks a decided tree skips (``walks_left`` when
        it stopped); 0 for a tree that has not stopped.
    """

    walks_left: jax.Array
    enabled: jax.Array
    saved: jax.Array

    @property
    def stopped(self) -> jax.Array:
        """``[B]`` bool: the tree's move is decided and it takes no more walks (a
        tree decided with no walk left saves nothing and need not stop)."""
        return self.saved > 0


def decided(visits: jax.Array, legal: jax.Array, remaining: jax.Array) -> jax.Array:
    """``[B]`` bool: no other legal action can reach the most visited one's count
    with ``remaining [B]`` more simulations (module docstring: ``N(a) + R < N(b)``
    for every legal ``a != b``, and ``N(b) >= 1``). ``visits [B, A]`` int,
    ``legal [B, A]`` bool."""
    counts = jnp.where(legal, visits, -1)
    best = jnp.argmax(counts, axis=-1)
    top = jnp.max(counts, axis=-1)
    others = legal & (jnp.arange(visits.shape[-1])[None, :] != best[:, None])
    runner_up = jnp.max(jnp.where(others, visits, 0), axis=-1)
    overtakable = jnp.any(others, axis=-1) & (runner_up + remaining >= top)
    return (top >= 1) & ~overtakable


def _state(tree: Tree) -> StopState:
    """The tree's :class:`StopState`, which ``EarlyStop.prepare`` set."""
    return present(tree.early_stop, "tree.early_stop")


def root_decided(tree: Tree, remaining: jax.Array) -> jax.Array:
    """``[B]`` bool :func:`decided` at each root with ``remaining [B]`` walks left."""
    legal = tree.children_index[:, Tree.ROOT_INDEX] != ILLEGAL
    return decided(tree.edge_visits[:, Tree.ROOT_INDEX], legal, remaining)


def enable_only(tree: Tree, enabled: jax.Array) -> Tree:
    """``tree`` whose early stopping applies only where ``enabled`` (``[B]`` or
    scalar bool, may be traced); the others search their full budget."""
    state = _state(tree)
    enabled = jnp.broadcast_to(jnp.asarray(enabled).astype(jnp.bool_), state.enabled.shape)
    return tree.replace(early_stop=state.replace(enabled=state.enabled & enabled,
                                                 saved=jnp.where(enabled, state.saved, 0)))


@dataclasses.dataclass(frozen=True)
class EarlyStop(Extension):
    """Early stopping as an engine extension (module docstring).

    * ``prepare``: the tree gets a :class:`StopState` for this search; a
      continued tree whose inherited visits already decide its move takes no
      walk at all;
    * ``after_walk``: counts the walk; at the end of a step, a tree whose move
      the visits decide stops;
    * ``stop``: a stopped tree's walks do not leave its root;
    * ``done``: the tree has stopped, or its root is terminal.

    Attributes:
      num_simulations: the search's budget ``S`` per tree.
      leaves_per_step: ``K``, walks per tree per step (``S`` is a multiple).
    """

    num_simulations: int
    leaves_per_step: int = 1

    def prepare(self, tree: Tree, continued: bool) -> Tree:
        del continued
        left = jnp.full((tree.batch_size,), self.num_simulations, jnp.int32)
        state = StopState(walks_left=left, enabled=jnp.ones(left.shape, jnp.bool_),
                          saved=jnp.zeros_like(left))
        return self._check(tree.replace(early_stop=state), jnp.bool_(True))

    def stop(self, tree: Tree, node: jax.Array) -> jax.Array:
        return _state(tree).stopped & (node == Tree.ROOT_INDEX)

    def after_walk(self, tree: Tree, walk: Walk, several: bool) -> Tree:
        del walk, several
        state = _state(tree)
        left = state.walks_left - 1
        tree = tree.replace(early_stop=state.replace(walks_left=left))
        # Only after the step's last walk do the visits hold all of its walks.
        return self._check(tree, left[0] % self.leaves_per_step == 0)

    def done(self, tree: Tree) -> jax.Array:
        return _state(tree).stopped | tree.node_terminal[:, Tree.ROOT_INDEX]

    @staticmethod
    def _check(tree: Tree, step_end: jax.Array) -> Tree:
        """Stops the enabled trees the visits decide, where ``step_end``."""
        state = _state(tree)
        # A stopped tree's visits no longer change and R only shrinks, so it stays
        # decided and keeps the count it stopped with. A root the solver proved
        # takes no-op walks already: they are not this extension's savings.
        newly = (step_end & state.enabled & ~state.stopped & ~root_proven(tree)
                 & root_decided(tree, state.walks_left))
        return tree.replace(early_stop=state.replace(
            saved=jnp.where(newly, state.walks_left, state.saved)))


__all__ = ["EarlyStop", "StopState", "decided", "enable_only", "root_decided"]

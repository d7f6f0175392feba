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
re-checks the rule after each backup (O(B * A), next to the O(B * D * A) walk);
``stop`` at the root keeps a decided tree's walks from leaving it, and ``done``
ends the loop when every tree is decided (or its root is terminal). The
decision is read from the stored flag, never from the visit counts inside a
step: the pending walks of a step (:mod:`jaxpuct.virtual_loss`) mark the root's
counts while the step's walks are selected.

Counting ``R`` from the root's visits: ``R = visit_budget - Σ_a N(root, a)``
with ``visit_budget`` the root's visit total when the search began plus
``num_simulations`` (a continued tree starts with its inherited visits). With
``K = leaves_per_step`` walks come ``K`` per step and a tree stops between
steps; every walk of an undecided tree adds one root visit, so ``R`` is exact
(a walk that found no selectable edge, possible with ``K > 1``, adds none:
``R`` then overstates what is left, which only delays a stop).
"""

from __future__ import annotations

import dataclasses

import chex
import jax.numpy as jnp

from jaxpuct.extensions import Extension
from jaxpuct.tree import ILLEGAL, Tree
from jaxpuct.walk import Walk


@chex.dataclass(frozen=True)
class StopState:
    """The early-stopping state of one search, per tree (``Tree.early_stop``).

    Attributes:
      visit_budget: ``[B]`` int32 root visit total ``Σ_a N(root, a)`` at which
        the search's simulations run out (its total at the start plus
        ``num_simulations``).
      enabled: ``[B]`` bool, the trees that may stop early.
      stopped: ``[B]`` bool, the trees whose move is decided: they take no more
        simulations.
    """

    visit_budget: chex.Array
    enabled: chex.Array
    stopped: chex.Array


def root_visit_total(tree: Tree) -> chex.Array:
    """``[B]`` int32 ``Σ_a N(root, a)``: the simulations the root has seen."""
    return jnp.sum(tree.edge_visits[:, Tree.ROOT_INDEX], axis=-1, dtype=jnp.int32)


def decided(visits: chex.Array, legal: chex.Array, remaining: chex.Array) -> chex.Array:
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


def remaining_simulations(tree: Tree) -> chex.Array:
    """``[B]`` int32 simulations of the budget a tree of an early-stopping search
    has not run (needs ``tree.early_stop``); after the search,
    ``tree.summary().simulations_saved``."""
    return jnp.maximum(tree.early_stop.visit_budget - root_visit_total(tree), 0)


def root_decided(tree: Tree) -> chex.Array:
    """``[B]`` bool :func:`decided` at each root, with the simulations left."""
    legal = tree.children_index[:, Tree.ROOT_INDEX] != ILLEGAL
    return decided(tree.edge_visits[:, Tree.ROOT_INDEX], legal, remaining_simulations(tree))


def enable_only(tree: Tree, enabled: chex.Array) -> Tree:
    """``tree`` whose early stopping applies only where ``enabled`` (``[B]`` or
    scalar bool, may be traced); the others search their full budget."""
    state = tree.early_stop
    enabled = jnp.broadcast_to(jnp.asarray(enabled).astype(jnp.bool_), state.enabled.shape)
    return tree.replace(early_stop=state.replace(enabled=state.enabled & enabled,
                                                 stopped=state.stopped & enabled))


@dataclasses.dataclass(frozen=True)
class EarlyStop(Extension):
    """Early stopping as an engine extension (module docstring).

    * ``prepare``: the tree gets a :class:`StopState` for this search; a
      continued tree whose inherited visits already decide its move takes no
      simulation at all;
    * ``after_walk``: a tree whose move the backed-up visits decide stops;
    * ``stop``: a stopped tree's walks do not leave its root;
    * ``done``: the tree has stopped, or its root is terminal.

    Attributes:
      num_simulations: the search's budget ``S`` per tree.
    """

    num_simulations: int

    def prepare(self, tree: Tree, continued: bool) -> Tree:
        del continued
        budget = root_visit_total(tree) + jnp.int32(self.num_simulations)
        enabled = jnp.ones((tree.batch_size,), jnp.bool_)
        tree = tree.replace(early_stop=StopState(visit_budget=budget, enabled=enabled,
                                                 stopped=jnp.zeros_like(enabled)))
        return self._update(tree)

    def stop(self, tree: Tree, node: chex.Array) -> chex.Array:
        return tree.early_stop.stopped & (node == Tree.ROOT_INDEX)

    def after_walk(self, tree: Tree, walk: Walk, several: bool) -> Tree:
        del walk, several
        return self._update(tree)

    def done(self, tree: Tree) -> chex.Array:
        return tree.early_stop.stopped | tree.node_terminal[:, Tree.ROOT_INDEX]

    @staticmethod
    def _update(tree: Tree) -> Tree:
        state = tree.early_stop
        # Once stopped, the root's visits (so R too) stop changing: it stays so.
        stopped = state.stopped | (state.enabled & root_decided(tree))
        return tree.replace(early_stop=state.replace(stopped=stopped))


__all__ = ["EarlyStop", "StopState", "decided", "enable_only", "remaining_simulations",
           "root_decided", "root_visit_total"]

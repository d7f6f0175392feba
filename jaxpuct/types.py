"""The data that crosses the boundary between a user's model and the search.

The field names and meanings follow `mctx` (DeepMind), so that an mctx
``recurrent_fn`` and mctx ``RootFnOutput``/``RecurrentFnOutput`` objects can be
passed unchanged. jaxpuct reads the optional fields below with ``getattr``, so
objects that lack them (mctx's) are accepted too.

Values are always from the point of view of the player to move at the node they
belong to; two-player zero-sum games use ``discount = -1``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import jax

from jaxpuct._dataclass import Replaceable, pytree_dataclass

Params = Any
Embedding = Any  # any pytree whose leaves have a leading [B] axis


@pytree_dataclass
class RootFnOutput(Replaceable):
    """What the search needs about the root of each tree.

    Attributes:
      prior_logits: ``[B, A]`` policy logits at the root.
      value: ``[B]`` value estimate of the root state.
      embedding: pytree with leaves ``[B, ...]`` given to ``recurrent_fn``.
      legal_action_mask: optional ``[B, A]`` bool, ``True`` where an action is
        legal at the root. Combined (AND) with the policy's ``invalid_actions``.
      state_hash: optional ``[B, 2]`` uint32 hash of the root state, used only
        by graph search.
    """

    prior_logits: jax.Array
    value: jax.Array
    embedding: Embedding
    legal_action_mask: jax.Array | None = None
    state_hash: jax.Array | None = None


@pytree_dataclass
class RecurrentFnOutput(Replaceable):
    """What ``recurrent_fn`` returns for the state reached by one action.

    Attributes:
      reward: ``[B]`` reward of the transition, from the point of view of the
        player who took the action.
      discount: ``[B]`` factor between ``reward`` and the new state's value
        (``-1`` for two-player zero-sum games, ``1`` or ``gamma`` otherwise).
      prior_logits: ``[B, A]`` policy logits at the new state.
      value: ``[B]`` value estimate of the new state. For a terminal state it is
        taken as exact: return 0 there when the outcome is in ``reward`` (the
        mctx/pgx convention).
      legal_action_mask: optional ``[B, A]`` bool for the new state (jaxpuct
        extension; default: every action legal). Illegal actions are never
        selected. A non-terminal state with no legal action is treated as a
        terminal one whose exact value is ``value``.
      terminal: optional ``[B]`` bool (jaxpuct extension; default: never). A
        terminal node is never expanded and its value is never averaged.
      state_hash: optional ``[B, 2]`` uint32 hash of the new state (graph
        search only; include the player to move).
    """

    reward: jax.Array
    discount: jax.Array
    prior_logits: jax.Array
    value: jax.Array
    legal_action_mask: jax.Array | None = None
    terminal: jax.Array | None = None
    state_hash: jax.Array | None = None


RecurrentFn = Callable[[Params, jax.Array, jax.Array, Embedding],
                       tuple[Any, Embedding]]

T = TypeVar("T")


@pytree_dataclass
class SearchSummary(Replaceable):
    """Root statistics of a finished search.

    Attributes:
      visit_counts: ``[B, A]`` edge visit counts ``N(root, a)``.
      visit_probs: ``[B, A]`` ``visit_counts`` normalised (all zeros for a root
        that was never searched, e.g. one with no legal action).
      value: ``[B]`` the root's search value ``Q(root)``.
      qvalues: ``[B, A]`` ``Q(root, a) = r + discount * Q(child)`` for expanded
        children, 0 elsewhere.
      unstored_leaves: ``[B]`` int32 leaves the tree evaluated but could not
        store because it was full (see ``Tree.unstored_leaves``); more than a few
        means ``max_nodes`` is too small for the search (or for the search plus
        the subtree it continued).
      simulations_saved: ``[B]`` int32 simulations early stopping skipped
        (``early_stop=``; see :mod:`jaxpuct.early_stop`): the walks the loop
        would still have given a tree when its move was decided; 0 for a tree
        that searched its budget (a terminal or solver-proven root, which takes
        no-op walks, counts 0 too). ``None`` without early stopping.
    """

    visit_counts: jax.Array
    visit_probs: jax.Array
    value: jax.Array
    qvalues: jax.Array
    unstored_leaves: jax.Array | None = None
    simulations_saved: jax.Array | None = None


@pytree_dataclass
class PolicyOutput(Replaceable, Generic[T]):
    """What a policy returns.

    Attributes:
      action: ``[B]`` int32 action to play. ``-1`` for a root with no legal
        action (nothing can be played there; see ``action_weights``).
      action_weights: ``[B, A]`` the search policy (the training target):
        visit counts with temperature, or the value-weighted rule; all zeros
        for a root with no legal action.
      search_tree: the ``Tree`` the search built.
    """

    action: jax.Array
    action_weights: jax.Array
    search_tree: T

"""Choosing the move and the training target from the root's statistics.

* :func:`lcb_action`: the move with the highest *lower confidence bound* of its
  value among the well-visited moves (KataGo, "KataGo methods": LCB move
  selection, ``lcbStdevs = 5``, minimum visit share 0.15). The most visited
  move can be one whose value looked good early; a move with almost as many
  visits and a clearly better, well-measured value is the safer choice.
* :func:`prune_policy_target`: KataGo's policy-target pruning (Wu 2019,
  "Accelerating Self-Play Learning in Go", forced playouts and policy target
  pruning): the visits that forced playouts (``sqrt(k * P(c) * N)``) and plain
  exploration spent on a child beyond what PUCT would have given it are removed
  from the self-play target.

* :func:`visit_policy`, :func:`value_weighted_policy`, :func:`sample_action`,
  :func:`choose_action`: the visit target with temperature, AlphaZero's move
  (Silver et al. 2018), and the value-weighted variant.

All are pure functions of root statistics ``[B, A]``.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct import prng
from jaxpuct.indexing import row_take
from jaxpuct.numerics import WEIGHT_FLOOR, normalize
from jaxpuct.selection import PUCTConfig, exploration_weight
from jaxpuct.tree import Tree, present
from jaxpuct.validation import concrete_value


def root_edge_moments(tree: Tree) -> tuple[jax.Array, jax.Array]:
    """``(Q(root, a), E[X**2](root, a))``, both ``[B, A]``, from the root player's
    view: ``X = r + d * Y`` with ``Y`` the child's returns, so
    ``E[X**2] = r**2 + 2 r d Q(child) + d**2 E[Y**2](child)``. Edges with no child
    read 0. Needs ``tree.node_sq_values``."""
    if tree.node_sq_values is None:
        raise ValueError("LCB needs the tree's second moment: expected tree.node_sq_values, "
                         "got None (search with second_moment=True or final_move='lcb').")
    children = tree.children_index[:, Tree.ROOT_INDEX]
    has_child = children >= 0
    safe = jnp.maximum(children, 0)
    if tree.edge_rewards is not None:
        reward = tree.edge_rewards[:, Tree.ROOT_INDEX]
        discount = present(tree.edge_discounts, "tree.edge_discounts")[:, Tree.ROOT_INDEX]
    else:
        reward, discount = row_take(tree.node_rewards, safe), row_take(tree.node_discounts, safe)
    child_q = row_take(tree.node_values, safe)
    child_sq = row_take(tree.node_sq_values, safe)
    q = reward + discount * child_q
    sq = reward * reward + 2.0 * reward * discount * child_q + discount * discount * child_sq
    return jnp.where(has_child, q, 0.0), jnp.where(has_child, sq, 0.0)


def lcb_values(visits: jax.Array, q: jax.Array, sq: jax.Array,
               lcb_stdevs: float = 5.0) -> jax.Array:
    """``[B, A]`` lower confidence bounds ``Q - lcb_stdevs * sqrt(Var / N)`` with
    ``Var = max(E[X**2] - Q**2, 0)``, from ``visits``, ``q`` and ``sq`` ``[B, A]``;
    ``-inf`` where ``N = 0``. (KataGo also widens the bound of low-visit moves
    with a Student-t factor; here the minimum visit share plays that part.)"""
    n = visits.astype(jnp.float32)
    variance = jnp.maximum(sq - q * q, 0.0)
    radius = lcb_stdevs * jnp.sqrt(variance / jnp.maximum(n, 1.0))
    return jnp.where(n > 0, q - radius, -jnp.inf)


def lcb_choice(visits: jax.Array, q: jax.Array, sq: jax.Array, lcb_stdevs: float = 5.0,
               min_visit_share: float = 0.15) -> jax.Array:
    """``[B]`` int32: among the moves with ``N(a) >= min_visit_share * max_b N(b)``
    (and ``N(a) > 0``) the one with the highest :func:`lcb_values` (lowest index
    on ties); ``-1`` in a row with no visit. Inputs ``[B, A]``."""
    n = visits.astype(jnp.float32)
    top = jnp.max(n, axis=-1, keepdims=True)
    eligible = (n > 0) & (n >= min_visit_share * top)
    lcb = jnp.where(eligible, lcb_values(visits, q, sq, lcb_stdevs), -jnp.inf)
    action = jnp.argmax(lcb, axis=-1).astype(jnp.int32)
    return jnp.where(jnp.any(eligible, axis=-1), action, -1)


def lcb_action(tree: Tree, lcb_stdevs: float = 5.0, min_visit_share: float = 0.15
               ) -> jax.Array:
    """``[B]`` the LCB move of each root (see :func:`lcb_choice`); needs
    ``tree.node_sq_values``."""
    q, sq = root_edge_moments(tree)
    return lcb_choice(tree.edge_visits[:, Tree.ROOT_INDEX], q, sq, lcb_stdevs, min_visit_share)


def prune_policy_target(visits: jax.Array, prior: jax.Array, q: jax.Array,
                        config: PUCTConfig = PUCTConfig(), forced_k: float = 2.0
                        ) -> jax.Array:
    """KataGo's pruned policy target ``[B, A]`` float32 (unnormalised visit weights).

    With ``N = Σ_a N(a)``, ``c = c(N)`` of ``config`` and the PUCT value
    ``PUCT(a) = Q(a) + c P(a) sqrt(N) / (1 + N(a))``, let ``i*`` be the most
    visited move. Every other move ``a`` keeps the fewest visits ``n' >= N(a) -
    sqrt(forced_k P(a) N)`` with ``PUCT(a; n') <= PUCT(i*)``, i.e.
    ``n' = max(N(a) - sqrt(forced_k P(a) N), c P(a) sqrt(N) / (PUCT(i*) - Q(a)) - 1)``
    (never more than ``N(a)``; ``N(a)`` unchanged when ``Q(a) >= PUCT(i*)``).
    A move left with at most one visit is pruned to 0. ``i*`` keeps ``N(i*)``.

    Args:
      visits: ``[B, A]`` root visit counts.
      prior: ``[B, A]`` root prior ``P`` (the one selection used, noise included).
      q: ``[B, A]`` root edge values (read only where visited).
      config: its exploration weight ``c(N)`` is used (``c_init``, ``c_base``).
      forced_k: KataGo's ``k`` in ``sqrt(k P N)`` (2).

    Returns:
      ``[B, A]`` weights; zeros in a row with no visit.
    """
    n = visits.astype(jnp.float32)
    total = jnp.sum(n, axis=-1, keepdims=True)
    c = exploration_weight(config, total[:, 0])[:, None]
    u_scale = c * prior * jnp.sqrt(total)
    puct = q + u_scale / (1.0 + n)
    best = jnp.argmax(n, axis=-1)
    is_best = jnp.arange(n.shape[-1])[None, :] == best[:, None]
    best_puct = jnp.take_along_axis(puct, best[:, None], axis=-1)
    forced = jnp.sqrt(forced_k * prior * total)
    gap = best_puct - q
    equal_puct = jnp.where(gap > 0, u_scale / jnp.where(gap > 0, gap, 1.0) - 1.0, n)
    pruned = jnp.minimum(n, jnp.maximum(n - forced, equal_puct))
    pruned = jnp.where(pruned <= 1.0, 0.0, pruned)
    return jnp.where(is_best | (n == 0), n, pruned)


__all__ = ["lcb_action", "lcb_choice", "lcb_values", "prune_policy_target",
           "root_edge_moments"]


def visit_policy(
    visit_counts: jax.Array,
    temperature: chex.Numeric,
    legal: jax.Array | None = None,
) -> jax.Array:
    """``π(a) ∝ N(a)^(1/τ)``; ``τ = 0`` puts all mass on the most visited action
    (lowest index on ties).

    Args:
      visit_counts: ``[B, A]`` (counts or any non-negative weights).
      temperature: ``τ >= 0``, a scalar or ``[B]`` (one per tree, e.g. τ = 1 for
        the opening moves of some games and 0 for others). A NaN τ acts as 0
        (a traced bad value must not leave a searched root without a move);
        ``τ = +inf`` spreads the weight evenly over the visited actions (the
        limit of ``N^(1/τ)``).
      legal: optional ``[B, A]`` bool; actions outside it get zero weight.

    Returns:
      ``[B, A]`` float32; all zeros in a row with no visit.
    """
    counts = visit_counts.astype(jnp.float32)
    if legal is not None:
        counts = jnp.where(legal, counts, 0.0)
    total = jnp.sum(counts, axis=-1, keepdims=True)
    tau = jnp.broadcast_to(jnp.asarray(temperature, jnp.float32),
                           counts.shape[:1]).reshape(-1, 1)
    tau = jnp.where(jnp.isnan(tau), 0.0, tau)
    greedy = jax.nn.one_hot(jnp.argmax(counts, axis=-1), counts.shape[-1], dtype=jnp.float32)
    # Scaling by the maximum first keeps N^(1/τ) finite for any τ > 0.
    top = jnp.max(counts, axis=-1, keepdims=True)
    powered = (counts / jnp.maximum(top, WEIGHT_FLOOR)) ** (1.0 / jnp.maximum(tau, WEIGHT_FLOOR))
    # 0 ** (1 / inf) is 1: an unvisited action keeps weight 0 at every τ.
    powered = normalize(jnp.where(counts > 0, powered, 0.0))
    weights = jnp.where(tau == 0, greedy, powered)
    return jnp.where(total > 0, weights, 0.0)


def value_weighted_policy(visit_counts: jax.Array, qvalues: jax.Array) -> jax.Array:
    """``π(a) ∝ N(a) · (1 + Q(a))`` for values in [-1, 1]: visits of moves that
    turned out bad count for less (a value-weighted visit target).

    Args:
      visit_counts: ``[B, A]``.
      qvalues: ``[B, A]`` root edge values.

    Returns:
      ``[B, A]`` float32; all zeros in a row with no weight.
    """
    weights = visit_counts.astype(jnp.float32) * jnp.clip(1.0 + qvalues, 0.0, 2.0)
    return normalize(weights)


def sample_action(rng_keys: jax.Array, weights: jax.Array) -> jax.Array:
    """``[B]`` int32 actions drawn from ``weights [B, A]`` (one key per row of
    ``rng_keys [B]``); ``-1`` in a row with no weight."""
    has_weight = jnp.any(weights > 0, axis=-1)
    logits = jnp.where(weights > 0, jnp.log(jnp.maximum(weights, WEIGHT_FLOOR)), -jnp.inf)
    action = prng.categorical(rng_keys, logits)
    return jnp.where(has_weight, action, -1).astype(jnp.int32)


def choose_action(rng_keys: jax.Array, weights: jax.Array, temperature: chex.Numeric
                  ) -> jax.Array:
    """:func:`sample_action` of the :func:`visit_policy` weights made with
    ``temperature``: where that is known at trace time to be ``<= 0`` (or NaN) in
    every row, the weights are one-hot and the draw can only return their argmax,
    so the argmax is returned without drawing (the same actions; on CPU each
    threefry draw is a loop of its own, a few microseconds of a ``B = 1`` search).

    Args:
      rng_keys: ``[B]`` keys.
      weights: ``[B, A]`` non-negative.
      temperature: ``[B]`` or scalar.

    Returns:
      ``[B]`` int32; ``-1`` in a row with no weight.
    """
    tau = concrete_value(temperature)
    if tau is None or not np.all(np.isnan(tau) | (tau <= 0)):
        return sample_action(rng_keys, weights)
    has_weight = jnp.any(weights > 0, axis=-1)
    return jnp.where(has_weight, jnp.argmax(weights, axis=-1), -1).astype(jnp.int32)

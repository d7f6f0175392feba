"""``alphazero_policy``: root noise, search, and the move/training target.

Same call shape as ``mctx.muzero_policy``; the keyword arguments after ``*``
are jaxpuct's own.
"""

from __future__ import annotations

import numbers
from typing import Any

import chex
import jax
import jax.numpy as jnp

from jaxpuct import validation
from jaxpuct.graph import GraphConfig
from jaxpuct.search import masked_softmax, root_legal_mask, search
from jaxpuct.selection import PUCTConfig
from jaxpuct.tree import ILLEGAL, Tree
from jaxpuct.types import PolicyOutput, RecurrentFn


def dirichlet_noise(
    rng_keys: chex.Array,
    prior: chex.Array,
    legal: chex.Array,
    fraction: float,
    alpha: float,
) -> chex.Array:
    """``(1 - fraction) * P + fraction * Dir(alpha)`` over the legal actions only.

    AlphaZero (Silver et al. 2018) uses ``fraction = 0.25`` and ``alpha``
    about 10 / (typical number of legal moves): 0.3 for chess, 0.03 for Go.

    Args:
      rng_keys: ``[B]`` keys, one per tree.
      prior: ``[B, A]`` probabilities (zero at illegal actions).
      legal: ``[B, A]`` bool.
      fraction: mixing weight in [0, 1].
      alpha: concentration (> 0).

    Returns:
      ``[B, A]`` probabilities; illegal actions keep zero mass.
    """
    num_actions = prior.shape[-1]
    gammas = jax.vmap(lambda k: jax.random.gamma(k, alpha, (num_actions,)))(rng_keys)
    gammas = jnp.where(legal, gammas, 0.0)
    total = jnp.sum(gammas, axis=-1, keepdims=True)
    # Tiny alphas can underflow every draw to zero: fall back to uniform.
    count = jnp.maximum(jnp.sum(legal, axis=-1, keepdims=True), 1)
    noise = jnp.where(total > 0, gammas / jnp.where(total > 0, total, 1.0), legal / count)
    return (1.0 - fraction) * prior + fraction * noise


def visit_policy(
    visit_counts: chex.Array,
    temperature: chex.Numeric,
    legal: chex.Array | None = None,
) -> chex.Array:
    """``π(a) ∝ N(a)^(1/τ)``; ``τ = 0`` puts all mass on the most visited action
    (lowest index on ties).

    Args:
      visit_counts: ``[B, A]`` (counts or any non-negative weights).
      temperature: ``τ >= 0``, a scalar or ``[B]`` (one per tree, e.g. τ = 1 for
        the opening moves of some games and 0 for others).
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
    greedy = jax.nn.one_hot(jnp.argmax(counts, axis=-1), counts.shape[-1], dtype=jnp.float32)
    # Scaling by the maximum first keeps N^(1/τ) finite for any τ > 0.
    top = jnp.max(counts, axis=-1, keepdims=True)
    powered = (counts / jnp.maximum(top, 1e-30)) ** (1.0 / jnp.maximum(tau, 1e-30))
    powered = powered / jnp.maximum(jnp.sum(powered, axis=-1, keepdims=True), 1e-30)
    weights = jnp.where(tau == 0, greedy, powered)
    return jnp.where(total > 0, weights, 0.0)


def value_weighted_policy(visit_counts: chex.Array, qvalues: chex.Array) -> chex.Array:
    """``π(a) ∝ N(a) · (1 + Q(a))`` for values in [-1, 1] (seed 004 / DESIGN §5):
    visits of moves that turned out bad count for less.

    Args:
      visit_counts: ``[B, A]``.
      qvalues: ``[B, A]`` root edge values.

    Returns:
      ``[B, A]`` float32; all zeros in a row with no weight.
    """
    weights = visit_counts.astype(jnp.float32) * jnp.clip(1.0 + qvalues, 0.0, 2.0)
    total = jnp.sum(weights, axis=-1, keepdims=True)
    return jnp.where(total > 0, weights / jnp.where(total > 0, total, 1.0), 0.0)


def _check_number(name: str, value: Any, low: float, high: float = float("inf")) -> None:
    if isinstance(value, numbers.Real) and not (low <= value <= high):
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}.")


def alphazero_policy(
    params: Any,
    rng_key: chex.PRNGKey,
    root: Any,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    invalid_actions: chex.Array | None = None,
    max_depth: int | None = None,
    *,
    max_nodes: int | None = None,
    selection: PUCTConfig = PUCTConfig(),
    dirichlet_fraction: float = 0.25,
    dirichlet_alpha: float = 0.3,
    temperature: chex.Numeric = 1.0,
    value_weighted: bool = False,
    tree: Tree | None = None,
    graph: GraphConfig | None = None,
) -> PolicyOutput[Tree]:
    """Runs PUCT search and returns the move and the search policy.

    Args:
      params: passed to ``recurrent_fn``.
      rng_key: one key, or ``[B]`` keys (one per tree: then element ``b``'s
        noise and sampling use only ``rng_key[b]``).
      root: ``RootFnOutput`` (jaxpuct's or mctx's): ``prior_logits [B, A]``,
        ``value [B]``, ``embedding [B, ...]``.
      recurrent_fn: ``(params, key, action [B], embedding) ->
        (RecurrentFnOutput, embedding)``.
      num_simulations: simulations per tree (>= 1).
      invalid_actions: optional ``[B, A]`` bool, actions not to take at the root.
      max_depth: optional longest path (>= 1).
      max_nodes: node capacity (default ``num_simulations + 1``).
      selection: the PUCT rule (default: AlphaZero schedule with FPU);
        ``PUCTConfig.mctx_muzero()`` reproduces ``mctx.muzero_policy``.
      dirichlet_fraction: root noise weight ε (AlphaZero 0.25; 0 disables).
      dirichlet_alpha: root noise concentration α (> 0).
      temperature: τ for the move and the target ``N^(1/τ)``; 0 is argmax.
        A scalar or ``[B]``; it may be a traced value.
      value_weighted: use ``N·(1+Q)`` instead of the visit counts (then τ
        applies to those weights).
      tree: continue this tree instead of starting from ``root`` (its
        ``root_prior`` is replaced when noise is asked for).
      graph: ``GraphConfig`` to run Monte-Carlo graph search (transpositions
        share one node; see ``jaxpuct.graph``), ``None`` for tree search.

    Returns:
      ``PolicyOutput(action [B], action_weights [B, A], search_tree)``. A root
      with no legal action gets ``action = -1`` and all-zero weights.
    """
    _check_number("dirichlet_fraction", dirichlet_fraction, 0.0, 1.0)
    _check_number("temperature", temperature, 0.0)
    if isinstance(dirichlet_alpha, numbers.Real) and not dirichlet_alpha > 0:
        raise ValueError(f"dirichlet_alpha must be > 0, got {dirichlet_alpha}.")
    if tree is None:
        batch_size, _ = validation.check_root(root)
    else:
        batch_size = tree.batch_size
    _, element_keys = validation.split_keys(rng_key, batch_size)
    noise_keys, sample_keys = jnp.split(
        jax.vmap(lambda k: jax.random.split(k, 2))(element_keys), 2, axis=1)
    noise_keys, sample_keys = noise_keys[:, 0], sample_keys[:, 0]

    if tree is None:
        legal = root_legal_mask(root, invalid_actions)
        prior = masked_softmax(root.prior_logits, legal)
    else:
        legal = tree.children_index[:, 0] != ILLEGAL
        if invalid_actions is not None:
            validation.check_shape("invalid_actions", invalid_actions, legal.shape)
            legal = legal & ~invalid_actions.astype(jnp.bool_)
        prior = jnp.where(legal, tree.children_prior[:, 0], 0.0)
    noised = prior
    if not (isinstance(dirichlet_fraction, numbers.Real) and dirichlet_fraction == 0):
        noised = dirichlet_noise(noise_keys, prior, legal, dirichlet_fraction, dirichlet_alpha)

    search_tree = search(
        params, rng_key, root, recurrent_fn, num_simulations,
        max_depth=max_depth, max_nodes=max_nodes, selection=selection,
        invalid_actions=invalid_actions, root_prior=noised, tree=tree, graph=graph)

    summary = search_tree.summary()
    if value_weighted:
        counts = value_weighted_policy(summary.visit_counts, summary.qvalues)
    else:
        counts = summary.visit_counts
    action_weights = visit_policy(counts, temperature, legal)
    has_weight = jnp.any(action_weights > 0, axis=-1)
    logits = jnp.where(action_weights > 0, jnp.log(jnp.maximum(action_weights, 1e-30)),
                       -jnp.inf)
    action = jax.vmap(jax.random.categorical)(sample_keys, logits)
    action = jnp.where(has_weight, action, -1).astype(jnp.int32)
    return PolicyOutput(action=action, action_weights=action_weights, search_tree=search_tree)

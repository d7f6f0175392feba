"""``alphazero_policy``: root noise, search, and the move/training target.

Same call shape as ``mctx.muzero_policy``; the keyword arguments after ``*``
are jaxpuct's own.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp

from jaxpuct import solver as solver_lib
from jaxpuct import validation
from jaxpuct.final_move import lcb_action
from jaxpuct.graph import GraphConfig
from jaxpuct.numerics import WEIGHT_FLOOR, masked_softmax, normalize
from jaxpuct.roots import root_prior_and_legal
from jaxpuct.search import (
    check_leaves_per_step,
    check_selection,
    needs_second_moment,
    prepare_tree,
    run_search,
)
from jaxpuct.selection import PUCTConfig, SelectionRule
from jaxpuct.solver import SolverConfig
from jaxpuct.tree import ILLEGAL, Tree
from jaxpuct.types import PolicyOutput, RecurrentFn
from jaxpuct.virtual_loss import VirtualLoss


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
    powered = (counts / jnp.maximum(top, WEIGHT_FLOOR)) ** (1.0 / jnp.maximum(tau, WEIGHT_FLOOR))
    powered = normalize(powered)
    weights = jnp.where(tau == 0, greedy, powered)
    return jnp.where(total > 0, weights, 0.0)


def value_weighted_policy(visit_counts: chex.Array, qvalues: chex.Array) -> chex.Array:
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
    selection: PUCTConfig | SelectionRule = PUCTConfig(),
    dirichlet_fraction: chex.Numeric = 0.25,
    dirichlet_alpha: chex.Numeric = 0.3,
    dirichlet: chex.Array | None = None,
    temperature: chex.Numeric = 1.0,
    value_weighted: bool = False,
    tree: Tree | None = None,
    graph: GraphConfig | None = None,
    leaves_per_step: int = 1,
    virtual_loss: VirtualLoss | None = None,
    final_move: str = "visits",
    solver: bool | SolverConfig = False,
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
      max_nodes: node capacity (default ``num_simulations + 1``; see
        :func:`jaxpuct.search` for a smaller one).
      selection: the PUCT rule (default: AlphaZero schedule with FPU);
        ``PUCTConfig.mctx_muzero()`` reproduces ``mctx.muzero_policy``.
      dirichlet_fraction: root noise weight ε in [0, 1] (AlphaZero 0.25; 0
        disables). A traced value outside [0, 1] is clipped to it.
      dirichlet_alpha: root noise concentration α (> 0). A traced value <= 0
        gives uniform noise.
      dirichlet: optional ``[B, A]`` noise probabilities to mix in instead of
        drawing them (e.g. mctx's draw, to check a port exactly); see
        :func:`root_noise`. Ignored when ``dirichlet_fraction == 0``.
      temperature: τ >= 0 for the move and the target ``N^(1/τ)``; 0 is argmax.
        A scalar or ``[B]``; it may be traced, and a traced τ < 0 acts as 0.
        Run under ``jax.experimental.checkify.checkify`` to get an error for
        traced out-of-range ``temperature``/``dirichlet_*`` values instead.
      value_weighted: use ``N·(1+Q)`` instead of the visit counts (then τ
        applies to those weights).
      tree: continue this tree instead of starting from ``root`` (its
        ``root_prior`` is replaced when noise is asked for).
      graph: ``GraphConfig`` to run Monte-Carlo graph search (transpositions
        share one node; see ``jaxpuct.graph``), ``None`` for tree search.
      leaves_per_step: walks per tree per network call (default 1; must divide
        ``num_simulations``); see :func:`jaxpuct.search`.
      virtual_loss: how those walks keep apart (default ``VirtualLoss()``).
      final_move: ``"visits"`` (sample from ``action_weights``) or ``"lcb"``:
        play :func:`jaxpuct.final_move.lcb_action` (KataGo's lower confidence
        bound, 5 standard deviations, moves with >= 15% of the top visits),
        whatever the temperature; ``action_weights`` stay the visit target. The
        tree then stores ``node_sq_values``.
      solver: ``True`` or a ``SolverConfig``: run the MCTS-solver (see
        :mod:`jaxpuct.solver` and :func:`jaxpuct.search`). Then the visits of
        dominated proven root moves (proven losses, moves below the best proven
        one) are left out of ``action_weights`` (unless nothing would be left),
        and where the root is proven, or ``temperature == 0`` (with the plain
        visit target and ``final_move="visits"``), the move is
        :func:`jaxpuct.solver.solver_action` (OpenSpiel's key: the best proven
        value, 0 for unproven moves; the shortest win or longest loss; visits).

    Returns:
      ``PolicyOutput(action [B], action_weights [B, A], search_tree)``. A root
      with no legal action gets ``action = -1`` and all-zero weights.
    """
    solver = solver_lib.solver_config(solver)
    rule = check_selection(selection, solver)
    validation.check_instance("graph", graph, GraphConfig, allow_none=True)
    check_leaves_per_step(num_simulations, leaves_per_step, virtual_loss)
    validation.check_choice("final_move", final_move, ("visits", "lcb"))
    batch_size, num_actions = (validation.check_root(root) if tree is None
                               else validation.check_root_fits_tree(root, tree))
    check_policy_numbers(batch_size, dirichlet_fraction, dirichlet_alpha, temperature)
    if invalid_actions is not None:
        validation.check_shape("invalid_actions", invalid_actions, (batch_size, num_actions))
    shared_key, element_keys = validation.split_keys(rng_key, batch_size)
    noise_keys, sample_keys = _split_per_element(element_keys)

    if tree is None:
        prior, legal = root_prior_and_legal(root, invalid_actions)
    else:
        legal = tree.children_index[:, Tree.ROOT_INDEX] != ILLEGAL
        if invalid_actions is not None:
            legal = legal & ~invalid_actions.astype(jnp.bool_)
        prior = jnp.where(legal, tree.children_prior[:, Tree.ROOT_INDEX], 0.0)
    noised = prior
    if validation.concrete_value(dirichlet_fraction) is None or dirichlet_fraction != 0:
        noised = root_noise(noise_keys, prior, legal, jnp.clip(dirichlet_fraction, 0.0, 1.0),
                            dirichlet_alpha, dirichlet)

    tree, embedding_like = prepare_tree(
        root, num_simulations, max_nodes, invalid_actions, noised, tree, graph,
        root_prior_legal=(prior, legal),
        second_moment=final_move == "lcb" or needs_second_moment(selection), solver=solver)
    search_tree = run_search(params, shared_key, element_keys, tree, recurrent_fn,
                             num_simulations, rule, max_depth, graph, embedding_like,
                             leaves_per_step, virtual_loss, solver=solver)

    summary = search_tree.summary()
    visits = (summary.visit_counts if solver is None
              else solver_lib.pruned_root_visits(search_tree, solver))
    counts = value_weighted_policy(visits, summary.qvalues) if value_weighted else visits
    action_weights = visit_policy(counts, jnp.maximum(temperature, 0.0), legal)
    action = (lcb_action(search_tree) if final_move == "lcb"
              else sample_action(sample_keys, action_weights))
    if solver is not None:
        greedy = jnp.broadcast_to(jnp.asarray(temperature) <= 0, action.shape)
        plain_greedy = final_move == "visits" and not value_weighted
        use_proof = solver_lib.root_proven(search_tree) | (greedy & plain_greedy)
        action = jnp.where(use_proof & jnp.any(legal, axis=-1),
                           solver_lib.solver_action(search_tree), action)
    return PolicyOutput(action=action, action_weights=action_weights, search_tree=search_tree)


def sample_action(rng_keys: chex.Array, weights: chex.Array) -> chex.Array:
    """``[B]`` int32 actions drawn from ``weights [B, A]`` (one key per row of
    ``rng_keys [B]``); ``-1`` in a row with no weight."""
    has_weight = jnp.any(weights > 0, axis=-1)
    logits = jnp.where(weights > 0, jnp.log(jnp.maximum(weights, WEIGHT_FLOOR)), -jnp.inf)
    action = jax.vmap(jax.random.categorical)(rng_keys, logits)
    return jnp.where(has_weight, action, -1).astype(jnp.int32)


def _split_per_element(element_keys: chex.Array) -> tuple[chex.Array, chex.Array]:
    """``[B]`` keys -> ``(noise_keys [B], sample_keys [B])``."""
    pairs = jax.vmap(lambda k: jax.random.split(k, 2))(element_keys)
    return pairs[:, 0], pairs[:, 1]


def check_policy_numbers(batch_size: int, dirichlet_fraction: Any, dirichlet_alpha: Any,
                          temperature: Any) -> None:
    """Shapes and (where concrete) ranges of the policy's numeric arguments."""
    validation.check_scalar_or_batch("temperature", temperature, batch_size)
    for name, value in (("dirichlet_fraction", dirichlet_fraction),
                        ("dirichlet_alpha", dirichlet_alpha)):
        if jnp.ndim(value) != 0:
            raise ValueError(f"{name} must be a scalar, got shape {list(jnp.shape(value))}.")
    validation.check_range("dirichlet_fraction", dirichlet_fraction, 0.0, 1.0)
    validation.check_positive("dirichlet_alpha", dirichlet_alpha)
    validation.check_range("temperature", temperature, 0.0)
    validation.debug_check_range("dirichlet_fraction", dirichlet_fraction, 0.0, 1.0)
    validation.debug_check_range("dirichlet_alpha", dirichlet_alpha, float(
        jnp.finfo(jnp.float32).tiny))
    validation.debug_check_range("temperature", temperature, 0.0)


def root_noise(rng_keys: chex.Array, prior: chex.Array, legal: chex.Array,
               fraction: chex.Numeric, alpha: chex.Numeric,
               noise: chex.Array | None = None) -> chex.Array:
    """The root prior ``[B, A]`` to select with: ``prior [B, A]`` mixed with
    Dirichlet noise drawn per tree (:func:`dirichlet_noise`, over ``legal [B, A]``),
    or with the given ``noise [B, A]`` probabilities.

    Given noise is mixed as ``mctx.muzero_policy`` mixes its own draw,
    ``(1 - fraction) * prior + fraction * noise``, and made a prior the way mctx
    makes one from the result: the softmax of ``log(max(p, tiny))``, here over the
    legal actions. So ``noise = jax.random.dirichlet(jax.random.split(key, 3)[1],
    jnp.full([A], alpha), (B,))`` reproduces mctx's root prior for ``key``.
    """
    if noise is None:
        return dirichlet_noise(rng_keys, prior, legal, fraction, alpha)
    validation.check_shape("dirichlet", noise, prior.shape)
    mixed = (1 - fraction) * prior + fraction * jnp.asarray(noise, jnp.float32)
    return masked_softmax(jnp.log(jnp.maximum(mixed, jnp.finfo(jnp.float32).tiny)), legal)

"""``alphazero_policy``: PUCT search with root noise, and the move/training target.

Same call shape as ``mctx.muzero_policy``; the keyword arguments after ``*``
are jaxpuct's own. The checks, keys, root prior and noise are the shared frame
(:mod:`jaxpuct.frame`); this module adds the PUCT rule and the move.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp

from jaxpuct import frame, validation
from jaxpuct import solver as solver_lib
from jaxpuct.expanders import RecurrentExpander
from jaxpuct.final_move import (  # noqa: F401 (re-exported: the policy's move functions)
    choose_action,
    lcb_action,
    sample_action,
    value_weighted_policy,
    visit_policy,
)
from jaxpuct.graph import GraphConfig
from jaxpuct.roots import dirichlet_noise  # noqa: F401 (re-exported)
from jaxpuct.selection import PUCTConfig, SelectionRule
from jaxpuct.solver import SolverConfig
from jaxpuct.tree import Tree
from jaxpuct.types import PolicyOutput, RecurrentFn
from jaxpuct.virtual_loss import VirtualLoss


def alphazero_policy(
    params: Any,
    rng_key: jax.Array,
    root: Any,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    invalid_actions: jax.Array | None = None,
    max_depth: int | None = None,
    *,
    max_nodes: int | None = None,
    selection: PUCTConfig | SelectionRule = PUCTConfig(),
    dirichlet_fraction: chex.Numeric = 0.25,
    dirichlet_alpha: chex.Numeric = 0.3,
    dirichlet: jax.Array | None = None,
    temperature: chex.Numeric = 1.0,
    value_weighted: bool = False,
    tree: Tree | None = None,
    graph: GraphConfig | None = None,
    leaves_per_step: int = 1,
    virtual_loss: VirtualLoss | None = None,
    final_move: str = "visits",
    solver: bool | SolverConfig = False,
    early_stop: bool | jax.Array = False,
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
        disables). A traced value outside [0, 1] is clipped to it; a traced NaN
        or inf means no noise.
      dirichlet_alpha: root noise concentration α (> 0). A traced value <= 0,
        NaN or inf gives uniform noise.
      dirichlet: optional ``[B, A]`` noise probabilities to mix in instead of
        drawing them (e.g. mctx's draw, to check a port exactly); see
        :func:`jaxpuct.roots.root_noise`. Ignored when ``dirichlet_fraction == 0``.
      temperature: τ >= 0 for the move and the target ``N^(1/τ)``; 0 is argmax.
        A scalar or ``[B]``; it may be traced, and a traced τ < 0 or NaN acts
        as 0 (``+inf`` spreads the weight over the visited actions), so a root
        with a legal move always gets one.
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
      early_stop: ``True``, or a ``[B]`` bool mask (may be traced, e.g.
        ``temperature == 0``): a tree stops taking simulations once no other
        legal root action can overtake its most visited one with the
        simulations left (``N(a) + left < N(best)``; Lc0's smart pruning, see
        :mod:`jaxpuct.early_stop`), and the search ends when every tree has
        stopped. At ``temperature == 0`` the move is exactly the full search's
        (with ``solver``, the most visited action is kept, but a proof the
        skipped simulations would have found is not). The visit counts are
        those of fewer simulations: with ``temperature > 0`` the move is
        sampled from truncated counts, and ``action_weights`` is not the full
        search's training target -- stop only the trees whose move matters,
        not those whose visit distribution is learned from. Refused with
        ``value_weighted=True`` and ``final_move="lcb"`` (their move is not the
        most visited action). ``search_tree.summary().simulations_saved``
        ``[B]`` counts the simulations each tree skipped.

    Returns:
      ``PolicyOutput(action [B], action_weights [B, A], search_tree)``. A root
      with no legal action gets ``action = -1`` and all-zero weights.
    """
    batch_size = frame.batch_size(root, tree)
    check_policy_numbers(batch_size, dirichlet_fraction, dirichlet_alpha, temperature)
    validation.check_choice("final_move", final_move, ("visits", "lcb"))
    frame.check_early_stop_move(early_stop, final_move, value_weighted)
    options = frame.engine_options(
        num_simulations, max_depth, frame.capacity(tree, max_nodes, num_simulations),
        leaves_per_step=leaves_per_step, virtual_loss=virtual_loss, solver=solver,
        second_moment=final_move == "lcb" or frame.needs_second_moment(selection),
        tree_bounds=frame.needs_tree_bounds(selection), early_stop=early_stop)
    rule = frame.selection_rule(selection, options)
    prepared = frame.prepare(root, rng_key, num_simulations, invalid_actions, options,
                             tree=tree, max_nodes=max_nodes, graph=graph,
                             noise=(dirichlet_fraction, dirichlet_alpha, dirichlet))
    expander = RecurrentExpander(recurrent_fn, prepared.tree.num_actions, prepared.tree.graph)
    search_tree, _ = frame.search(params, prepared, expander, rule, options)

    legal = prepared.legal
    summary = search_tree.summary()
    solver_cfg = None if options.solver is None else options.solver.config
    visits = (summary.visit_counts if solver_cfg is None
              else solver_lib.pruned_root_visits(search_tree, solver_cfg))
    counts = value_weighted_policy(visits, summary.qvalues) if value_weighted else visits
    action_weights = visit_policy(counts, jnp.maximum(temperature, 0.0), legal)
    action = (lcb_action(search_tree) if final_move == "lcb"
              else choose_action(prepared.sample_keys, action_weights, temperature))
    if solver_cfg is not None:
        greedy = jnp.broadcast_to(jnp.asarray(temperature) <= 0, action.shape)
        plain_greedy = final_move == "visits" and not value_weighted
        use_proof = solver_lib.root_proven(search_tree) | (greedy & plain_greedy)
        action = jnp.where(use_proof & jnp.any(legal, axis=-1),
                           solver_lib.solver_action(search_tree), action)
    return PolicyOutput(action=action, action_weights=action_weights, search_tree=search_tree)


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

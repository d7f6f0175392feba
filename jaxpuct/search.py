"""``search``: the engine behind a plain call (no root noise, no final move).

The loop itself is :mod:`jaxpuct.engine` (walk: :mod:`jaxpuct.walk`; storage and
backups: :mod:`jaxpuct.backup`, :mod:`jaxpuct.graph`; several leaves per step:
:mod:`jaxpuct.virtual_loss`); the checks, keys and tree preparation are the
policies' shared frame (:mod:`jaxpuct.frame`).

Gradients: reverse-mode ``jax.grad`` through a search is unsupported (as in mctx):
the loops are ``lax.while_loop`` s, and JAX raises "Reverse-mode differentiation
does not work for lax.while_loop". Differentiate a loss on the search's outputs
under ``jax.lax.stop_gradient`` (the training targets), or pass
``jax.lax.stop_gradient(params)`` to the search; see docs/guide/your_network.md.
"""

from __future__ import annotations

from typing import Any

import jax

from jaxpuct import frame
from jaxpuct.expanders import RecurrentExpander
from jaxpuct.graph import GraphConfig
from jaxpuct.selection import PUCTConfig, SelectionRule
from jaxpuct.solver import SolverConfig
from jaxpuct.tree import Tree
from jaxpuct.types import RecurrentFn
from jaxpuct.virtual_loss import VirtualLoss


def search(
    params: Any,
    rng_key: jax.Array,
    root: Any,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    *,
    max_depth: int | None = None,
    max_nodes: int | None = None,
    selection: PUCTConfig | SelectionRule = PUCTConfig(),
    invalid_actions: jax.Array | None = None,
    root_prior: jax.Array | None = None,
    tree: Tree | None = None,
    graph: GraphConfig | None = None,
    leaves_per_step: int = 1,
    virtual_loss: VirtualLoss | None = None,
    second_moment: bool = False,
    solver: bool | SolverConfig = False,
) -> Tree:
    """Runs ``num_simulations`` simulations on every tree of a batch.

    Args:
      params: passed to ``recurrent_fn``.
      rng_key: one key, or ``[B]`` keys (one per tree, see
        ``validation.split_keys``).
      root: ``RootFnOutput`` with ``prior_logits [B, A]``, ``value [B]``,
        ``embedding [B, ...]``. When ``tree`` is given it may be ``None``;
        otherwise only its shapes are checked against the tree's.
      recurrent_fn: ``(params, key, action [B], embedding) -> (RecurrentFnOutput,
        embedding)``, called once per simulation for the whole batch.
      num_simulations: simulations to run (>= 1).
      max_depth: longest path walked from the root (default: ``max_nodes``).
        A walk that reaches it stops at that node and backs up its value.
      max_nodes: node capacity (default ``num_simulations + 1``); with ``tree``
        it must be omitted or equal the tree's (a capacity cannot change).
        Each simulation stores at most one node, so a capacity below
        ``num_simulations + 1`` fills up (a ``UserWarning`` says so at trace
        time): new leaves are then still evaluated and backed up (their edge
        is counted as visited) but not stored, nothing is overwritten, and
        selection treats such an edge's Q as unvisited, which spreads visits
        where the tree could not grow. With tree reuse, give
        room for the inherited nodes too (e.g. ``2 * num_simulations``).
      selection: a ``PUCTConfig``, or a ``SelectionRule`` (a root rule and an
        interior rule).
      invalid_actions: optional ``[B, A]`` bool mask of root actions not to take.
      root_prior: optional ``[B, A]`` root prior to select with (noise).
      tree: optional tree to continue searching (simulations add to it);
        ``invalid_actions`` and ``root_prior`` then apply to its root (an
        action made invalid loses its subtree from the root's view).
      graph: ``GraphConfig`` for Monte-Carlo graph search (see
        ``jaxpuct.graph``), ``None`` for tree search. A continued ``tree`` keeps
        the configuration it was built with (``graph`` may be omitted; a
        different one is a ``ValueError``). A walk that would re-enter
        a node already on its own path stops before it: the edge is counted and
        the backup uses that node's current value.
      leaves_per_step: ``K``, walks per tree per search step (default 1). With
        ``K > 1`` each step walks ``K`` paths per tree under virtual loss and
        evaluates all ``B * K`` leaves in one ``recurrent_fn`` call, so the
        network is called ``num_simulations / K`` times (``num_simulations``
        must be a multiple of ``K``). A walk that finds nothing left to select
        (every unexpanded edge it could reach is claimed by an earlier walk of
        the step) is a no-op, so the root's edge visits may sum to less than
        ``num_simulations``. See :mod:`jaxpuct.virtual_loss`.
      virtual_loss: how the walks of one step keep apart (``K > 1`` only, a
        ``ValueError`` with ``K = 1``; default ``VirtualLoss()``: AlphaGo's value
        penalty with ``n_vl = 3``).
      second_moment: also store ``Tree.node_sq_values`` (the mean squared
        return of each node, for :func:`jaxpuct.final_move.lcb_action`); always
        stored when ``selection`` needs it (``utility_stdev_scale > 0``).
      solver: ``True`` or a ``SolverConfig`` to run the MCTS-solver (see
        :mod:`jaxpuct.solver`): the tree stores ``proof_plies``, proven nodes hold
        their exact value, walks stop at proven nodes, a ``PUCTConfig`` rule never
        enters a dominated proven edge, and a tree whose root is proven is not
        searched further (the loop ends when all are). A ``SelectionRule`` is
        used as given (it sees exact values on proven edges). ``False`` (default)
        compiles to the search without a solver.

    Returns:
      The ``Tree``. A root with no legal action (or a terminal root) is never
      searched: its statistics stay as they were.
    """
    capacity = frame.capacity(tree, max_nodes, num_simulations)
    options = frame.engine_options(
        num_simulations, max_depth, capacity, leaves_per_step=leaves_per_step,
        virtual_loss=virtual_loss, solver=solver,
        second_moment=second_moment or frame.needs_second_moment(selection),
        tree_bounds=frame.needs_tree_bounds(selection))
    rule = frame.selection_rule(selection, options)
    prepared = frame.prepare(root, rng_key, num_simulations, invalid_actions, options,
                             tree=tree, max_nodes=max_nodes, graph=graph, root_prior=root_prior)
    expander = RecurrentExpander(recurrent_fn, prepared.tree.num_actions, prepared.tree.graph)
    return frame.search(params, prepared, expander, rule, options)[0]

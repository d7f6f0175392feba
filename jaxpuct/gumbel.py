"""Gumbel MuZero search: Gumbel-Top-k and sequential halving at the root, a
deterministic rule inside, and the completed-Q improved policy as the target.

Danihelka, Guez, Schrittwieser and Silver, "Policy improvement by planning with
Gumbel", ICLR 2022 (https://openreview.net/forum?id=bERaNdoegnO). The rules and
defaults follow the paper and DeepMind's ``mctx.gumbel_muzero_policy``:

* completed Q (paper, appendix D): a visited action keeps its search Q, an
  unvisited one gets the *mixed value*
  ``(U(s) + ΣN · Σ_visited π(b) Q(b) / Σ_visited π(b)) / (ΣN + 1)``;
  optionally min-max rescaled to ``[0, 1]`` over all actions, then scaled by
  ``σ(q̂) = (maxvisit_init + max_b N(b)) · value_scale · q̂``;
* root (sequential halving, Karnin et al. 2013): the actions are ranked by
  ``g + logits + σ(q̂)`` with ``g`` a Gumbel draw, and each simulation visits
  the best action among those whose visit count equals the schedule's
  "considered visit" for that simulation (which sends the first ``m``
  simulations to the Gumbel-Top-``m`` actions, then halves them);
* interior nodes: ``argmax_a π'(a) - N(a) / (1 + ΣN)`` with
  ``π' = softmax(logits + σ(q̂))``, deterministic;
* the move: the best ``g + logits + σ(q̂)`` among the most visited actions; the
  training target (``action_weights``): ``π' = softmax(logits + σ(q̂))`` at the
  root.

jaxpuct runs these as a :class:`jaxpuct.selection.SelectionRule` inside its
engine (:mod:`jaxpuct.engine`), so a simulation stays O(depth)
and jaxpuct's extensions apply unchanged: legal masks at every node (mctx masks
only the root), terminal states, graph search (edge visits enter the completed
Q), node capacity below the simulation count, tree reuse, and NaN isolation.

The tree stores prior *probabilities*; the rules use ``log(prior)`` as logits
(a per-node constant shift of the network's logits, which changes none of the
softmaxes nor the root's ``logits - max(logits)``), and a finite
``MASKED_LOGIT`` where the prior is zero, as mctx does for invalid actions, so
that nothing becomes NaN.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct import frame, prng, validation
from jaxpuct import solver as solver_lib
from jaxpuct._dataclass import Replaceable, pytree_dataclass
from jaxpuct.expanders import RecurrentExpander
from jaxpuct.final_move import lcb_action
from jaxpuct.graph import GraphConfig
from jaxpuct.numerics import gather_rows
from jaxpuct.selection import ActionFn, SelectionRule
from jaxpuct.solver import SolverConfig
from jaxpuct.tree import ILLEGAL, Tree, edge_qvalues
from jaxpuct.types import PolicyOutput, RecurrentFn
from jaxpuct.virtual_loss import VirtualLoss

# A finite stand-in for log(0): exp(MASKED_LOGIT - max) is exactly 0 in float32,
# and it is mctx's lower clip of the root score (``score_considered``), so masked
# and zero-prior actions compare the same way in both.
MASKED_LOGIT = -1e9


@dataclasses.dataclass(frozen=True)
class CompletedQConfig:
    """How Q-values are completed and scaled: ``σ(q̂)`` of the paper (static; hashable).

    Defaults are those of ``mctx.qtransform_completed_by_mix_value``.

    Attributes:
      value_scale: ``c_scale`` of the paper, > 0 (0.1).
      maxvisit_init: ``c_visit`` of the paper, >= 0 (50).
      rescale_values: min-max rescale the completed Q to ``[0, 1]`` first.
      use_mixed_value: complete unvisited actions with the mixed value; if
        ``False``, with the network value ``U(s)`` of the node.
      epsilon: smallest denominator of the rescaling, > 0 (1e-8).
    """

    value_scale: float = 0.1
    maxvisit_init: float = 50.0
    rescale_values: bool = True
    use_mixed_value: bool = True
    epsilon: float = 1e-8

    def __post_init__(self):
        def fail(field, expected):
            raise ValueError(f"CompletedQConfig.{field} must be {expected}, got "
                             f"{getattr(self, field)!r}.")

        for field in ("value_scale", "maxvisit_init", "epsilon"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                fail(field, "a Python number")
            if not math.isfinite(value):
                fail(field, "finite")
        if not self.value_scale > 0:
            fail("value_scale", "> 0")
        if not self.maxvisit_init >= 0:
            fail("maxvisit_init", ">= 0")
        if not self.epsilon > 0:
            fail("epsilon", "> 0")
        for field in ("rescale_values", "use_mixed_value"):
            if not isinstance(getattr(self, field), bool):
                fail(field, "a bool")


# ------------------------------------------------------------ sequential halving


def considered_visits_sequence(max_num_considered_actions: int,
                               num_simulations: int) -> tuple[int, ...]:
    """The visit count an action must have to be visited, for each simulation.

    Sequential halving (Karnin, Koren and Somekh, "Almost optimal exploration in
    multi-armed bandits", ICML 2013) with the budget split of Danihelka et al.
    (2022) and ``mctx.seq_halving.get_sequence_of_considered_visits``: ``m``
    actions are considered, each phase gives every considered action
    ``max(1, floor(S / (ceil(log2 m) * k)))`` more visits (``k`` the number
    still considered), then ``k`` halves (never below 2). With ``m <= 1`` the
    sequence is ``0, 1, ..., S - 1`` (one action takes every visit).

    Returns:
      A tuple of ``num_simulations`` ints.
    """
    m, budget = max_num_considered_actions, num_simulations
    if m <= 1:
        return tuple(range(budget))
    phases = math.ceil(math.log2(m))
    sequence: list[int] = []
    # All considered actions have the same count at the start of each round.
    count, considered = 0, m
    while len(sequence) < budget:
        # Integer floor division equals int(S / (phases * k)) for these sizes.
        rounds = max(1, budget // (phases * considered))
        for _ in range(rounds):
            sequence.extend([count] * considered)
            count += 1
        considered = max(2, considered // 2)
    return tuple(sequence[:budget])


@functools.lru_cache(maxsize=64)
def considered_visits_table(max_num_considered_actions: int,
                            num_simulations: int) -> np.ndarray:
    """``[m + 1, S]`` int32: row ``k`` is :func:`considered_visits_sequence` ``(k, S)``
    (a root with ``k < m`` legal actions considers only ``k``). Built once per
    ``(m, S)`` in NumPy, at trace time; read-only."""
    table = np.array([considered_visits_sequence(k, num_simulations)
                      for k in range(max_num_considered_actions + 1)], np.int32)
    table.setflags(write=False)
    return table


# ---------------------------------------------------------------- completed Q


def prior_logits(prior: jax.Array) -> jax.Array:
    """``[B, A]`` logits ``log(prior)`` of ``prior [B, A]`` probabilities,
    ``MASKED_LOGIT`` where the prior is 0 (illegal actions): finite everywhere."""
    positive = prior > 0
    return jnp.where(positive, jnp.log(jnp.where(positive, prior, 1.0)), MASKED_LOGIT)


def mixed_value(raw_value: jax.Array, prior: jax.Array, visits: jax.Array,
                qvalues: jax.Array, has_q: jax.Array) -> jax.Array:
    """``[B]`` mixed value ``(U + ΣN · Σ_b π(b) Q(b) / Σ_b π(b)) / (ΣN + 1)``, the
    sums over the actions with a Q (Danihelka et al. 2022, appendix D, eq. 33).

    Args:
      raw_value: ``[B]`` network value ``U(s)``.
      prior: ``[B, A]`` prior probabilities.
      visits: ``[B, A]`` edge visit counts.
      qvalues: ``[B, A]`` edge Q-values (read only where ``has_q``).
      has_q: ``[B, A]`` bool, the actions whose Q is known.
    """
    counted = jnp.where(has_q, visits, 0).astype(jnp.float32)
    total_visits = jnp.sum(counted, axis=-1)
    # A floor keeps the weights finite when a visited action has prior 0.
    prior = jnp.maximum(prior, jnp.finfo(jnp.float32).tiny)
    prior_mass = jnp.sum(jnp.where(has_q, prior, 0.0), axis=-1, keepdims=True)
    # The divisor is a full [B, A] array, not a broadcast [B, 1]: XLA may turn a
    # division by a broadcast into a multiplication by its reciprocal, which
    # rounds differently from mctx's (per-action) division.
    safe_mass = jnp.where(has_q, prior_mass, 1.0)
    weighted_q = jnp.sum(jnp.where(has_q, prior * qvalues / safe_mass, 0.0), axis=-1)
    return (raw_value + total_visits * weighted_q) / (total_visits + 1.0)


def scaled_completed_qvalues(config: CompletedQConfig, raw_value: jax.Array,
                             prior: jax.Array, visits: jax.Array, qvalues: jax.Array,
                             has_q: jax.Array) -> jax.Array:
    """``[B, A]`` ``σ(q̂)``: completed, optionally rescaled, and scaled Q-values.

    Unvisited actions (``~has_q``) get the mixed value (or ``raw_value`` when
    ``config.use_mixed_value`` is off); the min-max rescaling runs over all
    ``A`` entries, illegal ones (completed like unvisited ones) included, as in
    mctx; the scale is ``(maxvisit_init + max_a visits) * value_scale``.

    Args:
      config: the transform's settings.
      raw_value: ``[B]`` network value ``U(s)``.
      prior: ``[B, A]`` prior probabilities.
      visits: ``[B, A]`` edge visit counts (0 at illegal actions).
      qvalues: ``[B, A]`` edge Q-values.
      has_q: ``[B, A]`` bool.
    """
    if config.use_mixed_value:
        fill = mixed_value(raw_value, prior, visits, qvalues, has_q)
    else:
        fill = raw_value
    completed = jnp.where(has_q, qvalues, fill[:, None])
    if config.rescale_values:
        low = jnp.min(completed, axis=-1, keepdims=True)
        high = jnp.max(completed, axis=-1, keepdims=True)
        completed = (completed - low) / jnp.maximum(high - low, config.epsilon)
    visit_scale = config.maxvisit_init + jnp.max(visits, axis=-1).astype(jnp.float32)
    return (visit_scale * config.value_scale)[:, None] * completed


@pytree_dataclass
class NodeStats(Replaceable):
    """What the Gumbel rules read at one node of each tree.

    Attributes:
      logits: ``[B, A]`` finite logits (``log`` prior, ``MASKED_LOGIT`` at 0).
      sigma: ``[B, A]`` ``σ(q̂)`` of :func:`scaled_completed_qvalues`.
      visits: ``[B, A]`` int32 edge visits, 0 at illegal actions.
      legal: ``[B, A]`` bool.
    """

    logits: jax.Array
    sigma: jax.Array
    visits: jax.Array
    legal: jax.Array


def node_stats(tree: Tree, config: CompletedQConfig, node: jax.Array,
               is_root: bool) -> NodeStats:
    """:class:`NodeStats` at ``node [B]``; the root (static ``is_root``) uses
    ``tree.root_prior``.

    A Q is known on an edge with a stored child and a visit: an edge visited
    after the tree filled up has no child and counts as unvisited here, and an
    action made illegal at a reused root keeps no Q (its visits are dropped).
    """
    children = gather_rows(tree.children_index, node)
    legal = children != ILLEGAL
    visits = jnp.where(legal, gather_rows(tree.edge_visits, node), 0)
    prior = tree.root_prior if is_root else gather_rows(tree.children_prior, node)
    qvalues = edge_qvalues(tree, node, children)
    has_q = (children >= 0) & (visits > 0)
    sigma = scaled_completed_qvalues(config, gather_rows(tree.raw_values, node), prior,
                                     visits, qvalues, has_q)
    return NodeStats(logits=prior_logits(prior), sigma=sigma, visits=visits, legal=legal)


def improved_policy(stats: NodeStats) -> jax.Array:
    """``[B, A]`` ``π' = softmax(logits + σ(q̂))`` over the legal actions (zero
    elsewhere, and all zeros in a row with no legal action)."""
    z = jnp.where(stats.legal, stats.logits + stats.sigma, MASKED_LOGIT)
    z = z - jnp.max(z, axis=-1, keepdims=True)
    weights = jnp.where(stats.legal, jnp.exp(z), 0.0)
    total = jnp.sum(weights, axis=-1, keepdims=True)
    return jnp.where(total > 0, weights / jnp.where(total > 0, total, 1.0), 0.0)


# -------------------------------------------------------------------- the rules


def interior_scores(stats: NodeStats) -> jax.Array:
    """``[B, A]`` ``π'(a) - N(a) / (1 + ΣN)`` (Danihelka et al. 2022, section 5),
    ``-inf`` at illegal actions: its argmax makes the visit frequencies track
    ``π'`` deterministically."""
    visits = stats.visits.astype(jnp.float32)
    total = jnp.sum(visits, axis=-1, keepdims=True)
    scores = improved_policy(stats) - visits / (1.0 + total)
    return jnp.where(stats.legal, scores, -jnp.inf)


def root_ranking(stats: NodeStats, gumbel: jax.Array) -> jax.Array:
    """``[B, A]`` ``g + logits - max(logits)``: the part of the root's score that
    a search does not change (the root's prior and legal mask are fixed while it
    runs), computed once per search; ``gumbel`` is ``[B, A]``."""
    top = jnp.max(jnp.where(stats.legal, stats.logits, MASKED_LOGIT), axis=-1, keepdims=True)
    return gumbel + (stats.logits - top)


def considered_scores(ranking: jax.Array, stats: NodeStats, visits: jax.Array,
                      considered_visit: jax.Array) -> jax.Array:
    """``[B, A]`` ``max(MASKED_LOGIT, g + logits - max(logits) + σ(q̂))`` where
    ``visits [B, A] == considered_visit [B]`` and the action is legal, ``-inf``
    elsewhere (mctx's ``score_considered`` with its root mask).

    ``ranking`` is :func:`root_ranking` ``[B, A]``; ``visits`` are the counts
    sequential halving schedules (see :func:`gumbel_policy` on tree reuse).
    """
    score = jnp.maximum(MASKED_LOGIT, ranking + stats.sigma)
    eligible = stats.legal & (visits == considered_visit[:, None])
    return jnp.where(eligible, score, -jnp.inf)


def gumbel_interior_rule(config: CompletedQConfig) -> ActionFn:
    """The interior ``ActionFn``: argmax of :func:`interior_scores` (lowest index
    on ties, like mctx's ``argmax``)."""

    def action(tree: Tree, node: jax.Array, depth: jax.Array,
               rng_keys: jax.Array) -> jax.Array:
        del depth, rng_keys  # deterministic
        scores = interior_scores(node_stats(tree, config, node, is_root=False))
        return jnp.argmax(scores, axis=-1).astype(jnp.int32)

    return action


def gumbel_root_rule(config: CompletedQConfig, ranking: jax.Array, base_visits: jax.Array,
                     num_considered: jax.Array, table: np.ndarray) -> ActionFn:
    """The root ``ActionFn``: sequential halving with Gumbel.

    Args:
      config: the Q transform.
      ranking: ``[B, A]`` :func:`root_ranking` of this search's (scaled) Gumbel
        draw.
      base_visits: ``[B, A]`` root visits before the search (0 for a new tree);
        the schedule counts only the visits above them.
      num_considered: ``[B]`` int32 ``min(m, number of legal root actions)``.
      table: ``[m + 1, S]`` :func:`considered_visits_table`.
    """
    schedule = jnp.asarray(table)
    last = table.shape[1] - 1

    def action(tree: Tree, node: jax.Array, depth: jax.Array,
               rng_keys: jax.Array) -> jax.Array:
        del depth, rng_keys  # the randomness is the Gumbel draw
        stats = node_stats(tree, config, node, is_root=True)
        new_visits = stats.visits - base_visits
        simulation = jnp.clip(jnp.sum(new_visits, axis=-1), 0, last)
        considered_visit = schedule[num_considered, simulation]
        scores = considered_scores(ranking, stats, new_visits, considered_visit)
        return jnp.argmax(scores, axis=-1).astype(jnp.int32)

    return action


# ---------------------------------------------------------------------- policy


def gumbel_policy(
    params: Any,
    rng_key: jax.Array,
    root: Any,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    invalid_actions: jax.Array | None = None,
    max_depth: int | None = None,
    *,
    max_num_considered_actions: int = 16,
    gumbel_scale: chex.Numeric = 1.0,
    qtransform: CompletedQConfig = CompletedQConfig(),
    gumbel: jax.Array | None = None,
    max_nodes: int | None = None,
    tree: Tree | None = None,
    graph: GraphConfig | None = None,
    leaves_per_step: int = 1,
    virtual_loss: VirtualLoss | None = None,
    solver: bool | SolverConfig = False,
    final_move: str = "gumbel",
    early_stop: bool = False,
) -> PolicyOutput[Tree]:
    """Runs Gumbel MuZero search and returns the move and the improved policy.

    Same call shape as ``mctx.gumbel_muzero_policy`` (Danihelka et al. 2022);
    the keyword arguments from ``gumbel`` on are jaxpuct's own.

    Args:
      params: passed to ``recurrent_fn``.
      rng_key: one key, or ``[B]`` keys (one per tree: then element ``b``'s
        Gumbel draw uses only ``rng_key[b]``).
      root: ``RootFnOutput`` (jaxpuct's or mctx's): ``prior_logits [B, A]``,
        ``value [B]``, ``embedding [B, ...]``; may be ``None`` with ``tree``.
      recurrent_fn: ``(params, key, action [B], embedding) ->
        (RecurrentFnOutput, embedding)``.
      num_simulations: simulations per tree ``S`` (>= 1).
      invalid_actions: optional ``[B, A]`` bool, actions not to take at the root.
      max_depth: optional longest path (>= 1).
      max_num_considered_actions: ``m`` >= 1, actions sampled without replacement
        (Gumbel-Top-``m``) at the root; fewer if fewer are legal.
      gumbel_scale: >= 0, scalar or ``[B]``; multiplies the Gumbel draw (0:
        deterministic, e.g. for evaluation).
      qtransform: :class:`CompletedQConfig`.
      gumbel: optional ``[B, A]`` standard Gumbel draw to use instead of one from
        ``rng_key`` (still multiplied by ``gumbel_scale``). mctx draws its own as
        ``jax.random.gumbel(jax.random.split(rng_key)[1], [B, A])``; passing that
        array reproduces mctx's search exactly.
      max_nodes: node capacity (default ``S + 1``; see :func:`jaxpuct.search`).
      tree: continue this tree (tree reuse). Sequential halving then schedules
        only the new simulations: an action's visit count *in this search*
        decides whether it is considered, while its Q (and ``σ``'s visit scale)
        use all its visits, inherited ones included. This keeps mctx's
        schedule exact for any inherited visit counts, which follow no
        schedule of their own.
      graph: ``GraphConfig`` for Monte-Carlo graph search; edge visits are the
        ``N`` of the completed Q.
      leaves_per_step: must be 1, and ``virtual_loss`` ``None`` (a
        ``ValueError`` otherwise): sequential halving schedules each simulation
        by the root's visit counts, which the pending walks of a step inflate.
      solver: ``True`` or a ``SolverConfig``: run the MCTS-solver alongside
        (:mod:`jaxpuct.solver`): proofs are backed up and walks stop at proven
        nodes (the rules see their exact values); a proven root plays
        :func:`jaxpuct.solver.solver_action`.
      final_move: ``"gumbel"`` (the paper's move, below) or ``"lcb"``
        (:func:`jaxpuct.final_move.lcb_action`; the tree stores the second
        moment). ``action_weights`` stay the improved policy.
      early_stop: must be ``False`` (a ``ValueError`` otherwise; see
        :func:`refuse_early_stop`): the move is not the most visited action.

    Returns:
      ``PolicyOutput(action [B], action_weights [B, A], search_tree)``:
      ``action`` the best ``g + logits + σ(q̂)`` among the actions most visited
      in this search, ``action_weights`` the improved policy
      ``softmax(logits + σ(q̂))`` over the legal root actions. A root with no
      legal action gets ``action = -1`` and all-zero weights.
    """
    check_gumbel_args(max_num_considered_actions, qtransform, final_move, leaves_per_step,
                      virtual_loss)
    refuse_early_stop(early_stop)
    batch_size = frame.batch_size(root, tree)
    check_gumbel_scale(gumbel_scale, batch_size)
    capacity = frame.capacity(tree, max_nodes, num_simulations)
    options = frame.engine_options(num_simulations, max_depth, capacity, solver=solver,
                                   second_moment=final_move == "lcb")
    prepared = frame.prepare(root, rng_key, num_simulations, invalid_actions, options,
                             tree=tree, max_nodes=max_nodes, graph=graph)
    root_search = GumbelRoot.begin(prepared, qtransform, max_num_considered_actions,
                                   num_simulations, gumbel, gumbel_scale)
    rule = frame.selection_rule(SelectionRule(root=root_search.rule(),
                                              interior=gumbel_interior_rule(qtransform)),
                                options)
    tree = prepared.tree
    expander = RecurrentExpander(recurrent_fn, tree.num_actions, tree.graph)
    search_tree, _ = frame.search(params, prepared, expander, rule, options)
    action, weights = root_search.move(search_tree, final_move, options.solver is not None)
    return PolicyOutput(action=action, action_weights=weights, search_tree=search_tree)


def check_gumbel_args(max_num_considered_actions: int, qtransform: CompletedQConfig,
                      final_move: str, leaves_per_step: int, virtual_loss: Any) -> None:
    """The static arguments of a Gumbel root (any search it runs over)."""
    validation.check_int("max_num_considered_actions", max_num_considered_actions, 1)
    validation.check_instance("qtransform", qtransform, CompletedQConfig)
    validation.check_choice("final_move", final_move, ("gumbel", "lcb"))
    if leaves_per_step != 1 or virtual_loss is not None:
        raise ValueError(
            f"a Gumbel root supports leaves_per_step=1 only, got leaves_per_step="
            f"{leaves_per_step}, virtual_loss={virtual_loss!r}: sequential halving picks "
            "each simulation's root action from the visit counts, which the pending walks "
            "of a step would inflate. Use a PUCT root for several leaves per step.")


def refuse_early_stop(early_stop: Any) -> None:
    """A Gumbel root takes no early stopping (:mod:`jaxpuct.early_stop`): its rule
    keeps the most visited action, and a Gumbel move is not that action."""
    if frame.early_stop_on(early_stop):
        raise ValueError(
            f"a Gumbel root does not support early_stop, got early_stop={early_stop!r}: "
            "its move is the best g + logits + sigma(q) among the actions sequential "
            "halving visited most, not the most visited action, and sigma(q) still "
            "changes with the simulations a stop would skip (sequential halving also "
            "plans the whole budget). Use alphazero_policy(early_stop=True), or omit "
            "early_stop.")


def check_gumbel_scale(gumbel_scale: Any, batch_size: int) -> None:
    validation.check_scalar_or_batch("gumbel_scale", gumbel_scale, batch_size)
    validation.check_range("gumbel_scale", gumbel_scale, 0.0)
    validation.debug_check_range("gumbel_scale", gumbel_scale, 0.0)


@dataclasses.dataclass(frozen=True)
class GumbelRoot:
    """A Gumbel root search over a prepared tree: the draw, the root's statistics
    before the search, and the schedule (shared by :func:`gumbel_policy` and
    :func:`jaxpuct.stochastic.stochastic_gumbel_policy`). Lives inside one traced
    call (not a pytree).

    Attributes:
      qtransform: the Q transform.
      ranking: ``[B, W]`` :func:`root_ranking` of the scaled Gumbel draw (0
        past the decision actions) and the root's prior.
      start: the root's :class:`NodeStats` before the search.
      num_considered: ``[B]`` int32 ``min(m, legal root actions)``.
      table: ``[m + 1, S]`` :func:`considered_visits_table`.
    """

    qtransform: CompletedQConfig
    ranking: jax.Array
    start: NodeStats
    num_considered: jax.Array
    table: np.ndarray

    @classmethod
    def begin(cls, prepared: Any, qtransform: CompletedQConfig, max_considered: int,
              num_simulations: int, gumbel: jax.Array | None,
              gumbel_scale: chex.Numeric) -> GumbelRoot:
        """The draw (``gumbel [B, A]`` given, else one per tree from the frame's
        move keys) and the root's statistics of ``prepared.tree``."""
        tree = prepared.tree
        batch_size, width = tree.batch_size, tree.num_actions
        num_actions = width if tree.chance is None else tree.chance.num_actions
        scale_value = validation.concrete_value(gumbel_scale)
        if gumbel is not None:
            validation.check_shape("gumbel", gumbel, (batch_size, num_actions))
        elif scale_value is not None and np.all(scale_value == 0):
            # A deterministic search: the draw would be multiplied by 0, so it is
            # not made (each threefry is a loop of its own on CPU).
            gumbel = jnp.zeros((batch_size, num_actions), jnp.float32)
        else:
            # Each element draws from its own key (the frame's per-tree move key),
            # so the batch elements stay independent.
            gumbel = prng.gumbel(prepared.sample_keys, (num_actions,))
        scale = jnp.reshape(jnp.asarray(gumbel_scale, jnp.float32), (-1, 1))
        gumbel = scale * jnp.asarray(gumbel, jnp.float32)
        gumbel = jnp.pad(gumbel, ((0, 0), (0, width - num_actions)))
        root_index = jnp.full((batch_size,), Tree.ROOT_INDEX, jnp.int32)
        start = node_stats(tree, qtransform, root_index, is_root=True)
        num_legal = jnp.sum(start.legal, axis=-1).astype(jnp.int32)
        return cls(qtransform=qtransform, ranking=root_ranking(start, gumbel), start=start,
                   num_considered=jnp.minimum(max_considered, num_legal),
                   table=considered_visits_table(max_considered, num_simulations))

    def rule(self) -> ActionFn:
        """The root ``ActionFn`` (sequential halving with the draw)."""
        return gumbel_root_rule(self.qtransform, self.ranking, self.start.visits,
                                self.num_considered, self.table)

    def move(self, tree: Tree, final_move: str, solver: bool
             ) -> tuple[jax.Array, jax.Array]:
        """``(action [B], improved policy [B, W])`` after the search: the best
        ``g + logits + σ(q̂)`` among the actions most visited in this search (or
        the LCB move; a proven root's solver move)."""
        root_index = jnp.full((tree.batch_size,), Tree.ROOT_INDEX, jnp.int32)
        final = node_stats(tree, self.qtransform, root_index, is_root=True)
        new_visits = final.visits - self.start.visits
        most_visited = jnp.max(jnp.where(final.legal, new_visits, 0), axis=-1)
        scores = considered_scores(self.ranking, final, new_visits, most_visited)
        has_legal = jnp.any(final.legal, axis=-1)
        action = jnp.where(has_legal, jnp.argmax(scores, axis=-1), -1).astype(jnp.int32)
        if final_move == "lcb":
            action = jnp.where(has_legal, lcb_action(tree), -1)
        if solver:
            action = jnp.where(solver_lib.root_proven(tree) & has_legal,
                               solver_lib.solver_action(tree), action)
        return action, improved_policy(final)

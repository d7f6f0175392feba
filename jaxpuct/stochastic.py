"""Chance nodes: search in stochastic environments (Stochastic MuZero).

Antonoglou, Schrittwieser, Ozair, Hubert and Silver, "Planning in Stochastic
Environments with a Learned Model", ICLR 2022
(https://openreview.net/forum?id=X6D9bAHhBQ1); the contract is that of DeepMind's
``mctx.stochastic_muzero_policy``:

* a *decision node* holds a state; its edges are the ``A`` actions, expanded by
  ``decision_recurrent_fn(params, key, action [B], state) ->
  (DecisionRecurrentFnOutput(chance_logits [B, C], afterstate_value [B]),
  afterstate)``;
* a *chance node* holds an afterstate; its edges are the ``C`` chance outcomes,
  expanded by ``chance_recurrent_fn(params, key, outcome [B], afterstate) ->
  (ChanceRecurrentFnOutput(action_logits [B, A], value [B], reward [B],
  discount [B]), state)``;
* node kinds alternate along every path; the edge into a chance node has reward 0
  and discount 1, the edge into a decision node carries the chance function's
  reward and discount;
* decision nodes select by the PUCT rule of a :class:`jaxpuct.PUCTConfig`;
  chance nodes by the deterministic quota rule ``argmax_c p(c) / (N(c) + 1)``
  (lowest index on ties; outcomes with ``p = 0`` are never taken). That rule is
  Jefferson/D'Hondt apportionment, so after ``n`` visits ``N(c) >= floor(n p(c))``.

Layout. The engine's :class:`jaxpuct.tree.Tree` is used unchanged, with edge arrays
of width ``W = max(A, C)``: a decision node's edges ``a >= A`` and a chance node's
edges ``c >= C`` are ``ILLEGAL``. The node kind is a ``[B, N]`` bool stored in the
embedding pytree (:class:`StochasticEmbedding`), next to the state and the
afterstate (each node keeps the last one of each kind on its path, so every
function is always given a real embedding, never a placeholder). The walk
(:func:`jaxpuct.search.select`), the storage (:func:`jaxpuct.search.expand_tree`)
and the visit backup (:func:`jaxpuct.search.backup`) are the engine's; a
simulation stays O(depth).

Model calls. mctx calls *both* functions on the whole batch at every simulation
and keeps one result per element. Here each simulation calls
``decision_recurrent_fn`` only if some element's leaf edge leaves a decision node,
and ``chance_recurrent_fn`` only if some leaf edge leaves a chance node
(``lax.cond`` on ``any``), always with in-range indices: an element that does not
need a call gets action or outcome 0 and its own stored embedding. At ``B = 1``
that is exactly one call per simulation (half of mctx's two); in a large batch
both kinds are usually needed at every step and the count approaches two, as in
mctx (see ``docs/chance_nodes.md`` for measurements). Under ``jax.vmap`` of the
whole policy, ``lax.cond`` becomes a select and both calls run.

Backups (``chance_backup``):

* ``"visits"`` (mctx's): every node's Q is the running mean of the returns
  through it; at a chance node the outcomes are weighted by their visit counts,
  which the quota rule keeps close to ``p``.
* ``"expectation"``: a chance node's Q is ``Σ_c p(c) Q(c) + (1 - Σ_c p(c)) U``
  over its expanded outcomes ``c`` (``U``: the afterstate value, standing in for
  the outcomes not seen yet); decision nodes on the path are re-averaged from
  their children's current values, ``(U + Σ_a N(a) Q(a)) / (1 + Σ_a N(a))`` (the
  idempotent update of graph search), so an improved expectation reaches every
  ancestor. Right when ``p`` is exact (dice, tile spawns): it removes the
  sampling noise of the visit weights. With learned ``p`` it trusts the model's
  probabilities as much as the visit mean does, but also gives rare outcomes their
  full weight after a single visit. Costs O(depth * W) per simulation instead of
  O(depth).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import chex
import jax
import jax.numpy as jnp

from jaxpuct import validation
from jaxpuct.numerics import finite_or_zero, gather_rows, prior_and_legal
from jaxpuct.policies import check_policy_numbers, dirichlet_noise, sample_action, visit_policy
from jaxpuct.roots import root_prior_and_legal
from jaxpuct.search import Walk, backup, check_selection, expand_tree, prepare_tree, select
from jaxpuct.selection import PUCTConfig, SelectionRule
from jaxpuct.tree import ILLEGAL, NodeData, Tree, edge_qvalues
from jaxpuct.types import PolicyOutput

ChanceBackup = Literal["visits", "expectation"]
_CHANCE_BACKUPS = ("visits", "expectation")


@chex.dataclass(frozen=True)
class DecisionRecurrentFnOutput:
    """What ``decision_recurrent_fn`` returns for the afterstate of one action.

    Attributes:
      chance_logits: ``[B, C]`` logits of the chance outcomes (exact
        ``log p`` for a game with known probabilities; ``-inf`` for impossible
        outcomes, which are never selected).
      afterstate_value: ``[B]`` value of the afterstate, from the view of the
        player who took the action.
    """

    chance_logits: chex.Array
    afterstate_value: chex.Array


@chex.dataclass(frozen=True)
class ChanceRecurrentFnOutput:
    """What ``chance_recurrent_fn`` returns for the state reached by one outcome.

    Attributes:
      action_logits: ``[B, A]`` policy logits at the new state.
      value: ``[B]`` value of the new state (view of its player to move; exact
        when ``terminal``).
      reward: ``[B]`` reward of the whole transition, to the player who acted.
      discount: ``[B]`` (``-1`` when the player to move changes).
      legal_action_mask: optional ``[B, A]`` bool (jaxpuct extension).
      terminal: optional ``[B]`` bool: never expanded (jaxpuct extension).
    """

    action_logits: chex.Array
    value: chex.Array
    reward: chex.Array
    discount: chex.Array
    legal_action_mask: chex.Array | None = None
    terminal: chex.Array | None = None


@chex.dataclass(frozen=True)
class StochasticEmbedding:
    """The embedding the tree stores per node.

    Attributes:
      state: pytree ``[B, ...]``: the node's state (decision node) or its
        parent's (chance node).
      afterstate: pytree ``[B, ...]``: the node's afterstate (chance node) or
        its parent's (decision node; zeros at the root).
      is_decision: ``[B]`` bool, the node kind.
    """

    state: Any
    afterstate: Any
    is_decision: chex.Array


class ModelCalls(NamedTuple):
    """How often each function was called over a search (scalars int32): one
    call is on the whole batch ``[B]``."""

    decision: chex.Array
    chance: chex.Array


class _SimState(NamedTuple):
    tree: Tree
    path_nodes: chex.Array  # [B, D + 1]
    path_actions: chex.Array  # [B, D]
    calls: ModelCalls


class _RecomputeState(NamedTuple):
    depth: chex.Array
    node_visits: chex.Array  # [B, N]
    node_values: chex.Array  # [B, N]
    edge_visits: chex.Array  # [B, N, W]


@dataclasses.dataclass(frozen=True)
class _Shapes:
    """Static sizes of one stochastic search."""

    batch_size: int
    num_actions: int
    num_outcomes: int

    @property
    def width(self) -> int:
        return max(self.num_actions, self.num_outcomes)


def is_decision_node(tree: Tree) -> chex.Array:
    """``[B, N]`` bool node kinds of a tree built by :func:`stochastic_search`."""
    return tree.embeddings.is_decision


def chance_scores(tree: Tree, node: chex.Array) -> chex.Array:
    """``[B, W]`` quota scores ``p(c) / (N(c) + 1)`` at ``node [B]`` (``-inf`` at
    impossible outcomes)."""
    prior = gather_rows(tree.children_prior, node)
    visits = gather_rows(tree.edge_visits, node).astype(jnp.float32)
    legal = gather_rows(tree.children_index, node) != ILLEGAL
    return jnp.where(legal, prior / (visits + 1.0), -jnp.inf)


def stochastic_rule(decision: SelectionRule) -> SelectionRule:
    """``decision``'s rule at decision nodes, the chance quota rule at chance
    nodes (the root is a decision node)."""

    def interior(tree, node, depth, rng_keys):
        action = decision.interior(tree, node, depth, rng_keys)
        outcome = jnp.argmax(chance_scores(tree, node), axis=-1).astype(jnp.int32)
        return jnp.where(gather_rows(is_decision_node(tree), node), action, outcome)

    return SelectionRule(root=decision.root, interior=interior)


# ------------------------------------------------------------------ checks


def _check_embedding(name: str, embedding: Any, like: Any) -> None:
    """``embedding`` has the structure, shapes and dtypes of ``like``."""
    expected, got = jax.tree.structure(like), jax.tree.structure(embedding)
    if expected != got:
        raise ValueError(f"{name} must have the structure {expected}, got {got}.")
    for (path, new), old in zip(jax.tree_util.tree_leaves_with_path(embedding),
                                jax.tree.leaves(like), strict=True):
        where = jax.tree_util.keystr(path)
        if new.shape != old.shape or new.dtype != old.dtype:
            raise ValueError(f"{name}{where} must have shape {list(old.shape)} and dtype "
                             f"{old.dtype}, got {list(new.shape)} and {new.dtype}.")


def _check_decision_output(output: Any, batch_size: int) -> int:
    """Shapes of ``decision_recurrent_fn``'s output; returns ``C``."""
    logits = getattr(output, "chance_logits", None)
    if logits is None or jnp.ndim(logits) != 2 or jnp.shape(logits)[0] != batch_size:
        got = None if logits is None else list(jnp.shape(logits))
        raise ValueError("decision_recurrent_fn output .chance_logits must have shape "
                         f"[B={batch_size}, C], got {got}.")
    if logits.shape[1] < 1:
        raise ValueError("decision_recurrent_fn output .chance_logits must have C >= 1 "
                         f"chance outcomes, got shape {list(logits.shape)}.")
    validation.check_shape("decision_recurrent_fn output .afterstate_value",
                           getattr(output, "afterstate_value", None), (batch_size,))
    return logits.shape[1]


def _check_chance_output(output: Any, state: Any, shapes: _Shapes, state_like: Any) -> None:
    """Shapes of ``chance_recurrent_fn``'s output and new state."""
    b, a = shapes.batch_size, shapes.num_actions
    validation.check_shape("chance_recurrent_fn output .action_logits",
                           getattr(output, "action_logits", None), (b, a))
    for field in ("value", "reward", "discount"):
        validation.check_shape(f"chance_recurrent_fn output .{field}",
                               getattr(output, field, None), (b,))
    if getattr(output, "legal_action_mask", None) is not None:
        validation.check_shape("chance_recurrent_fn output .legal_action_mask",
                               output.legal_action_mask, (b, a))
    if getattr(output, "terminal", None) is not None:
        validation.check_shape("chance_recurrent_fn output .terminal", output.terminal, (b,))
    _check_embedding("chance_recurrent_fn state (like root.embedding)", state, state_like)


def _unpack(name: str, result: Any) -> tuple[Any, Any]:
    if not (isinstance(result, tuple) and len(result) == 2):
        raise ValueError(f"{name} must return a pair (output, embedding), got "
                         f"{type(result).__name__}.")
    return result


def _pad(x: chex.Array, width: int, fill: Any) -> chex.Array:
    """``[B, K]`` -> ``[B, width]`` padded with ``fill``."""
    return jnp.pad(x, ((0, 0), (0, width - x.shape[1])), constant_values=fill)


# ------------------------------------------------------------------ expansion


def _zeros_like_shapes(shapes: Any) -> Any:
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


def evaluate_stochastic_leaves(
    params: Any, rng_key: chex.PRNGKey, tree: Tree, walk: Walk, shapes: _Shapes,
    decision_recurrent_fn: Callable, chance_recurrent_fn: Callable, state_like: Any,
) -> tuple[NodeData, ModelCalls]:
    """Evaluates each walk's leaf edge with the function of its parent's kind.

    Each function is called at most once, on the whole batch, and only when some
    element needs it (``lax.cond``); elements that do not get index 0 and their
    own embedding. Returns the sanitised new nodes ``[B]`` (width ``W``) and the
    calls made (0 or 1 each).
    """
    b, a, c, w = shapes.batch_size, shapes.num_actions, shapes.num_outcomes, shapes.width
    parent, action = walk.leaf_edge()
    embedding = jax.tree.map(lambda x: x[jnp.arange(b), parent], tree.embeddings)
    from_decision = embedding.is_decision
    need_decision = walk.expand & from_decision
    need_chance = walk.expand & ~from_decision
    # Indices stay in range for every element, called for or not.
    decision_key, chance_key = jax.random.split(rng_key)

    def call_decision():
        act = jnp.where(need_decision, action, 0).clip(0, a - 1).astype(jnp.int32)
        out, after = _unpack("decision_recurrent_fn", decision_recurrent_fn(
            params, decision_key, act, embedding.state))
        _check_decision_output(out, b)
        _check_embedding("decision_recurrent_fn afterstate", after, embedding.afterstate)
        return out.chance_logits.astype(jnp.float32), finite_or_zero(out.afterstate_value), after

    def call_chance():
        outcome = jnp.where(need_chance, action, 0).clip(0, c - 1).astype(jnp.int32)
        out, state = _unpack("chance_recurrent_fn", chance_recurrent_fn(
            params, chance_key, outcome, embedding.afterstate))
        _check_chance_output(out, state, shapes, state_like)
        legal = getattr(out, "legal_action_mask", None)
        legal = jnp.ones((b, a), jnp.bool_) if legal is None else legal.astype(jnp.bool_)
        terminal = getattr(out, "terminal", None)
        terminal = jnp.zeros((b,), jnp.bool_) if terminal is None else terminal.astype(jnp.bool_)
        return (out.action_logits.astype(jnp.float32), legal, finite_or_zero(out.value),
                finite_or_zero(out.reward), finite_or_zero(out.discount), terminal, state)

    decision_out = jax.lax.cond(jnp.any(need_decision), call_decision,
                                lambda: _zeros_like_shapes(jax.eval_shape(call_decision)))
    chance_out = jax.lax.cond(jnp.any(need_chance), call_chance,
                              lambda: _zeros_like_shapes(jax.eval_shape(call_chance)))
    chance_logits, afterstate_value, afterstate = decision_out
    action_logits, legal, value, reward, discount, terminal, state = chance_out

    outcome_prior, outcome_legal = prior_and_legal(chance_logits, jnp.ones((b, c), jnp.bool_))
    action_prior, action_legal = prior_and_legal(action_logits, legal)
    kind = from_decision[:, None]
    prior = jnp.where(kind, _pad(outcome_prior, w, 0.0), _pad(action_prior, w, 0.0))
    legal = jnp.where(kind, _pad(outcome_legal, w, False), _pad(action_legal, w, False))
    leaf = NodeData(
        reward=jnp.where(from_decision, 0.0, reward),
        discount=jnp.where(from_decision, 1.0, discount),
        value=jnp.where(from_decision, afterstate_value, value),
        prior=prior,
        legal=legal,
        terminal=~from_decision & (terminal | ~jnp.any(action_legal, axis=-1)),
        embedding=StochasticEmbedding(
            state=_where_tree(from_decision, embedding.state, state),
            afterstate=_where_tree(from_decision, afterstate, embedding.afterstate),
            is_decision=~from_decision),
    )
    calls = ModelCalls(decision=jnp.any(need_decision).astype(jnp.int32),
                       chance=jnp.any(need_chance).astype(jnp.int32))
    return leaf, calls


def _where_tree(pred: chex.Array, on_true: Any, on_false: Any) -> Any:
    def pick(x, y):
        return jnp.where(pred.reshape(pred.shape + (1,) * (x.ndim - 1)), x, y)
    return jax.tree.map(pick, on_true, on_false)


# ------------------------------------------------------------------ backup


def expectation_backup(tree: Tree, walk: Walk) -> Tree:
    """Bottom-up along each path: count the edge taken, add a visit, and recompute
    the node from its children: chance nodes ``Σ p Q + (1 - Σ p) U`` over expanded
    outcomes, decision nodes ``(U + Σ N(a) Q(a)) / (1 + Σ N(a))``; terminal nodes
    keep ``U``. O(B * W) per depth step."""
    rows = jnp.arange(tree.batch_size)
    kinds = is_decision_node(tree)

    def body(state: _RecomputeState) -> _RecomputeState:
        on_path = state.depth < walk.num_edges
        node = walk.path_nodes[:, state.depth]
        action = walk.path_actions[:, state.depth]
        edge_visits = state.edge_visits.at[rows, node, action].add(on_path.astype(jnp.int32))
        children = gather_rows(tree.children_index, node)
        has_child = children >= 0
        q = edge_qvalues(tree.replace(node_values=state.node_values), node, children)
        raw = tree.raw_values[rows, node]
        counts = jnp.where(has_child, gather_rows(edge_visits, node), 0).astype(jnp.float32)
        mean = (raw + jnp.sum(counts * q, axis=-1)) / (1.0 + jnp.sum(counts, axis=-1))
        prior = jnp.where(has_child, gather_rows(tree.children_prior, node), 0.0)
        expectation = jnp.sum(prior * q, axis=-1) + (1.0 - jnp.sum(prior, axis=-1)) * raw
        new_value = jnp.where(kinds[rows, node], mean, expectation)
        new_value = jnp.where(tree.node_terminal[rows, node], raw, new_value)
        old_value = state.node_values[rows, node]
        count = state.node_visits[rows, node]
        return _RecomputeState(
            depth=state.depth - 1,
            node_visits=state.node_visits.at[rows, node].set(count + on_path.astype(jnp.int32)),
            node_values=state.node_values.at[rows, node].set(
                jnp.where(on_path, new_value, old_value)),
            edge_visits=edge_visits)

    init = _RecomputeState(jnp.max(walk.num_edges) - 1, tree.node_visits, tree.node_values,
                           tree.edge_visits)
    final = jax.lax.while_loop(lambda s: s.depth >= 0, body, init)
    return tree.replace(node_visits=final.node_visits, node_values=final.node_values,
                        edge_visits=final.edge_visits)


# ------------------------------------------------------------------ search


def _stochastic_root(root: Any, params: Any, rng_key: chex.PRNGKey,
                     decision_recurrent_fn: Callable) -> tuple[Any, _Shapes]:
    """The root as a width-``W`` ``RootFnOutput`` whose embedding is a
    :class:`StochasticEmbedding`; ``C`` is read from the shape of
    ``decision_recurrent_fn``'s output (``jax.eval_shape``: no call is made)."""
    from jaxpuct.types import RootFnOutput

    batch_size, num_actions = validation.check_root(root)
    action = jnp.zeros((batch_size,), jnp.int32)
    out_shape, after_shape = _unpack("decision_recurrent_fn", jax.eval_shape(
        lambda e: decision_recurrent_fn(params, rng_key, action, e), root.embedding))
    num_outcomes = _check_decision_output(out_shape, batch_size)
    shapes = _Shapes(batch_size, num_actions, num_outcomes)
    legal = getattr(root, "legal_action_mask", None)
    legal = (jnp.ones((batch_size, num_actions), jnp.bool_) if legal is None
             else legal.astype(jnp.bool_))
    wide = RootFnOutput(
        prior_logits=_pad(root.prior_logits.astype(jnp.float32), shapes.width, -jnp.inf),
        value=root.value,
        embedding=StochasticEmbedding(state=root.embedding,
                                      afterstate=_zeros_like_shapes(after_shape),
                                      is_decision=jnp.ones((batch_size,), jnp.bool_)),
        legal_action_mask=_pad(legal, shapes.width, False))
    return wide, shapes


def stochastic_search(
    params: Any,
    rng_key: chex.PRNGKey,
    root: Any,
    decision_recurrent_fn: Callable,
    chance_recurrent_fn: Callable,
    num_simulations: int,
    *,
    max_depth: int | None = None,
    max_nodes: int | None = None,
    selection: PUCTConfig | SelectionRule = PUCTConfig(),
    invalid_actions: chex.Array | None = None,
    root_prior: chex.Array | None = None,
    chance_backup: ChanceBackup = "visits",
) -> tuple[Tree, ModelCalls]:
    """Runs ``num_simulations`` simulations of Stochastic MuZero search.

    Each simulation expands one node, of either kind (so ``S`` simulations reach
    about ``S / 2`` decision nodes below the root, as in mctx).

    Args:
      params: passed to both functions.
      rng_key: one key, or ``[B]`` keys (one per tree).
      root: ``RootFnOutput`` (jaxpuct's or mctx's): ``prior_logits [B, A]``,
        ``value [B]``, ``embedding [B, ...]``, optional ``legal_action_mask``.
      decision_recurrent_fn: ``(params, key, action [B], state) ->
        (DecisionRecurrentFnOutput, afterstate)``.
      chance_recurrent_fn: ``(params, key, outcome [B], afterstate) ->
        (ChanceRecurrentFnOutput, state)``.
      num_simulations: ``S >= 1``.
      max_depth: longest path in nodes of either kind (default ``max_nodes``).
      max_nodes: node capacity (default ``S + 1``).
      selection: the rule at decision nodes (``PUCTConfig`` or
        ``SelectionRule``); ``PUCTConfig.mctx_muzero()`` is mctx's.
      invalid_actions: optional ``[B, A]`` bool, root actions not to take.
      root_prior: optional ``[B, A]`` prior to select with at the root (noise).
      chance_backup: ``"visits"`` or ``"expectation"`` (module docstring).

    Returns:
      ``(tree, calls)``: the ``Tree`` (edge width ``W = max(A, C)``, node kinds
      in ``tree.embeddings.is_decision``) and the number of calls of each function.
    """
    decision_rule = check_selection(selection)
    validation.check_choice("chance_backup", chance_backup, _CHANCE_BACKUPS)
    validation.check_int("num_simulations", num_simulations, 1)
    batch_size, num_actions = validation.check_root(root)
    shared_key, element_keys = validation.split_keys(rng_key, batch_size)
    wide, shapes = _stochastic_root(root, params, shared_key, decision_recurrent_fn)
    w = shapes.width
    if invalid_actions is not None:
        validation.check_shape("invalid_actions", invalid_actions, (batch_size, num_actions))
        invalid_actions = _pad(invalid_actions.astype(jnp.bool_), w, True)
    if root_prior is not None:
        validation.check_shape("root_prior", root_prior, (batch_size, num_actions))
        root_prior = _pad(root_prior.astype(jnp.float32), w, 0.0)
    tree, _ = prepare_tree(wide, num_simulations, max_nodes, invalid_actions, root_prior,
                           None, None)
    depth_limit = tree.max_nodes if max_depth is None else validation.check_int(
        "max_depth", max_depth, 1)
    rule = stochastic_rule(decision_rule)

    def simulate(sim, state: _SimState) -> _SimState:
        key = jax.random.fold_in(shared_key, sim)
        tie_keys = jax.vmap(jax.random.fold_in, (0, None))(element_keys, sim)
        walk, _ = select(state.tree, rule, depth_limit, tie_keys, None, None, sim,
                         state.path_nodes, state.path_actions)
        leaf, calls = evaluate_stochastic_leaves(
            params, key, state.tree, walk, shapes, decision_recurrent_fn,
            chance_recurrent_fn, root.embedding)
        tree, leaf_return = expand_tree(state.tree, walk, leaf)
        tree = (backup(tree, walk, leaf_return) if chance_backup == "visits"
                else expectation_backup(tree, walk))
        calls = ModelCalls(state.calls.decision + calls.decision,
                           state.calls.chance + calls.chance)
        return _SimState(tree, walk.path_nodes, walk.path_actions, calls)

    init = _SimState(
        tree=tree,
        path_nodes=jnp.zeros((batch_size, depth_limit + 1), jnp.int32),
        path_actions=jnp.zeros((batch_size, depth_limit), jnp.int32),
        calls=ModelCalls(jnp.int32(0), jnp.int32(0)))
    final = jax.lax.fori_loop(0, num_simulations, simulate, init)
    return final.tree, final.calls


def stochastic_policy(
    params: Any,
    rng_key: chex.PRNGKey,
    root: Any,
    decision_recurrent_fn: Callable,
    chance_recurrent_fn: Callable,
    num_simulations: int,
    invalid_actions: chex.Array | None = None,
    max_depth: int | None = None,
    *,
    max_nodes: int | None = None,
    selection: PUCTConfig | SelectionRule = PUCTConfig(),
    dirichlet_fraction: chex.Numeric = 0.25,
    dirichlet_alpha: chex.Numeric = 0.3,
    temperature: chex.Numeric = 1.0,
    chance_backup: ChanceBackup = "visits",
) -> PolicyOutput[Tree]:
    """Stochastic MuZero search (Antonoglou et al. 2022) with mctx's contract.

    Same call shape as ``mctx.stochastic_muzero_policy``; the keyword arguments
    after ``*`` are jaxpuct's (mctx's ``pb_c_init``/``pb_c_base``/``qtransform``
    are ``selection=PUCTConfig.mctx_muzero(c_init, c_base)``). See the module
    docstring for the node kinds, the chance rule and the backups, and
    :func:`stochastic_search` for the arguments they share.

    Args:
      params: passed to both functions.
      rng_key: one key, or ``[B]`` keys.
      root: ``RootFnOutput``: ``prior_logits [B, A]``, ``value [B]``,
        ``embedding [B, ...]``, optional ``legal_action_mask [B, A]``.
      decision_recurrent_fn: ``(params, key, action [B], state) ->
        (DecisionRecurrentFnOutput(chance_logits [B, C], afterstate_value [B]),
        afterstate)``.
      chance_recurrent_fn: ``(params, key, outcome [B], afterstate) ->
        (ChanceRecurrentFnOutput(action_logits [B, A], value [B], reward [B],
        discount [B]), state)``.
      num_simulations: ``S >= 1`` (each expands one node of either kind).
      invalid_actions: optional ``[B, A]`` bool, root actions not to take.
      max_depth: optional longest path, counting nodes of both kinds.
      max_nodes: node capacity (default ``S + 1``).
      selection: the decision-node rule (default: AlphaZero schedule with FPU).
      dirichlet_fraction: root noise weight (0 disables).
      dirichlet_alpha: root noise concentration.
      temperature: τ for the move and the target ``N^(1/τ)``; 0 is argmax.
      chance_backup: ``"visits"`` (mctx) or ``"expectation"`` (exact ``p``).

    Returns:
      ``PolicyOutput(action [B], action_weights [B, A], search_tree)``; the tree's
      edge arrays have width ``max(A, C)``.
    """
    batch_size, num_actions = validation.check_root(root)
    check_policy_numbers(batch_size, dirichlet_fraction, dirichlet_alpha, temperature)
    if invalid_actions is not None:
        validation.check_shape("invalid_actions", invalid_actions, (batch_size, num_actions))
    _, element_keys = validation.split_keys(rng_key, batch_size)
    pairs = jax.vmap(lambda k: jax.random.split(k, 2))(element_keys)
    noise_keys, sample_keys = pairs[:, 0], pairs[:, 1]
    prior, legal = root_prior_and_legal(root, invalid_actions)
    noised = prior
    if validation.concrete_value(dirichlet_fraction) is None or dirichlet_fraction != 0:
        noised = dirichlet_noise(noise_keys, prior, legal,
                                 jnp.clip(dirichlet_fraction, 0.0, 1.0), dirichlet_alpha)
    tree, _ = stochastic_search(
        params, rng_key, root, decision_recurrent_fn, chance_recurrent_fn, num_simulations,
        max_depth=max_depth, max_nodes=max_nodes, selection=selection,
        invalid_actions=invalid_actions, root_prior=noised, chance_backup=chance_backup)
    counts = tree.edge_visits[:, Tree.ROOT_INDEX, :num_actions]
    action_weights = visit_policy(counts, jnp.maximum(temperature, 0.0), legal)
    action = sample_action(sample_keys, action_weights)
    return PolicyOutput(action=action, action_weights=action_weights, search_tree=tree)

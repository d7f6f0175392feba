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
  (outcomes with ``p = 0`` are never taken). That rule is Jefferson/D'Hondt
  apportionment, so after ``n`` visits ``N(c) >= floor(n p(c))``, whichever
  of the tied outcomes is taken. ``chance_ties`` says which: ``"first"`` (the
  lowest index, as mctx's ``argmax``), ``"random"`` (uniformly
  among the tied outcomes, drawn afresh at every visit from the tree's own key) or
  ``"shared"`` (the first in a random order of the outcomes drawn once per tree
  and search, the same at every chance node of that search). Ties are the rule with
  exact probabilities, where many outcomes are equally likely: with ``"first"``
  a chance node visited ``k`` times has seen the same ``k`` lowest-index
  outcomes in every search (a backgammon opponent's rolls 1-2, 1-3, 1-4; 2048's
  new tile in the first empty cells), so its value leans towards them. With
  ``"random"`` sibling chance nodes (the afterstates of two moves) see different
  outcomes, so the comparison of the moves carries the outcomes' luck; ``"first"``
  and ``"shared"`` show every sibling the same outcomes in the same order (common
  random numbers), and ``"shared"`` changes that order from one search to the next.

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

from jaxpuct import frame, prng, validation
from jaxpuct import gumbel as gumbel_lib
from jaxpuct import solver as solver_lib
from jaxpuct._dataclass import Replaceable, pytree_dataclass
from jaxpuct.backup import store_leaves
from jaxpuct.final_move import choose_action, lcb_action, visit_policy
from jaxpuct.graph import GraphConfig
from jaxpuct.indexing import row_add, row_set, row_take
from jaxpuct.numerics import (
    argmax_by_priority,
    finite_or_zero,
    gather_rows,
    key_uniform,
    prior_and_legal,
)
from jaxpuct.policies import check_policy_numbers
from jaxpuct.selection import PUCTConfig, SelectionRule
from jaxpuct.tree import ILLEGAL, ChanceLayout, NodeData, Tree, edge_qvalues, present
from jaxpuct.types import PolicyOutput, RecurrentFn
from jaxpuct.virtual_loss import VirtualLoss
from jaxpuct.walk import Walk

ChanceBackup = Literal["visits", "expectation"]
_CHANCE_BACKUPS = ("visits", "expectation")
ChanceTies = Literal["first", "random", "shared"]
_CHANCE_TIES = ("first", "random", "shared")
# Salt of the per-search outcome order of chance_ties="shared" (apart from the
# selection's own draws from the same per-tree keys).
_ORDER_SALT = 0x6F726472


@pytree_dataclass
class DecisionRecurrentFnOutput(Replaceable):
    """What ``decision_recurrent_fn`` returns for the afterstate of one action.

    Attributes:
      chance_logits: ``[B, C]`` logits of the chance outcomes (exact
        ``log p`` for a game with known probabilities; ``-inf`` for impossible
        outcomes, which are never selected).
      afterstate_value: ``[B]`` value of the afterstate, from the view of the
        player who took the action.
      afterstate_hash: optional ``[B, 2]`` uint32 hash of the afterstate (graph
        search only, jaxpuct extension).
    """

    chance_logits: jax.Array
    afterstate_value: jax.Array
    afterstate_hash: jax.Array | None = None


@pytree_dataclass
class ChanceRecurrentFnOutput(Replaceable):
    """What ``chance_recurrent_fn`` returns for the state reached by one outcome.

    Attributes:
      action_logits: ``[B, A]`` policy logits at the new state.
      value: ``[B]`` value of the new state (view of its player to move; exact
        when ``terminal``).
      reward: ``[B]`` reward of the whole transition, to the player who acted.
      discount: ``[B]`` (``-1`` when the player to move changes).
      legal_action_mask: optional ``[B, A]`` bool (jaxpuct extension).
      terminal: optional ``[B]`` bool: never expanded (jaxpuct extension).
      state_hash: optional ``[B, 2]`` uint32 hash of the new state (graph search
        only, jaxpuct extension; include the player to move).
    """

    action_logits: jax.Array
    value: jax.Array
    reward: jax.Array
    discount: jax.Array
    legal_action_mask: jax.Array | None = None
    terminal: jax.Array | None = None
    state_hash: jax.Array | None = None


@pytree_dataclass
class StochasticEmbedding(Replaceable):
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
    is_decision: jax.Array


class ModelCalls(NamedTuple):
    """How often each function was called over a search (scalars int32): one
    call is on the whole batch of leaf edges (``[B]``, or ``[B * K]``)."""

    decision: jax.Array
    chance: jax.Array


class _RecomputeState(NamedTuple):
    depth: jax.Array
    node_visits: jax.Array  # [B, N]
    node_values: jax.Array  # [B, N]
    edge_visits: jax.Array  # [B, N, W]


def is_decision_node(tree: Tree) -> jax.Array:
    """``[B, N]`` bool node kinds of a tree built by :func:`stochastic_search`."""
    return tree.embeddings.is_decision


def chance_scores(tree: Tree, node: jax.Array) -> jax.Array:
    """``[B, W]`` quota scores ``p(c) / (N(c) + 1)`` at ``node [B]`` (``-inf`` at
    impossible outcomes). With the solver's proofs in the tree, proven outcomes
    score ``-inf`` too unless every outcome is proven: a walk into one would only
    back up its exact value again, and the node's proof needs the others."""
    prior = gather_rows(tree.children_prior, node)
    visits = gather_rows(tree.edge_visits, node).astype(jnp.float32)
    children = gather_rows(tree.children_index, node)
    legal = children != ILLEGAL
    if tree.proof_plies is not None:
        proven = (children >= 0) & (row_take(tree.proof_plies, jnp.maximum(children, 0)) >= 0)
        open_ = legal & ~proven
        legal = jnp.where(jnp.any(open_, axis=-1, keepdims=True), open_, legal)
    return jnp.where(legal, prior / (visits + 1.0), -jnp.inf)


def chance_order(element_keys: jax.Array, width: int) -> jax.Array:
    """``[B, width]`` float32 in [0, 1): the outcome order of ``chance_ties="shared"``
    for one search, drawn from each tree's key (``element_keys [B]``); a higher
    draw comes first."""
    return key_uniform(element_keys, width, _ORDER_SALT)


def chance_outcome(scores: jax.Array, ties: ChanceTies, rng_keys: jax.Array,
                   order: jax.Array | None = None) -> jax.Array:
    """``[B]`` int32 the outcome of highest quota score (``scores [B, W]``);
    among equal scores the lowest index (``ties="first"``), one drawn uniformly
    with each tree's key (``rng_keys [B]``, ``ties="random"``), or the first in
    the search's ``order [B, W]`` (:func:`chance_order`, ``ties="shared"``). A row
    with no finite score gets 0 in every mode."""
    if ties == "first":
        return jnp.argmax(scores, axis=-1).astype(jnp.int32)
    if ties == "shared":
        if order is None:
            raise ValueError("chance_ties='shared' needs the search's outcome order: "
                             "expected order [B, W] (chance_order), got None.")
        return argmax_by_priority(scores, order)
    # Its own stream: the decision rule's tie noise may draw from the same keys.
    return argmax_by_priority(scores, key_uniform(rng_keys, scores.shape[-1], 1))


def stochastic_rule(decision: SelectionRule, ties: ChanceTies = "first",
                    order: jax.Array | None = None) -> SelectionRule:
    """``decision``'s rule at decision nodes, the chance quota rule at chance
    nodes (the root is a decision node), its ties broken as ``ties`` says
    (``order [B, W]``: the search's outcome order, for ``ties="shared"``)."""

    def interior(tree, node, depth, rng_keys):
        action = decision.interior(tree, node, depth, rng_keys)
        outcome = chance_outcome(chance_scores(tree, node), ties, rng_keys, order)
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


def _check_chance_output(output: Any, state: Any, batch_size: int, num_actions: int,
                         state_like: Any) -> None:
    """Shapes of ``chance_recurrent_fn``'s output and new state."""
    b, a = batch_size, num_actions
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


def _pad(x: jax.Array, width: int, fill: Any) -> jax.Array:
    """``[B, K]`` -> ``[B, width]`` padded with ``fill``."""
    return jnp.pad(x, ((0, 0), (0, width - x.shape[1])), constant_values=fill)


# ------------------------------------------------------------------ expansion


def _zeros_like_shapes(shapes: Any) -> Any:
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


@dataclasses.dataclass(frozen=True)
class ChanceExpander:
    """Stochastic MuZero's two functions as one expander (:mod:`jaxpuct.expanders`).

    Each leaf edge is evaluated by the function of its parent's kind. Each
    function is called at most once per step, on all ``M`` rows, and only when
    some row needs it (``lax.cond``); rows that do not get index 0 and their own
    embedding. The counts are :class:`ModelCalls` (0 or 1 each per step).

    Attributes:
      decision_recurrent_fn: ``(params, key, action [M], state) ->
        (DecisionRecurrentFnOutput, afterstate)``.
      chance_recurrent_fn: ``(params, key, outcome [M], afterstate) ->
        (ChanceRecurrentFnOutput, state)``.
      layout: the tree's :class:`jaxpuct.tree.ChanceLayout`.
      graph: graph search: the expander then reads the outputs' ``afterstate_hash``
        and ``state_hash`` (an afterstate's hash is salted, so that a state and an
        afterstate never share a node).
    """

    decision_recurrent_fn: RecurrentFn
    chance_recurrent_fn: RecurrentFn
    layout: ChanceLayout
    graph: Any = None

    def __call__(self, params: Any, rng_key: jax.Array, embedding: Any,
                 action: jax.Array, needed: jax.Array) -> tuple[NodeData, ModelCalls]:
        a, c, w = self.layout.num_actions, self.layout.num_outcomes, self.layout.width
        b = action.shape[0]
        from_decision = embedding.is_decision
        need_decision = needed & from_decision
        need_chance = needed & ~from_decision
        decision_key, chance_key = prng.split(rng_key, 2)

        def call_decision():
            act = jnp.where(need_decision, action, 0).clip(0, a - 1).astype(jnp.int32)
            out, after = _unpack("decision_recurrent_fn", self.decision_recurrent_fn(
                params, decision_key, act, embedding.state))
            _check_decision_output(out, b)
            _check_embedding("decision_recurrent_fn afterstate", after, embedding.afterstate)
            return (out.chance_logits.astype(jnp.float32),
                    finite_or_zero(out.afterstate_value), after,
                    self._hash(out, "afterstate_hash", "decision_recurrent_fn", b))

        def call_chance():
            outcome = jnp.where(need_chance, action, 0).clip(0, c - 1).astype(jnp.int32)
            out, state = _unpack("chance_recurrent_fn", self.chance_recurrent_fn(
                params, chance_key, outcome, embedding.afterstate))
            _check_chance_output(out, state, b, a, embedding.state)
            legal = getattr(out, "legal_action_mask", None)
            legal = jnp.ones((b, a), jnp.bool_) if legal is None else legal.astype(jnp.bool_)
            terminal = getattr(out, "terminal", None)
            terminal = (jnp.zeros((b,), jnp.bool_) if terminal is None
                        else terminal.astype(jnp.bool_))
            return (out.action_logits.astype(jnp.float32), legal, finite_or_zero(out.value),
                    finite_or_zero(out.reward), finite_or_zero(out.discount), terminal, state,
                    self._hash(out, "state_hash", "chance_recurrent_fn", b))

        decision_out = jax.lax.cond(jnp.any(need_decision), call_decision,
                                    lambda: _zeros_like_shapes(jax.eval_shape(call_decision)))
        chance_out = jax.lax.cond(jnp.any(need_chance), call_chance,
                                  lambda: _zeros_like_shapes(jax.eval_shape(call_chance)))
        chance_logits, afterstate_value, afterstate, afterstate_hash = decision_out
        action_logits, legal, value, reward, discount, terminal, state, state_hash = chance_out

        outcome_prior, outcome_legal = prior_and_legal(chance_logits,
                                                       jnp.ones((b, c), jnp.bool_))
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
            state_hash=(None if self.graph is None else
                        jnp.where(from_decision[:, None], afterstate_hash, state_hash)),
        )
        calls = ModelCalls(decision=jnp.any(need_decision).astype(jnp.int32),
                           chance=jnp.any(need_chance).astype(jnp.int32))
        return leaf, calls

    def initial_counts(self) -> ModelCalls:
        return ModelCalls(jnp.int32(0), jnp.int32(0))

    def _hash(self, output: Any, field: str, what: str, batch_size: int) -> jax.Array:
        """``[B, 2]`` uint32 hash ``output.field`` (graph search), else zeros."""
        if self.graph is None:
            return jnp.zeros((batch_size, 2), jnp.uint32)
        value = getattr(output, field, None)
        if value is None:
            raise ValueError(f"graph search over chance nodes needs {what} output "
                             f".{field} ([B, 2] uint32), got None.")
        validation.check_hash(f"{what} output .{field}", value, batch_size)
        if field == "afterstate_hash":
            value = value ^ jnp.asarray([0, AFTERSTATE_SALT], jnp.uint32)
        return value


# XORed into an afterstate hash's second word: a state and an afterstate of equal
# hashes (e.g. a board before and after a move that changes nothing) stay apart.
AFTERSTATE_SALT = 0x9E3779B9


def _where_tree(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    def pick(x, y):
        return jnp.where(pred.reshape(pred.shape + (1,) * (x.ndim - 1)), x, y)
    return jax.tree.map(pick, on_true, on_false)


# ------------------------------------------------------------------ backup


def expectation_backup(tree: Tree, walk: Walk) -> Tree:
    """Bottom-up along each path (``[B]`` records): count the edge taken, add a
    visit, and recompute the node from its children: chance nodes
    ``Σ p Q + (1 - Σ p) U`` over expanded outcomes, decision nodes
    ``(U + Σ N(a) Q(a)) / (1 + Σ N(a))``; terminal nodes keep ``U``. O(B * W) per
    depth step."""
    kinds = is_decision_node(tree)

    def body(state: _RecomputeState) -> _RecomputeState:
        on_path = state.depth < walk.num_edges
        node = walk.path_nodes[:, state.depth]
        action = walk.path_actions[:, state.depth]
        edge_visits = row_add(state.edge_visits, (node, action), on_path.astype(jnp.int32))
        children = gather_rows(tree.children_index, node)
        has_child = children >= 0
        q = edge_qvalues(tree.replace(node_values=state.node_values), node, children)
        raw = row_take(tree.raw_values, node)
        counts = jnp.where(has_child, gather_rows(edge_visits, node), 0).astype(jnp.float32)
        mean = (raw + jnp.sum(counts * q, axis=-1)) / (1.0 + jnp.sum(counts, axis=-1))
        prior = jnp.where(has_child, gather_rows(tree.children_prior, node), 0.0)
        expectation = jnp.sum(prior * q, axis=-1) + (1.0 - jnp.sum(prior, axis=-1)) * raw
        new_value = jnp.where(row_take(kinds, node), mean, expectation)
        new_value = jnp.where(row_take(tree.node_terminal, node), raw, new_value)
        old_value = row_take(state.node_values, node)
        count = row_take(state.node_visits, node)
        return _RecomputeState(
            depth=state.depth - 1,
            node_visits=row_set(state.node_visits, node, count + on_path.astype(jnp.int32)),
            node_values=row_set(state.node_values, node,
                                jnp.where(on_path, new_value, old_value)),
            edge_visits=edge_visits)

    init = _RecomputeState(jnp.max(walk.num_edges) - 1, tree.node_visits, tree.node_values,
                           tree.edge_visits)
    final = jax.lax.while_loop(lambda s: s.depth >= 0, body, init)
    return tree.replace(node_visits=final.node_visits, node_values=final.node_values,
                        edge_visits=final.edge_visits)


def store_and_backup_expectation(tree: Tree, walks: Walk, leaves: NodeData,
                                 after_walk: Callable | None) -> Tree:
    """The engine's ``Backup`` for ``chance_backup="expectation"``: the leaves are
    stored as in tree mode, then each walk's path is recomputed in turn
    (:func:`expectation_backup`) and the extensions' hook runs after it."""
    tree, _ = store_leaves(tree, walks, leaves)

    def one(k, tree):
        walk = walks.one(k)
        tree = expectation_backup(tree, walk)
        return tree if after_walk is None else after_walk(tree, walk)

    if walks.num_walks == 1:
        return one(0, tree)
    return jax.lax.fori_loop(0, walks.num_walks, one, tree)


# ------------------------------------------------------------------ search


def _stochastic_root(root: Any, params: Any, rng_key: jax.Array,
                     decision_recurrent_fn: RecurrentFn) -> tuple[Any, ChanceLayout]:
    """The root as a width-``W`` ``RootFnOutput`` whose embedding is a
    :class:`StochasticEmbedding`; ``C`` is read from the shape of
    ``decision_recurrent_fn``'s output (``jax.eval_shape``: no call is made)."""
    from jaxpuct.types import RootFnOutput

    batch_size, num_actions = validation.check_root(root)
    action = jnp.zeros((batch_size,), jnp.int32)
    out_shape, after_shape = _unpack("decision_recurrent_fn", jax.eval_shape(
        lambda e: decision_recurrent_fn(params, rng_key, action, e), root.embedding))
    num_outcomes = _check_decision_output(out_shape, batch_size)
    layout = ChanceLayout(num_actions, num_outcomes)
    legal = getattr(root, "legal_action_mask", None)
    legal = (jnp.ones((batch_size, num_actions), jnp.bool_) if legal is None
             else legal.astype(jnp.bool_))
    wide = RootFnOutput(
        prior_logits=_pad(root.prior_logits.astype(jnp.float32), layout.width, -jnp.inf),
        value=root.value,
        embedding=StochasticEmbedding(state=root.embedding,
                                      afterstate=_zeros_like_shapes(after_shape),
                                      is_decision=jnp.ones((batch_size,), jnp.bool_)),
        legal_action_mask=_pad(legal, layout.width, False),
        state_hash=getattr(root, "state_hash", None))
    return wide, layout


class _Call(NamedTuple):
    """The engine keywords of a stochastic search (static)."""

    max_depth: int | None
    max_nodes: int | None
    selection: Any
    chance_backup: str
    graph: Any
    leaves_per_step: int
    virtual_loss: VirtualLoss | None
    solver: Any
    second_moment: bool
    early_stop: Any = False
    chance_ties: ChanceTies = "first"


def _stochastic_call(params: Any, rng_key: jax.Array, root: Any, functions: tuple,
                     num_simulations: int, invalid_actions: jax.Array | None, call: _Call,
                     tree: Tree | None, noise: Any, root_prior: jax.Array | None,
                     decision_rule: Callable[[frame.Prepared], SelectionRule] | None = None,
                     ) -> tuple[Tree, ModelCalls, frame.Prepared]:
    """The frame of the stochastic policies and :func:`stochastic_search`:
    ``functions`` is ``(decision_recurrent_fn, chance_recurrent_fn)``; the
    ``[B, A]`` arguments are checked and padded to the tree's width ``W``.
    ``decision_rule(prepared)``: the decision nodes' rule, made from the prepared
    call (a Gumbel root); default ``call.selection``."""
    decision_recurrent_fn, chance_recurrent_fn = functions
    validation.check_choice("chance_backup", call.chance_backup, _CHANCE_BACKUPS)
    validation.check_choice("chance_ties", call.chance_ties, _CHANCE_TIES)
    validation.check_int("num_simulations", num_simulations, 1)
    validation.check_instance("graph", call.graph, GraphConfig, allow_none=True)
    if call.graph is not None and call.graph.hash_fn is not None:
        raise ValueError(
            "GraphConfig.hash_fn is not supported with chance nodes: give the hashes in "
            "the outputs (root.state_hash, DecisionRecurrentFnOutput.afterstate_hash, "
            "ChanceRecurrentFnOutput.state_hash), so states and afterstates are told apart.")
    if call.graph is not None and call.chance_backup == "expectation":
        raise ValueError(
            "chance_backup='expectation' is not supported with graph search: a graph's "
            "backup recomputes every node from its children's visit-weighted values. Use "
            "chance_backup='visits' with graph=.")
    second_moment = call.second_moment or frame.needs_second_moment(call.selection)
    if second_moment and call.chance_backup == "expectation":
        raise ValueError(
            "chance_backup='expectation' cannot keep the second moment that "
            "final_move='lcb' or PUCTConfig(utility_stdev_scale > 0) read (it recomputes "
            "values from the children, not from returns): use chance_backup='visits'.")
    if tree is None:
        batch_size = validation.check_root(root)[0]
        shared_key = validation.split_keys(rng_key, batch_size)[0]
        wide, layout = _stochastic_root(root, params, shared_key, decision_recurrent_fn)
        capacity = frame.capacity(None, call.max_nodes, num_simulations)
    else:
        validation.check_tree_object("tree", tree)
        if tree.chance is None:
            raise ValueError(
                "tree must have chance nodes (built by stochastic_policy or "
                f"stochastic_search), got a {getattr(tree, 'kind', type(tree).__name__)} "
                "tree.")
        wide, layout, batch_size, capacity = None, tree.chance, tree.batch_size, tree.max_nodes
        if root is not None:
            validation.check_shape("root.prior_logits", root.prior_logits,
                                   (batch_size, layout.num_actions))
    narrow = (batch_size, layout.num_actions)
    if invalid_actions is not None:
        validation.check_mask("invalid_actions", invalid_actions, narrow)
        invalid_actions = _pad(invalid_actions.astype(jnp.bool_), layout.width, True)
    if root_prior is not None:
        validation.check_shape("root_prior", root_prior, narrow)
        root_prior = _pad(root_prior.astype(jnp.float32), layout.width, 0.0)
    backup = store_and_backup_expectation if call.chance_backup == "expectation" else None
    options = frame.engine_options(num_simulations, call.max_depth, capacity,
                                   leaves_per_step=call.leaves_per_step,
                                   virtual_loss=call.virtual_loss, solver=call.solver,
                                   second_moment=second_moment, backup=backup,
                                   tree_bounds=frame.needs_tree_bounds(call.selection),
                                   early_stop=call.early_stop)
    prepared = frame.prepare(wide, rng_key, num_simulations, invalid_actions, options,
                             tree=tree, max_nodes=call.max_nodes, graph=call.graph,
                             noise=noise, root_prior=root_prior, chance=layout)
    selection = call.selection if decision_rule is None else decision_rule(prepared)
    order = (chance_order(prepared.keys.elements, layout.width)
             if call.chance_ties == "shared" else None)
    rule = stochastic_rule(frame.selection_rule(selection, options), call.chance_ties, order)
    expander = ChanceExpander(decision_recurrent_fn, chance_recurrent_fn, layout,
                              prepared.tree.graph)
    search_tree, calls = frame.search(params, prepared, expander, rule, options)
    return search_tree, calls, prepared


def stochastic_search(
    params: Any,
    rng_key: jax.Array,
    root: Any,
    decision_recurrent_fn: RecurrentFn,
    chance_recurrent_fn: RecurrentFn,
    num_simulations: int,
    *,
    max_depth: int | None = None,
    max_nodes: int | None = None,
    selection: PUCTConfig | SelectionRule = PUCTConfig(),
    invalid_actions: jax.Array | None = None,
    root_prior: jax.Array | None = None,
    chance_backup: ChanceBackup = "visits",
    chance_ties: ChanceTies = "first",
    tree: Tree | None = None,
    graph: GraphConfig | None = None,
    leaves_per_step: int = 1,
    virtual_loss: VirtualLoss | None = None,
) -> tuple[Tree, ModelCalls]:
    """Runs ``num_simulations`` simulations of Stochastic MuZero search.

    Each simulation expands one node, of either kind (so ``S`` simulations reach
    about ``S / 2`` decision nodes below the root, as in mctx).

    Args:
      params: passed to both functions.
      rng_key: one key, or ``[B]`` keys (one per tree).
      root: ``RootFnOutput`` (jaxpuct's or mctx's): ``prior_logits [B, A]``,
        ``value [B]``, ``embedding [B, ...]``, optional ``legal_action_mask``;
        may be ``None`` with ``tree``.
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
      chance_ties: which of the outcomes tied under the quota rule a chance node
        takes: ``"first"`` (lowest index, mctx's), ``"random"`` (drawn at every
        visit) or ``"shared"`` (a random order per search, the same at every chance
        node) (module docstring).
      tree: a tree with chance nodes to continue, rooted at a decision node (from
        :func:`jaxpuct.subtree_path` over an action and its outcome).
      graph: ``GraphConfig`` for graph search over chance nodes (see
        :func:`stochastic_policy`).
      leaves_per_step: ``K`` walks per tree per step, kept apart by virtual loss
        (:mod:`jaxpuct.virtual_loss`); each function is still called at most once
        per step, on ``B * K`` rows.
      virtual_loss: how those walks keep apart (``K > 1`` only).

    Returns:
      ``(tree, calls)``: the ``Tree`` (edge width ``W = max(A, C)``, node kinds
      in ``tree.embeddings.is_decision``, its layout in ``tree.chance``) and the
      number of calls of each function.
    """
    call = _Call(max_depth=max_depth, max_nodes=max_nodes, selection=selection,
                 chance_backup=chance_backup, graph=graph, leaves_per_step=leaves_per_step,
                 virtual_loss=virtual_loss, solver=False, second_moment=False,
                 chance_ties=chance_ties)
    search_tree, calls, _ = _stochastic_call(
        params, rng_key, root, (decision_recurrent_fn, chance_recurrent_fn), num_simulations,
        invalid_actions, call, tree, None, root_prior)
    return search_tree, calls


def stochastic_policy(
    params: Any,
    rng_key: jax.Array,
    root: Any,
    decision_recurrent_fn: RecurrentFn,
    chance_recurrent_fn: RecurrentFn,
    num_simulations: int,
    invalid_actions: jax.Array | None = None,
    max_depth: int | None = None,
    *,
    max_nodes: int | None = None,
    selection: PUCTConfig | SelectionRule = PUCTConfig(),
    dirichlet_fraction: chex.Numeric = 0.25,
    dirichlet_alpha: chex.Numeric = 0.3,
    temperature: chex.Numeric = 1.0,
    chance_backup: ChanceBackup = "visits",
    chance_ties: ChanceTies = "first",
    tree: Tree | None = None,
    graph: GraphConfig | None = None,
    leaves_per_step: int = 1,
    virtual_loss: VirtualLoss | None = None,
    solver: Any = False,
    final_move: str = "visits",
    early_stop: bool | jax.Array = False,
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
        ``embedding [B, ...]``, optional ``legal_action_mask [B, A]``; may be
        ``None`` with ``tree``.
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
      chance_ties: ``"first"`` (mctx), ``"random"`` or ``"shared"``: which tied
        outcome the quota rule takes (see :func:`stochastic_search`).
      tree: continue a tree with chance nodes rooted at a decision node
        (:func:`jaxpuct.subtree_path` over ``[action, outcome]``).
      graph: ``GraphConfig`` for graph search over chance nodes: states and
        afterstates reached along different paths share one node. The hashes come
        from ``root.state_hash``, ``DecisionRecurrentFnOutput.afterstate_hash`` and
        ``ChanceRecurrentFnOutput.state_hash`` (``hash_fn`` is refused), and the
        backup must be ``"visits"`` (graph search's idempotent visit-weighted
        update, also at chance nodes).
      leaves_per_step: ``K`` walks per tree per step (see :func:`stochastic_search`).
      virtual_loss: how those walks keep apart (``K > 1`` only).
      solver: ``True`` or a ``SolverConfig``: the MCTS-solver through decision and
        chance nodes (:mod:`jaxpuct.solver`; a chance node is proven by
        expectimax over its outcome probabilities, or by agreement). Where the
        root is proven, or with ``temperature == 0``, the move is
        :func:`jaxpuct.solver.solver_action`. For values outside [-1, 1] give
        ``SolverConfig(value_bound=None)``.
      final_move: ``"visits"`` or ``"lcb"`` (KataGo's lower confidence bound over
        the root's edges; needs ``chance_backup="visits"``).
      early_stop: ``True`` or a ``[B]`` bool mask: stop a tree once its most
        visited root action is decided, as :func:`jaxpuct.alphazero_policy`
        does (the same caveats: exact for the move at ``temperature == 0``,
        truncated counts otherwise); refused with ``final_move="lcb"``.

    Returns:
      ``PolicyOutput(action [B], action_weights [B, A], search_tree)``; the tree's
      edge arrays have width ``max(A, C)``.
    """
    batch_size = frame.batch_size(root, tree)
    check_policy_numbers(batch_size, dirichlet_fraction, dirichlet_alpha, temperature)
    validation.check_choice("final_move", final_move, ("visits", "lcb"))
    frame.check_early_stop_move(early_stop, final_move)
    call = _Call(max_depth=max_depth, max_nodes=max_nodes, selection=selection,
                 chance_backup=chance_backup, graph=graph, leaves_per_step=leaves_per_step,
                 virtual_loss=virtual_loss, solver=solver,
                 second_moment=final_move == "lcb", early_stop=early_stop,
                 chance_ties=chance_ties)
    search_tree, _, prepared = _stochastic_call(
        params, rng_key, root, (decision_recurrent_fn, chance_recurrent_fn), num_simulations,
        invalid_actions, call, tree, (dirichlet_fraction, dirichlet_alpha, None), None)
    num_actions = present(search_tree.chance, "search_tree.chance").num_actions
    counts = search_tree.edge_visits[:, Tree.ROOT_INDEX, :num_actions]
    legal = prepared.legal[:, :num_actions]
    action_weights = visit_policy(counts, jnp.maximum(temperature, 0.0), legal)
    if final_move == "lcb":
        action = jnp.where(jnp.any(legal, axis=-1), lcb_action(search_tree), -1)
    else:
        action = choose_action(prepared.sample_keys, action_weights, temperature)
    if call.solver not in (False, None):
        greedy = jnp.broadcast_to(jnp.asarray(temperature) <= 0, action.shape)
        use_proof = solver_lib.root_proven(search_tree) | (greedy & (final_move == "visits"))
        action = jnp.where(use_proof & jnp.any(legal, axis=-1),
                           solver_lib.solver_action(search_tree), action)
    return PolicyOutput(action=action, action_weights=action_weights, search_tree=search_tree)


def stochastic_gumbel_policy(
    params: Any,
    rng_key: jax.Array,
    root: Any,
    decision_recurrent_fn: RecurrentFn,
    chance_recurrent_fn: RecurrentFn,
    num_simulations: int,
    invalid_actions: jax.Array | None = None,
    max_depth: int | None = None,
    *,
    max_num_considered_actions: int = 16,
    gumbel_scale: chex.Numeric = 1.0,
    qtransform: gumbel_lib.CompletedQConfig = gumbel_lib.CompletedQConfig(),
    gumbel: jax.Array | None = None,
    max_nodes: int | None = None,
    chance_backup: ChanceBackup = "visits",
    chance_ties: ChanceTies = "first",
    tree: Tree | None = None,
    graph: GraphConfig | None = None,
    solver: Any = False,
    final_move: str = "gumbel",
    early_stop: bool = False,
) -> PolicyOutput[Tree]:
    """Gumbel MuZero's root (Danihelka et al. 2022) over a search with chance nodes
    (Antonoglou et al. 2022): Gumbel-Top-``m`` and sequential halving at the root,
    Gumbel's deterministic interior rule at decision nodes, the quota rule at
    chance nodes, and the completed-Q improved policy as the target. mctx has no
    such policy (its Gumbel root runs over decision nodes only).

    The arguments are those of :func:`jaxpuct.gumbel_policy` (``gumbel``:
    ``[B, A]``) and :func:`stochastic_policy` (the two functions,
    ``chance_backup``, ``chance_ties``, ``tree``, ``graph``, ``solver``;
    ``early_stop`` is refused, as by :func:`jaxpuct.gumbel_policy`). ``σ``'s
    completed Q of a root action is the value of its chance node.

    Returns:
      ``PolicyOutput(action [B], action_weights [B, A] = improved policy,
      search_tree)``; the tree's edge arrays have width ``max(A, C)``.
    """
    gumbel_lib.check_gumbel_args(max_num_considered_actions, qtransform, final_move, 1, None)
    gumbel_lib.refuse_early_stop(early_stop)
    batch_size = frame.batch_size(root, tree)
    gumbel_lib.check_gumbel_scale(gumbel_scale, batch_size)
    call = _Call(max_depth=max_depth, max_nodes=max_nodes,
                 selection=PUCTConfig(), chance_backup=chance_backup, graph=graph,
                 leaves_per_step=1, virtual_loss=None, solver=solver,
                 second_moment=final_move == "lcb", chance_ties=chance_ties)
    roots: list[gumbel_lib.GumbelRoot] = []

    def decision_rule(prepared: frame.Prepared) -> SelectionRule:
        roots.append(gumbel_lib.GumbelRoot.begin(prepared, qtransform,
                                                 max_num_considered_actions,
                                                 num_simulations, gumbel, gumbel_scale))
        return SelectionRule(root=roots[0].rule(),
                             interior=gumbel_lib.gumbel_interior_rule(qtransform))

    search_tree, _, _ = _stochastic_call(
        params, rng_key, root, (decision_recurrent_fn, chance_recurrent_fn), num_simulations,
        invalid_actions, call, tree, None, None, decision_rule=decision_rule)
    action, weights = roots[0].move(search_tree, final_move, solver not in (False, None))
    num_actions = present(search_tree.chance, "search_tree.chance").num_actions
    return PolicyOutput(action=action, action_weights=weights[:, :num_actions],
                        search_tree=search_tree)

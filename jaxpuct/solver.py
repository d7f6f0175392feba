"""MCTS-solver: exact (proven) values backed up through the search tree or graph.

Winands, Björnsson & Saito, "Monte-Carlo Tree Search Solver", Computers and Games
2008: terminal values are exact, a node is a proven win as soon as one move leads to
a proven loss for the opponent, and a proven loss when every move leads to a proven
win for the opponent; selection avoids proven losses and the final move takes a
proven win. OpenSpiel's ``MCTSBot(solve=True)`` (``open_spiel/python/algorithms/
mcts.py``) generalises the rule to any outcomes: a decision node is proven when all
its children are, or when its best proven child reaches the maximum utility, and it
takes the best child's outcome; its move is chosen by the key ``(proven outcome, or
0 when unproven; visits; total reward)``.

Conventions (those of :mod:`jaxpuct.tree`): a value is from the view of the player to
move at its node; an edge's value is ``e(n, a) = r(n, a) + discount(n, a) * V(child)``
(``discount = -1`` in two-player zero-sum games, as in mctx); every node maximises
its edge values, which covers one- and two-player games alike.

The rule (:func:`prove`), for a node ``n`` and its LEGAL edges (``ILLEGAL`` edges,
including root actions made invalid, never block a proof):

* seeds: terminal nodes (and nodes with no legal move) are proven with their stored
  value, 0 plies to the end;
* ``n`` is proven when every legal edge has a proven child (exact minimax over the
  proven children), or -- the early cut-off -- when a proven child gives
  ``e >= value_bound``, the largest value any edge can have;
* its exact value is the largest ``e`` over its proven children.

Assumption behind the cut-off (stated in :class:`SolverConfig`): every edge value
``r + discount * V`` lies at or below ``value_bound`` (1 for games scored in
[-1, 1]). With ``value_bound=None`` there is no cut-off and a node is proven only
when all its legal children are; that needs no bound on the values at all.

Storage: ``Tree.proof_plies [B, N]`` int32, ``-1`` for an unproven node, else the
length in plies of the proof found (0 at a terminal node). A proven node's exact
value is written into ``Tree.node_values``, so every reader of ``Q(n, a)`` (the
selection rule, the summary, the final move) sees it without knowing about the
solver. Plies: a proven node with a positive value takes the shortest proof among
its value-achieving proven children, one with a value <= 0 the longest -- so the
final move prefers the quickest win and the slowest loss (CrazyAra's solver does the
same, after losing on time in forced mates). With the cut-off only some children are
proven, so a win's plies are the shortest *found*, not always the shortest that
exists.

In the search (:class:`Solver`, an extension of the engine, :mod:`jaxpuct.extensions`):

* a walk stops at a proven node and backs up its stored (exact) value, like a
  terminal node; a tree whose root is proven takes no-op steps while the others in
  the batch go on, and the simulation loop ends when every root is proven;
* after each backup, :func:`backup_proofs` re-examines the path bottom-up while the
  node below was just proven: O(A) per level, and zero levels in the common case
  where the leaf is not proven, so a simulation stays O(depth);
* the PUCT rule (:func:`solver_rule`) never enters a dominated proven edge -- one
  with ``e <= -value_bound`` (a proven loss) or ``e`` below the best proven edge of
  the node -- unless every legal edge is such (then the unmasked scores decide).
  Another proven edge scores its exact value without the exploration term, as in
  OpenSpiel, so the walks go to the unproven moves a proof still needs unless those
  look worse than the proven value;
* graph search proves through transpositions: a proven node reached through a new
  parent makes the walk stop there, and the proof pass checks that parent. A proof
  in graph mode assumes, as graph search itself does, that a state's value does not
  depend on the path to it (no graph-history interaction).

Chance nodes (:mod:`jaxpuct.stochastic`): a chance node is proven once every
possible outcome is, by expectimax over the stored outcome probabilities
(:func:`prove_expectation`, exact when they are) or, with
``SolverConfig(chance_rule="agreement")``, only when all outcomes agree
(:func:`prove_chance`, OpenSpiel's rule, which needs no probabilities). The
cut-off at ``value_bound`` applies to decision nodes only.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal, NamedTuple

import jax
import jax.numpy as jnp

from jaxpuct.extensions import Extension
from jaxpuct.indexing import row_set, row_take
from jaxpuct.numerics import gather_rows
from jaxpuct.selection import (
    PUCTConfig,
    SelectionRule,
    best_action,
    node_scores,
    puct_qvalues,
    tree_bounds,
)
from jaxpuct.tree import ILLEGAL, Tree, edge_qvalues, present

UNPROVEN = -1  # proof_plies of a node with no proof


@dataclasses.dataclass(frozen=True)
class SolverConfig:
    """MCTS-solver options (static; hashable).

    Attributes:
      value_bound: the largest value an edge ``r + discount * V`` can take (1 for
        win/draw/loss games scored +1/0/-1). A node is proven as soon as one proven
        child reaches it, and proven edges at or below ``-value_bound`` (proven
        losses) are never selected. ``None``: no cut-off -- a node is proven only
        when all its legal children are -- which is right for any values.
      chance_rule: how a chance node (:mod:`jaxpuct.stochastic`) is proven, once
        every possible outcome (probability > 0) is: ``"expectation"``
        (expectimax: the probability-weighted mean of the outcomes' exact
        values; exact when the chance probabilities are, as in dice or 2048's
        spawns) or ``"agreement"`` (OpenSpiel's ``MCTSBot``: only when every
        outcome has the same value, which needs no probabilities at all -- the
        choice for learned chance models).
    """

    value_bound: float | None = 1.0
    chance_rule: Literal["expectation", "agreement"] = "expectation"

    def __post_init__(self):
        if self.chance_rule not in ("expectation", "agreement"):
            raise ValueError("SolverConfig.chance_rule must be 'expectation' or 'agreement', "
                             f"got {self.chance_rule!r}.")
        bound = self.value_bound
        if bound is not None and not (isinstance(bound, (int, float)) and bound > 0
                                      and bound != float("inf")):
            raise ValueError("SolverConfig.value_bound must be a finite number > 0 or None, "
                             f"got {bound!r}.")


def solver_config(solver: Any) -> SolverConfig | None:
    """``solver`` (``bool``, ``None`` or a ``SolverConfig``) as a config or ``None``."""
    if solver is None or solver is False:
        return None
    if solver is True:
        return SolverConfig()
    if isinstance(solver, SolverConfig):
        return solver
    raise ValueError("solver must be a bool or a SolverConfig, got "
                     f"{solver!r} of type {type(solver).__name__}.")


class Proof(NamedTuple):
    """The outcome of a proof step: ``proven [B]`` bool, ``value [B]`` float32 (the
    exact value where proven), ``plies [B]`` int32 (``UNPROVEN`` where not)."""

    proven: jax.Array
    value: jax.Array
    plies: jax.Array


def prove(legal: jax.Array, child_proven: jax.Array, edge_value: jax.Array,
          child_plies: jax.Array, value_bound: float | None) -> Proof:
    """The solver's rule for decision nodes (see the module docstring).

    Args:
      legal: ``[B, A]`` bool, the node's legal edges.
      child_proven: ``[B, A]`` bool, the edge has a proven child.
      edge_value: ``[B, A]`` ``r + discount * V(child)``; read where ``child_proven``.
      child_plies: ``[B, A]`` int32 plies of the children's proofs.
      value_bound: see :class:`SolverConfig`.

    Returns:
      ``Proof`` of ``[B]`` arrays.
    """
    child_proven = child_proven & legal
    proven_value = jnp.where(child_proven, edge_value, -jnp.inf)
    best = jnp.max(proven_value, axis=-1)
    all_proven = jnp.all(child_proven | ~legal, axis=-1) & jnp.any(legal, axis=-1)
    proven = all_proven
    if value_bound is not None:
        proven = proven | (best >= value_bound)
    achieving = child_proven & (edge_value == best[:, None])
    plies = child_plies + 1
    shortest = jnp.min(jnp.where(achieving, plies, jnp.iinfo(jnp.int32).max), axis=-1)
    longest = jnp.max(jnp.where(achieving, plies, 0), axis=-1)
    plies = jnp.where(best > 0, shortest, longest)
    return Proof(proven=proven, value=jnp.where(proven, best, 0.0).astype(jnp.float32),
                 plies=jnp.where(proven, plies, UNPROVEN).astype(jnp.int32))


def prove_chance(child_proven: jax.Array, edge_value: jax.Array, child_plies: jax.Array,
                 possible: jax.Array) -> Proof:
    """``chance_rule="agreement"`` at a chance node: proven only when every possible
    outcome is proven and all give the same value (OpenSpiel ``MCTSBot``). Plies:
    the longest outcome's. Inputs ``[B, C]`` (``possible``: outcomes with
    probability > 0); returns ``Proof`` of ``[B]`` arrays."""
    child_proven = child_proven & possible
    hi = jnp.max(jnp.where(child_proven, edge_value, -jnp.inf), axis=-1)
    lo = jnp.min(jnp.where(child_proven, edge_value, jnp.inf), axis=-1)
    proven = (jnp.all(child_proven | ~possible, axis=-1) & jnp.any(possible, axis=-1)
              & (hi == lo))
    plies = jnp.max(jnp.where(child_proven, child_plies + 1, 0), axis=-1)
    return Proof(proven=proven, value=jnp.where(proven, hi, 0.0).astype(jnp.float32),
                 plies=jnp.where(proven, plies, UNPROVEN).astype(jnp.int32))


def prove_expectation(child_proven: jax.Array, edge_value: jax.Array,
                      child_plies: jax.Array, probs: jax.Array) -> Proof:
    """``chance_rule="expectation"`` at a chance node (expectimax): proven when every
    possible outcome (``probs > 0``) is proven; its value is ``Σ p(c) e(c) / Σ p(c)``
    over them; plies: the longest outcome's. Inputs ``[B, C]``; returns ``Proof``
    of ``[B]`` arrays."""
    possible = probs > 0
    child_proven = child_proven & possible
    proven = jnp.all(child_proven | ~possible, axis=-1) & jnp.any(possible, axis=-1)
    weights = jnp.where(possible, probs, 0.0)
    total = jnp.maximum(jnp.sum(weights, axis=-1), jnp.finfo(jnp.float32).tiny)
    value = jnp.sum(jnp.where(child_proven, weights * edge_value, 0.0), axis=-1) / total
    plies = jnp.max(jnp.where(child_proven, child_plies + 1, 0), axis=-1)
    return Proof(proven=proven, value=jnp.where(proven, value, 0.0).astype(jnp.float32),
                 plies=jnp.where(proven, plies, UNPROVEN).astype(jnp.int32))


def with_proofs(tree: Tree) -> Tree:
    """``tree`` with ``proof_plies [B, N]`` (unchanged if it has them): its used
    terminal nodes proven in 0 plies, every other node unproven."""
    if tree.proof_plies is not None:
        return tree
    used = jnp.arange(tree.max_nodes)[None, :] < tree.num_nodes[:, None]
    return tree.replace(proof_plies=jnp.where(used & tree.node_terminal, 0, UNPROVEN)
                        .astype(jnp.int32))


def node_edges(tree: Tree, node: jax.Array, node_values: jax.Array | None = None
               ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(legal, child_proven, edge_value, child_plies)``, each ``[B, A]``, of the
    edges of ``node [B]`` (``node_values``: the values to read, default the tree's)."""
    children = gather_rows(tree.children_index, node)
    view = tree if node_values is None else tree.replace(node_values=node_values)
    edge_value = edge_qvalues(view, node, children)
    child_plies = row_take(present(tree.proof_plies, "tree.proof_plies"),
                           jnp.maximum(children, 0))
    child_proven = (children >= 0) & (child_plies >= 0)
    return children != ILLEGAL, child_proven, edge_value, child_plies


def prove_nodes(tree: Tree, node: jax.Array, config: SolverConfig,
                node_values: jax.Array | None = None) -> Proof:
    """:func:`prove` at ``node [B]`` of each tree, from its children's proofs; in a
    tree with chance nodes, the chance rule of ``config`` at chance nodes."""
    legal, child_proven, edge_value, child_plies = node_edges(tree, node, node_values)
    decision = prove(legal, child_proven, edge_value, child_plies, config.value_bound)
    if tree.chance is None:
        return decision
    probs = jnp.where(legal, gather_rows(tree.children_prior, node), 0.0)
    if config.chance_rule == "expectation":
        chance = prove_expectation(child_proven, edge_value, child_plies, probs)
    else:
        chance = prove_chance(child_proven, edge_value, child_plies, probs > 0)
    kind = gather_rows(tree.embeddings.is_decision, node)
    return Proof(*(jnp.where(kind, d, c) for d, c in zip(decision, chance, strict=True)))


class _ProofState(NamedTuple):
    """The proof pass's loop carry."""

    depth: jax.Array  # scalar int32, counts down
    pending: jax.Array  # [B] the node below ``depth`` on the path was just proven
    node_values: jax.Array  # [B, N]
    proof_plies: jax.Array  # [B, N]


def backup_proofs(tree: Tree, walk: Any, config: SolverConfig, full: bool = False) -> Tree:
    """Re-examines each walk's path bottom-up after its backup and records new proofs.

    ``walk`` is a :class:`jaxpuct.search.Walk` (``path_nodes [B, D + 1]``,
    ``path_actions [B, D]``, ``num_edges [B]``). The pass starts when the node the
    walk ended on (its new leaf, a transposition it was linked to, or the proven or
    terminal node it stopped at) is proven, and climbs while each level gets proven:
    ``O(B * A)`` per level, and no level at all when no tree's leaf is proven.
    ``full`` re-examines every path node that is proven already as well (the
    multi-leaf engine needs it: a walk selected before an earlier walk of the same
    step proved a node on its path, and its backup then folded a return into that
    node's stored exact value, which this restores).
    """
    proof_plies = present(tree.proof_plies, "tree.proof_plies")
    parent, action = walk.leaf_edge()
    leaf = row_take(tree.children_index, parent, action)
    leaf_proven = (walk.num_edges > 0) & (leaf >= 0) & (
        row_take(proof_plies, jnp.maximum(leaf, 0)) >= 0)
    path_proven = jnp.zeros_like(leaf_proven)
    if full:
        on_path = jnp.arange(walk.path_nodes.shape[1])[None, :] < walk.num_edges[:, None]
        path_proven = jnp.any(on_path & (row_take(proof_plies, walk.path_nodes) >= 0),
                              axis=-1)

    def cond(state: _ProofState):
        return (state.depth >= 0) & (jnp.any(state.pending) | full)

    def body(state: _ProofState) -> _ProofState:
        depth = state.depth
        node = walk.path_nodes[:, depth]
        on_path = depth < walk.num_edges
        was_proven = row_take(state.proof_plies, node) >= 0
        check = on_path & (state.pending | (was_proven if full else False))
        view = tree.replace(proof_plies=state.proof_plies)
        proof = prove_nodes(view, node, config, state.node_values)
        write = check & proof.proven
        target = jnp.where(write, node, tree.max_nodes)
        values = row_set(state.node_values, target, proof.value)
        plies = row_set(state.proof_plies, target, proof.plies)
        pending = jnp.where(on_path, write, state.pending)
        return _ProofState(depth - 1, pending, values, plies)

    start = jnp.max(walk.num_edges) - 1
    if full:
        start = jnp.where(jnp.any(leaf_proven | path_proven), start, -1)
    init = _ProofState(start, leaf_proven, tree.node_values, proof_plies)
    final = jax.lax.while_loop(cond, body, init)
    return tree.replace(node_values=final.node_values, proof_plies=final.proof_plies)


def reprove_root(tree: Tree, config: SolverConfig) -> Tree:
    """Recomputes the roots' proofs from their children (after the root's legal
    edges changed, e.g. ``invalid_actions`` on a reused tree): ``O(B * A)``. A root
    that loses its proof keeps its value as a search estimate."""
    root = jnp.full((tree.batch_size,), Tree.ROOT_INDEX, jnp.int32)
    proof = prove_nodes(tree, root, config)
    terminal = tree.node_terminal[:, Tree.ROOT_INDEX]
    plies = jnp.where(terminal, 0, proof.plies)
    values = jnp.where(proof.proven & ~terminal, proof.value,
                       tree.node_values[:, Tree.ROOT_INDEX])
    return tree.replace(
        proof_plies=present(tree.proof_plies, "tree.proof_plies").at[:, Tree.ROOT_INDEX].set(plies),
        node_values=tree.node_values.at[:, Tree.ROOT_INDEX].set(values))


def dominated_edges(legal: jax.Array, child_proven: jax.Array, edge_value: jax.Array,
                    value_bound: float | None) -> jax.Array:
    """``[B, A]`` bool: proven edges no search should enter -- proven losses
    (``e <= -value_bound``) and edges worse than the node's best proven edge --
    or none at all in a row where every legal edge is such. Inputs ``[B, A]``."""
    child_proven = child_proven & legal
    best = jnp.max(jnp.where(child_proven, edge_value, -jnp.inf), axis=-1, keepdims=True)
    worse = edge_value < best
    if value_bound is not None:
        worse = worse | (edge_value <= -value_bound)
    dominated = child_proven & worse
    everything = jnp.all(dominated | ~legal, axis=-1, keepdims=True)
    return dominated & ~everything


def exploitation_scores(tree: Tree, config: PUCTConfig, node: jax.Array, is_root: bool
                        ) -> jax.Array:
    """``[B, A]`` the Q part of the PUCT score at ``node [B]`` (completed and, if the
    rule says so, normalised as :func:`jaxpuct.selection.node_scores` does), without
    the exploration term."""
    children = gather_rows(tree.children_index, node)
    visits = gather_rows(tree.edge_visits, node)
    prior = tree.root_prior if is_root else gather_rows(tree.children_prior, node)
    return puct_qvalues(config, prior, visits, edge_qvalues(tree, node, children),
                             (children >= 0) & (visits > 0), gather_rows(tree.node_values, node),
                             jnp.asarray(is_root), tree_bounds(tree, config))


def solver_rule(config: PUCTConfig, solver: SolverConfig) -> SelectionRule:
    """The PUCT rule of ``config`` where a proven edge scores its exact value with no
    exploration bonus (OpenSpiel's ``puct_value`` of a solved child: visiting it again
    teaches nothing, so the unproven moves get the walks unless their ``Q + U`` is
    below it) and :func:`dominated_edges` are masked out (``-inf``)."""

    def choose(is_root: bool):
        def action(tree, node, depth, rng_keys):
            del depth
            scores = node_scores(tree, config, node, is_root, rng_keys)
            legal, child_proven, edge_value, _ = node_edges(tree, node)
            exact = exploitation_scores(tree, config, node, is_root)
            scores = jnp.where(child_proven & legal, exact, scores)
            skip = dominated_edges(legal, child_proven, edge_value, solver.value_bound)
            return best_action(config, jnp.where(skip, -jnp.inf, scores), rng_keys)
        return action

    return SelectionRule(root=choose(True), interior=choose(False))


def best_child(legal: jax.Array, child_proven: jax.Array, edge_value: jax.Array,
               child_plies: jax.Array, visits: jax.Array, qvalues: jax.Array
               ) -> jax.Array:
    """``[B]`` int32 OpenSpiel's best child with plies: the legal action with the
    largest key ``(e if proven else 0; fewer plies for a proven e > 0, more plies
    for a proven e < 0; visits; Q)``, lowest index on ties; ``-1`` in a row with no
    legal action. Inputs ``[B, A]``; ``qvalues`` stands in for OpenSpiel's total
    reward (visits are equal at that point of the key)."""
    proven = child_proven & legal
    outcome = jnp.where(proven, edge_value, 0.0)
    prefer_short = proven & (edge_value > 0)
    prefer_long = proven & (edge_value < 0)
    plies = child_plies.astype(jnp.float32)
    keys = (outcome, jnp.where(prefer_short, -plies, jnp.where(prefer_long, plies, 0.0)),
            visits.astype(jnp.float32), qvalues)
    candidates = legal
    for key in keys:
        top = jnp.max(jnp.where(candidates, key, -jnp.inf), axis=-1, keepdims=True)
        candidates = candidates & (key == top)
    action = jnp.argmax(candidates, axis=-1).astype(jnp.int32)
    return jnp.where(jnp.any(legal, axis=-1), action, -1)


def root_edges(tree: Tree) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """:func:`node_edges` at the roots."""
    return node_edges(tree, jnp.full((tree.batch_size,), Tree.ROOT_INDEX, jnp.int32))


def solver_action(tree: Tree) -> jax.Array:
    """``[B]`` :func:`best_child` of each root (needs ``tree.proof_plies``)."""
    legal, child_proven, edge_value, child_plies = root_edges(tree)
    visits = tree.edge_visits[:, Tree.ROOT_INDEX]
    return best_child(legal, child_proven, edge_value, child_plies, visits, edge_value)


def root_proven(tree: Tree) -> jax.Array:
    """``[B]`` bool: the root is proven (``False`` everywhere for a tree without
    proofs)."""
    if tree.proof_plies is None:
        return jnp.zeros((tree.batch_size,), jnp.bool_)
    return tree.proof_plies[:, Tree.ROOT_INDEX] >= 0


def pruned_root_visits(tree: Tree, config: SolverConfig) -> jax.Array:
    """``[B, A]`` root visit counts with the dominated proven edges set to 0 (all
    of them kept in a row where that would leave no visit)."""
    legal, child_proven, edge_value, _ = root_edges(tree)
    visits = tree.edge_visits[:, Tree.ROOT_INDEX]
    pruned = jnp.where(dominated_edges(legal, child_proven, edge_value, config.value_bound),
                       0, visits)
    return jnp.where(jnp.any(pruned > 0, axis=-1, keepdims=True), pruned, visits)


@dataclasses.dataclass(frozen=True)
class Solver(Extension):
    """The MCTS-solver as an engine extension (:mod:`jaxpuct.extensions`).

    * ``prepare``: the tree stores ``proof_plies``; a continued tree's root is
      proven again under its new legal edges;
    * ``wrap_rule``: a ``PUCTConfig`` rule becomes :func:`solver_rule` (a
      ``SelectionRule`` is used as given: it sees exact values on proven edges);
    * ``stop``: walks do not enter proven nodes (their exact value is backed up);
    * ``after_walk``: :func:`backup_proofs` (re-examining proven path nodes when
      the walk is one of several of a step);
    * ``done``: a tree whose root is proven needs no more simulations.
    """

    config: SolverConfig = SolverConfig()
    keeps_proofs: ClassVar[bool] = True

    def prepare(self, tree: Tree, continued: bool) -> Tree:
        tree = with_proofs(tree)
        return reprove_root(tree, self.config) if continued else tree

    def wrap_rule(self, rule: SelectionRule, selection: Any) -> SelectionRule:
        if isinstance(selection, PUCTConfig):
            return solver_rule(selection, self.config)
        return rule

    def stop(self, tree: Tree, node: jax.Array) -> jax.Array:
        return gather_rows(present(tree.proof_plies, "tree.proof_plies"), node) >= 0

    def after_walk(self, tree: Tree, walk: Any, several: bool) -> Tree:
        # several: an earlier walk of the step may have proven a node on this path.
        return backup_proofs(tree, walk, self.config, full=several)

    def done(self, tree: Tree) -> jax.Array:
        return root_proven(tree)


__all__ = ["Proof", "Solver", "SolverConfig", "UNPROVEN", "backup_proofs", "best_child",
           "dominated_edges", "prove", "prove_chance", "prove_expectation", "prove_nodes",
           "pruned_root_visits", "reprove_root", "root_proven", "solver_action",
           "solver_config", "solver_rule", "with_proofs"]

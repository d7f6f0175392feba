"""Batched PUCT search: select, expand, back up -- lockstep over the batch.

Each simulation walks every tree from its root to a leaf, evaluates all the
leaves with **one** call of ``recurrent_fn``, stores the new nodes and backs the
values up along the recorded paths.

Why it is fast: the walk and the backup are ``while_loop`` s over *depth* whose
carries hold only ``[B]`` and ``[B, D]`` arrays (the backup also carries the
three statistics arrays it scatters into, which XLA updates in place). Nothing
is ``vmap`` ped over the batch, so no loop turns into a select over whole
``[B, N, A]`` arrays, and a simulation costs O(B * depth * A), never
O(tree size). (mctx vmaps a ``while_loop`` that carries the tree, which is
where its time goes.)

The phases are separate functions: :func:`select` (the walk, with a root rule and
an interior rule, see :class:`jaxpuct.selection.SelectionRule`),
:func:`evaluate_leaves` (the one ``recurrent_fn`` call),
:func:`expand_tree` or :func:`jaxpuct.graph.add_leaves` (storage), and
:func:`backup` or :func:`backup_graph`.

Gradients: reverse-mode ``jax.grad`` through a search is unsupported (as in mctx):
the loops are ``lax.while_loop`` s, and JAX raises "Reverse-mode differentiation
does not work for lax.while_loop". Differentiate a loss on the search's outputs
under ``jax.lax.stop_gradient`` (the training targets), or pass
``jax.lax.stop_gradient(params)`` to the search; see docs/guide/your_network.md.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp

from jaxpuct import graph as graph_lib
from jaxpuct import solver as solver_lib
from jaxpuct import validation
from jaxpuct import virtual_loss as vl_lib
from jaxpuct.graph import GraphConfig
from jaxpuct.numerics import finite_or_zero, prior_and_legal
from jaxpuct.roots import build_tree, check_init_args, root_prior_and_legal
from jaxpuct.selection import PUCTConfig, SelectionRule, puct_rule
from jaxpuct.solver import SolverConfig
from jaxpuct.tree import ILLEGAL, NodeData, Tree, store_nodes, with_second_moment, write_nodes
from jaxpuct.types import RecurrentFn
from jaxpuct.virtual_loss import VirtualLoss


@chex.dataclass(frozen=True)
class Walk:
    """Where one simulation's walk ended, for every tree.

    Attributes:
      path_nodes: ``[B, D + 1]`` node at each depth (column 0 is the root).
      path_actions: ``[B, D]`` action taken at each depth.
      num_edges: ``[B]`` edges walked, the last one included (0: not searched).
      expand: ``[B]`` the last edge had no child: evaluate and store one.
    """

    path_nodes: chex.Array
    path_actions: chex.Array
    num_edges: chex.Array
    expand: chex.Array

    def leaf_edge(self) -> tuple[chex.Array, chex.Array]:
        """``(parent [B], action [B])`` of the last edge walked."""
        rows = jnp.arange(self.num_edges.shape[0])
        last = jnp.maximum(self.num_edges - 1, 0)
        return self.path_nodes[rows, last], self.path_actions[rows, last]


class _WalkState(NamedTuple):
    """The walk's loop carry: ``[B]`` and ``[B, D]`` arrays (and graph marks)."""

    depth: chex.Array  # scalar int32: edges walked so far
    node: chex.Array  # [B] current node
    active: chex.Array  # [B] still walking
    path_nodes: chex.Array  # [B, D + 1]
    path_actions: chex.Array  # [B, D]
    num_edges: chex.Array  # [B]
    expand: chex.Array  # [B]
    marks: chex.Array | None  # [B, N] graph search: simulation that last entered a node


class _SimulationState(NamedTuple):
    """The simulation loop's carry."""

    tree: Tree
    marks: chex.Array | None  # [B, N], graph search only
    path_nodes: chex.Array  # [B, D + 1], reused between simulations
    path_actions: chex.Array  # [B, D]


class _BackupState(NamedTuple):
    """Tree-mode backup carry: the three statistics arrays are updated in place."""

    depth: chex.Array  # scalar int32, counts down
    leaf_return: chex.Array  # [B] return seen from the node at ``depth``
    node_visits: chex.Array  # [B, N]
    node_values: chex.Array  # [B, N]
    edge_visits: chex.Array  # [B, N, A]
    node_sq_values: chex.Array | None  # [B, N] second moment, when stored


class _GraphBackupState(NamedTuple):
    """Graph-mode backup carry."""

    depth: chex.Array
    node_visits: chex.Array
    node_values: chex.Array
    edge_visits: chex.Array
    node_sq_values: chex.Array | None


def search(
    params: Any,
    rng_key: chex.PRNGKey,
    root: Any,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    *,
    max_depth: int | None = None,
    max_nodes: int | None = None,
    selection: PUCTConfig | SelectionRule = PUCTConfig(),
    invalid_actions: chex.Array | None = None,
    root_prior: chex.Array | None = None,
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
      max_nodes: node capacity (default ``num_simulations + 1``; ignored when
        ``tree`` is given). Each simulation stores at most one node, so a
        capacity below ``num_simulations + 1`` fills up (a ``UserWarning`` says
        so at trace time): new leaves are then still evaluated and backed up
        (their edge is counted as visited) but not stored, nothing is
        overwritten, and selection treats such an edge's Q as unvisited, which
        spreads visits where the tree could not grow. With tree reuse, give
        room for the inherited nodes too (e.g. ``2 * num_simulations``).
      selection: a ``PUCTConfig``, or a ``SelectionRule`` (a root rule and an
        interior rule).
      invalid_actions: optional ``[B, A]`` bool mask of root actions not to take.
      root_prior: optional ``[B, A]`` root prior to select with (noise).
      tree: optional tree to continue searching (simulations add to it);
        ``invalid_actions`` and ``root_prior`` then apply to its root (an
        action made invalid loses its subtree from the root's view).
      graph: ``GraphConfig`` for Monte-Carlo graph search (see
        ``jaxpuct.graph``), ``None`` for tree search. A walk that would re-enter
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
      virtual_loss: how the walks of one step keep apart (``K > 1`` only;
        default ``VirtualLoss()``: AlphaGo's value penalty with ``n_vl = 3``).
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
    solver = solver_lib.solver_config(solver)
    rule = check_selection(selection, solver)
    check_leaves_per_step(num_simulations, leaves_per_step, virtual_loss)
    tree, embedding_like = prepare_tree(root, num_simulations, max_nodes, invalid_actions,
                                        root_prior, tree, graph,
                                        second_moment=second_moment or needs_second_moment(
                                            selection), solver=solver)
    shared_key, element_keys = validation.split_keys(rng_key, tree.batch_size)
    return run_search(params, shared_key, element_keys, tree, recurrent_fn, num_simulations,
                      rule, max_depth, graph, embedding_like, leaves_per_step, virtual_loss,
                      solver=solver)


def needs_second_moment(selection: Any) -> bool:
    """Whether ``selection`` reads ``Tree.node_sq_values`` (a ``SelectionRule``
    may say so with a ``needs_second_moment`` attribute)."""
    return bool(getattr(selection, "needs_second_moment", False))


def check_leaves_per_step(num_simulations: int, leaves_per_step: int,
                          virtual_loss: VirtualLoss | None) -> None:
    """``leaves_per_step`` is an int >= 1 that divides ``num_simulations``."""
    validation.check_int("num_simulations", num_simulations, 1)
    validation.check_int("leaves_per_step", leaves_per_step, 1)
    validation.check_instance("virtual_loss", virtual_loss, VirtualLoss, allow_none=True)
    if num_simulations % leaves_per_step:
        raise ValueError(
            f"num_simulations must be a multiple of leaves_per_step: expected "
            f"num_simulations % leaves_per_step == 0, got {num_simulations} % "
            f"{leaves_per_step} == {num_simulations % leaves_per_step}.")


def check_selection(selection: Any, solver: SolverConfig | None = None) -> SelectionRule:
    """``selection`` as a ``SelectionRule`` (a ``PUCTConfig`` becomes its PUCT rule,
    with ``solver``: :func:`jaxpuct.solver.solver_rule`)."""
    if isinstance(selection, PUCTConfig):
        if solver is not None:
            return solver_lib.solver_rule(selection, solver)
        return puct_rule(selection)
    if isinstance(selection, SelectionRule):
        return selection
    raise ValueError("selection must be a PUCTConfig or a SelectionRule, got "
                     f"{selection!r} of type {type(selection).__name__}.")


def prepare_tree(
    root: Any,
    num_simulations: int,
    max_nodes: int | None,
    invalid_actions: chex.Array | None,
    root_prior: chex.Array | None,
    tree: Tree | None,
    graph: GraphConfig | None,
    root_prior_legal: tuple[chex.Array, chex.Array] | None = None,
    second_moment: bool = False,
    solver: SolverConfig | None = None,
) -> tuple[Tree, Any]:
    """Checks the search's arguments once and returns the tree to search and an
    embedding ``[B, ...]`` shaped like ``recurrent_fn``'s (to check it against).

    A new tree is built from ``root`` (``root_prior_legal``: its ``(prior,
    legal)`` when the caller computed them already); a given ``tree`` gets
    ``invalid_actions`` and ``root_prior`` applied to its root.
    ``second_moment``: store ``Tree.node_sq_values`` (see
    :func:`jaxpuct.tree.with_second_moment`). ``solver``: store the solver's proofs
    (a given tree's root is proven again under its new legal edges); without it a
    given tree's proofs are dropped.
    """
    continued = tree is not None
    tree, embedding_like = _prepare_tree(root, num_simulations, max_nodes, invalid_actions,
                                         root_prior, tree, graph, root_prior_legal)
    tree = with_second_moment(tree) if second_moment else tree
    if solver is None:
        return tree.replace(proof_plies=None), embedding_like
    tree = solver_lib.with_proofs(tree)
    return (solver_lib.reprove_root(tree, solver) if continued else tree), embedding_like


def _prepare_tree(root, num_simulations, max_nodes, invalid_actions, root_prior, tree, graph,
                  root_prior_legal):
    """:func:`prepare_tree` without the second moment."""
    validation.check_int("num_simulations", num_simulations, 1)
    validation.check_instance("graph", graph, GraphConfig, allow_none=True)
    if tree is None:
        if max_nodes is None:
            max_nodes = num_simulations + 1
        check_init_args(root, max_nodes, root_prior, invalid_actions, graph)
        if max_nodes < num_simulations + 1:
            warnings.warn(
                f"max_nodes={max_nodes} < num_simulations + 1 = {num_simulations + 1}: "
                "the tree fills up and later leaves are evaluated but not stored, which "
                "weakens the search. Give max_nodes >= num_simulations + 1 (more with "
                "tree reuse).", UserWarning, stacklevel=4)
        prior, legal = (root_prior_and_legal(root, invalid_actions)
                        if root_prior_legal is None else root_prior_legal)
        return (build_tree(root, prior, legal, max_nodes, root_prior, graph),
                root.embedding)
    validation.check_root_fits_tree(root, tree)
    shape = (tree.batch_size, tree.num_actions)
    if invalid_actions is not None:
        validation.check_shape("invalid_actions", invalid_actions, shape)
    if root_prior is not None:
        validation.check_shape("root_prior", root_prior, shape)
    if (graph is not None) != tree.is_graph:
        raise ValueError("graph must be given exactly when the tree was built for graph "
                         f"search: graph={graph!r}, but the tree is "
                         f"{'a graph' if tree.is_graph else 'not a graph'}.")
    embedding_like = jax.tree.map(lambda x: x[:, Tree.ROOT_INDEX], tree.embeddings)
    return restrict_root(tree, invalid_actions, root_prior), embedding_like


def run_search(
    params: Any,
    shared_key: chex.PRNGKey,
    element_keys: chex.Array,
    tree: Tree,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    rule: SelectionRule,
    max_depth: int | None,
    graph: GraphConfig | None,
    embedding_like: Any,
    leaves_per_step: int = 1,
    virtual_loss: VirtualLoss | None = None,
    force_multi: bool = False,
    solver: SolverConfig | None = None,
) -> Tree:
    """The simulation loop on checked arguments (see :func:`search`).

    ``shared_key`` seeds ``recurrent_fn`` (folded with the simulation index);
    ``element_keys [B]`` seed each tree's own selection noise.
    ``leaves_per_step > 1`` (or ``force_multi``, for tests: the multi-leaf
    engine with ``K = 1``) runs :func:`run_multi_search`. ``solver``: back up
    proofs after each backup (the tree must hold ``proof_plies``).
    """
    depth_limit = tree.max_nodes if max_depth is None else validation.check_int(
        "max_depth", max_depth, 1)
    if leaves_per_step > 1 or force_multi:
        return run_multi_search(params, shared_key, element_keys, tree, recurrent_fn,
                                num_simulations // leaves_per_step, leaves_per_step, rule,
                                depth_limit, graph, embedding_like,
                                VirtualLoss() if virtual_loss is None else virtual_loss,
                                solver)

    def simulate(sim, state: _SimulationState) -> _SimulationState:
        key = jax.random.fold_in(shared_key, sim)
        tie_keys = jax.vmap(jax.random.fold_in, (0, None))(element_keys, sim)
        walk, marks = select(state.tree, rule, depth_limit, tie_keys, graph, state.marks,
                             sim, state.path_nodes, state.path_actions)
        parent, action = walk.leaf_edge()
        leaf = evaluate_leaves(params, key, state.tree, parent, action, recurrent_fn,
                               embedding_like, graph)
        if graph is None:
            tree, leaf_return = expand_tree(state.tree, walk, leaf)
            tree = backup(tree, walk, leaf_return)
        else:
            tree = graph_lib.add_leaves(state.tree, graph, parent, action, walk.expand, leaf)
            tree = backup_graph(tree, walk)
        if solver is not None:
            tree = solver_lib.backup_proofs(tree, walk, solver)
        return _SimulationState(tree, marks, walk.path_nodes, walk.path_actions)

    # Graph search marks each node it enters with the simulation's number, which
    # finds cycles in O(1) per step instead of scanning the path.
    marks = None if graph is None else jnp.full(tree.node_visits.shape, -1, jnp.int32)
    # The path buffers are reused from one simulation to the next: entries past a
    # walk's length are never read, so they need no clearing (which would cost
    # O(B * max_depth) per simulation).
    init = _SimulationState(
        tree=tree, marks=marks,
        path_nodes=jnp.full((tree.batch_size, depth_limit + 1), Tree.ROOT_INDEX, jnp.int32),
        path_actions=jnp.zeros((tree.batch_size, depth_limit), jnp.int32))
    if solver is not None:
        return solver_lib.loop_until_proven(num_simulations, simulate, init).tree
    return jax.lax.fori_loop(0, num_simulations, simulate, init).tree


class _MultiWalks(NamedTuple):
    """The ``K`` walks of one search step: ``[K, B, ...]`` path records."""

    path_nodes: chex.Array  # [K, B, D + 1]
    path_actions: chex.Array  # [K, B, D]
    num_edges: chex.Array  # [K, B]; 0 for an invalid (no-op) walk
    expand: chex.Array  # [K, B]
    saved_values: chex.Array  # [K, B, D + 1] values virtual loss overwrote
    first: chex.Array | None  # [K, B, D + 1] the step's first overwrite ("loss" mode)

    def walk(self, k: chex.Array) -> Walk:
        return Walk(path_nodes=self.path_nodes[k], path_actions=self.path_actions[k],
                    num_edges=self.num_edges[k], expand=self.expand[k])

    def leaf_edges(self) -> tuple[chex.Array, chex.Array]:
        """``(parent [K, B], action [K, B])`` of each walk's last edge."""
        last = jnp.maximum(self.num_edges - 1, 0)[..., None]
        return (jnp.take_along_axis(self.path_nodes, last, axis=-1)[..., 0],
                jnp.take_along_axis(self.path_actions, last, axis=-1)[..., 0])


class _StepState(NamedTuple):
    """The multi-leaf step loop's carry (also the carry of its walk loop)."""

    tree: Tree
    marks: chex.Array | None  # [B, N], graph search only
    stamp: chex.Array | None  # [B, N] step that last overwrote a value ("loss" mode)
    walks: _MultiWalks


def run_multi_search(
    params: Any,
    shared_key: chex.PRNGKey,
    element_keys: chex.Array,
    tree: Tree,
    recurrent_fn: RecurrentFn,
    num_steps: int,
    leaves_per_step: int,
    rule: SelectionRule,
    depth_limit: int,
    graph: GraphConfig | None,
    embedding_like: Any,
    virtual_loss: VirtualLoss,
    solver: SolverConfig | None = None,
) -> Tree:
    """``num_steps`` steps of ``K = leaves_per_step`` walks per tree (see
    :func:`search` and :mod:`jaxpuct.virtual_loss`).

    A step: ``K`` walks in turn, each marking its path with virtual loss and
    claiming its unexpanded edge; the marks of all ``K`` undone at once
    (:func:`jaxpuct.virtual_loss.undo_step`, which restores the tree bit for
    bit); one ``recurrent_fn`` call on the ``[B * K]`` leaves (row ``b * K + k``);
    then the leaves stored and the paths backed up: in tree mode all ``K`` in one
    pass (:func:`expand_tree_step`, :func:`backup_step`), in graph mode walk by
    walk (a leaf may be a transposition of one stored earlier in the step).
    Walk ``k`` of step ``t`` uses simulation number ``t * K + k`` for its
    selection keys and graph marks; ``recurrent_fn``'s key is folded with ``t``.
    With ``K = 1`` this computes the same trees as the one-leaf loop.

    Cost per step: the ``K`` walks and their marks, O(K * B * depth) in ``K``
    sequential loops; the undo, the storage and the backup O(K * B * depth) in
    one loop each (why: on a CPU at small ``B`` each loop iteration costs a
    fixed overhead per operation, whatever the sizes).
    """
    batch_size, k_total = tree.batch_size, leaves_per_step
    rows = jnp.arange(batch_size)
    flat_like = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct((batch_size * k_total,) + x.shape[1:], x.dtype),
        embedding_like)
    track = virtual_loss.mode == "loss"

    def walk_one(step, k, state: _StepState) -> _StepState:
        sim = step * k_total + k
        tie_keys = jax.vmap(jax.random.fold_in, (0, None))(element_keys, sim)
        walks = state.walks
        walk, marks = select(state.tree, rule, depth_limit, tie_keys, graph, state.marks,
                             sim, walks.path_nodes[k], walks.path_actions[k])
        parent, action = walk.leaf_edge()
        # An ILLEGAL last edge: every edge the rule could pick was illegal or
        # claimed by an earlier walk of this step. The walk does nothing.
        invalid = walk.expand & (state.tree.children_index[rows, parent, action] == ILLEGAL)
        num_edges = jnp.where(invalid, 0, walk.num_edges)
        expand = walk.expand & ~invalid
        tree, saved, stamp, first = vl_lib.apply_in_step(
            state.tree, virtual_loss, walk.path_nodes, walk.path_actions, num_edges, expand,
            walks.saved_values[k], state.stamp, step,
            None if walks.first is None else walks.first[k])
        tree = vl_lib.set_claims(tree, parent, action, expand, vl_lib.CLAIMED)
        walks = _MultiWalks(
            path_nodes=walks.path_nodes.at[k].set(walk.path_nodes),
            path_actions=walks.path_actions.at[k].set(walk.path_actions),
            num_edges=walks.num_edges.at[k].set(num_edges),
            expand=walks.expand.at[k].set(expand),
            saved_values=walks.saved_values.at[k].set(saved),
            first=None if first is None else walks.first.at[k].set(first))
        return _StepState(tree, marks, stamp, walks)

    def store_one(k, tree: Tree, walks: _MultiWalks, leaves: NodeData) -> Tree:
        walk = walks.walk(k)
        leaf = jax.tree.map(lambda x: x[k], leaves)
        parent, action = walk.leaf_edge()
        tree = graph_lib.add_leaves(tree, graph, parent, action, walk.expand, leaf)
        tree = backup_graph(tree, walk)
        if solver is not None:
            # full: an earlier walk of this step may have proven a node on this path.
            tree = solver_lib.backup_proofs(tree, walk, solver, full=True)
        return tree

    def step_fn(step, state: _StepState) -> _StepState:
        state = jax.lax.fori_loop(0, k_total, functools.partial(walk_one, step), state)
        walks = state.walks
        tree = vl_lib.undo_step(state.tree, virtual_loss, walks.path_nodes, walks.path_actions,
                                walks.num_edges, walks.expand, walks.saved_values,
                                walks.first)
        # [K, B] leaf edges -> one [B * K] network call (row b * K + k).
        parents, actions = walks.leaf_edges()
        embedding = jax.tree.map(
            lambda x: x[rows[:, None], parents.T].reshape((-1,) + x.shape[2:]),
            tree.embeddings)
        key = jax.random.fold_in(shared_key, step)
        flat = evaluate_edges(params, key, embedding, actions.T.reshape(-1), recurrent_fn,
                              flat_like, graph, tree.num_actions)
        # [B * K] -> [K, B], the layout of the path records.
        leaves = jax.tree.map(
            lambda x: jnp.swapaxes(x.reshape((batch_size, k_total) + x.shape[1:]), 0, 1),
            flat)
        if graph is None:
            tree, leaf_return = expand_tree_step(tree, walks, parents, actions, leaves)
            tree = backup_step(tree, walks, leaf_return)
            if solver is not None:
                # Walk by walk, full: an earlier walk may prove a node on a later path.
                tree = jax.lax.fori_loop(0, k_total, lambda k, t: solver_lib.backup_proofs(
                    t, walks.walk(k), solver, full=True), tree)
        else:
            tree = vl_lib.set_claims(tree, parents, actions, walks.expand, vl_lib.RELEASED)
            tree = jax.lax.fori_loop(0, k_total,
                                     lambda k, t: store_one(k, t, walks, leaves), tree)
        return _StepState(tree, state.marks, state.stamp, walks)

    marks = None if graph is None else jnp.full(tree.node_visits.shape, -1, jnp.int32)
    stamp = jnp.full(tree.node_visits.shape, -1, jnp.int32) if track else None
    path_len = depth_limit + 1
    init = _StepState(tree=tree, marks=marks, stamp=stamp, walks=_MultiWalks(
        path_nodes=jnp.full((k_total, batch_size, path_len), Tree.ROOT_INDEX, jnp.int32),
        path_actions=jnp.zeros((k_total, batch_size, depth_limit), jnp.int32),
        num_edges=jnp.zeros((k_total, batch_size), jnp.int32),
        expand=jnp.zeros((k_total, batch_size), jnp.bool_),
        saved_values=jnp.zeros((k_total, batch_size, path_len), jnp.float32),
        first=jnp.zeros((k_total, batch_size, path_len), jnp.bool_) if track else None))
    if solver is not None:
        return solver_lib.loop_until_proven(num_steps, step_fn, init).tree
    return jax.lax.fori_loop(0, num_steps, step_fn, init).tree


def expand_tree_step(tree: Tree, walks: _MultiWalks, parents: chex.Array,
                     actions: chex.Array, leaves: NodeData) -> tuple[Tree, chex.Array]:
    """Tree mode, all ``K`` walks of a step at once: :func:`expand_tree` with
    ``[K, B]`` leaf edges ``(parents, actions)`` and leaves ``[K, B, ...]``.

    Walk ``k`` gets the ``k``-th free slot among the walks that expand (as if
    stored one after another); the scatter that links the stored children also
    releases the claims of leaves that found no room. Returns the tree and the
    ``[K, B]`` values to back up into each last edge's parent.
    """
    rows = jnp.arange(tree.batch_size)
    expand = walks.expand
    taken = jnp.cumsum(expand.astype(jnp.int32), axis=0) - expand.astype(jnp.int32)
    slot = tree.num_nodes + taken
    store = expand & (slot < tree.max_nodes)
    slot = jnp.where(store, slot, tree.max_nodes)
    tree = write_nodes(tree, slot, leaves)
    edge_parent = jnp.where(expand, parents, tree.max_nodes)
    tree = tree.replace(
        num_nodes=tree.num_nodes + jnp.sum(store, axis=0, dtype=jnp.int32),
        children_index=tree.children_index.at[rows, edge_parent, actions].set(
            jnp.where(store, slot, vl_lib.RELEASED), mode="drop"))
    leaf_node = jnp.take_along_axis(walks.path_nodes, walks.num_edges[..., None],
                                    axis=-1)[..., 0]
    stopped = (walks.num_edges > 0) & ~expand
    stopped_return = (tree.node_rewards[rows, leaf_node]
                      + tree.node_discounts[rows, leaf_node] * tree.node_values[rows, leaf_node])
    tree = tree.replace(node_visits=tree.node_visits.at[
        rows, jnp.where(stopped, leaf_node, tree.max_nodes)].add(1, mode="drop"))
    leaf_return = jnp.where(expand, leaves.reward + leaves.discount * leaves.value,
                            stopped_return)
    return tree, leaf_return


def backup_step(tree: Tree, walks: _MultiWalks, leaf_return: chex.Array) -> Tree:
    """Tree-mode backup of all ``K`` walks of a step in one loop over depth
    (``leaf_return [K, B]`` as from :func:`expand_tree_step`).

    Several walks may pass through a node (at the same depth: this is a tree),
    so each depth step folds all their returns in at once: with ``m`` walks
    through a node of count ``n`` and value ``q``, ``n += m`` and
    ``q = (q * n_old + sum of returns) / (n_old + m)``, the same mean as ``m``
    one-leaf backups (to rounding). The sums are scatter-adds, so duplicates are
    fine; O(K * B) per depth step.
    """
    rows = jnp.arange(tree.batch_size)

    def fold(array, node, scaled, added, count_after):
        # (q * n_old + sum of added) / n_new at every node on a path at this depth.
        array = array.at[rows, node].set(scaled, mode="drop")
        array = array.at[rows, node].add(added, mode="drop")
        total = array[rows, jnp.minimum(node, tree.max_nodes - 1)]
        return array.at[rows, node].set(total / count_after, mode="drop")

    def body(state: _BackupState) -> _BackupState:
        depth, ret = state.depth, state.leaf_return
        on_path = depth < walks.num_edges
        safe = walks.path_nodes[:, :, depth]
        node = jnp.where(on_path, safe, tree.max_nodes)
        action = walks.path_actions[:, :, depth]
        count_int = state.node_visits[rows, safe]
        count = count_int.astype(jnp.float32)
        # Counts are >= 0, so this adds exactly 1; reading ``count_int`` in the
        # update orders the read before the in-place scatter-add (else XLA copies
        # the [B, N] counts to read them after it).
        visits = state.node_visits.at[rows, node].add(1 + jnp.minimum(count_int, 0),
                                                      mode="drop")
        count_after = visits[rows, safe].astype(jnp.float32)
        values = fold(state.node_values, node, state.node_values[rows, safe] * count, ret,
                      count_after)
        edge_visits = state.edge_visits.at[rows, node, action].add(1, mode="drop")
        sq_values = state.node_sq_values
        if sq_values is not None:
            sq_values = fold(sq_values, node, sq_values[rows, safe] * count, ret * ret,
                             count_after)
        parent_ret = tree.node_rewards[rows, safe] + tree.node_discounts[rows, safe] * ret
        return _BackupState(depth - 1, jnp.where(on_path, parent_ret, ret), visits, values,
                            edge_visits, sq_values)

    init = _BackupState(jnp.max(walks.num_edges) - 1, leaf_return, tree.node_visits,
                        tree.node_values, tree.edge_visits, tree.node_sq_values)
    final = jax.lax.while_loop(lambda s: s.depth >= 0, body, init)
    return tree.replace(node_visits=final.node_visits, node_values=final.node_values,
                        edge_visits=final.edge_visits, node_sq_values=final.node_sq_values)


def restrict_root(tree: Tree, invalid_actions: chex.Array | None,
                  root_prior: chex.Array | None) -> Tree:
    """Applies a new root mask and root prior (shapes checked) to an existing tree."""
    children = tree.children_index[:, Tree.ROOT_INDEX]
    if invalid_actions is not None:
        children = jnp.where(invalid_actions.astype(jnp.bool_), ILLEGAL, children)
    legal = children != ILLEGAL
    prior = tree.root_prior if root_prior is None else root_prior
    return tree.replace(
        children_index=tree.children_index.at[:, Tree.ROOT_INDEX].set(children),
        root_prior=jnp.where(legal, prior.astype(jnp.float32), 0.0),
        node_terminal=tree.node_terminal.at[:, Tree.ROOT_INDEX].set(
            tree.node_terminal[:, Tree.ROOT_INDEX] | ~jnp.any(legal, axis=-1)))


def _advance(tree: Tree, state: _WalkState, action: chex.Array, max_depth: int,
             graph: GraphConfig | None, sim: chex.Array) -> _WalkState:
    """Takes ``action [B]`` from ``state.node`` in every active walk."""
    rows = jnp.arange(tree.batch_size)
    depth, node, active = state.depth, state.node, state.active
    child = tree.children_index[rows, node, action]
    safe_child = jnp.maximum(child, 0)
    path_actions = state.path_actions.at[:, depth].set(
        jnp.where(active, action, state.path_actions[:, depth]))
    num_edges = jnp.where(active, depth + 1, state.num_edges)
    descend = active & (child >= 0)
    expand = jnp.where(active, child < 0, state.expand)
    stop = (depth + 1 >= max_depth) | tree.node_terminal[rows, safe_child]
    if tree.proof_plies is not None:
        # MCTS-solver: a proven node is not entered; its exact value is backed up.
        stop = stop | (tree.proof_plies[rows, safe_child] >= 0)
    marks = state.marks
    if graph is not None:
        seen = marks[rows, safe_child]
        # The root is on every path: it needs no mark (a write of it before the
        # walk made XLA copy the [B, N] marks on every simulation).
        cycle = (seen == sim) | (child == Tree.ROOT_INDEX)
        stop = stop | cycle
        if graph.stop_at_transposition:
            stop = stop | (tree.edge_visits[rows, node, action]
                           < tree.node_visits[rows, safe_child])
        marks = marks.at[rows, jnp.where(descend & ~cycle, child, tree.max_nodes)].set(
            sim, mode="drop")
    path_nodes = state.path_nodes.at[:, depth + 1].set(
        jnp.where(descend, child, state.path_nodes[:, depth + 1]))
    return _WalkState(depth=depth + 1, node=jnp.where(descend, child, node),
                      active=descend & ~stop, path_nodes=path_nodes,
                      path_actions=path_actions, num_edges=num_edges, expand=expand,
                      marks=marks)


def select(tree: Tree, rule: SelectionRule, max_depth: int, rng_keys: chex.Array,
           graph: GraphConfig | None, marks: chex.Array | None, sim: chex.Array | int,
           path_nodes: chex.Array, path_actions: chex.Array,
           ) -> tuple[Walk, chex.Array | None]:
    """Walks every tree from the root until an unexpanded edge, a terminal node or
    ``max_depth`` (graph search also stops at a transposition or a cycle) and
    records the path.

    The root step runs once, outside the loop, with ``rule.root``; the loop
    then uses ``rule.interior``. Its carry is ``O(B * D)`` (plus the ``[B, N]``
    marks of graph search, updated in place). ``path_nodes [B, D + 1]`` (column
    0 holding the root) and ``path_actions [B, D]`` are the buffers to record
    into; ``rng_keys [B]`` are folded with the depth for each step's rule.
    """
    batch_size = tree.batch_size
    root = jnp.full((batch_size,), Tree.ROOT_INDEX, jnp.int32)

    def step_keys(depth):
        return jax.vmap(jax.random.fold_in, (0, None))(rng_keys, depth)

    active = ~tree.node_terminal[:, Tree.ROOT_INDEX]
    if tree.proof_plies is not None:
        active = active & (tree.proof_plies[:, Tree.ROOT_INDEX] < 0)  # proven: no-op
    state = _WalkState(
        depth=jnp.int32(0), node=root, active=active,
        path_nodes=path_nodes, path_actions=path_actions,
        num_edges=jnp.zeros((batch_size,), jnp.int32),
        expand=jnp.zeros((batch_size,), jnp.bool_),
        marks=marks)
    action = rule.root(tree, root, state.depth, step_keys(state.depth))
    state = _advance(tree, state, action, max_depth, graph, sim)

    def cond(state: _WalkState):
        return jnp.any(state.active) & (state.depth < max_depth)

    def body(state: _WalkState) -> _WalkState:
        action = rule.interior(tree, state.node, state.depth, step_keys(state.depth))
        return _advance(tree, state, action, max_depth, graph, sim)

    state = jax.lax.while_loop(cond, body, state)
    walk = Walk(path_nodes=state.path_nodes, path_actions=state.path_actions,
                num_edges=state.num_edges, expand=state.expand)
    return walk, state.marks


def evaluate_leaves(params: Any, rng_key: chex.PRNGKey, tree: Tree, parent: chex.Array,
                    action: chex.Array, recurrent_fn: RecurrentFn, embedding_like: Any,
                    graph: GraphConfig | None) -> NodeData:
    """Calls ``recurrent_fn`` once on the edges ``(parent [B], action [B])`` and
    returns the new nodes' data, sanitised: non-finite rewards, discounts and
    values read as 0, priors from :func:`jaxpuct.numerics.prior_and_legal`, and
    a state with no legal action is terminal."""
    rows = jnp.arange(tree.batch_size)
    embedding = jax.tree.map(lambda x: x[rows, parent], tree.embeddings)
    return evaluate_edges(params, rng_key, embedding, action, recurrent_fn, embedding_like,
                          graph, tree.num_actions)


def evaluate_edges(params: Any, rng_key: chex.PRNGKey, embedding: Any, action: chex.Array,
                   recurrent_fn: RecurrentFn, embedding_like: Any,
                   graph: GraphConfig | None, num_actions: int) -> NodeData:
    """One ``recurrent_fn`` call on ``M`` edges: parent ``embedding [M, ...]`` and
    ``action [M]`` (``embedding_like``: ``[M, ...]`` shapes to check against).
    Returns the sanitised ``NodeData`` ``[M]`` (see :func:`evaluate_leaves`)."""
    batch_size = action.shape[0]
    output, new_embedding = validation.unpack_recurrent_result(
        recurrent_fn(params, rng_key, action, embedding))
    validation.check_recurrent_output(output, new_embedding, batch_size, num_actions,
                                      embedding_like)
    legal = getattr(output, "legal_action_mask", None)
    legal = (jnp.ones((batch_size, num_actions), jnp.bool_) if legal is None
             else legal.astype(jnp.bool_))
    terminal = getattr(output, "terminal", None)
    terminal = (jnp.zeros((batch_size,), jnp.bool_) if terminal is None
                else terminal.astype(jnp.bool_))
    prior, legal = prior_and_legal(output.prior_logits, legal)
    state_hash = None
    if graph is not None:
        state_hash = graph_lib.state_hash(graph, output, new_embedding, "recurrent_fn output")
        validation.check_hash("recurrent_fn state hash", state_hash, batch_size)
    return NodeData(
        reward=finite_or_zero(output.reward),
        discount=finite_or_zero(output.discount),
        value=finite_or_zero(output.value),
        prior=prior,
        legal=legal,
        terminal=terminal | ~jnp.any(legal, axis=-1),
        embedding=new_embedding,
        state_hash=state_hash,
    )


def expand_tree(tree: Tree, walk: Walk, leaf: NodeData) -> tuple[Tree, chex.Array]:
    """Tree mode: stores each evaluated leaf where there is room and returns the
    value to back up into the last edge's parent, ``[B]`` ``r + discount * v``.

    A walk that ended on an existing node (terminal, or ``max_depth``) backs up
    that node's stored value and counts one more visit to it.
    """
    rows = jnp.arange(tree.batch_size)
    parent, action = walk.leaf_edge()
    store = walk.expand & (tree.num_nodes < tree.max_nodes)
    tree = store_nodes(tree, parent, action, store, leaf)
    leaf_node = walk.path_nodes[rows, walk.num_edges]
    stopped = (walk.num_edges > 0) & ~walk.expand
    stopped_return = (tree.node_rewards[rows, leaf_node]
                      + tree.node_discounts[rows, leaf_node] * tree.node_values[rows, leaf_node])
    tree = tree.replace(node_visits=tree.node_visits.at[
        rows, jnp.where(stopped, leaf_node, tree.max_nodes)].add(1, mode="drop"))
    leaf_return = jnp.where(walk.expand, leaf.reward + leaf.discount * leaf.value,
                            stopped_return)
    return tree, leaf_return


def backup(tree: Tree, walk: Walk, leaf_return: chex.Array) -> Tree:
    """Tree-mode backup: bottom-up along each recorded path, add one visit to each
    node and edge and fold the discounted return into the node's running mean.

    ``leaf_return [B]`` is the return seen from the parent of the last edge.
    Paths never repeat a node, so each step's scatters are duplicate-free.
    The loop runs ``max(num_edges)`` times; its work per step is O(B).
    """
    rows = jnp.arange(tree.batch_size)

    def cond(state: _BackupState):
        return state.depth >= 0

    def body(state: _BackupState) -> _BackupState:
        depth, ret = state.depth, state.leaf_return
        on_path = depth < walk.num_edges
        node = walk.path_nodes[:, depth]
        action = walk.path_actions[:, depth]
        count_int = state.node_visits[rows, node]
        count = count_int.astype(jnp.float32)
        value = state.node_values[rows, node]
        new_value = (value * count + ret) / (count + 1.0)
        # A set of the gathered count (not a scatter-add) lets XLA update the
        # carried array in place instead of copying it on every step.
        visits = state.node_visits.at[rows, node].set(count_int + on_path.astype(jnp.int32))
        values = state.node_values.at[rows, node].set(jnp.where(on_path, new_value, value))
        edge_visits = state.edge_visits.at[rows, node, action].add(on_path.astype(jnp.int32))
        sq_values = state.node_sq_values
        if sq_values is not None:
            sq = sq_values[rows, node]
            new_sq = (sq * count + ret * ret) / (count + 1.0)
            sq_values = sq_values.at[rows, node].set(jnp.where(on_path, new_sq, sq))
        parent_ret = tree.node_rewards[rows, node] + tree.node_discounts[rows, node] * ret
        return _BackupState(depth - 1, jnp.where(on_path, parent_ret, ret), visits, values,
                            edge_visits, sq_values)

    init = _BackupState(jnp.max(walk.num_edges) - 1, leaf_return, tree.node_visits,
                        tree.node_values, tree.edge_visits, tree.node_sq_values)
    final = jax.lax.while_loop(cond, body, init)
    return tree.replace(node_visits=final.node_visits, node_values=final.node_values,
                        edge_visits=final.edge_visits, node_sq_values=final.node_sq_values)


def backup_graph(tree: Tree, walk: Walk) -> Tree:
    """Graph-mode backup: bottom-up along each path, count the edge taken and
    recompute the node from its children (``jaxpuct.graph.recompute_nodes``).
    The leaf node itself is not changed. O(B * A) per depth step."""
    rows = jnp.arange(tree.batch_size)

    def cond(state: _GraphBackupState):
        return state.depth >= 0

    def body(state: _GraphBackupState) -> _GraphBackupState:
        on_path = state.depth < walk.num_edges
        node = walk.path_nodes[:, state.depth]
        action = walk.path_actions[:, state.depth]
        edge_visits = state.edge_visits.at[rows, node, action].add(on_path.astype(jnp.int32))
        visits, values, sq_values = graph_lib.recompute_nodes(
            tree, node, on_path, state.node_visits, state.node_values, edge_visits,
            state.node_sq_values)
        return _GraphBackupState(state.depth - 1, visits, values, edge_visits, sq_values)

    init = _GraphBackupState(jnp.max(walk.num_edges) - 1, tree.node_visits, tree.node_values,
                             tree.edge_visits, tree.node_sq_values)
    final = jax.lax.while_loop(cond, body, init)
    return tree.replace(node_visits=final.node_visits, node_values=final.node_values,
                        edge_visits=final.edge_visits, node_sq_values=final.node_sq_values)

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
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp

from jaxpuct import graph as graph_lib
from jaxpuct import validation
from jaxpuct.graph import GraphConfig
from jaxpuct.selection import PUCTConfig, puct_scores
from jaxpuct.tree import ILLEGAL, UNEXPANDED, Tree, edge_qvalues, gather_rows
from jaxpuct.types import RecurrentFn


@chex.dataclass(frozen=True)
class _Walk:
    """Where one simulation's walk ended, for every tree.

    path_nodes: ``[B, D + 1]`` node at each depth (slot 0 is the root).
    path_actions: ``[B, D]`` action taken at each depth.
    num_edges: ``[B]`` edges walked, the last one included (0: not searched).
    expand: ``[B]`` the last edge had no child: evaluate and store one.
    """

    path_nodes: chex.Array
    path_actions: chex.Array
    num_edges: chex.Array
    expand: chex.Array


def masked_softmax(logits: chex.Array, legal: chex.Array) -> chex.Array:
    """``[B, A]`` probabilities over legal actions; all zeros where none is legal.

    Non-finite logits of a legal action (a diverged network) give the uniform
    distribution over the legal actions of that row, so one bad evaluation
    cannot poison the search of its tree or any other.
    """
    logits = logits.astype(jnp.float32)
    finite = jnp.all(jnp.isfinite(logits) | ~legal, axis=-1, keepdims=True)
    logits = jnp.where(finite, logits, 0.0)
    logits = jnp.where(legal, logits, -jnp.inf)
    top = jnp.max(logits, axis=-1, keepdims=True)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    weights = jnp.where(legal, jnp.exp(logits - top), 0.0)
    total = jnp.sum(weights, axis=-1, keepdims=True)
    return jnp.where(total > 0, weights / jnp.where(total > 0, total, 1.0), 0.0)


def _finite_or_zero(x: chex.Array) -> chex.Array:
    x = x.astype(jnp.float32)
    return jnp.where(jnp.isfinite(x), x, 0.0)


def init_tree(
    root: Any,
    max_nodes: int,
    root_prior: chex.Array | None = None,
    invalid_actions: chex.Array | None = None,
    graph: GraphConfig | None = None,
) -> Tree:
    """A batch of trees holding only their roots.

    Args:
      root: ``RootFnOutput`` (jaxpuct's or mctx's): ``prior_logits [B, A]``,
        ``value [B]``, ``embedding [B, ...]``, optional ``legal_action_mask``.
      max_nodes: node capacity ``N`` of each tree (>= 1).
      root_prior: optional ``[B, A]`` prior to select with at the root (e.g.
        with Dirichlet noise); defaults to the network prior.
      invalid_actions: optional ``[B, A]`` bool, ``True`` where an action must
        not be taken at the root (mctx's convention).
      graph: graph-search options; the root's hash is read from
        ``root.state_hash`` or ``graph.hash_fn(root.embedding)``.

    Returns:
      ``Tree`` with ``[B, max_nodes, ...]`` arrays and ``num_nodes == 1``.
    """
    batch_size, num_actions = validation.check_root(root)
    max_nodes = validation.check_int("max_nodes", max_nodes, 1)
    legal = root_legal_mask(root, invalid_actions)
    prior = masked_softmax(root.prior_logits, legal)
    if root_prior is None:
        root_prior = prior
    validation.check_shape("root_prior", root_prior, (batch_size, num_actions))
    value = _finite_or_zero(root.value)

    def node_array(root_value, fill, dtype):
        array = jnp.full((batch_size, max_nodes), fill, dtype)
        return array.at[:, 0].set(root_value)

    children_index = jnp.full((batch_size, max_nodes, num_actions), UNEXPANDED, jnp.int32)
    children_index = children_index.at[:, 0].set(jnp.where(legal, UNEXPANDED, ILLEGAL))
    embeddings = jax.tree.map(
        lambda x: jnp.zeros((batch_size, max_nodes) + x.shape[1:], x.dtype).at[:, 0].set(x),
        root.embedding)
    tree = Tree(
        node_visits=node_array(1, 0, jnp.int32),
        raw_values=node_array(value, 0.0, jnp.float32),
        node_values=node_array(value, 0.0, jnp.float32),
        node_rewards=jnp.zeros((batch_size, max_nodes), jnp.float32),
        node_discounts=jnp.zeros((batch_size, max_nodes), jnp.float32),
        node_terminal=node_array(~jnp.any(legal, axis=-1), False, jnp.bool_),
        embeddings=embeddings,
        children_index=children_index,
        children_prior=jnp.zeros((batch_size, max_nodes, num_actions),
                                 jnp.float32).at[:, 0].set(prior),
        edge_visits=jnp.zeros((batch_size, max_nodes, num_actions), jnp.int32),
        root_prior=jnp.where(legal, root_prior.astype(jnp.float32), 0.0),
        num_nodes=jnp.ones((batch_size,), jnp.int32),
    )
    if graph is None:
        return tree
    root_hash = graph_lib.state_hash(graph, root, root.embedding, "root")
    validation.check_hash("root state hash", root_hash, batch_size)
    tree = tree.replace(
        node_hash=jnp.zeros((batch_size, max_nodes, 2), jnp.uint32).at[:, 0].set(root_hash),
        hash_table=graph_lib.empty_table(batch_size, graph.table_size(max_nodes)))
    if graph.edge_rewards:
        edge_shape = (batch_size, max_nodes, num_actions)
        tree = tree.replace(edge_rewards=jnp.zeros(edge_shape, jnp.float32),
                            edge_discounts=jnp.zeros(edge_shape, jnp.float32))
    return graph_lib.insert(tree, graph.max_probes, root_hash,
                            jnp.zeros((batch_size,), jnp.int32),
                            jnp.ones((batch_size,), jnp.bool_))


def root_legal_mask(root: Any, invalid_actions: chex.Array | None) -> chex.Array:
    """``[B, A]`` bool: the root's legal mask AND NOT ``invalid_actions``."""
    batch_size, num_actions = root.prior_logits.shape
    legal = getattr(root, "legal_action_mask", None)
    legal = (jnp.ones((batch_size, num_actions), jnp.bool_) if legal is None
             else legal.astype(jnp.bool_))
    if invalid_actions is not None:
        validation.check_shape("invalid_actions", invalid_actions, (batch_size, num_actions))
        legal = legal & ~invalid_actions.astype(jnp.bool_)
    return legal


def search(
    params: Any,
    rng_key: chex.PRNGKey,
    root: Any,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    *,
    max_depth: int | None = None,
    max_nodes: int | None = None,
    selection: PUCTConfig = PUCTConfig(),
    invalid_actions: chex.Array | None = None,
    root_prior: chex.Array | None = None,
    tree: Tree | None = None,
    graph: GraphConfig | None = None,
) -> Tree:
    """Runs ``num_simulations`` simulations of PUCT search on every tree of a batch.

    Args:
      params: passed to ``recurrent_fn``.
      rng_key: one key, or ``[B]`` keys (one per tree, see
        ``validation.split_keys``).
      root: ``RootFnOutput`` with ``prior_logits [B, A]``, ``value [B]``,
        ``embedding [B, ...]``; ignored when ``tree`` is given.
      recurrent_fn: ``(params, key, action [B], embedding) -> (RecurrentFnOutput,
        embedding)``, called once per simulation for the whole batch.
      num_simulations: simulations to run (>= 1).
      max_depth: longest path walked from the root (default: ``max_nodes``).
        A walk that reaches it stops at that node and backs up its value.
      max_nodes: node capacity (default ``num_simulations + 1``; ignored when
        ``tree`` is given). When a tree is full, new leaves are still
        evaluated and backed up (their edge is counted as visited) but not
        stored; nothing is overwritten. An edge visited that way has no
        child, and selection treats its Q as unvisited.
      selection: the PUCT rule.
      invalid_actions: optional ``[B, A]`` bool mask of root actions not to take.
      root_prior: optional ``[B, A]`` root prior to select with (noise).
      tree: optional tree to continue searching (simulations add to it);
        ``invalid_actions`` and ``root_prior`` then apply to its root (an
        action made invalid loses its subtree from the root's view).
      graph: ``GraphConfig`` for Monte-Carlo graph search (see
        ``jaxpuct.graph``), ``None`` for tree search. A walk that would re-enter
        a node already on its own path stops before it: the edge is counted and
        the backup uses that node's current value.

    Returns:
      The ``Tree``. A root with no legal action (or a terminal root) is never
      searched: its statistics stay as they were.
    """
    num_simulations = validation.check_int("num_simulations", num_simulations, 1)
    if tree is None:
        batch_size, _ = validation.check_root(root)
        if max_nodes is None:
            max_nodes = num_simulations + 1
        tree = init_tree(root, max_nodes, root_prior, invalid_actions, graph)
        embedding_like = root.embedding
    else:
        embedding_like = jax.tree.map(lambda x: x[:, 0], tree.embeddings)
        tree = _restrict_root(tree, invalid_actions, root_prior)
    if graph is not None and not isinstance(graph, GraphConfig):
        raise ValueError(f"graph must be a GraphConfig or None, got {type(graph).__name__}.")
    if (graph is not None) != tree.is_graph:
        raise ValueError("graph must be given exactly when the tree was built for graph "
                         f"search: graph={graph!r}, tree.node_hash is "
                         f"{'set' if tree.is_graph else 'None'}.")
    if not isinstance(selection, PUCTConfig):
        raise ValueError(f"selection must be a PUCTConfig, got {type(selection).__name__}.")
    depth_limit = tree.max_nodes if max_depth is None else validation.check_int(
        "max_depth", max_depth, 1)
    shared_key, element_keys = validation.split_keys(rng_key, tree.batch_size)

    def simulate(sim, carry):
        tree, marks, paths = carry
        key = jax.random.fold_in(shared_key, sim)
        tie_keys = jax.vmap(jax.random.fold_in, (0, None))(element_keys, sim)
        walk, marks = select(tree, selection, depth_limit, tie_keys, graph, marks, sim, paths)
        tree, leaf_return = expand(params, key, tree, walk, recurrent_fn, embedding_like,
                                   graph)
        paths = (walk.path_nodes, walk.path_actions)
        if graph is None:
            return backup(tree, walk, leaf_return), marks, paths
        return backup_graph(tree, walk), marks, paths

    # Graph search marks each node it enters with the simulation's number, which
    # finds cycles in O(1) per step instead of scanning the path.
    marks = None if graph is None else jnp.full(tree.node_visits.shape, -1, jnp.int32)
    # The path buffers are reused from one simulation to the next: entries past a
    # walk's length are never read, so they need no clearing (which would cost
    # O(B * max_depth) per simulation).
    paths = (jnp.zeros((tree.batch_size, depth_limit + 1), jnp.int32),
             jnp.zeros((tree.batch_size, depth_limit), jnp.int32))
    tree, _, _ = jax.lax.fori_loop(0, num_simulations, simulate, (tree, marks, paths))
    return tree


def _restrict_root(tree: Tree, invalid_actions: chex.Array | None,
                   root_prior: chex.Array | None) -> Tree:
    """Applies a new root mask and root prior to an existing tree."""
    shape = (tree.batch_size, tree.num_actions)
    children = tree.children_index[:, 0]
    if invalid_actions is not None:
        validation.check_shape("invalid_actions", invalid_actions, shape)
        children = jnp.where(invalid_actions.astype(jnp.bool_), ILLEGAL, children)
    legal = children != ILLEGAL
    prior = tree.root_prior if root_prior is None else root_prior
    if root_prior is not None:
        validation.check_shape("root_prior", root_prior, shape)
    return tree.replace(
        children_index=tree.children_index.at[:, 0].set(children),
        root_prior=jnp.where(legal, prior.astype(jnp.float32), 0.0),
        node_terminal=tree.node_terminal.at[:, 0].set(
            tree.node_terminal[:, 0] | ~jnp.any(legal, axis=-1)))


def node_scores(tree: Tree, config: PUCTConfig, node: chex.Array, is_root: chex.Array,
                rng_keys: chex.Array | None = None
                ) -> tuple[chex.Array, chex.Array, chex.Array]:
    """Selection scores at ``node [B]``: ``(scores [B, A]`` (``-inf`` at illegal
    actions), the node's ``children [B, A]`` and ``edge_visits [B, A])``, the
    last two returned so the walk does not gather them again."""
    children = gather_rows(tree.children_index, node)
    visits = gather_rows(tree.edge_visits, node)
    prior = jnp.where(is_root, tree.root_prior, gather_rows(tree.children_prior, node))
    uniform = None
    if config.tie_noise > 0:
        # Each tree draws from its own key, so batch elements stay independent.
        uniform = jax.vmap(lambda k: jax.random.uniform(k, (tree.num_actions,)))(rng_keys)
    scores = puct_scores(
        config,
        prior=prior,
        edge_visits=visits,
        edge_q=edge_qvalues(tree, node, children),
        has_q=(children >= 0) & (visits > 0),
        legal=children != ILLEGAL,
        parent_value=gather_rows(tree.node_values, node),
        node_visits=gather_rows(tree.node_visits, node),
        is_root=is_root,
        uniform=uniform,
    )
    return scores, children, visits


def select(tree: Tree, config: PUCTConfig, max_depth: int, rng_keys: chex.Array,
           graph: GraphConfig | None = None, marks: chex.Array | None = None,
           sim: chex.Array | int = 0,
           paths: tuple[chex.Array, chex.Array] | None = None,
           ) -> tuple[_Walk, chex.Array | None]:
    """Walks every tree from the root until an unexpanded edge, a terminal node or
    ``max_depth`` (graph search also stops at a transposition or a cycle);
    records the path. The loop carry is ``O(B * D)`` (plus the ``[B, N]`` marks
    of graph search, updated in place). ``paths`` are ``[B, D + 1]`` and ``[B, D]``
    buffers to record into (column 0 of the first must hold the root, 0)."""
    batch_size = tree.batch_size
    rows = jnp.arange(batch_size)
    root = jnp.zeros((batch_size,), jnp.int32)

    def cond(carry):
        depth, _, active, *_ = carry
        return jnp.any(active) & (depth < max_depth)

    def body(carry):
        depth, node, active, path_nodes, path_actions, num_edges, expand, marks = carry
        keys = (jax.vmap(jax.random.fold_in, (0, None))(rng_keys, depth)
                if config.tie_noise > 0 else None)
        scores, children, visits = node_scores(tree, config, node, depth == 0, keys)
        action = jnp.argmax(scores, axis=-1).astype(jnp.int32)
        child = children[rows, action]
        path_actions = path_actions.at[:, depth].set(
            jnp.where(active, action, path_actions[:, depth]))
        num_edges = jnp.where(active, depth + 1, num_edges)
        descend = active & (child >= 0)
        expand = jnp.where(active, child < 0, expand)
        stop = (depth + 1 >= max_depth) | tree.node_terminal[rows, jnp.maximum(child, 0)]
        if graph is not None:
            safe_child = jnp.maximum(child, 0)
            cycle = marks[rows, safe_child] == sim
            stop = stop | cycle
            if graph.stop_at_transposition:
                stop = stop | (visits[rows, action] < tree.node_visits[rows, safe_child])
            marks = marks.at[rows, jnp.where(descend & ~cycle, child, tree.max_nodes)].set(
                sim, mode="drop")
        node = jnp.where(descend, child, node)
        path_nodes = path_nodes.at[:, depth + 1].set(
            jnp.where(descend, child, path_nodes[:, depth + 1]))
        active = descend & ~stop
        return depth + 1, node, active, path_nodes, path_actions, num_edges, expand, marks

    searchable = ~tree.node_terminal[:, 0]
    if paths is None:
        paths = (jnp.zeros((batch_size, max_depth + 1), jnp.int32),
                 jnp.zeros((batch_size, max_depth), jnp.int32))
    init = (
        jnp.int32(0), root, searchable, *paths,
        jnp.zeros((batch_size,), jnp.int32),
        jnp.zeros((batch_size,), jnp.bool_),
        None if marks is None else marks.at[:, 0].set(sim),
    )
    _, _, _, path_nodes, path_actions, num_edges, expand, marks = jax.lax.while_loop(
        cond, body, init)
    walk = _Walk(path_nodes=path_nodes, path_actions=path_actions,
                 num_edges=num_edges, expand=expand)
    return walk, marks


def expand(params: Any, rng_key: chex.PRNGKey, tree: Tree, walk: _Walk,
           recurrent_fn: RecurrentFn, embedding_like: Any,
           graph: GraphConfig | None = None) -> tuple[Tree, chex.Array]:
    """Evaluates the leaf edge of every walk with one ``recurrent_fn`` call, stores
    the new nodes where there is room, and returns the value to back up into the
    last edge's parent: ``[B]`` ``r + discount * value`` of the leaf.

    In graph search a new state already in the transposition table is linked
    to its node instead of being stored (its evaluation is not used: the node
    already has one)."""
    batch_size, num_actions = tree.batch_size, tree.num_actions
    rows = jnp.arange(batch_size)
    last = jnp.maximum(walk.num_edges - 1, 0)
    parent = walk.path_nodes[rows, last]
    action = walk.path_actions[rows, last]
    embedding = jax.tree.map(lambda x: x[rows, parent], tree.embeddings)
    output, new_embedding = recurrent_fn(params, rng_key, action, embedding)
    validation.check_recurrent_output(output, new_embedding, batch_size, num_actions,
                                      embedding_like)

    legal = getattr(output, "legal_action_mask", None)
    legal = (jnp.ones((batch_size, num_actions), jnp.bool_) if legal is None
             else legal.astype(jnp.bool_))
    terminal = getattr(output, "terminal", None)
    terminal = (jnp.zeros((batch_size,), jnp.bool_) if terminal is None
                else terminal.astype(jnp.bool_))
    terminal = terminal | ~jnp.any(legal, axis=-1)
    reward = _finite_or_zero(output.reward)
    discount = _finite_or_zero(output.discount)
    value = _finite_or_zero(output.value)
    prior = masked_softmax(output.prior_logits, legal)

    store = walk.expand & (tree.num_nodes < tree.max_nodes)
    if graph is not None:
        new_hash = graph_lib.state_hash(graph, output, new_embedding, "recurrent_fn output")
        validation.check_hash("recurrent_fn state hash", new_hash, batch_size)
        known = graph_lib.lookup(tree, graph.max_probes, new_hash)
        transposition = walk.expand & (known >= 0)
        store = store & ~transposition
    # An out-of-range slot makes every write below a no-op for trees that store
    # nothing (full, or the walk ended on an existing node).
    slot = jnp.where(store, tree.num_nodes, tree.max_nodes)

    def put(array, update):
        return array.at[rows, slot].set(update, mode="drop")

    tree = tree.replace(
        node_visits=put(tree.node_visits, 1),
        raw_values=put(tree.raw_values, value),
        node_values=put(tree.node_values, value),
        node_rewards=put(tree.node_rewards, reward),
        node_discounts=put(tree.node_discounts, discount),
        node_terminal=put(tree.node_terminal, terminal),
        embeddings=jax.tree.map(put, tree.embeddings, new_embedding),
        children_index=put(tree.children_index,
                           jnp.where(legal, UNEXPANDED, ILLEGAL).astype(jnp.int32)),
        children_prior=put(tree.children_prior, prior),
        edge_visits=put(tree.edge_visits, jnp.zeros((batch_size, num_actions), jnp.int32)),
        num_nodes=tree.num_nodes + store.astype(jnp.int32),
    )
    link_parent = jnp.where(store, parent, tree.max_nodes)
    tree = tree.replace(children_index=tree.children_index.at[rows, link_parent, action].set(
        slot, mode="drop"))
    if graph is not None:
        tree = tree.replace(node_hash=tree.node_hash.at[rows, slot].set(new_hash, mode="drop"))
        tree = graph_lib.insert(tree, graph.max_probes, new_hash, slot, store)
        link_parent = jnp.where(transposition, parent, tree.max_nodes)
        tree = tree.replace(children_index=tree.children_index.at[
            rows, link_parent, action].set(known, mode="drop"))
        if tree.edge_rewards is not None:
            # Every evaluated edge keeps its own reward, also when full.
            edge_parent = jnp.where(walk.expand, parent, tree.max_nodes)
            tree = tree.replace(
                edge_rewards=tree.edge_rewards.at[rows, edge_parent, action].set(
                    reward, mode="drop"),
                edge_discounts=tree.edge_discounts.at[rows, edge_parent, action].set(
                    discount, mode="drop"))
        # Graph backup reads every value from the children; nothing to return.
        return tree, jnp.zeros((batch_size,), jnp.float32)

    # The walk ended on an existing node (terminal, or max_depth): its stored
    # value is the leaf value, and it counts one more visit.
    leaf = walk.path_nodes[rows, walk.num_edges]
    stopped = (walk.num_edges > 0) & ~walk.expand
    leaf_return_stop = (tree.node_rewards[rows, leaf]
                        + tree.node_discounts[rows, leaf] * tree.node_values[rows, leaf])
    tree = tree.replace(node_visits=tree.node_visits.at[
        rows, jnp.where(stopped, leaf, tree.max_nodes)].add(1, mode="drop"))
    leaf_return = jnp.where(walk.expand, reward + discount * value, leaf_return_stop)
    return tree, leaf_return


def backup(tree: Tree, walk: _Walk, leaf_return: chex.Array) -> Tree:
    """Tree-mode backup: bottom-up along each recorded path, add one visit to each
    node and edge and fold the discounted return into the node's running mean.

    ``leaf_return [B]`` is the return seen from the parent of the last edge.
    Paths never repeat a node, so each step's scatters are duplicate-free.
    The loop runs ``max(num_edges)`` times; its work per step is O(B).
    """
    rows = jnp.arange(tree.batch_size)

    def cond(carry):
        return carry[0] >= 0

    def body(carry):
        depth, ret, visits, values, edge_visits = carry
        on_path = depth < walk.num_edges
        node = walk.path_nodes[:, depth]
        action = walk.path_actions[:, depth]
        count_int = visits[rows, node]
        count = count_int.astype(jnp.float32)
        value = values[rows, node]
        new_value = (value * count + ret) / (count + 1.0)
        # A set of the gathered count (not a scatter-add) lets XLA update the
        # carried array in place instead of copying it on every step.
        visits = visits.at[rows, node].set(count_int + on_path.astype(jnp.int32))
        values = values.at[rows, node].set(jnp.where(on_path, new_value, value))
        edge_visits = edge_visits.at[rows, node, action].add(on_path.astype(jnp.int32))
        parent_ret = tree.node_rewards[rows, node] + tree.node_discounts[rows, node] * ret
        ret = jnp.where(on_path, parent_ret, ret)
        return depth - 1, ret, visits, values, edge_visits

    init = (jnp.max(walk.num_edges) - 1, leaf_return, tree.node_visits, tree.node_values,
            tree.edge_visits)
    _, _, visits, values, edge_visits = jax.lax.while_loop(cond, body, init)
    return tree.replace(node_visits=visits, node_values=values, edge_visits=edge_visits)


def backup_graph(tree: Tree, walk: _Walk) -> Tree:
    """Graph-mode backup: bottom-up along each path, count the edge taken and
    recompute the node from its children (``jaxpuct.graph.recompute_nodes``).
    The leaf node itself is not changed. O(B * A) per depth step."""
    rows = jnp.arange(tree.batch_size)

    def cond(carry):
        return carry[0] >= 0

    def body(carry):
        depth, visits, values, edge_visits = carry
        on_path = depth < walk.num_edges
        node = walk.path_nodes[:, depth]
        action = walk.path_actions[:, depth]
        edge_visits = edge_visits.at[rows, node, action].add(on_path.astype(jnp.int32))
        visits, values = graph_lib.recompute_nodes(tree, node, on_path, visits, values,
                                                   edge_visits)
        return depth - 1, visits, values, edge_visits

    init = (jnp.max(walk.num_edges) - 1, tree.node_visits, tree.node_values, tree.edge_visits)
    _, visits, values, edge_visits = jax.lax.while_loop(cond, body, init)
    return tree.replace(node_visits=visits, node_values=values, edge_visits=edge_visits)

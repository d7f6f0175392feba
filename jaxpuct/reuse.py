"""Tree reuse across moves: keep the part of the search below the move played.

After a move is played, the subtree (or, in graph search, the sub-graph) under
that move already holds a search of the new position: its visits, values and
priors are still valid. ``subtree`` makes it the new tree, compacted into the
same fixed-size arrays (``N = max_nodes`` does not change), so that
``search(..., tree=...)`` / ``alphazero_policy(..., tree=...)`` continue it and
the next move starts from ``N(child)`` visits instead of one (AlphaGo Zero,
Silver et al. 2017: "the search tree is reused at subsequent time-steps").

Layout of the returned tree:

* the new root is slot 0; the other kept nodes follow in increasing old slot
  index (in a tree that keeps every parent before its children, since nodes
  are created in that order);
* every node reachable from the new root is kept, with all its statistics:
  visit count, value, raw value, terminal flag, embedding, the reward and
  discount of the edge into it, the prior, edge visits and (renumbered) child
  indices of its edges; an edge visited while the old tree was full keeps its
  visits and still has no child;
* the new root's own ``node_rewards``/``node_discounts`` are reset to 0 (the
  edge into it from the old root no longer exists; ``init_tree`` stores 0
  there too);
* graph search: node hashes and per-edge rewards and discounts move with their
  nodes, and the transposition table is rebuilt for the new slots
  (``jaxpuct.graph.rebuild_hash_table``);
* ``root_prior`` is the new root's network prior ``children_prior[:, 0]``:
  no noise is carried over (``alphazero_policy(tree=...)`` draws fresh noise);
* freed slots are reset to ``init_tree``'s empty state (``UNEXPANDED`` edges,
  zero visits, priors, values and embeddings) and ``num_nodes`` counts the
  kept nodes, so the search fills the freed slots with new nodes.

When the move has no child node (the edge is unexpanded -- e.g. it was never
visited, or only while the tree was full --, illegal, or the action is
negative, as ``alphazero_policy`` returns at a root with no legal move) there
is nothing to reuse, and no embedding for the new position either. Those
elements get ``reused == False`` and a placeholder tree: one terminal root with
every action illegal, so a search leaves it alone and a policy returns action
-1. Re-initialise them from the new position with ``subtree_or_init``, which
picks, per element, the subtree or a fresh ``init_tree(root)``.

Cost: everything is batched and jit-able, with no host round-trip and no loop
over nodes. Reachability in tree mode uses the parent pointers and pointer
jumping: one ``[B, N, A]`` scatter, then ``O(log N)`` rounds of ``[B, N]``
gathers. In graph mode (``tree.node_hash`` set) a node may have several parents
and edges may even point back up, so reachability is a frontier expansion over
all edges repeated until nothing changes (one ``[B, N, A]`` scatter per level
of the sub-graph), and the transposition table is rebuilt (``N`` sequential
``[B]``-wide inserts). Compaction is a handful of ``[B, N]`` and ``[B, N, A]``
gathers. Nothing is ``O(N^2)``. ``python -m benchmarks.reuse_cost`` measures
it against one search.
"""

from __future__ import annotations

from typing import Any, Literal

import jax
import jax.numpy as jnp

from jaxpuct import graph as graph_lib
from jaxpuct import solver as solver_lib
from jaxpuct import validation
from jaxpuct.graph import GraphConfig
from jaxpuct.numerics import batch_where
from jaxpuct.roots import check_init_args, new_tree
from jaxpuct.tree import ILLEGAL, UNEXPANDED, Tree, present, with_second_moment

Reachability = Literal["auto", "pointer_jumping", "frontier"]
REACHABILITY_METHODS: tuple[Reachability, ...] = ("auto", "pointer_jumping", "frontier")


def subtree(tree: Tree, action: jax.Array, *, reachability: Reachability = "auto",
            graph: GraphConfig | None = None) -> tuple[Tree, jax.Array]:
    """The subtree under ``action`` played at the root, as a new tree.

    Args:
      tree: a ``Tree`` (``[B, N, ...]`` arrays).
      action: ``[B]`` int action played at each root; a negative action means
        that no move was played (nothing is reused).
      reachability: ``"auto"`` (pointer jumping for trees, frontier expansion
        when ``tree.node_hash`` is set), ``"pointer_jumping"`` (trees only:
        every node has at most one parent) or ``"frontier"`` (any graph).
      graph: optional; if given, it must be the ``GraphConfig`` the tree was
        built with (the tree carries it, and its ``max_probes`` rebuilds the
        transposition table).

    Returns:
      ``(new_tree, reused)``: ``new_tree`` has the same shapes as ``tree``
      (layout in the module docstring); ``reused [B]`` bool is ``False`` where
      the action had no child node: those elements hold a placeholder (a
      terminal root with no legal action and no embedding); see
      ``subtree_or_init``.
    """
    action = jnp.asarray(action)
    validation.check_tree_fits("tree", tree, None, None)
    validation.check_shape("action", action, (tree.batch_size,))
    validation.check_actions("action", action, tree.num_actions)
    if tree.chance is not None:
        raise ValueError(
            "subtree of a tree with chance nodes: the child under an action is a chance "
            "node, which no search continues. Use subtree_path(tree, actions) with "
            "actions [B, 2] = (action played, chance outcome seen).")
    return subtree_path(tree, action[:, None], reachability=reachability, graph=graph)


def subtree_path(tree: Tree, actions: jax.Array, *, reachability: Reachability = "auto",
                 graph: GraphConfig | None = None) -> tuple[Tree, jax.Array]:
    """The subtree reached by a sequence of moves from the root.

    For example own move then the opponent's reply, ``actions = [[a, b]]``.
    The moves of row ``b`` are ``actions[b, :k]`` where ``k`` is the position
    of the first negative entry (``-1`` padding), or ``K``. The walk follows
    existing child nodes only; ``reused[b]`` is ``False`` when one of those
    moves has no child node, or when the row is empty (its first entry is
    negative: no move was played). ``subtree(tree, a)`` is
    ``subtree_path(tree, a[:, None])``.

    Args:
      tree: a ``Tree``.
      actions: ``[B, K]`` int moves, ``-1`` padded.
      reachability: see ``subtree``.
      graph: see ``subtree``.

    Returns:
      ``(new_tree, reused [B] bool)`` as for ``subtree``.
    """
    new_tree, reused = _subtree_path(tree, actions, reachability)
    return _rebuild_hash_table(new_tree, graph), reused


def subtree_or_init(
    tree: Tree,
    action: jax.Array,
    root: Any,
    *,
    invalid_actions: jax.Array | None = None,
    root_prior: jax.Array | None = None,
    reachability: Reachability = "auto",
    graph: GraphConfig | None = None,
) -> tuple[Tree, jax.Array]:
    """``subtree`` where the move has a child node, a fresh tree elsewhere.

    The usual self-play step: after playing ``action``, pass the new
    position's ``root`` (as for ``search``); elements whose move was searched
    continue their subtree, the others (an unexpanded or illegal move, a
    negative action, e.g. after a game was reset) start from
    ``init_tree(root, max_nodes, root_prior, invalid_actions)``.

    Args:
      tree: a ``Tree``.
      action: ``[B]`` or ``[B, K]`` (a move sequence, as ``subtree_path``).
      root: ``RootFnOutput`` of the new positions (``[B, A]`` prior logits,
        ``[B]`` value, ``[B, ...]`` embedding, optional legal mask and, in
        graph mode, ``state_hash`` unless ``graph.hash_fn`` is set). Only
        read for the elements not reused.
      invalid_actions: optional ``[B, A]`` for the fresh roots (pass it to the
        search too to mask the reused ones: ``alphazero_policy(tree=...,
        invalid_actions=...)`` does).
      root_prior: optional ``[B, A]`` prior for the fresh roots.
      reachability: see ``subtree``.
      graph: see ``subtree``; the tree's own ``hash_fn``, if set, hashes the
        fresh roots.

    Returns:
      ``(new_tree, reused [B] bool)``, same shapes as ``tree``.
    """
    action = jnp.asarray(action)
    actions = action[:, None] if action.ndim == 1 else action
    validation.check_tree_fits("tree", tree, None, None)
    if tree.chance is not None:
        raise ValueError(
            "subtree_or_init of a tree with chance nodes is not supported: a fresh "
            "element needs the wide root that stochastic_policy builds. Continue with "
            "subtree_path and start the elements it could not reuse with a new search.")
    if tree.sampled is not None:
        raise ValueError(
            "subtree_or_init of a tree of sampled actions is not supported: a fresh "
            "element needs the root samples that sampled_policy draws. Continue with "
            "subtree(tree, output.action_slot) and start the elements it could not reuse "
            "with a new sampled_policy call.")
    reused_tree, reused = _subtree_path(tree, actions, reachability)
    _check_graph(tree, graph)
    batch_size, num_actions = check_init_args(root, tree.max_nodes, root_prior,
                                              invalid_actions, tree.graph)
    validation.check_tree_fits("tree", tree, batch_size, num_actions)
    fresh = new_tree(root, tree.max_nodes, root_prior, invalid_actions, None)
    if tree.node_sq_values is not None:
        fresh = with_second_moment(fresh)
    if tree.proof_plies is not None:
        fresh = solver_lib.with_proofs(fresh)
    if tree.is_graph:
        # The graph fields of a fresh root, shaped like the reused tree's (the
        # transposition table is rebuilt below for every element).
        root_hash = graph_lib.state_hash(present(tree.graph, "tree.graph"), root,
                                         root.embedding, "root")
        fresh = fresh.replace(
            node_hash=jnp.zeros_like(present(tree.node_hash, "tree.node_hash")).at[:, 0].set(
                root_hash),
            hash_table=reused_tree.hash_table,
            edge_rewards=None if tree.edge_rewards is None else jnp.zeros_like(
                tree.edge_rewards),
            edge_discounts=None if tree.edge_discounts is None else jnp.zeros_like(
                tree.edge_discounts),
            graph=tree.graph)
    return _rebuild_hash_table(batch_where(reused, reused_tree, fresh), graph), reused


def reachable(tree: Tree, start: jax.Array, method: Reachability = "auto") -> jax.Array:
    """``[B, N]`` bool: the used nodes reachable from ``start [B]`` along child edges.

    ``start`` itself is included. ``method``: ``"pointer_jumping"`` (trees:
    each node has at most one parent; ``O(B N A + B N log N)``), ``"frontier"``
    (any graph, cycles included: ``O(B N A)`` per level), ``"auto"`` (the
    former unless ``tree.node_hash`` is set).
    """
    validation.check_choice("reachability", method, REACHABILITY_METHODS)
    if method == "auto":
        method = "frontier" if tree.is_graph else "pointer_jumping"
    start = jnp.asarray(start, jnp.int32)
    children = _used_children(tree)
    if method == "pointer_jumping":
        return _reachable_pointer_jumping(children, start)
    return _reachable_frontier(children, start)


# ----------------------------------------------------------------------------------


def _used_children(tree: Tree) -> jax.Array:
    """``[B, N, A]`` child indices, negative for none and in unused slots."""
    used = jnp.arange(tree.max_nodes)[None, :] < tree.num_nodes[:, None]
    return jnp.where(used[:, :, None], tree.children_index, UNEXPANDED)


def _flat_targets(children: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """``[B * N * A]`` flat indices ``b * N + child`` of the edges with a child
    (and ``mask``), ``B * N`` (out of range) elsewhere.

    Scatters into a flat ``[B * N]`` array run about twice as fast on CPU as
    the same scatter with a separate batch index."""
    batch_size, num_nodes, _ = children.shape
    has_child = children >= 0
    if mask is not None:
        has_child = has_child & mask[:, :, None]
    base = (jnp.arange(batch_size, dtype=jnp.int32) * num_nodes)[:, None, None]
    return jnp.where(has_child, children + base, batch_size * num_nodes).reshape(-1)


def _reachable_pointer_jumping(children: jax.Array, start: jax.Array) -> jax.Array:
    batch_size, num_nodes, _ = children.shape
    node_ids = jnp.broadcast_to(jnp.arange(num_nodes, dtype=jnp.int32)[None, :, None],
                                children.shape).reshape(-1)
    # parent[b, c] = n for the edge n -> c; -1 for the root and unused slots.
    # (The one O(B N A) step; a stored parent array would make it O(B N).)
    parent = jnp.full((batch_size * num_nodes,), -1, jnp.int32).at[
        _flat_targets(children)].set(node_ids, mode="drop").reshape(batch_size, num_nodes)
    own = jnp.broadcast_to(jnp.arange(num_nodes, dtype=jnp.int32), (batch_size, num_nodes))
    # Every node jumps towards its ancestors and stops at `start` or at a node
    # with no parent. Each round doubles the distance jumped.
    jump = jnp.where((parent < 0) | (own == start[:, None]), own, parent)
    batch = jnp.arange(batch_size)[:, None]
    # In a tree, paths are at most N - 1 edges long: ceil(log2(N)) rounds reach
    # every stop (fewer when the tree is shallow: the loop ends when nothing
    # moves). The bound also ends the loop on input that is not a tree.
    max_rounds = max(1, (num_nodes - 1).bit_length())

    def cond(carry):
        rounds, _, changed = carry
        return changed & (rounds < max_rounds)

    def body(carry):
        rounds, jump, _ = carry
        new = jump[batch, jump]
        return rounds + 1, new, jnp.any(new != jump)

    _, jump, _ = jax.lax.while_loop(cond, body, (jnp.int32(0), jump, jnp.bool_(True)))
    return jump == start[:, None]


def _reachable_frontier(children: jax.Array, start: jax.Array) -> jax.Array:
    batch_size, num_nodes, _ = children.shape
    reach = jnp.zeros((batch_size, num_nodes), jnp.bool_).at[
        jnp.arange(batch_size), start].set(True)

    def cond(carry):
        _, changed = carry
        return changed

    def body(carry):
        reach, _ = carry
        new = reach.reshape(-1).at[_flat_targets(children, reach)].set(
            True, mode="drop").reshape(batch_size, num_nodes)
        return new, jnp.any(new != reach)

    # One round per level of the sub-graph, plus one that sees no change; at
    # most N rounds (each adds a node), cycles included.
    reach, _ = jax.lax.while_loop(cond, body, (reach, jnp.bool_(True)))
    return reach


def _walk(tree: Tree, actions: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(node [B], found [B])``: the node reached by the non-negative prefix of
    ``actions [B, K]``; ``found`` is False for an empty prefix or a missing child."""
    batch_size, num_steps = actions.shape
    rows = jnp.arange(batch_size)
    actions = actions.astype(jnp.int32)
    node = jnp.zeros((batch_size,), jnp.int32)
    found = actions[:, 0] >= 0
    active = found
    # K is small and static (a move or two): unrolled.
    for k in range(num_steps):
        action = actions[:, k]
        active = active & (action >= 0)
        in_range = (action >= 0) & (action < tree.num_actions)
        child = tree.children_index[rows, node, jnp.where(in_range, action, 0)]
        ok = in_range & (child >= 0)
        found = found & (~active | ok)
        node = jnp.where(active & ok, child, node)
        active = active & ok
    found = found & (tree.num_nodes > 0)
    return node, found


def _subtree_path(tree: Tree, actions: jax.Array, reachability: Reachability
                  ) -> tuple[Tree, jax.Array]:
    actions = jnp.asarray(actions)
    validation.check_tree_fits("tree", tree, None, None)
    if actions.ndim != 2 or actions.shape[0] != tree.batch_size:
        raise ValueError(f"actions must have shape [B, K] with B={tree.batch_size}, "
                         f"got {list(actions.shape)}.")
    validation.check_actions("actions", actions, tree.num_actions)
    new_root, reused = _walk(tree, actions)
    if tree.chance is not None:
        # Only a decision node can be a root that a search continues.
        reused = reused & tree.embeddings.is_decision[jnp.arange(tree.batch_size), new_root]
    keep = reachable(tree, new_root, reachability) & reused[:, None]
    return _compact(tree, new_root, keep, reused), reused


def _compact(tree: Tree, new_root: jax.Array, keep: jax.Array, reused: jax.Array) -> Tree:
    """Moves the kept nodes to the front (``new_root`` first, then increasing
    old index), remaps child indices and resets every other slot."""
    batch_size, num_nodes = tree.batch_size, tree.max_nodes
    batch = jnp.arange(batch_size)[:, None]
    own = jnp.arange(num_nodes, dtype=jnp.int32)[None, :]
    is_root = own == new_root[:, None]
    others = keep & ~is_root
    # new_index[b, n]: the new slot of kept node n (root 0, others after it).
    new_index = jnp.where(is_root, 0, jnp.cumsum(others, axis=1, dtype=jnp.int32))
    new_index = jnp.where(keep, new_index, num_nodes)
    count = jnp.sum(keep, axis=1, dtype=jnp.int32)
    # source[b, j]: the old slot moved to new slot j; out of range (N) where
    # none, so that the gathers below fill those slots with the empty state.
    source = jnp.full((batch_size, num_nodes), num_nodes, jnp.int32).at[
        batch, new_index].set(jnp.broadcast_to(own, (batch_size, num_nodes)), mode="drop")
    flat_source = jnp.where(source < num_nodes, source + batch * num_nodes,
                            batch_size * num_nodes).reshape(-1)

    def move(array, fill):
        # A gather of whole rows from the flattened [B * N, ...] array.
        flat = array.reshape((batch_size * num_nodes,) + array.shape[2:])
        moved = flat.at[flat_source].get(mode="fill", fill_value=fill)
        return moved.reshape(array.shape)

    # Child codes through one lookup table per tree: entry c + 2 holds the new
    # index of old node c, entries 0 and 1 keep ILLEGAL and UNEXPANDED.
    codes = jnp.broadcast_to(jnp.array([ILLEGAL, UNEXPANDED], jnp.int32), (batch_size, 2))
    table = jnp.concatenate([codes, new_index], axis=1).reshape(-1)
    table_base = (jnp.arange(batch_size, dtype=jnp.int32) * (num_nodes + 2))[:, None, None]
    children = move(tree.children_index, UNEXPANDED)
    children = table[children + 2 + table_base]

    # An element with nothing to reuse gets a placeholder root: terminal, no
    # legal action, one visit. (Selects over whole arrays, not `.at[:, 0].set`:
    # they fuse with the gathers above, where an update slice costs a copy.)
    at_root = jnp.broadcast_to(own == 0, (batch_size, num_nodes))
    placeholder = at_root & ~reused[:, None]
    children = jnp.where(placeholder[:, :, None], ILLEGAL, children)
    new = tree.replace(
        node_visits=jnp.where(placeholder, 1, move(tree.node_visits, 0)),
        raw_values=move(tree.raw_values, 0.0),
        node_values=move(tree.node_values, 0.0),
        node_rewards=jnp.where(at_root, 0.0, move(tree.node_rewards, 0.0)),
        node_discounts=jnp.where(at_root, 0.0, move(tree.node_discounts, 0.0)),
        node_terminal=move(tree.node_terminal, False) | placeholder,
        embeddings=jax.tree.map(lambda x: move(x, 0), tree.embeddings),
        children_index=children.astype(tree.children_index.dtype),
        children_prior=move(tree.children_prior, 0.0),
        edge_visits=move(tree.edge_visits, 0),
        num_nodes=jnp.where(reused, count, 1).astype(tree.num_nodes.dtype),
        node_hash=move(tree.node_hash, 0) if tree.is_graph else None,
        edge_rewards=None if tree.edge_rewards is None else move(tree.edge_rewards, 0.0),
        edge_discounts=(None if tree.edge_discounts is None
                        else move(tree.edge_discounts, 0.0)),
        node_sq_values=(None if tree.node_sq_values is None
                        else move(tree.node_sq_values, 0.0)),
        # Proofs stay valid in a subtree; the placeholder root is terminal.
        proof_plies=(None if tree.proof_plies is None else jnp.where(
            placeholder, 0, move(tree.proof_plies, solver_lib.UNPROVEN))),
        early_stop=None,  # one search's state, not the subtree's
    )
    return new.replace(root_prior=new.children_prior[:, 0])


def _check_graph(tree: Tree, graph: GraphConfig | None) -> None:
    """A ``graph`` given to reuse must be the tree's own."""
    validation.check_instance("graph", graph, GraphConfig, allow_none=True)
    if graph is not None and (tree.graph is None or not graph.same_storage(tree.graph)):
        built = "tree search" if tree.graph is None else repr(tree.graph)
        raise ValueError(f"graph={graph!r} does not match the tree, which was built for "
                         f"{built} (omit graph=: the tree carries its configuration).")


def _rebuild_hash_table(tree: Tree, graph: GraphConfig | None) -> Tree:
    """Graph mode: the transposition table indexes slots, so it is rebuilt
    after the slots moved (``jaxpuct.graph.rebuild_hash_table`` with the tree's
    own probe count, O(B N P)). Tree mode: nothing to do."""
    _check_graph(tree, graph)
    return graph_lib.rebuild_hash_table(tree)

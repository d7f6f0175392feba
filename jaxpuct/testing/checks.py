"""Structural invariants of a finished search tree, checked on the host.

:func:`check_tree` checks what every tree (or graph) returned by
``jaxpuct.search`` / ``jaxpuct.alphazero_policy`` satisfies whatever the game:
counts, links and capacity. Game-specific checks (that each node is the state
its path leads to, that values lie within the game's bounds) belong to the
caller; the tests of this repository add them on top (``tests/search_cases.py``).
"""

from __future__ import annotations

import jax
import numpy as np

from jaxpuct.tree import ILLEGAL, UNEXPANDED, Tree

__all__ = ["check_tree"]


def check_tree(tree: Tree, num_simulations: int | None = None, *,
               check_unused: bool = True) -> None:
    """Raises ``AssertionError`` naming the tree, node and rule if ``tree`` is broken.

    Args:
      tree: a batch of ``B`` trees with ``N`` node slots and ``A`` actions (device
        or host arrays).
      num_simulations: ``S``, the number of simulations the tree was searched for
        from a fresh root (``None``: a continued or reused tree, whose root count
        is not known; the root checks are skipped).
      check_unused: also check that the slots at and above ``num_nodes`` still
        hold their initial values (true of ``init_tree`` and of ``search``; a
        tree built some other way may leave garbage there).

    Checked, for every batch element ``b`` with ``n = num_nodes[b]``:

    * ``1 <= n <= N`` and, given ``S``, ``n <= S + 1`` (a simulation adds at most
      one node);
    * given ``S``: the root has ``S + 1`` visits and its edges ``S`` if any root
      action is legal, else 1 and 0 (mctx's convention, see ``jaxpuct.tree``);
    * every child index is ``ILLEGAL``, ``UNEXPANDED`` or a used slot in
      ``[1, n)``; in tree mode (``node_hash is None``) every non-root used node has
      exactly one parent edge, created after its parent (a larger index), and
      ``N(parent, a) == N(child)``; in graph mode a child differs from its parent;
    * illegal edges, and edges of terminal nodes, have no visits; a visited edge
      has a child unless the tree is full (``n == N``);
    * every used node has at least one visit, and a node whose edges were visited
      has ``N(n) == 1 + sum_a N(n, a)`` (its own evaluation plus one per
      simulation through it; nodes at the depth limit keep their edges unvisited;
      a node proven by the MCTS-solver has at least that many: walks stop there);
    * with ``check_unused``: unused slots have no visits, no values, no prior and
      ``UNEXPANDED`` children.

    Raises:
      ValueError: ``tree`` is not a ``jaxpuct.Tree`` or its arrays disagree in shape.
      AssertionError: an invariant does not hold (the message says which).
    """
    if not isinstance(tree, Tree):
        raise ValueError(f"check_tree expects a jaxpuct.Tree, got {type(tree).__name__}")
    t = jax.tree.map(np.asarray, tree)
    if t.children_index.ndim != 3:
        raise ValueError(f"children_index must be [B, N, A], got shape {t.children_index.shape}")
    batch, capacity, num_actions = t.children_index.shape
    for name in ("children_prior", "edge_visits"):
        if getattr(t, name).shape != (batch, capacity, num_actions):
            raise ValueError(f"{name} has shape {getattr(t, name).shape}, expected "
                             f"{(batch, capacity, num_actions)} like children_index")
    for name in ("node_visits", "raw_values", "node_values", "node_terminal"):
        if getattr(t, name).shape != (batch, capacity):
            raise ValueError(f"{name} has shape {getattr(t, name).shape}, expected "
                             f"{(batch, capacity)}")
    if t.num_nodes.shape != (batch,):
        raise ValueError(f"num_nodes has shape {t.num_nodes.shape}, expected {(batch,)}")
    graph = t.node_hash is not None
    for b in range(batch):
        _check_one(t, b, num_simulations, graph, check_unused)


def _check_one(t: Tree, b: int, sims: int | None, graph: bool, check_unused: bool) -> None:
    capacity = t.children_index.shape[1]
    n = int(t.num_nodes[b])

    def require(ok, message: str) -> None:
        if not ok:
            raise AssertionError(f"tree {b} (num_nodes={n}): {message}")

    require(1 <= n <= capacity, f"num_nodes must be in [1, {capacity}]")
    kids = t.children_index[b]
    visits = t.edge_visits[b]
    node_visits = t.node_visits[b]

    if sims is not None:
        require(n <= sims + 1, f"more nodes than {sims} simulations + 1 can create")
        searched = bool((kids[0] != ILLEGAL).any())
        expected = sims + 1 if searched else 1
        require(node_visits[0] == expected,
                f"root visits {node_visits[0]} != {expected} (S + 1 after S simulations, "
                "1 if no root action is legal)")
        require(visits[0].sum() == (sims if searched else 0),
                f"root edge visits sum to {visits[0].sum()}, expected "
                f"{sims if searched else 0}")

    if check_unused:
        require(np.all(node_visits[n:] == 0), "an unused slot has visits")
        require(np.all(kids[n:] == UNEXPANDED), "an unused slot has children")
        require(np.all(visits[n:] == 0), "an unused slot has edge visits")
        require(np.all(t.children_prior[b, n:] == 0), "an unused slot has a prior")
        require(np.all(t.node_values[b, n:] == 0) and np.all(t.raw_values[b, n:] == 0),
                "an unused slot has a value")

    used = kids[:n]
    bad = ~((used == ILLEGAL) | (used == UNEXPANDED) | ((used >= 1) & (used < n)))
    if bad.any():
        p, a = np.argwhere(bad)[0]
        require(False, f"node {p} action {a}: child index {used[p, a]} is neither ILLEGAL, "
                f"UNEXPANDED nor a used slot in [1, {n})")
    links = np.argwhere(used >= 0)
    if graph:
        for p, a in links:
            require(used[p, a] != p, f"node {p} action {a} links the node to itself")
    else:
        child_ids = np.sort(used[used >= 0])
        require(np.array_equal(child_ids, np.arange(1, n)),
                "every non-root used node must have exactly one parent edge (children "
                f"indices {child_ids.tolist()} are not 1..{n - 1} once each)")
        for p, a in links:
            c = used[p, a]
            require(c > p, f"node {p} action {a}: child {c} was created before its parent")
            require(visits[p, a] == node_visits[c],
                    f"node {p} action {a}: edge visits {visits[p, a]} != visits "
                    f"{node_visits[c]} of its child {c}")

    full = n == capacity
    for i in range(n):
        require(node_visits[i] >= 1, f"node {i} is used but has no visit")
        illegal = used[i] == ILLEGAL
        require(np.all(visits[i][illegal] == 0), f"node {i}: an illegal action was visited")
        edge_sum = int(visits[i].sum())
        if t.node_terminal[b, i]:
            require(edge_sum == 0, f"node {i} is terminal but its edges have visits")
            continue
        childless = (used[i] == UNEXPANDED) & (visits[i] > 0)
        require(full or not childless.any(),
                f"node {i}: a visited edge has no child though the tree is not full")
        proven = t.proof_plies is not None and t.proof_plies[b, i] >= 0
        if edge_sum and proven:
            # Walks stop at a proven node: each such stop is a visit of the node
            # (and of the edge into it), not of its edges.
            require(node_visits[i] >= 1 + edge_sum,
                    f"node {i}: visits {node_visits[i]} < 1 + {edge_sum} edge visits")
        elif edge_sum:
            require(node_visits[i] == 1 + edge_sum,
                    f"node {i}: visits {node_visits[i]} != 1 + {edge_sum} edge visits")

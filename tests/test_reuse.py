"""Tests of tree reuse across moves (``jaxpuct.reuse``) and of searches that
continue a reused tree with a capacity larger than one search.

Everything runs under ``jit`` with a few fixed shapes (compiled once per
module). The game is tic-tac-toe with a *noisy* evaluator: the exact minimax
value plus Gaussian noise and a prior that leans towards the optimal moves, so
that searches concentrate like they do with a trained network and the subtrees
worth reusing are not tiny.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpuct
from jaxpuct import reuse
from jaxpuct.testing import random_games, tictactoe
from jaxpuct.tree import ILLEGAL, UNEXPANDED, Tree

S = 16  # simulations per search
N = 2 * S  # capacity: twice one search, the usual setting for reuse in self-play
P = tictactoe.parse


# ------------------------------------------------------------------ noisy evaluator


@functools.cache
def _tables() -> tuple[np.ndarray, np.ndarray]:
    """``([3**9] values, [3**9, 9] logits)``: exact value + N(0, 0.5^2) clipped to
    [-1, 1]; logits +1 on optimal moves plus N(0, 1). Fixed seed."""
    rng = np.random.default_rng(0)
    exact = tictactoe.value_table()
    values = np.clip(exact + 0.5 * rng.standard_normal(exact.shape), -1.0, 1.0)
    logits = rng.standard_normal((3**9, 9))
    for pos in tictactoe.all_positions():
        for a in tictactoe.optimal_moves(pos):
            logits[tictactoe.code(pos), a] += 1.0
    return values.astype(np.float32), logits.astype(np.float32)


def _evaluate(state: tictactoe.State) -> tuple[jax.Array, jax.Array]:
    values, logits = _tables()
    code = tictactoe.codes(state)
    return jnp.where(state.terminal, 0.0, jnp.asarray(values)[code]), jnp.asarray(logits)[code]


def _recurrent_fn(params, rng_key, action, embedding):
    del params, rng_key
    state, reward, terminal = tictactoe.step(embedding, action)
    value, logits = _evaluate(state)
    out = jaxpuct.RecurrentFnOutput(
        reward=reward, discount=-jnp.ones_like(reward), prior_logits=logits, value=value,
        legal_action_mask=tictactoe.legal(state), terminal=terminal)
    return out, state


def _root(state: tictactoe.State) -> jaxpuct.RootFnOutput:
    value, logits = _evaluate(state)
    return jaxpuct.RootFnOutput(prior_logits=logits, value=value, embedding=state,
                                legal_action_mask=tictactoe.legal(state))


# ------------------------------------------------------------------ compiled once

_KEY = jax.random.key(0)
_init = jax.jit(lambda state: jaxpuct.init_tree(_root(state), N))
_search_more = jax.jit(
    lambda tree: jaxpuct.search(None, _KEY, None, _recurrent_fn, S, tree=tree))
_subtree = jax.jit(reuse.subtree)
_subtree_path = jax.jit(reuse.subtree_path)
_subtree_or_init = jax.jit(
    lambda tree, action, state: reuse.subtree_or_init(tree, action, _root(state)))
_step = jax.jit(tictactoe.step)


@functools.partial(jax.jit, static_argnames="method")
def _reachable(tree, start, method):
    return reuse.reachable(tree, start, method)


_policy = jax.jit(lambda key, tree: jaxpuct.alphazero_policy(
    None, key, None, _recurrent_fn, S, tree=tree, dirichlet_fraction=0.25,
    dirichlet_alpha=0.3, temperature=1.0))


def _self_play_step(key, tree, state):
    """One move of self-play with tree reuse: search (noise, τ = 1), play, reuse.

    Finished games restart from the empty board with a fresh tree."""
    out = _policy(key, tree)
    new_state, _, _ = _step(state, jnp.maximum(out.action, 0))
    done = new_state.terminal | (out.action < 0)
    initial = tictactoe.initial(state.board.shape[0])
    next_state = jax.tree.map(
        lambda a, b: jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), a, b),
        initial, new_state)
    next_tree, reused = _subtree_or_init(out.search_tree, jnp.where(done, -1, out.action),
                                         next_state)
    return out, next_tree, reused, next_state


_POSITIONS = [
    tictactoe.EMPTY,  # big game: fills the tree
    P("X.. .O. ..."),
    P("XO. .X. ..."),
    P("XOX OXO ..."),  # 3 empty cells: at most 16 nodes, never full
]


def _positions_state(positions=_POSITIONS) -> tictactoe.State:
    return tictactoe.batch(list(positions))


def _np(tree: Tree) -> dict[str, np.ndarray]:
    """Host copy: every array field, embeddings flattened to ``emb0``, ``emb1``..."""
    out = {name: np.asarray(getattr(tree, name)) for name in (
        "node_visits", "raw_values", "node_values", "node_rewards", "node_discounts",
        "node_terminal", "children_index", "children_prior", "edge_visits", "root_prior",
        "num_nodes")}
    for i, leaf in enumerate(jax.tree.leaves(tree.embeddings)):
        out[f"emb{i}"] = np.asarray(leaf)
    return out


NODE_FIELDS = ("node_visits", "raw_values", "node_values", "node_terminal")
EDGE_FIELDS = ("children_prior", "edge_visits")


def _assert_slot_empty(new: dict, b: int, n: int) -> None:
    for name in NODE_FIELDS + ("node_rewards", "node_discounts") + EDGE_FIELDS:
        assert not np.any(new[name][b, n]), (name, b, n)
    for name in new:
        if name.startswith("emb"):
            assert not np.any(new[name][b, n]), (name, b, n)
    assert np.all(new["children_index"][b, n] == UNEXPANDED), (b, n)


def _check_against_numpy_walk(old: dict, new: dict, b: int, path) -> bool:
    """Checks element ``b`` of ``new`` against a NumPy walk of ``old``.

    Returns whether a subtree was reused. Independent of the implementation:
    walks the old and the new tree in parallel from the node reached by
    ``path`` and compares every statistic; then checks the documented order
    (new root first, then increasing old index) and the freed slots.
    """
    node, found = 0, len(path) > 0 and path[0] >= 0
    for a in path:
        if a < 0:
            break
        child = old["children_index"][b, node, a]
        if child < 0:
            found = False
            break
        node = int(child)
    if not found:
        assert new["num_nodes"][b] == 1
        assert new["node_visits"][b, 0] == 1 and new["node_terminal"][b, 0]
        assert np.all(new["children_index"][b, 0] == ILLEGAL)
        assert not np.any(new["root_prior"][b])
        for n in range(1, new["node_visits"].shape[1]):
            _assert_slot_empty(new, b, n)
        return False

    mapping = {node: 0}
    stack = [node]
    while stack:
        o = stack.pop()
        n = mapping[o]
        for name in NODE_FIELDS + EDGE_FIELDS:
            np.testing.assert_array_equal(new[name][b, n], old[name][b, o], err_msg=name)
        for name in old:
            if name.startswith("emb"):
                np.testing.assert_array_equal(new[name][b, n], old[name][b, o], err_msg=name)
        for name in ("node_rewards", "node_discounts"):
            expected = 0.0 if n == 0 else old[name][b, o]
            assert new[name][b, n] == expected, name
        for a in range(old["children_index"].shape[2]):
            oc, nc = int(old["children_index"][b, o, a]), int(new["children_index"][b, n, a])
            if oc < 0:
                assert nc == oc
                continue
            assert nc >= 0
            if oc in mapping:
                assert mapping[oc] == nc
            else:
                assert nc not in mapping.values()
                mapping[oc] = nc
                stack.append(oc)
    count = int(new["num_nodes"][b])
    assert sorted(mapping.values()) == list(range(count))
    # Documented order: increasing old index (the new root is the smallest in a tree).
    assert [mapping[o] for o in sorted(mapping)] == list(range(count))
    np.testing.assert_array_equal(new["root_prior"][b], new["children_prior"][b, 0])
    for n in range(count, new["node_visits"].shape[1]):
        _assert_slot_empty(new, b, n)
    return True


def _check_visit_sums(tree: dict, b: int) -> None:
    """Tree-mode invariants: a non-terminal node's edges hold all its visits but
    its first; a child has at most its edge's visits (equal unless the edge was
    visited while the tree was full); terminal nodes have no edge visit."""
    for n in range(int(tree["num_nodes"][b])):
        edges = tree["edge_visits"][b, n]
        if tree["node_terminal"][b, n]:
            assert not edges.any()
        else:
            assert edges.sum() == tree["node_visits"][b, n] - 1, (b, n)
        for a in np.flatnonzero(tree["children_index"][b, n] >= 0):
            child = tree["children_index"][b, n, a]
            assert 1 <= tree["node_visits"][b, child] <= edges[a]


def _first_trees():
    state = _positions_state()
    return state, _search_more(_init(state))


# ------------------------------------------------------------------ tests


def test_subtree_matches_numpy_walk():
    _, tree = _first_trees()
    old = _np(tree)
    visits = old["edge_visits"][:, 0]
    rows = []
    for b in range(len(_POSITIONS)):
        rows.append(int(np.argmax(visits[b])))
    # Element 1: a legal move that was never expanded, if any (else the least visited).
    unexpanded = np.flatnonzero(old["children_index"][1, 0] == UNEXPANDED)
    rows[1] = int(unexpanded[0]) if unexpanded.size else int(np.argmin(visits[1]))
    # Element 2: an occupied cell (illegal).
    rows[2] = 0
    action = np.array(rows, np.int32)
    new, reused = _subtree(tree, jnp.asarray(action))
    new = _np(new)
    results = [_check_against_numpy_walk(old, new, b, [action[b]]) for b in range(4)]
    np.testing.assert_array_equal(np.asarray(reused), results)
    assert results[0] and results[3] and not results[2]

    # action -1: nothing played, nothing reused.
    new, reused = _subtree(tree, jnp.full((4,), -1, jnp.int32))
    assert not np.asarray(reused).any()
    new = _np(new)
    for b in range(4):
        assert not _check_against_numpy_walk(old, new, b, [-1])


def test_subtree_path_matches_two_subtrees_and_numpy_walk():
    _, tree = _first_trees()
    old = _np(tree)
    first = np.argmax(old["edge_visits"][:, 0], axis=-1).astype(np.int32)
    rows = np.arange(4)
    child = old["children_index"][rows, 0, first]
    second = np.argmax(old["edge_visits"][rows, child], axis=-1).astype(np.int32)
    actions = np.stack([first, second], axis=1)
    actions[2, 1] = -1  # padding: stops after one move
    actions[3] = -1  # empty path: nothing reused
    new, reused = _subtree_path(tree, jnp.asarray(actions))
    once, reused_once = _subtree(tree, jnp.asarray(first))
    twice, reused_twice = _subtree(once, jnp.asarray(np.where(actions[:, 1] >= 0,
                                                              actions[:, 1], 0)))
    new_np = _np(new)
    for b in range(4):
        ok = _check_against_numpy_walk(old, new_np, b, list(actions[b]))
        assert ok == bool(reused[b])
    assert list(np.asarray(reused)) == [True, True, True, False]
    # Element 2 stopped after one move; elements 0, 1 went two moves deep, exactly
    # as two successive subtree calls (the order of kept nodes is preserved).
    for name, value in _np(new).items():
        np.testing.assert_array_equal(value[:2], _np(twice)[name][:2], err_msg=name)
        np.testing.assert_array_equal(value[2], _np(once)[name][2], err_msg=name)


def test_reachability_methods_agree_on_trees():
    _, tree = _first_trees()
    tree = _search_more(_search_more(tree))  # deeper trees, full for element 0
    for start in range(0, N, 3):
        starts = jnp.full((4,), start, jnp.int32)
        jumping = _reachable(tree, starts, "pointer_jumping")
        frontier = _reachable(tree, starts, "frontier")
        np.testing.assert_array_equal(np.asarray(jumping), np.asarray(frontier))
    old = _np(tree)
    # Against a NumPy depth-first walk from the root: every used node is reachable.
    reach = np.asarray(_reachable(tree, jnp.zeros((4,), jnp.int32), "pointer_jumping"))
    for b in range(4):
        np.testing.assert_array_equal(reach[b], np.arange(N) < old["num_nodes"][b])


def _dag_tree() -> Tree:
    """A hand-made graph (as graph search builds it, hash table left out):
    0 -> 1, 2;  1 -> 3;  2 -> 3 (shared), 4;  3 -> 1 (a cycle);  5 unreachable."""
    num_nodes, num_actions = 8, 3
    children = np.full((1, num_nodes, num_actions), UNEXPANDED, np.int32)
    children[0, 0, :2] = [1, 2]
    children[0, 0, 2] = ILLEGAL
    children[0, 1, 0] = 3
    children[0, 2, :2] = [3, 4]
    children[0, 3, 1] = 1
    children[0, 5, 0] = 4
    used = (np.arange(num_nodes) < 6)[None]
    ids = np.arange(num_nodes, dtype=np.float32)[None]
    return Tree(
        node_visits=jnp.asarray(np.where(used, 10 + ids, 0).astype(np.int32)),
        raw_values=jnp.asarray(np.where(used, ids / 10, 0).astype(np.float32)),
        node_values=jnp.asarray(np.where(used, -ids / 10, 0).astype(np.float32)),
        node_rewards=jnp.asarray(np.where(used, ids, 0).astype(np.float32)),
        node_discounts=jnp.asarray(np.where(used, -1.0, 0).astype(np.float32)),
        node_terminal=jnp.asarray(ids == 4),
        embeddings=jnp.asarray(np.where(used, 100 + ids, 0).astype(np.int32)),
        children_index=jnp.asarray(children),
        children_prior=jnp.asarray(np.where(used[:, :, None], 1 / 3, 0.0)
                                   * np.ones((1, num_nodes, num_actions), np.float32)),
        edge_visits=jnp.asarray((children >= 0).astype(np.int32)),
        root_prior=jnp.full((1, num_actions), 0.5, jnp.float32),
        num_nodes=jnp.array([6], jnp.int32),
    )


def test_frontier_reuse_of_a_dag_keeps_every_reachable_node():
    dag = _dag_tree()
    subgraph = jax.jit(functools.partial(reuse.subtree, reachability="frontier"))
    # From node 2: 2, 3, 4 and 1 (through the cycle 3 -> 1). New root first, then
    # increasing old index: 2 -> 0, 1 -> 1, 3 -> 2, 4 -> 3.
    new, reused = subgraph(dag, jnp.array([1], jnp.int32))
    assert bool(reused[0]) and int(new.num_nodes[0]) == 4
    np.testing.assert_array_equal(np.asarray(new.embeddings[0, :5]), [102, 101, 103, 104, 0])
    np.testing.assert_array_equal(np.asarray(new.children_index[0, :4]),
                                  [[2, 3, -1], [2, -1, -1], [-1, 1, -1], [-1, -1, -1]])
    np.testing.assert_array_equal(np.asarray(new.node_visits[0]), [12, 11, 13, 14, 0, 0, 0, 0])
    np.testing.assert_array_equal(np.asarray(new.node_terminal[0, :4]), [0, 0, 0, 1])
    np.testing.assert_array_equal(np.asarray(new.node_rewards[0, :4]), [0, 1, 3, 4])
    # From node 1: 1 and 3 only.
    new, _ = subgraph(dag, jnp.array([0], jnp.int32))
    assert int(new.num_nodes[0]) == 2
    np.testing.assert_array_equal(np.asarray(new.children_index[0, :2]),
                                  [[1, -1, -1], [-1, 0, -1]])
    np.testing.assert_array_equal(np.asarray(new.embeddings[0, :3]), [101, 103, 0])
    with pytest.raises(ValueError, match="reachability"):
        reuse.subtree(dag, jnp.array([0]), reachability="bfs")


GRAPH = jaxpuct.GraphConfig()
_GAME_RF = random_games.make_recurrent_fn(with_hash=True)


@jax.jit
def _graph_search(game, roots):
    root = random_games.root(game, roots, with_hash=True)
    return jaxpuct.search(game, _KEY, root, _GAME_RF, 2 * S, max_nodes=N, graph=GRAPH)


@jax.jit
def _graph_reuse(game, tree, action, next_roots):
    """Reuse at ``action`` (a fresh root where it has no child), S more
    simulations, and a lookup of every node's hash in the rebuilt table."""
    next_root = random_games.root(game, next_roots, with_hash=True)
    new, reused = reuse.subtree_or_init(tree, action, next_root, graph=GRAPH)
    more = jaxpuct.search(game, _KEY, None, _GAME_RF, S, tree=new, graph=GRAPH)
    found = jax.vmap(lambda h: jaxpuct.graph.lookup(new, GRAPH.max_probes, h),
                     in_axes=1, out_axes=1)(new.node_hash)
    return new, reused, more, found


def test_graph_mode_keeps_every_reachable_node_and_rebuilds_the_table():
    """Graph search on random games with transpositions (DAGs): the reused
    sub-graph holds exactly the nodes a NumPy breadth-first walk reaches, in
    the documented order, with their hashes, per-edge rewards and a rebuilt
    transposition table; the search continues from it."""
    games = []
    for seed in range(100):  # games whose root has two moves that do not end it
        game = random_games.random_game(seed, num_actions=3, depth=6, merge_prob=0.5,
                                        reward_mode="dense", value_noise=0.3)
        kids = game.children[0][game.children[0] >= 0]
        if (~game.terminal[kids]).sum() >= 2 and len(games) < 4:
            games.append(game)
    game, roots = random_games.stack_games(games)
    tree = _graph_search(game, jnp.asarray(roots))
    old = _np(tree)
    children = old["children_index"]
    # The graphs share nodes: some node has two parents.
    assert max(np.bincount(c[c >= 0]).max() for c in children.reshape(4, -1)) >= 2
    # The most visited move to a non-terminal node.
    rows = np.arange(4)[:, None]
    live = (children[:, 0] >= 0) & ~old["node_terminal"][rows, np.maximum(children[:, 0], 0)]
    action = np.argmax(np.where(live, old["edge_visits"][:, 0], -1), -1).astype(np.int32)
    assert live[rows[:, 0], action].all()
    missing = np.flatnonzero(children[1, 0] < 0)
    action[1] = missing[0] if missing.size else -1  # no child: a fresh root
    next_roots = np.where(action >= 0, game.children[roots, np.maximum(action, 0)], -1)
    next_roots = np.where(next_roots >= 0, next_roots, roots).astype(np.int32)
    new, reused, more, found = _graph_reuse(game, tree, jnp.asarray(action),
                                            jnp.asarray(next_roots))
    new_np = _np(new)
    for name in ("node_hash", "edge_rewards", "edge_discounts"):
        old[name], new_np[name] = np.asarray(getattr(tree, name)), np.asarray(getattr(new, name))
    assert list(np.asarray(reused)) == [True, False, True, True]
    for b in range(4):
        if not reused[b]:
            assert new_np["num_nodes"][b] == 1 and new_np["emb0"][b, 0] == next_roots[b]
            assert np.asarray(found)[b, 0] == 0
            continue
        child = int(children[b, 0, action[b]])
        seen, frontier = {child}, [child]
        while frontier:
            frontier = [int(c) for n in frontier for c in children[b, n]
                        if c >= 0 and int(c) not in seen]
            seen.update(frontier)
        order = [child] + sorted(seen - {child})  # new root first, then old order
        mapping = {o: i for i, o in enumerate(order)}
        assert new_np["num_nodes"][b] == len(order)
        for i, o in enumerate(order):
            for name in NODE_FIELDS + EDGE_FIELDS + ("node_hash", "edge_rewards",
                                                     "edge_discounts", "emb0"):
                np.testing.assert_array_equal(new_np[name][b, i], old[name][b, o],
                                              err_msg=name)
            expected = [mapping[c] if c >= 0 else c for c in children[b, o]]
            np.testing.assert_array_equal(new_np["children_index"][b, i], expected)
        # Every kept node is found at its new slot; freed slots hold nothing.
        np.testing.assert_array_equal(np.asarray(found)[b, :len(order)], np.arange(len(order)))
        for n in range(len(order), N):
            _assert_slot_empty(new_np, b, n)
            assert not new_np["node_hash"][b, n].any() and not new_np["edge_rewards"][b, n].any()
    # The search goes on from the reused roots and from the fresh one.
    visits = new_np["node_visits"][:, 0]
    np.testing.assert_array_equal(np.asarray(more.node_visits[:, 0]), visits + S)
    np.testing.assert_array_equal(np.asarray(more.edge_visits[:, 0]).sum(-1), visits - 1 + S)
    assert (np.asarray(more.num_nodes) <= N).all()


def test_continued_search_adds_simulations_and_keeps_sums():
    _, tree = _first_trees()
    old = _np(tree)
    action = np.argmax(old["edge_visits"][:, 0], axis=-1).astype(np.int32)
    child = old["children_index"][np.arange(4), 0, action]
    reused_tree, reused = _subtree(tree, jnp.asarray(action))
    assert np.asarray(reused).all()
    cont = _np(_search_more(reused_tree))
    child_visits = old["node_visits"][np.arange(4), child]
    for b in range(4):
        if old["node_terminal"][b, child[b]]:
            continue
        assert cont["node_visits"][b, 0] == child_visits[b] + S
        assert cont["edge_visits"][b, 0].sum() == child_visits[b] - 1 + S
        assert cont["num_nodes"][b] <= N
        _check_visit_sums(cont, b)


def test_full_tree_keeps_nodes_and_counts_simulations():
    state, tree = _first_trees()
    action = jnp.asarray(np.argmax(np.asarray(tree.edge_visits[:, 0]), -1).astype(np.int32))
    tree, _ = _subtree(tree, action)
    start_visits = np.asarray(tree.node_visits[:, 0])
    searches, filled = 0, set()
    while 0 not in filled or searches < 4:
        before = _np(tree)
        tree = _search_more(tree)
        searches += 1
        after = _np(tree)
        assert (after["num_nodes"] <= N).all()
        np.testing.assert_array_equal(after["node_visits"][:, 0], start_visits + searches * S)
        np.testing.assert_array_equal(after["edge_visits"][:, 0].sum(-1),
                                      start_visits - 1 + searches * S)
        for b in range(4):
            _check_visit_sums(after, b)
            used = int(before["num_nodes"][b])
            # Nodes that existed before the search keep their data and their links.
            for name in ("raw_values", "node_rewards", "node_discounts", "node_terminal",
                         "children_prior", "emb0", "emb1", "emb2"):
                np.testing.assert_array_equal(after[name][b, :used], before[name][b, :used],
                                              err_msg=name)
            linked = before["children_index"][b, :used] >= 0
            np.testing.assert_array_equal(after["children_index"][b, :used][linked],
                                          before["children_index"][b, :used][linked])
            if before["num_nodes"][b] == N:  # already full: nothing stored at all
                assert after["num_nodes"][b] == N
                np.testing.assert_array_equal(after["children_index"][b],
                                              before["children_index"][b])
                filled.add(b)
        assert searches < 20
    assert int(after["num_nodes"][0]) == N
    assert 3 not in filled and int(after["num_nodes"][3]) < N  # a small game never fills


def test_batch_elements_reuse_independently():
    """A batch with a normal reuse, a missing child (fresh tree), an illegal move
    and a small game, searched on until element 0 is full: each element equals
    the same pipeline run on it alone (a batch of copies of it)."""
    state, tree = _first_trees()
    old = _np(tree)
    action = np.argmax(old["edge_visits"][:, 0], axis=-1).astype(np.int32)
    unexpanded = np.flatnonzero(old["children_index"][1, 0] == UNEXPANDED)
    action[1] = unexpanded[0] if unexpanded.size else -1
    action[2] = 0  # occupied: illegal
    next_state, _, _ = _step(state, jnp.asarray(np.maximum(action, 0)))

    def pipeline(st, tr, act):
        tr, reused = _subtree_or_init(tr, act, st)
        for _ in range(3):
            tr = _search_more(tr)
        return _np(tr), np.asarray(reused)

    batch, reused = pipeline(next_state, tree, jnp.asarray(action))
    assert list(reused) == [True, False, False, True]
    assert batch["num_nodes"][0] == N
    # Element 1 restarted from the position after its move: a fresh 3S search.
    assert batch["node_visits"][1, 0] == 1 + 3 * S
    for b in range(4):
        # Element b with no other element beside it: a batch of copies of it
        # (same shapes, so the compiled functions are shared).
        alone_state = jax.tree.map(lambda x, b=b: jnp.repeat(x[b:b + 1], 4, axis=0),
                                   next_state)
        alone_tree = jax.tree.map(lambda x, b=b: jnp.repeat(x[b:b + 1], 4, axis=0), tree)
        alone, alone_reused = pipeline(alone_state, alone_tree,
                                       jnp.full((4,), action[b], jnp.int32))
        assert (alone_reused == reused[b]).all()
        for name, value in alone.items():
            for copy in range(4):
                np.testing.assert_array_equal(value[copy], batch[name][b],
                                              err_msg=f"{name} [{b}]")


def test_self_play_with_reuse_and_capacity_twice_the_search():
    """Self-play move after move with max_nodes = 2 S, reusing trees (finished
    games restart with a fresh tree): every search adds S visits to its root,
    trees fill up and keep working, and the root noise is drawn afresh."""
    batch = 4
    state = tictactoe.initial(batch)
    tree = _init(state)
    keys = jax.random.split(jax.random.key(1), 14)
    num_reused = num_full = num_restarts = 0
    for key in keys:
        before = _np(tree)
        out, tree, reused, state = _self_play_step(key, tree, state)
        searched = _np(out.search_tree)
        after = _np(tree)
        action = np.asarray(out.action)
        reused = np.asarray(reused)
        # The search added S simulations to every root it could search.
        for b in range(batch):
            if before["node_terminal"][b, 0]:
                continue
            assert searched["node_visits"][b, 0] == before["node_visits"][b, 0] + S
            assert searched["edge_visits"][b, 0].sum() == searched["node_visits"][b, 0] - 1
            _check_visit_sums(searched, b)
            # Fresh noise on the root prior; the network prior is untouched.
            np.testing.assert_array_equal(searched["children_prior"][b, 0],
                                          before["children_prior"][b, 0])
            np.testing.assert_array_equal(before["root_prior"][b], before["children_prior"][b, 0])
            legal = searched["children_index"][b, 0] != ILLEGAL
            if legal.sum() > 1:
                assert not np.allclose(searched["root_prior"][b], searched["children_prior"][b, 0])
            np.testing.assert_allclose(searched["root_prior"][b].sum(), 1.0, rtol=1e-5)
            assert not searched["root_prior"][b][~legal].any()
        num_full += int((searched["num_nodes"] == N).sum())
        for b in range(batch):
            if reused[b]:
                child = searched["children_index"][b, 0, action[b]]
                num_reused += 1
                assert after["node_visits"][b, 0] == searched["node_visits"][b, child]
                _check_against_numpy_walk(searched, after, b, [action[b]])
            else:
                num_restarts += 1
                assert after["num_nodes"][b] == 1 and after["node_visits"][b, 0] == 1
                assert not np.asarray(state.board)[b].any()  # restarted game
    counts = (f"{num_reused} reused trees, {num_restarts} fresh, "
              f"{num_full} searches ended full")
    assert num_reused > 20 and num_restarts >= batch, counts


def test_root_noise_reapplied_on_reused_root():
    _, tree = _first_trees()
    first = _policy(_KEY, tree).search_tree
    action = jnp.argmax(first.edge_visits[:, 0], -1).astype(jnp.int32)
    reused_tree, _ = _subtree(first, action)
    # The reused tree carries no noise...
    np.testing.assert_array_equal(np.asarray(reused_tree.root_prior),
                                  np.asarray(reused_tree.children_prior[:, 0]))
    out = _policy(jax.random.key(3), reused_tree).search_tree
    # ...the policy draws fresh noise into root_prior only.
    np.testing.assert_array_equal(np.asarray(out.children_prior[:, 0]),
                                  np.asarray(reused_tree.children_prior[:, 0]))
    legal = np.asarray(out.children_index[:, 0] != ILLEGAL)
    diff = np.abs(np.asarray(out.root_prior) - np.asarray(out.children_prior[:, 0]))
    assert (diff.max(-1) > 1e-3)[legal.sum(-1) > 1].all()


def test_reused_search_beats_fresh_search_of_same_size():
    """Decision quality on tic-tac-toe, judged by exact minimax.

    For every position with 2 to 4 stones (1080), search it with S
    simulations, play the most visited move and search the reply position in
    three ways: fresh with S, reused subtree + S, fresh with 2 S. Score: how
    often the most visited move is optimal, over the positions where not
    every move is.
    """
    parents = [p for p in tictactoe.all_positions() if 9 - p.count(0) in (2, 3, 4)]
    assert len(parents) % 4 == 0
    names = ("fresh S", "reused + S", "fresh 2S")
    visits = {name: [] for name in names}
    actions, reused, child_visits, root_visits = [], [], [], []
    # In batches of 4: the functions compiled for the other tests are reused.
    for i in range(0, len(parents), 4):
        state = tictactoe.batch(parents[i:i + 4])
        first = _search_more(_init(state))
        action = jnp.argmax(first.edge_visits[:, 0], -1).astype(jnp.int32)
        child_state, _, _ = _step(state, action)
        reused_tree, ok = _subtree(first, action)
        fresh = _search_more(_init(child_state))
        continued = _search_more(reused_tree)
        for name, tree in zip(names, (fresh, continued, _search_more(fresh)), strict=True):
            visits[name].append(np.asarray(tree.edge_visits[:, 0]))
        actions.append(np.asarray(action))
        reused.append(np.asarray(ok))
        child_visits.append(np.asarray(reused_tree.node_visits[:, 0]))
        root_visits.append(np.asarray(continued.node_visits[:, 0]))
    results = {name: np.concatenate(v) for name, v in visits.items()}
    action = np.concatenate(actions)
    reused = np.concatenate(reused)
    children = [tictactoe.play(p, int(a)) for p, a in zip(parents, action, strict=True)]
    scored = [i for i, c in enumerate(children) if not tictactoe.is_terminal(c)
              and len(tictactoe.optimal_moves(c)) < len(tictactoe.legal_moves(c))]
    optimal = {i: tictactoe.optimal_moves(children[i]) for i in scored}
    scores = {}
    for name, root_edge_visits in results.items():
        best = np.argmax(root_edge_visits, -1)
        scores[name] = float(np.mean([best[i] in optimal[i] for i in scored]))
    child_visits = np.concatenate(child_visits)[scored]
    rates = (f"{len(scored)} positions, S={S}: mean reused visits "
             f"{child_visits.mean():.1f}; optimal-move rate "
             + ", ".join(f"{k} {v:.3f}" for k, v in scores.items()))
    assert reused.all()
    # Reused + S searches more than fresh S (it starts from the child's visits)...
    root_visits = np.concatenate(root_visits)[scored]
    assert (root_visits == child_visits + S).all() and child_visits.mean() > 0.4 * S
    # ...and decides better: closer to a fresh search with twice the simulations.
    assert scores["reused + S"] > scores["fresh S"] + 0.01, rates
    assert (scores["fresh 2S"] - scores["reused + S"]
            < scores["reused + S"] - scores["fresh S"]), rates

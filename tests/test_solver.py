"""MCTS-solver (``solver=True``; Winands, Björnsson & Saito 2008; OpenSpiel
``MCTSBot(solve=True)``).

* The proof rule, the dominated-edge mask and the final-move key on hand-made rows
  (OpenSpiel's nine ``best_child`` cases from ``mcts_test.py``).
* Tic-tac-toe, every reachable non-terminal position: every proven node of every
  tree holds the exact minimax value, at three simulation counts of one continued
  search, and no proof flips between them; the same with 4 leaves per step.
* OpenSpiel's solver positions (``mcts_test.py``: draw, loss, win) through
  ``alphazero_policy(solver=True)``: proven values and the move.
* Random finite games with rewards on every move (values not in {-1, 0, 1}), exact
  minimax only (``value_bound=None``): proven values equal backward induction; the
  same in graph search on games with transpositions, where nodes with several
  parents get proven.
* A proven root stops taking simulations while the rest of the batch goes on, and
  the others' trees do not depend on it.
* ``solver=False`` stores no proofs; subtree reuse keeps them; bad arguments raise.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc

import jaxpuct
from jaxpuct import solver as solver_lib
from jaxpuct import visualize
from jaxpuct.solver import SolverConfig
from jaxpuct.testing import checks, random_games, tictactoe

_GAME_RF = random_games.make_recurrent_fn(with_hash=True)
_EXACT = SolverConfig(value_bound=None)

# ------------------------------------------------------------ the rule, by hand

_prove = jax.jit(solver_lib.prove, static_argnames=("value_bound",))
_dominated = jax.jit(solver_lib.dominated_edges, static_argnames=("value_bound",))
_best_child = jax.jit(solver_lib.best_child)
_prove_chance = jax.jit(solver_lib.prove_chance)


def _rows(*rows):
    return jnp.asarray(np.array(rows))


def test_prove_rule_by_hand():
    legal = _rows([1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 0])
    legal = legal.astype(bool)
    proven = _rows([1, 0, 0, 0],  # a win among unproven moves: cut-off
                   [1, 1, 0, 0],  # two proven non-wins, one unproven: open
                   [1, 1, 0, 0],  # every legal move proven (the illegal one ignored)
                   [1, 1, 1, 1],  # all proven losses
                   [1, 1, 0, 1],  # an illegal "child" never counts
                   ).astype(bool)
    value = _rows([1.0, 0, 0, 0], [0.0, -1, 0, 0], [-1.0, 0.0, 9, 9], [-1.0, -1, -1, -1],
                  [0.0, -1, 0, 1])
    plies = _rows([4, 0, 0, 0], [0, 0, 0, 0], [2, 6, 0, 0], [0, 4, 2, 0], [0, 0, 0, 0])
    out = _prove(legal, proven, value.astype(jnp.float32), plies, value_bound=1.0)
    np.testing.assert_array_equal(out.proven, [True, False, True, True, False])
    np.testing.assert_array_equal(out.value, [1.0, 0.0, 0.0, -1.0, 0.0])
    # Win: shortest; draw and loss: longest among the value-achieving children.
    np.testing.assert_array_equal(out.plies, [5, -1, 7, 5, -1])
    # Without a bound the win needs every legal move proven.
    exact = _prove(legal, proven, value.astype(jnp.float32), plies, value_bound=None)
    np.testing.assert_array_equal(exact.proven, [False, False, True, True, False])
    # Two wins: the shorter one sets the plies.
    two = _prove(jnp.ones((1, 2), bool), jnp.ones((1, 2), bool), _rows([1.0, 1.0]),
                 _rows([6, 2]), value_bound=1.0)
    np.testing.assert_array_equal(two.plies, [3])


def test_prove_chance_needs_every_outcome_equal():
    possible = _rows([1, 1, 0], [1, 1, 1], [1, 1, 1]).astype(bool)
    proven = _rows([1, 1, 0], [1, 1, 1], [1, 1, 0]).astype(bool)
    value = _rows([0.5, 0.5, 9], [0.5, 0.5, -1], [1.0, 1, 1]).astype(jnp.float32)
    out = _prove_chance(proven, value, _rows([1, 3, 0], [0, 0, 0], [0, 0, 0]), possible)
    np.testing.assert_array_equal(out.proven, [True, False, False])
    np.testing.assert_array_equal(out.value, [0.5, 0.0, 0.0])
    np.testing.assert_array_equal(out.plies, [4, -1, -1])


def test_dominated_edges_by_hand():
    legal = _rows([1, 1, 1], [1, 1, 1], [1, 1, 0], [1, 1, 1]).astype(bool)
    proven = _rows([1, 0, 0], [1, 1, 0], [1, 1, 1], [1, 0, 1]).astype(bool)
    value = _rows([-1.0, 0, 0], [0.0, -0.5, 0], [-1.0, -1, 1], [-0.2, 0, 0.3])
    out = _dominated(legal, proven, value.astype(jnp.float32), value_bound=1.0)
    np.testing.assert_array_equal(out, [[1, 0, 0],  # a proven loss
                                        [0, 1, 0],  # worse than the proven draw
                                        [0, 0, 0],  # every legal move lost: none masked
                                        [1, 0, 0]])  # below the best proven move


# OpenSpiel mcts_test.py, MctsBotTest.test_choose_*: (expected, [(visits, total reward,
# outcome or None), ...]). The plies of the last case say which loss is slower.
_OPENSPIEL_BEST_CHILD = [
    (0, [(50, 30, None), (40, 40, None)]),
    (1, [(50, 30, None), (40, 40, 1.0)]),
    (1, [(50, 30, 0.5), (40, 40, 0.8)]),
    (0, [(50, 30, -0.5), (40, 40, -0.8)]),
    (1, [(50, 40, None), (10, 1, 0.1)]),
    (0, [(50, 30, None), (40, 40, -1.0)]),
    (0, [(50, 30, None), (40, 40, 0.0)]),
    (1, [(50, 30, -1.0), (40, 40, None)]),
    (1, [(50, 10, -1.0), (60, 15, -1.0)]),
]


def test_best_child_matches_openspiel_cases():
    rows = [case for _, case in _OPENSPIEL_BEST_CHILD]
    visits = _rows(*[[c[0] for c in r] for r in rows])
    q = _rows(*[[c[1] / c[0] for c in r] for r in rows]).astype(jnp.float32)
    proven = _rows(*[[c[2] is not None for c in r] for r in rows])
    value = _rows(*[[0.0 if c[2] is None else c[2] for c in r] for r in rows])
    plies = np.zeros((len(rows), 2), np.int32)
    plies[-1] = [1, 3]
    action = _best_child(jnp.ones((len(rows), 2), bool), proven, value.astype(jnp.float32),
                         jnp.asarray(plies), visits, q)
    np.testing.assert_array_equal(action, [e for e, _ in _OPENSPIEL_BEST_CHILD])
    # Shortest win beats more visits; the slower loss beats more visits.
    action = _best_child(jnp.ones((2, 2), bool), jnp.ones((2, 2), bool),
                         _rows([1.0, 1.0], [-1.0, -1.0]).astype(jnp.float32),
                         _rows([5, 1], [5, 1]), _rows([90, 10], [10, 90]),
                         jnp.zeros((2, 2)))
    np.testing.assert_array_equal(action, [1, 0])


# ------------------------------------------------------------------- tic-tac-toe

_TTT_POSITIONS = tictactoe.all_positions()


@sc.jit(static_argnames=("sims", "k"))
def _ttt_continue(tree, *, sims, k=1):
    """``sims`` more solver simulations on ``tree`` (tic-tac-toe, uniform prior, zero
    value, exact terminals)."""
    return jaxpuct.search(None, jax.random.key(0), None, tictactoe.recurrent_fn, sims,
                          tree=tree, leaves_per_step=k, solver=True)


@sc.jit(static_argnames=("max_nodes",))
def _ttt_empty_tree(state, *, max_nodes):
    return jaxpuct.init_tree(tictactoe.root(state), max_nodes)


def _node_minimax(tree) -> np.ndarray:
    """``[B, N]`` exact minimax value of every node's position (0 at terminal ones)."""
    emb = jax.device_get(tree.embeddings)
    absolute = emb.board.astype(np.int64) * emb.player.astype(np.int64)[..., None]
    codes = np.where(absolute == -1, 2, absolute) @ (3 ** np.arange(9))
    return tictactoe.value_table()[codes]


def _check_ttt_proofs(tree, positions, previous=None) -> tuple[np.ndarray, np.ndarray]:
    """Every proven used node holds the exact minimax value; no proof flipped since
    ``previous`` (plies, values). Returns this tree's (plies, values)."""
    plies = np.asarray(tree.proof_plies)
    values = np.asarray(tree.node_values)
    used = np.arange(plies.shape[1])[None, :] < np.asarray(tree.num_nodes)[:, None]
    proven = used & (plies >= 0)
    exact = _node_minimax(tree)
    wrong = np.argwhere(proven & (values != exact))
    assert wrong.size == 0, [(tictactoe.format_position(positions[b]), n, values[b, n],
                              exact[b, n]) for b, n in wrong[:5]]
    # Terminal nodes are proven in 0 plies, and nothing proven is unused.
    np.testing.assert_array_equal(plies[used & np.asarray(tree.node_terminal)], 0)
    assert not np.any(~used & (plies >= 0))
    if previous is not None:
        old_plies, old_values = previous
        was = old_plies >= 0
        assert np.all(plies[was] >= 0), "a proof was lost"
        np.testing.assert_array_equal(values[was], old_values[was])
    return plies, values


@pytest.mark.parametrize(("k", "every", "sims"),
                         [(1, 1, 16), pytest.param(4, 12, 32, marks=pytest.mark.slow)])
def test_ttt_proven_values_are_minimax_and_never_flip(k, every, sims):
    """All 4520 positions with one leaf per step (16, 32 and 48 simulations); every
    twelfth with 4 leaves (32, 64, 96). Every node of every tree is checked."""
    positions = _TTT_POSITIONS[::every]
    tree = _ttt_empty_tree(tictactoe.batch(positions), max_nodes=3 * sims + 1)
    record, proven_share = None, []
    for _ in range(3):
        tree = _ttt_continue(tree, sims=sims, k=k)
        record = _check_ttt_proofs(tree, positions, record)
        proven_share.append(float(np.mean(record[0][:, 0] >= 0)))
    # Proofs accumulate; after the third call most roots are solved.
    assert proven_share == sorted(proven_share) and proven_share[-1] > 0.7, proven_share
    # A proven root took no more simulations than it was given and plays a minimax move.
    root_proven = record[0][:, 0] >= 0
    assert np.all(np.asarray(tree.node_visits)[root_proven, 0] <= 3 * sims + 1)
    action = np.asarray(jax.jit(solver_lib.solver_action)(tree))
    misses = [i for i in np.flatnonzero(root_proven)
              if int(action[i]) not in tictactoe.optimal_moves(positions[i])]
    assert not misses, [tictactoe.format_position(positions[i]) for i in misses[:5]]


# OpenSpiel mcts_test.py (solve=True, 10 000 simulations): the positions, their
# value for the player to move and the moves MCTSBot must choose.
_OPENSPIEL_POSITIONS = [
    ("O.. .X. ..X", 0.0, {2, 6}),  # x(1,1) o(0,0) x(2,2): draw, o(0,2) or o(2,0)
    ("OOX .X. ..X", -1.0, None),  # ... o(0,1) x(0,2): every move loses
    (".X. ... ..O", 1.0, {2}),  # x(0,1) o(2,2): x(0,2) wins
]


@sc.jit
def _ttt_policy(state, key, temperature):
    return jaxpuct.alphazero_policy(None, key, tictactoe.root(state),
                                    tictactoe.recurrent_fn, 800, temperature=temperature,
                                    solver=True)


def test_openspiel_solver_positions():
    state = tictactoe.batch([tictactoe.parse(p) for p, _, _ in _OPENSPIEL_POSITIONS])
    for temperature in (0.0, 1.0):
        out = _ttt_policy(state, jax.random.key(3), jnp.float32(temperature))
        tree = out.search_tree
        np.testing.assert_array_equal(np.asarray(tree.proof_plies[:, 0]) >= 0, True)
        np.testing.assert_array_equal(tree.node_values[:, 0],
                                      [v for _, v, _ in _OPENSPIEL_POSITIONS])
        # The solved roots stopped early: 800 simulations were not needed.
        assert np.all(np.asarray(tree.node_visits[:, 0]) < 801)
        for (text, _, moves), a in zip(_OPENSPIEL_POSITIONS, np.asarray(out.action),
                                       strict=True):
            if moves is not None:
                assert int(a) in moves, (text, int(a), temperature)
    # No proven-losing move of the drawn position keeps a weight in the target.
    q = np.asarray(tree.summary().qvalues[0])
    weights = np.asarray(out.action_weights[0])
    assert np.all(weights[q < 0] == 0) and weights[[2, 6]].sum() == pytest.approx(1.0)
    # The lost position: all legal moves proven losses, the slowest one played.
    legal, child_proven, edge_value, plies = jax.device_get(solver_lib.root_edges(tree))
    assert np.all(child_proven[1][legal[1]]) and np.all(edge_value[1][legal[1]] == -1)
    assert plies[1][int(out.action[1])] == plies[1][legal[1]].max()


# --------------------------------------------------- random games, general values


@sc.jit(static_argnames=("sims", "graph", "config"))
def _game_search(forest, roots, *, sims, graph=None, config=_EXACT):
    root = random_games.root(forest, roots, with_hash=graph is not None)
    return jaxpuct.search(forest, jax.random.key(1), root, _GAME_RF, sims, graph=graph,
                          solver=config)


def test_random_games_dense_rewards_exact_minimax():
    forest, roots, _ = sc.game_forest(range(16), reward_mode="dense", extra_turn_prob=0.3)
    tree = _game_search(forest, jnp.asarray(roots), sims=320)
    checks.check_tree(tree)
    proven = sc.check_game_proofs(tree, forest)
    assert proven[:, 0].mean() > 0.5, proven[:, 0].mean()


def test_graph_search_proves_through_transpositions():
    forest, roots, _ = sc.game_forest(range(16), merge_prob=0.5)
    tree = _game_search(forest, jnp.asarray(roots), sims=160, graph=jaxpuct.GraphConfig(),
                        config=SolverConfig())
    proven = sc.check_game_proofs(tree, forest)
    assert proven[:, 0].mean() > 0.5, proven[:, 0].mean()
    checks.check_tree(tree)
    # Proven nodes with several parents: proofs shared through transpositions.
    children = np.asarray(tree.children_index)
    shared = 0
    for b in range(children.shape[0]):
        kids = children[b][children[b] >= 0]
        counts = np.bincount(kids, minlength=children.shape[1])
        shared += int(np.sum((counts > 1) & proven[b]))
    assert shared > 0


def test_proven_root_stops_and_batch_is_independent():
    forest, roots, games = sc.game_forest(range(8))
    roots = jnp.asarray(roots)
    tree = _game_search(forest, roots, sims=160)
    visits = np.asarray(tree.node_visits[:, 0])
    proven = np.asarray(tree.proof_plies[:, 0]) >= 0
    assert proven.any() and np.all(visits[proven] < 161)
    # Replace element 0 by a copy of an element proven early: every other tree is
    # unchanged, bit for bit.
    early = int(np.argmin(np.where(proven, visits, 10**6)))
    swapped = _game_search(forest, roots.at[0].set(roots[early]), sims=160)
    for a, b in zip(jax.tree.leaves(tree), jax.tree.leaves(swapped), strict=True):
        np.testing.assert_array_equal(np.asarray(a)[1:], np.asarray(b)[1:])
    assert int(swapped.node_visits[0, 0]) == visits[early]


# ------------------------------------------------------------------ plumbing


def test_solver_off_stores_no_proofs_and_reuse_keeps_them():
    forest, roots, _ = sc.game_forest(range(8))
    tree = _game_search(forest, jnp.asarray(roots), sims=160)
    assert tree.proof_plies is not None
    assert "proof_plies" in tree.bytes_per_node()
    off = jax.eval_shape(lambda t: jaxpuct.search(forest, jax.random.key(1), None, _GAME_RF,
                                                  1, tree=t), tree)
    assert off.proof_plies is None
    action = jnp.argmax(tree.edge_visits[:, 0], axis=-1)
    sub, _ = sc.jit(jaxpuct.subtree)(tree, action)
    assert "proven in 0 plies" in visualize.to_dot(tree, 0)
    child = np.asarray(tree.children_index)[np.arange(8), 0, np.asarray(action)]
    np.testing.assert_array_equal(np.asarray(sub.proof_plies[:, 0]),
                                  np.asarray(tree.proof_plies)[np.arange(8), child])


def test_bad_solver_arguments():
    state = tictactoe.batch([tictactoe.EMPTY])
    root = tictactoe.root(state)
    with pytest.raises(ValueError, match="solver must be a bool or a SolverConfig.*'yes'"):
        jaxpuct.search(None, jax.random.key(0), root, tictactoe.recurrent_fn, 4,
                       solver="yes")
    with pytest.raises(ValueError, match="value_bound must be a finite number > 0.*-1"):
        SolverConfig(value_bound=-1.0)


@sc.jit
def _ttt_restricted(tree, invalid):
    return jaxpuct.search(None, jax.random.key(0), None, tictactoe.recurrent_fn, 256,
                          tree=tree, invalid_actions=invalid, solver=True)


def test_root_made_invalid_is_proven_again():
    """A proven win whose winning move is then forbidden at the root: the root's
    proof is recomputed from the moves left (exact value over them, or unproven)."""
    position = tictactoe.parse(".X. ... ..O")  # x(0,1) o(2,2): x(0,2) wins
    tree = _ttt_empty_tree(tictactoe.batch([position]), max_nodes=2 * 256 + 1)
    tree = _ttt_restricted(tree, jnp.zeros((1, 9), bool))
    assert int(tree.proof_plies[0, 0]) >= 0 and float(tree.node_values[0, 0]) == 1.0
    before = int(tree.edge_visits[0, 0, 2])
    invalid = jnp.zeros((1, 9), bool).at[0, 2].set(True)
    tree = _ttt_restricted(tree, invalid)
    q = tictactoe.qvalues(position)
    q[2] = np.nan  # the best of the other moves draws: a stale proof would read 1
    if int(tree.proof_plies[0, 0]) >= 0:
        assert float(tree.node_values[0, 0]) == np.nanmax(q)
    assert int(tree.edge_visits[0, 0, 2]) == before  # the forbidden move is not searched

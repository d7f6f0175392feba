"""Tests of the exact oracles in :mod:`jaxpuct.testing` (``tictactoe``, ``random_games``,
the logit masks): the search tests trust them."""

from __future__ import annotations

import collections
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxpuct.testing import (
    MASKED_LOGIT,
    mask_illegal_logits,
    mask_root_logits,
    random_games,
    tictactoe,
)

# Compiled once for the whole module; every call below uses a few fixed shapes.
_ttt_step = jax.jit(tictactoe.step)
_ttt_legal = jax.jit(tictactoe.legal)
_ttt_root_exact = jax.jit(functools.partial(tictactoe.root, exact_value=True, with_hash=True))
_ttt_rec = jax.jit(tictactoe.recurrent_fn)
_ttt_rec_exact = jax.jit(tictactoe.make_recurrent_fn(exact_value=True, with_hash=True))
_ttt_rec_masked = jax.jit(mask_illegal_logits(tictactoe.recurrent_fn))
_game_rec = jax.jit(random_games.make_recurrent_fn(with_hash=True))
_game_root = jax.jit(random_games.root)

_KEY = jax.random.key(0)
P = tictactoe.parse


# ------------------------------------------------------------------ tic-tac-toe, NumPy


def test_ttt_position_counts():
    all_pos = tictactoe.all_positions(include_terminal=True)
    assert len(all_pos) == 5478
    assert len(set(all_pos)) == 5478
    assert len(tictactoe.all_positions()) == 4520
    # The 958 terminal boards of the UCI "Tic-Tac-Toe Endgame" data set (Aha, 1991):
    # 626 won by X, 316 by O, 16 draws.
    winners = collections.Counter(tictactoe.winner(p) for p in all_pos
                                  if tictactoe.is_terminal(p))
    assert winners == {1: 626, -1: 316, 0: 16}
    assert tictactoe.all_positions()[0] == tictactoe.EMPTY
    assert tictactoe.all_positions() == tictactoe.all_positions()


def test_ttt_parse_format_roundtrip():
    for pos in tictactoe.all_positions(include_terminal=True)[::37]:
        assert P(tictactoe.format_position(pos)) == pos
    assert P("XO. .X. ..O") == (1, -1, 0, 0, 1, 0, 0, 0, -1)
    with pytest.raises(ValueError):
        P("XX. ... ...")
    with pytest.raises(ValueError):
        tictactoe.play(P("X.. ... ..."), 0)


def test_ttt_known_values():
    empty = tictactoe.EMPTY
    assert tictactoe.minimax_value(empty) == 0
    assert tictactoe.optimal_moves(empty) == set(range(9))  # every opening draws
    # Against a corner only the centre draws; against the centre only corners do.
    assert tictactoe.optimal_moves(P("X.. ... ...")) == {4}
    assert tictactoe.optimal_moves(P("... .X. ...")) == {0, 2, 6, 8}
    # X to move completes the top row.
    win_x = P("XX. OO. ...")
    assert tictactoe.minimax_value(win_x) == 1
    assert tictactoe.optimal_moves(win_x) == {2}
    assert tictactoe.qvalues(win_x)[2] == 1
    # O to move completes the middle row; X's threat on the top row is irrelevant.
    win_o = P("XX. OO. X..")
    assert tictactoe.to_move(win_o) == -1
    assert tictactoe.minimax_value(win_o) == 1
    assert 5 in tictactoe.optimal_moves(win_o)
    # O to move cannot block both of X's threats (cells 1 and 5) and cannot win first.
    fork = P("X.X .O. O.X")
    assert tictactoe.to_move(fork) == -1
    assert tictactoe.minimax_value(fork) == -1
    assert tictactoe.optimal_moves(fork) == set(tictactoe.legal_moves(fork))
    # Against opposite corners, O must take an edge: a corner loses to a fork.
    assert tictactoe.optimal_moves(P("X.. .O. ..X")) == {1, 3, 5, 7}
    # Terminal positions: value for the player to move is the outcome, no moves.
    lost = P("XXX OO. ...")
    assert tictactoe.minimax_value(lost) == -1
    assert tictactoe.optimal_moves(lost) == set()
    assert np.isnan(tictactoe.qvalues(lost)).all()


@functools.cache
def _absolute_minimax(pos: tictactoe.Position) -> int:
    """Winner under perfect play (X maximises, O minimises): independent of negamax."""
    if tictactoe.is_terminal(pos):
        return tictactoe.winner(pos)
    outcomes = [_absolute_minimax(tictactoe.play(pos, a)) for a in tictactoe.legal_moves(pos)]
    return max(outcomes) if tictactoe.to_move(pos) == 1 else min(outcomes)


def test_ttt_negamax_matches_absolute_minimax():
    values = collections.Counter()
    for pos in tictactoe.all_positions():
        me = tictactoe.to_move(pos)
        value = tictactoe.minimax_value(pos)
        assert value == me * _absolute_minimax(pos)
        values[value] += 1
        best = {a for a in tictactoe.legal_moves(pos)
                if me * _absolute_minimax(tictactoe.play(pos, a)) == value}
        assert tictactoe.optimal_moves(pos) == best
        q = tictactoe.qvalues(pos)
        assert np.nanmax(q) == value
        assert set(np.flatnonzero(q == value).tolist()) == best
    assert set(values) == {-1, 0, 1}


def test_ttt_value_table():
    table = tictactoe.value_table()
    assert table.shape == (3**9,)
    for pos in tictactoe.all_positions(include_terminal=True):
        expected = 0 if tictactoe.is_terminal(pos) else tictactoe.minimax_value(pos)
        assert table[tictactoe.code(pos)] == expected
    assert np.count_nonzero(table) == sum(
        tictactoe.minimax_value(p) != 0 for p in tictactoe.all_positions())


# ------------------------------------------------------------------- tic-tac-toe, JAX


def test_ttt_batch_roundtrip_and_legal_mask():
    positions = tictactoe.all_positions(include_terminal=True)
    state = tictactoe.batch(positions)
    assert state.board.dtype == jnp.int8 and state.board.shape == (5478, 9)
    assert tictactoe.unbatch(state) == positions
    legal = np.asarray(_ttt_legal(state))
    for pos, mask, term in zip(positions, legal, np.asarray(state.terminal), strict=True):
        assert np.flatnonzero(mask).tolist() == tictactoe.legal_moves(pos)
        assert term == tictactoe.is_terminal(pos)
    # The relative board: the player to move's stones are +1.
    assert np.all(np.asarray(state.board).sum(axis=1) <= 0)


def test_ttt_root_exact_values_and_hashes():
    positions = tictactoe.all_positions(include_terminal=True)
    root = _ttt_root_exact(tictactoe.batch(positions))
    expected = [0 if tictactoe.is_terminal(p) else tictactoe.minimax_value(p)
                for p in positions]
    np.testing.assert_array_equal(np.asarray(root.value), expected)
    np.testing.assert_array_equal(np.asarray(root.prior_logits), 0)
    hashes = np.asarray(root.state_hash)
    assert hashes.dtype == np.uint32 and hashes.shape == (5478, 2)
    assert len({tuple(h) for h in hashes}) == 5478
    np.testing.assert_array_equal(hashes[:, 0], [tictactoe.code(p) for p in positions])
    assert tictactoe.root(tictactoe.initial(3)).state_hash is None


def _numpy_step(pos, dead, action):
    """Reference for ttt_step on absolute positions: (pos, dead, reward, terminal)."""
    if dead or tictactoe.is_terminal(pos):
        return pos, dead, 0.0, True
    if action not in tictactoe.legal_moves(pos):
        return pos, True, -1.0, True  # illegal: the mover loses, board unchanged
    child = tictactoe.play(pos, action)
    return child, False, float(tictactoe.winner(child) != 0), tictactoe.is_terminal(child)


def test_ttt_step_matches_numpy_on_random_playouts():
    rng = np.random.default_rng(0)
    batch = 256
    state = tictactoe.initial(batch)
    positions = [tictactoe.EMPTY] * batch
    dead = [False] * batch
    player = np.ones(batch)
    for _ in range(11):  # past the end of every game, to check absorption
        legal = np.asarray(_ttt_legal(state))
        actions = np.empty(batch, np.int32)
        for i in range(batch):
            moves = np.flatnonzero(legal[i])
            # Mostly legal moves; sometimes any cell, to exercise the illegal-move rule.
            use_any = moves.size == 0 or rng.random() < 0.03
            actions[i] = rng.integers(9) if use_any else rng.choice(moves)
        state, reward, terminal = _ttt_step(state, jnp.asarray(actions))
        reward, terminal = np.asarray(reward), np.asarray(terminal)
        for i in range(batch):
            was_over = dead[i] or tictactoe.is_terminal(positions[i])
            positions[i], dead[i], r, t = _numpy_step(positions[i], dead[i], int(actions[i]))
            if not was_over:
                player[i] = -player[i]
            assert reward[i] == r and terminal[i] == t, (i, positions[i])
        assert tictactoe.unbatch(state) == positions
        np.testing.assert_array_equal(np.asarray(state.player), player)
        np.testing.assert_array_equal(np.asarray(state.terminal), terminal)
    assert np.asarray(state.terminal).all()


def test_ttt_recurrent_fn_outputs():
    positions = tictactoe.all_positions()[::5]  # 904 non-terminal positions
    state = tictactoe.batch(positions)
    action = jnp.asarray([tictactoe.legal_moves(p)[-1] for p in positions], jnp.int32)
    out, new_state = _ttt_rec(None, _KEY, action, state)
    exact, _ = _ttt_rec_exact(None, _KEY, action, state)
    masked, _ = _ttt_rec_masked(None, _KEY, action, state)
    children = [tictactoe.play(p, int(a)) for p, a in zip(positions, action, strict=True)]
    assert tictactoe.unbatch(new_state) == children
    np.testing.assert_array_equal(np.asarray(out.discount), -1)
    np.testing.assert_array_equal(np.asarray(out.value), 0)
    np.testing.assert_array_equal(np.asarray(out.prior_logits), 0)
    assert out.state_hash is None
    out_np, exact_np = jax.tree.map(np.asarray, (out, exact))  # no per-element dispatch
    for i, child in enumerate(children):
        term = tictactoe.is_terminal(child)
        assert out_np.terminal[i] == term
        assert out_np.reward[i] == float(tictactoe.winner(child) != 0)
        assert np.flatnonzero(out_np.legal_action_mask[i]).tolist() == tictactoe.legal_moves(
            child)
        assert exact_np.value[i] == (0 if term else tictactoe.minimax_value(child))
        # The exact Q of the move, as a search would back it up, is the oracle's Q.
        q = exact_np.reward[i] + exact_np.discount[i] * exact_np.value[i]
        assert q == tictactoe.qvalues(positions[i])[int(action[i])]
    logits = np.asarray(masked.prior_logits)
    legal = np.asarray(masked.legal_action_mask)
    assert np.all(logits[legal] == 0) and np.all(logits[~legal] == MASKED_LOGIT)
    probs = np.asarray(jax.nn.softmax(masked.prior_logits))
    assert np.all(probs[~legal & legal.any(axis=1, keepdims=True)] == 0)


# ------------------------------------------------------------------------ random games


def _brute_force(game: random_games.RandomGame, node: int, sign: float = 1.0,
                 total: float = 0.0) -> float:
    """Optimal return from ``node``'s mover's view, by enumerating every play.

    ``sign`` is the product of discounts so far (its sign says whether the mover is
    the root's player, who maximises the root-view return ``total``; the other
    player minimises it). Independent of the negamax recursion of the oracle.
    """
    moves = np.flatnonzero(game.children[node] >= 0)
    if moves.size == 0:
        return total
    outcomes = [_brute_force(game, int(game.children[node, a]),
                             sign * float(game.discount[node, a]),
                             total + sign * float(game.reward[node, a])) for a in moves]
    return max(outcomes) if sign > 0 else min(outcomes)


_game_kwargs = st.fixed_dictionaries({
    "num_actions": st.integers(1, 3),
    "depth": st.integers(1, 4),
    "legal_prob": st.sampled_from([0.3, 0.7, 1.0]),
    "terminal_prob": st.sampled_from([0.0, 0.3]),
    "reward_mode": st.sampled_from(["terminal", "dense"]),
    "discount": st.sampled_from([-1.0, 1.0, 0.9]),
    "extra_turn_prob": st.sampled_from([0.0, 0.3]),
    "merge_prob": st.sampled_from([0.0, 0.5]),
})


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), kwargs=_game_kwargs)
def test_backward_induction_matches_brute_force(seed, kwargs):
    game = random_games.random_game(seed, **kwargs)
    values = random_games.game_values(game)
    for node in range(min(game.num_nodes, 12)):
        assert values[node] == pytest.approx(_brute_force(game, node), abs=1e-9)
    q = random_games.game_qvalues(game)
    best = random_games.optimal_actions(game)
    assert best and all(abs(q[0, a] - values[0]) <= 1e-6 for a in best)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), kwargs=_game_kwargs)
def test_random_game_structure(seed, kwargs):
    game = random_games.random_game(seed, **kwargs)
    again = random_games.random_game(seed, **kwargs)
    for field in ("children", "reward", "discount", "terminal", "value", "depth"):
        np.testing.assert_array_equal(getattr(game, field), getattr(again, field))
    legal = game.children >= 0
    assert not game.terminal[0]
    assert np.all(legal.any(axis=1) == ~game.terminal)  # >= 1 legal move iff non-terminal
    assert np.all(game.children[legal] > np.nonzero(legal)[0])  # topological ids
    assert np.all(game.depth[game.children[legal]] == game.depth[np.nonzero(legal)[0]] + 1)
    assert np.all(game.terminal[game.depth == kwargs["depth"]])
    assert np.all(game.reward[~legal] == 0)
    if kwargs["discount"] != -1.0:
        assert np.all(game.discount[legal] == kwargs["discount"])
    else:
        assert set(np.unique(game.discount[legal])) <= {-1.0, 1.0}
    if kwargs["reward_mode"] == "terminal":
        into_terminal = np.zeros_like(legal)
        into_terminal[legal] = game.terminal[game.children[legal]]
        assert np.all(game.reward[legal & ~into_terminal] == 0)
        assert set(np.unique(game.reward)) <= {-1.0, 0.0, 1.0}
    np.testing.assert_array_equal(game.value, 0)


def test_random_game_features():
    game = random_games.random_game(3, 3, 5, terminal_prob=0.3)
    assert len(set(game.depth[game.terminal].tolist())) >= 3  # terminals at varying depths
    dag = random_games.random_game(1, 3, 4, merge_prob=0.5)
    indegree = np.bincount(dag.children[dag.children >= 0], minlength=dag.num_nodes)
    assert indegree.max() >= 2  # transpositions exist
    assert np.all(indegree[1:] >= 1) and indegree[0] == 0
    tree = random_games.random_game(1, 3, 4)
    assert np.all(np.bincount(tree.children[tree.children >= 0])[1:] == 1)
    extra = random_games.random_game(2, 3, 4, extra_turn_prob=0.5)
    assert (extra.discount == 1).any() and (extra.discount == -1).any()
    perfect = random_games.random_game(4, 3, 4, reward_mode="dense", value_noise=0.0)
    values = random_games.game_values(perfect)
    np.testing.assert_allclose(perfect.value, np.where(perfect.terminal, 0, values), atol=1e-6)
    noisy = random_games.random_game(4, 3, 4, reward_mode="dense", value_noise=0.1)
    assert np.all(noisy.value[noisy.terminal] == 0)
    assert 0 < np.abs(noisy.value - perfect.value).max() < 1
    assert np.std(random_games.random_game(5, prior_scale=1.0).prior_logits) > 0.5
    with pytest.raises(ValueError):
        random_games.random_game(0, 3, 8, legal_prob=1.0, terminal_prob=0.0, max_nodes=100)


def test_stack_and_pad_preserve_values():
    games = [random_games.random_game(s, 3, 4, reward_mode="dense", merge_prob=0.3)
             for s in range(5)]
    forest, roots = random_games.stack_games(games)
    padded = random_games.pad_game(forest, forest.num_nodes + 7)
    values = random_games.game_values(padded)
    for game, root in zip(games, roots, strict=True):
        assert values[root] == pytest.approx(random_games.game_values(game)[0])
    assert padded.num_nodes == forest.num_nodes + 7
    assert np.all(padded.terminal[forest.num_nodes:])
    with pytest.raises(ValueError):
        random_games.pad_game(forest, 3)


def _numpy_game_step(game, node, action):
    """Reference for random_game_step: (child, reward, discount, terminal)."""
    if node < 0 or game.terminal[node]:
        return -1, 0.0, 1.0, True
    child = int(game.children[node, action])
    if child < 0:
        return -1, -1.0, 1.0, True
    return child, float(game.reward[node, action]), float(game.discount[node, action]), bool(
        game.terminal[child])


def test_random_game_recurrent_fn_matches_arrays():
    games = [random_games.random_game(s, 4, 5, extra_turn_prob=0.3, merge_prob=0.2,
                                      reward_mode="dense", value_noise=0.2, prior_scale=1.0)
             for s in range(8)]
    forest, roots = random_games.stack_games(games)
    forest = random_games.pad_game(forest, 4096)  # one compiled shape whatever the games' sizes
    rng = np.random.default_rng(0)
    batch = 64
    node = np.resize(roots, batch).astype(np.int32)
    root = _game_root(forest, jnp.asarray(node))
    np.testing.assert_array_equal(np.asarray(root.embedding), node)
    np.testing.assert_array_equal(np.asarray(root.legal_action_mask), forest.children[node] >= 0)
    np.testing.assert_allclose(np.asarray(root.value), forest.value[node])
    np.testing.assert_array_equal(random_games.root(forest, 3).embedding, [0, 0, 0])
    embedding = root.embedding
    legal = np.asarray(root.legal_action_mask)
    for _ in range(7):  # past the deepest terminal, to check the dead state
        actions = np.array([rng.choice(np.flatnonzero(m)) if m.any() and rng.random() > 0.05
                            else rng.integers(4) for m in legal], np.int32)
        out, embedding = _game_rec(forest, _KEY, jnp.asarray(actions), embedding)
        expected = [_numpy_game_step(forest, int(n), int(a)) for n, a in zip(node, actions,
                                                                              strict=True)]
        node = np.array([e[0] for e in expected], np.int32)
        np.testing.assert_array_equal(np.asarray(embedding), node)
        np.testing.assert_allclose(np.asarray(out.reward), [e[1] for e in expected])
        np.testing.assert_allclose(np.asarray(out.discount), [e[2] for e in expected])
        np.testing.assert_array_equal(np.asarray(out.terminal), [e[3] for e in expected])
        alive = node >= 0
        legal = np.asarray(out.legal_action_mask)
        np.testing.assert_array_equal(legal[alive], forest.children[node[alive]] >= 0)
        assert not legal[~alive].any()
        value = np.where(alive, forest.value[np.maximum(node, 0)], 0.0)
        np.testing.assert_allclose(np.asarray(out.value), value, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(out.prior_logits)[alive],
                                   forest.prior_logits[node[alive]], rtol=1e-6)
        hashes = np.asarray(out.state_hash)
        np.testing.assert_array_equal(hashes[:, 0], node.astype(np.uint32))
    assert (node < 0).all()


def test_oracles_fit_mctx():
    """The root and recurrent functions run unchanged in mctx (the interface check)."""
    mctx = pytest.importorskip("mctx")
    state = tictactoe.batch([P("XX. OO. ..."), P("XX. OO. X..")])
    root = mask_root_logits(tictactoe.root(state))
    out = jax.jit(functools.partial(
        mctx.muzero_policy, num_simulations=32, max_depth=9,
        recurrent_fn=mask_illegal_logits(tictactoe.recurrent_fn)))(
        None, _KEY, root, invalid_actions=~root.legal_action_mask)
    # Each side wins at once: X at 2, O at 5. (`action` is sampled; the weights are not.)
    assert np.argmax(np.asarray(out.action_weights), axis=-1).tolist() == [2, 5]

"""The exact connect-four solver (:mod:`jaxpuct.testing.connect_four`) against
oracles: exhaustive minimax over pgx's own rules (``env.step`` under ``jax.jit``),
an independent memoised negamax on a plain grid (``benchmarks.solver.c4_exact``),
hand-made positions, and pgx's observations of played games."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxpuct.testing import connect_four as c4

pgx = pytest.importorskip("pgx")

# A drawn game (heuristic play, seed 0): after 34 moves only column 3 holds the
# draw; after 38 only column 6 (both checked with benchmarks.solver.c4_exact).
_DRAWN_GAME = [4, 1, 2, 5, 4, 3, 2, 5, 2, 2, 2, 6, 1, 3, 1, 4, 4, 0, 0, 2, 5, 3, 3, 4, 5, 1,
               1, 5, 6, 3, 0, 0, 5, 1, 4, 0, 6, 6, 6, 3, 0, 6]


def _positions(count: int, empties: list[int], seed: int) -> list[list[int]]:
    """Move lists of non-terminal positions, alternating heuristic/uniform play."""
    rng = np.random.default_rng(seed)
    return [c4._random_position(empties[i % len(empties)], i % 2 == 0, rng)
            for i in range(count)]


def _pad(move_lists: list[list[int]]) -> np.ndarray:
    out = np.full((len(move_lists), 42), -1, np.int8)
    for i, m in enumerate(move_lists):
        out[i, :len(m)] = m
    return out


def _pgx_minimax(move_lists: list[list[int]]) -> np.ndarray:
    """``[n, 7]`` exact move values (NaN illegal) by exhaustive minimax over pgx:
    the whole game tree of every position is expanded level by level with
    ``jax.vmap(env.step)`` (in fixed-size chunks: one compilation), then backed up
    from the leaves. pgx's rewards and terminal flags alone decide the outcome."""
    env = pgx.make("connect_four")
    chunk = 2048
    step = jax.jit(jax.vmap(env.step))
    take = lambda tree, idx: jax.tree.map(lambda x: x[idx], tree)  # noqa: E731
    frontier = jax.device_get(c4.pgx_states(_pad(move_lists), env))
    levels = []  # per level: parent index, action, reward to the mover, terminal
    while len(frontier.current_player):
        legal = frontier.legal_action_mask & ~frontier.terminated[:, None]
        parent, action = np.nonzero(legal)
        if parent.size == 0:
            break
        children = []
        for start in range(0, parent.size, chunk):
            idx = parent[start:start + chunk]
            act = action[start:start + chunk]
            pad = chunk - idx.size  # repeat the last entry: the shape stays fixed
            idx_p, act_p = np.pad(idx, (0, pad), mode="edge"), np.pad(act, (0, pad), mode="edge")
            out = jax.device_get(step(take(frontier, idx_p), act_p.astype(np.int32)))
            children.append(take(out, np.arange(idx.size)))
        children = jax.tree.map(lambda *xs: np.concatenate(xs), *children)
        mover = frontier.current_player[parent]
        reward = children.rewards[np.arange(parent.size), mover]
        levels.append((parent, action, reward, children.terminated, len(frontier.current_player)))
        frontier = take(children, np.flatnonzero(~children.terminated))
    # Back up: a node's value is the max over its moves of reward (terminal child)
    # or minus the child's value; a node's row in the next level is its rank among
    # the non-terminal children.
    child_values = None
    q = None
    for parent, action, reward, terminal, num_parents in reversed(levels):
        move_q = reward.astype(np.float64)
        if child_values is not None:
            move_q[~terminal] = -child_values
        q = np.full((num_parents, 7), np.nan)
        q[parent, action] = move_q
        child_values = np.nanmax(q, axis=1)
    return q


def test_solver_matches_minimax_over_pgx_rules():
    move_lists = _positions(24, [1, 2, 3, 4, 5, 6, 7], seed=1)
    expected = _pgx_minimax(move_lists)
    for moves, q in zip(move_lists, expected, strict=True):
        board = c4.board_from_moves(moves)
        got = c4.move_values(board)
        np.testing.assert_array_equal(got, q.astype(np.float32), err_msg=str(moves))
        assert c4.solve(board) == np.nanmax(q)


def test_solver_matches_independent_negamax():
    from benchmarks.solver import c4_exact
    for moves in _positions(12, [8, 10, 12, 14], seed=2):
        value, optimal = c4_exact(moves)
        mv = c4.move_values(c4.board_from_moves(moves))
        assert np.nanmax(mv) == value
        assert set(np.flatnonzero(c4.optimal_moves(mv))) == optimal


def test_windows_and_shared_table():
    """The transposition table holds bounds that depend on the search window. A
    null-window search must return a correct bound, and a full-window solve on the
    same table afterwards the exact value (a table that stores a fail-high or a
    fail-low result as exact fails this); so must a table shared by a position's
    children and grandchildren (as in move_values)."""
    boards = [c4.board_from_moves(m) for m in _positions(120, [10, 12, 14], seed=6)]
    # A win in one is found before the table is used: those say nothing here.
    boards = [b for b in boards if not any(b.wins(c) for c in np.flatnonzero(b.legal()))]
    assert len(boards) >= 50
    for board in boards:
        exact = c4.Solver().solve(board)
        for alpha, beta in ((-1, 0), (0, 1)):
            shared = c4.Solver()
            got = shared.negamax(board, alpha, beta)
            if got <= alpha:
                assert exact <= got
            elif got >= beta:
                assert exact >= got
            else:
                assert exact == got
            assert shared.solve(board) == exact, str(board)
        shared = c4.Solver()
        for col in np.flatnonzero(board.legal()):
            if board.wins(col):
                continue
            child = board.play(int(col))
            for position in [child] + [child.play(int(c)) for c in np.flatnonzero(child.legal())
                                       if not child.wins(c)]:
                if not position.is_terminal():
                    assert shared.solve(position) == c4.Solver().solve(position)


def test_known_positions():
    # The first player has three in column 0 and plays the fourth (only solve():
    # move_values would solve the other moves of this opening, which takes minutes).
    board = c4.board_from_moves([0, 1, 0, 1, 0, 1])
    assert board.wins(0) and not board.wins(1)
    assert c4.solve(board) == 1
    # A late position (uniform play, 9 empty cells) where only the win at once in
    # column 3 wins: every other move loses.
    board = c4.board_from_moves([5, 6, 6, 1, 2, 6, 2, 0, 4, 5, 5, 5, 4, 0, 5, 2, 5, 4, 6, 0,
                                 6, 3, 2, 4, 6, 2, 0, 3, 1, 1, 0, 0, 4])
    assert c4.solve(board) == 1 and board.wins(3)
    np.testing.assert_array_equal(c4.move_values(board),
                                  np.array([np.nan, -1, -1, 1, -1, np.nan, np.nan], np.float32))
    # The first player holds 1, 2, 3 of the bottom row with 0 and 4 open: the
    # second player, to move, blocks one end and loses at the other.
    board = c4.board_from_moves([1, 1, 2, 2, 3])
    assert c4.solve(board) == -1
    np.testing.assert_array_equal(c4.move_values(board), -np.ones(7, np.float32))
    # Nearly full boards of a drawn game.
    for played, optimal in ((34, {3}), (38, {6}), (41, {6})):
        board = c4.board_from_moves(_DRAWN_GAME[:played])
        assert board.num_empty == 42 - played
        mv = c4.move_values(board)
        assert c4.solve(board) == 0 and np.nanmax(mv) == 0
        assert set(np.flatnonzero(c4.optimal_moves(mv))) == optimal
    assert c4.board_from_moves(_DRAWN_GAME).num_empty == 0
    assert c4.board_from_moves(_DRAWN_GAME).is_terminal()
    with pytest.raises(ValueError, match="over"):
        c4.solve(c4.board_from_moves(_DRAWN_GAME))
    with pytest.raises(ValueError, match="over"):
        c4.solve(c4.board_from_moves([0, 1, 0, 1, 0, 1, 0]))


def test_move_values_consistent_with_solve():
    for moves in _positions(16, [8, 10, 12, 14], seed=3):
        board = c4.board_from_moves(moves)
        mv = c4.move_values(board)
        assert mv.shape == (7,) and mv.dtype == np.float32
        np.testing.assert_array_equal(np.isnan(mv), ~board.legal())
        assert set(np.unique(mv[~np.isnan(mv)])) <= {-1.0, 0.0, 1.0}
        assert np.nanmax(mv) == c4.solve(board)
        # Each move's value is minus its child's (or +1 for a win at once).
        for col in np.flatnonzero(board.legal()):
            if board.wins(col):
                assert mv[col] == 1
            else:
                assert mv[col] == -c4.solve(board.play(int(col)))


def test_pgx_observation_round_trip():
    rng = np.random.default_rng(4)
    move_lists = []
    for length in rng.integers(0, 40, size=24):
        board, moves = c4.EMPTY, []
        while len(moves) < length:  # random play, stopping at the end of the game
            col = int(rng.choice(np.flatnonzero(board.legal())))
            won = board.wins(col)
            board, moves = board.play(col), moves + [col]
            if won:
                break
        move_lists.append(moves)
    state = jax.device_get(c4.pgx_states(_pad(move_lists)))
    for i, moves in enumerate(move_lists):
        board = c4.board_from_moves(moves)
        obs = state.observation[i]
        assert c4.board_from_pgx_obs(obs) == board
        np.testing.assert_array_equal(board.to_pgx_obs(), obs)
        assert bool(state.terminated[i]) == board.is_terminal()
        if not board.is_terminal():
            np.testing.assert_array_equal(board.legal(), state.legal_action_mask[i])
    # The layout by hand: the first stone lands in the bottom row, and the player to
    # move (the second) sees it in channel 1.
    obs = c4.board_from_moves([3]).to_pgx_obs()
    assert obs[5, 3, 1] and obs.sum() == 1


def test_bad_boards():
    obs = np.zeros((6, 7, 2), bool)
    obs[0, 0, 0] = True  # a stone floating at the top
    with pytest.raises(ValueError, match="above an empty"):
        c4.board_from_pgx_obs(obs)
    obs = np.zeros((6, 7, 2), bool)
    obs[5, 0] = True
    with pytest.raises(ValueError, match="both"):
        c4.board_from_pgx_obs(obs)
    with pytest.raises(ValueError, match="full"):
        c4.board_from_moves([0] * 7)
    with pytest.raises(ValueError, match="after the game was won"):
        c4.board_from_moves([0, 1, 0, 1, 0, 1, 0, 1])


def test_endgame_positions(tmp_path):
    data = c4.endgame_positions(12, min_empty=6, max_empty=10, seed=5)
    n = 12
    assert data["obs"].shape == (n, 6, 7, 2) and data["obs"].dtype == bool
    assert data["move_values"].shape == (n, 7) and data["legal"].shape == (n, 7)
    assert data["moves"].shape == (n, 42)
    assert data["heuristic"].sum() == 6
    keys = set()
    for i in range(n):
        moves = [int(m) for m in data["moves"][i] if m >= 0]
        board = c4.board_from_moves(moves)
        assert not board.is_terminal()
        assert 6 <= board.num_empty <= 10 and board.num_empty == data["num_empty"][i]
        assert c4.board_from_pgx_obs(data["obs"][i]) == board
        np.testing.assert_array_equal(data["legal"][i], board.legal())
        np.testing.assert_array_equal(data["move_values"][i], c4.move_values(board))
        assert data["value"][i] == c4.solve(board)
        keys.add((board.mover, board.opponent))
    assert len(keys) == n
    state = jax.device_get(c4.pgx_states(data["moves"]))
    np.testing.assert_array_equal(state.observation, data["obs"])
    assert not state.terminated.any()

    path = str(tmp_path / "set.npz")
    made = c4.load_or_make_endgame_set(path, 12, 6, 10, seed=5)
    for k in data:
        np.testing.assert_array_equal(made[k], data[k])
    loaded = c4.load_or_make_endgame_set(path, 12, 6, 10, seed=5)
    for k in data:
        np.testing.assert_array_equal(loaded[k], data[k])
    other = c4.load_or_make_endgame_set(path, 4, 6, 10, seed=5)  # other arguments: remade
    assert other["value"].shape == (4,)


def test_probe_metrics():
    from benchmarks import connect_four_probe as probe
    exact = np.array([1.0, 0.0, -1.0, 1.0])
    m = probe.value_metrics(np.array([0.9, 0.5, -0.2, -1.0]), exact)
    assert m["sign_acc"] == 0.25  # only the first is classified right
    assert m["recall_win"] == 0.5 and m["recall_draw"] == 0.0 and m["recall_loss"] == 0.0
    np.testing.assert_allclose(m["value_mse"], np.mean([0.01, 0.25, 0.64, 4.0]))
    nan = np.nan
    data = {"value": np.array([1.0, 0.0], np.float32),
            "legal": np.array([[True] * 7, [True] * 6 + [False]]),
            "move_values": np.array([[1, -1, -1, 1, -1, -1, -1],
                                     [0, 0, 0, 0, 0, 0, nan]], np.float32)}
    assert probe.optimal_share(np.array([0, 0]), data) == (1.0, 1.0)
    assert probe.optimal_share(np.array([1, 2]), data) == (0.5, 0.0)

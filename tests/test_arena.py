"""The OpenSpiel arena: action mapping, lockstep cross-checks, match statistics."""

import math
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpuct.alphazero import arena, scores

pyspiel = pytest.importorskip("pyspiel")

# pgx's board layouts (pgx/tic_tac_toe.py, connect_four.py, othello.py): the cell
# (row, column) of each board action, row 0 at the top (othello: rank 1).
PGX_CELLS = {
    "tic_tac_toe": {a: divmod(a, 3) for a in range(9)},
    "connect_four": {a: (None, a) for a in range(7)},
    "othello": {a: divmod(a, 8) for a in range(64)},
}


def _openspiel_cell(game: str, name: str):
    """(row, column) that OpenSpiel's action name refers to."""
    if game == "tic_tac_toe":  # "x(1,2)"
        row, col = re.fullmatch(r"[xo]\((\d),(\d)\)", name).groups()
        return int(row), int(col)
    if game == "connect_four":  # "x3"
        return None, int(re.fullmatch(r"[xo](\d)", name).group(1))
    file, rank = re.fullmatch(r"([a-h])([1-8])", name).groups()  # othello "d3"
    return int(rank) - 1, "abcdefgh".index(file)


@pytest.mark.parametrize("game", arena.ARENA_GAMES)
def test_actions_name_the_same_cells(game):
    os_game = pyspiel.load_game(game)
    state = os_game.new_initial_state()
    assert os_game.num_distinct_actions() == len(PGX_CELLS[game]) + (game == "othello")
    for action, cell in PGX_CELLS[game].items():
        os_action = arena.openspiel_action(game, action)
        assert arena.pgx_action(game, os_action) == action
        assert _openspiel_cell(game, state.action_to_string(0, os_action)) == cell
    if game == "othello":
        assert state.action_to_string(0, arena.openspiel_action(game, 64)) == "pass"


# Random games per game; othello's 128 include games OpenSpiel ends before pgx.
RANDOM_GAMES = {"tic_tac_toe": 64, "connect_four": 64, "othello": 128}


@pytest.mark.parametrize("game", arena.ARENA_GAMES)
def test_random_games_agree_move_by_move(game):
    """The same random moves in pgx and OpenSpiel: same legal moves at every ply,
    same end, same returns (with othello's passes after OpenSpiel's end)."""
    from jaxpuct.envs.pgx_games import make_pgx_game
    pgx_game = make_pgx_game(game)
    step = jax.jit(pgx_game.environment.step)
    b = RANDOM_GAMES[game]
    state = jax.jit(pgx_game.init, static_argnums=1)(jax.random.PRNGKey(3), b)
    first_id = np.asarray(state.current_player)
    os_states = [pyspiel.load_game(game).new_initial_state() for _ in range(b)]
    rng = np.random.default_rng(0)
    rewards = np.zeros((b, 2))
    forced_passes = 0
    while True:
        legal, terminal, player, r = jax.device_get(
            (state.legal_action_mask, state.terminated, state.current_player, state.rewards))
        rewards += r
        if terminal.all():
            break
        actions = np.zeros(b, np.int32)
        for g in np.flatnonzero(~terminal):
            s = os_states[g]
            if s.is_terminal():  # othello: nobody can move; pgx passes twice
                assert game == "othello" and np.flatnonzero(legal[g]).tolist() == [64]
                actions[g] = 64
                forced_passes += 1
                continue
            assert s.current_player() == (0 if player[g] == first_id[g] else 1)
            os_legal = s.legal_actions()
            assert sorted(arena.openspiel_action(game, a)
                          for a in np.flatnonzero(legal[g])) == os_legal
            os_move = int(rng.choice(os_legal))
            s.apply_action(os_move)
            actions[g] = arena.pgx_action(game, os_move)
        state = step(state, jnp.asarray(actions))
    for g, s in enumerate(os_states):
        assert s.is_terminal()
        returns = s.returns()
        assert rewards[g, first_id[g]] == returns[0]
        assert rewards[g, 1 - first_id[g]] == returns[1]
    if game == "othello":
        assert forced_passes > 0  # the seed above reaches that case


def _perfect_ttt_agent():
    from jaxpuct.testing import tictactoe
    optimal = tictactoe.optimal_move_table()  # [3**9, 9] by position code
    powers = 3 ** np.arange(9)

    def act(keys, state):
        del keys
        boards = np.asarray(state._x.board)  # [B, 9]: -1 empty, 0 X, 1 O
        table = optimal[((boards + 1) * powers).sum(-1)]
        return np.argmax(table, axis=-1)  # lowest optimal move; 0 where none
    return act


def test_perfect_tic_tac_toe_player_never_loses_to_random_bot():
    result = arena.play_match(_perfect_ttt_agent(), "tic_tac_toe",
                              arena.BotSpec(kind="random"), num_games=32, seed=5)
    assert result.first.games == result.second.games == 16
    assert result.total.losses == 0
    # Random play rarely holds a perfect first player to a draw.
    assert result.first.wins >= 12
    assert result.total.score_low > 0.5 and result.total.elo_low > 0
    # The game records: replayed in OpenSpiel from the start, each ends where the
    # match counted it, with jaxpuct's recorded result (X is OpenSpiel's player 0).
    game = pyspiel.load_game("tic_tac_toe")
    assert len(result.moves) == 32 and result.agent_first.sum() == 16
    for moves, first, outcome, plies in zip(result.moves, result.agent_first,
                                             result.outcome, result.plies, strict=True):
        state = game.new_initial_state()
        for move in moves:
            state.apply_action(arena.openspiel_action("tic_tac_toe", move))
        assert state.is_terminal() and len(moves) == plies
        assert state.returns()[0 if first else 1] == outcome
    from examples.arena import game_records
    records = game_records(result)
    assert records[0] == {"agent_first": True, "result": int(result.outcome[0]),
                          "moves": list(result.moves[0])}


def test_a_match_keeps_the_agents_root_with_each_of_its_moves(tmp_path):
    """``--record-roots``: every move of the agent comes with the root that chose it
    (visits summing to the simulations, none on an occupied cell, the move a most
    visited one), every move of the bot with ``None``, in the result and the JSON."""
    import json

    from examples import arena as arena_cli
    path = tmp_path / "match.json"
    result = arena_cli.main(["--game", "tic_tac_toe", "--simulations", "8", "--value", "zero",
                             "--opponent", "random", "--games", "2", "--seed", "3",
                             "--json", str(path), "--record-roots"])
    records = json.loads(path.read_text())["game_records"]
    assert len(result.roots) == len(records) == 2
    agent_moves = 0
    for moves, roots, first, record in zip(result.moves, result.roots, result.agent_first,
                                           records, strict=True):
        assert len(roots) == len(moves) and record["roots"] == list(roots)
        for ply, (move, root) in enumerate(zip(moves, roots, strict=True)):
            if (ply % 2 == 0) != bool(first):
                assert root is None
                continue
            visits = np.array(root["visits"])
            assert visits.shape == (9,) and len(root["q"]) == 9
            assert np.isfinite(root["q"]).all()
            assert visits.sum() == 8 and visits[move] == visits.max()
            assert visits[list(moves[:ply])].sum() == 0
            agent_moves += 1
    assert agent_moves >= 4
    # Without the flag the records stay as they were.
    plain = arena.play_match(_perfect_ttt_agent(), "tic_tac_toe", arena.BotSpec(kind="random"),
                             num_games=2, seed=3)
    assert plain.roots == ()


def test_mismatch_is_caught():
    """A legal mask that disagrees with OpenSpiel raises, naming the game and ply."""
    state = pyspiel.load_game("connect_four").new_initial_state()
    legal = np.ones(7, bool)
    legal[3] = False
    with pytest.raises(arena.ArenaMismatchError, match="game 7, ply 0: legal actions"):
        arena.check_same_position("connect_four", legal, False, state, "game 7, ply 0")
    with pytest.raises(arena.ArenaMismatchError, match="pgx terminal=True"):
        arena.check_same_position("connect_four", legal, True, state, "game 7, ply 0")


def _wilson_by_quadratic(s, n, z):
    """The roots p of (s - p)^2 = z^2 p (1 - p) / n, i.e.
    (1 + z^2/n) p^2 - (2 s + z^2/n) p + s^2 = 0."""
    k = z * z / n
    return np.sort(np.roots([1 + k, -(2 * s + k), s * s]).real)


@pytest.mark.parametrize("wins,draws,losses", [(40, 3, 21), (0, 0, 10), (10, 0, 0),
                                               (5, 10, 5), (1, 0, 0), (700, 100, 200)])
def test_score_interval_and_elo_against_independent_formulas(wins, draws, losses):
    m = scores.match_score(wins, draws, losses)
    n = wins + draws + losses
    s = (wins + draws / 2) / n
    assert m.score == pytest.approx(s)
    assert (m.score_low, m.score_high) == pytest.approx(tuple(_wilson_by_quadratic(s, n, 1.96)),
                                                        abs=1e-4)
    # The logistic Elo model: the difference's expected score is the score.
    for elo, score in ((m.elo, m.score), (m.elo_low, m.score_low), (m.elo_high, m.score_high)):
        if math.isfinite(elo):
            assert 1 / (1 + 10 ** (-elo / 400)) == pytest.approx(score)
        else:
            assert score in (0.0, 1.0) and (elo > 0) == (score == 1.0)


def test_score_hand_values():
    # 0 of 10: the upper bound is z^2 / (n + z^2).
    assert scores.wilson_interval(0.0, 10)[1] == pytest.approx(3.8415 / 13.8415, abs=1e-4)
    assert scores.elo_difference(0.75) == pytest.approx(400 * math.log10(3))
    # Large n: close to the normal approximation.
    low, high = scores.wilson_interval(0.6, 100_000)
    half = 1.96 * math.sqrt(0.6 * 0.4 / 100_000)
    assert (low, high) == pytest.approx((0.6 - half, 0.6 + half), abs=1e-5)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="wins must be an int >= 0, got -1"):
        scores.match_score(-1, 0, 1)
    with pytest.raises(ValueError, match="no game was played"):
        scores.match_score(0, 0, 0)
    with pytest.raises(ValueError, match="kind must be 'mcts' or 'random', got 'uct'"):
        arena.BotSpec(kind="uct")
    with pytest.raises(ValueError, match="simulations must be an int >= 1, got 0"):
        arena.BotSpec(simulations=0)
    with pytest.raises(ValueError, match="game must be one of .*got 'go_9x9'"):
        arena.openspiel_action("go_9x9", 0)
    with pytest.raises(ValueError, match="num_games must be an int >= 2, got 1"):
        arena.play_match(_perfect_ttt_agent(), "tic_tac_toe", arena.BotSpec(kind="random"), 1)


# --------------------------------------------------------- the arena command line
def _arena_exit(argv, monkeypatch) -> str:
    """The error of ``examples.arena`` for ``argv``; playing a game fails the test
    (every check must come before the first game)."""
    from examples import arena as arena_cli

    def no_games(*args, **kwargs):
        raise AssertionError("a game was played before the arguments were checked")

    monkeypatch.setattr(arena, "play_match", no_games)
    with pytest.raises(SystemExit) as info:
        arena_cli.main(argv)
    return str(info.value.code)


def test_arena_command_line_checks_its_arguments_before_playing(tmp_path, monkeypatch):
    assert arena.split_run_dirs(" runs/a, runs/b ,,") == ["runs/a", "runs/b"]
    pure = ["--game", "tic_tac_toe", "--simulations", "2", "--opponent", "random"]
    message = _arena_exit(pure + ["--games", "3"], monkeypatch)
    assert message == ("error: --games must be even and at least 2 (half the games per "
                       "colour), got 3")
    for flag in (["--agent-symmetry", "average"], ["--agent-ensemble", "runs/x"],
                 ["--agent-graph-search"]):
        message = _arena_exit(pure + flag, monkeypatch)
        assert message.startswith("error: --agent-symmetry, --agent-ensemble and "
                                  "--agent-graph-search need --run-dir")
    message = _arena_exit(pure + ["--agent-selection", "puct", "--agent-uct-c", "1"],
                          monkeypatch)
    assert message.startswith("error: --agent-uct-c is UCT's constant")
    for flag in (["--agent-selection", "uct"], ["--agent-uct-c", "1"],
                 ["--agent-tie-break", "random"]):
        message = _arena_exit(["--run-dir", str(tmp_path)] + flag, monkeypatch)
        assert message.startswith("error: --agent-selection, --agent-uct-c and "
                                  "--agent-tie-break set a pure search's rule")
    # A MuZero run (its config has unroll_steps): the known-rules switches are refused.
    muzero_run = tmp_path / "muzero_run"
    muzero_run.mkdir()
    (muzero_run / "config.json").write_text('{"unroll_steps": 5}')
    for flag in (["--agent-symmetry", "average"], ["--agent-ensemble", "x"],
                 ["--agent-graph-search"]):
        message = _arena_exit(["--run-dir", str(muzero_run)] + flag, monkeypatch)
        assert message.startswith("error: --agent-symmetry, --agent-ensemble and "
                                  "--agent-graph-search are for known-rules searches")
    message = _arena_exit(["--run-dir", str(muzero_run), "--record-roots", "--json",
                           str(tmp_path / "r.json")], monkeypatch)
    assert message == "error: --record-roots is for known-rules searches; not for a MuZero run"
    message = _arena_exit(pure + ["--games", "2", "--record-roots"], monkeypatch)
    assert message == ("error: --record-roots keeps the roots in --json's game records: "
                       "pass --json")
    missing = tmp_path / "no_such_run"
    message = _arena_exit(["--run-dir", str(missing)], monkeypatch)
    assert message.startswith(f"error: --run-dir {str(missing)!r} does not exist")
    assert "--resume" not in message and not missing.exists()
    message = _arena_exit(["--run-dir", str(tmp_path)], monkeypatch)
    assert "holds no training run" in message and "--resume" not in message
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    message = _arena_exit(pure + ["--games", "2", "--json", str(blocker / "x.json")],
                          monkeypatch)
    assert message.startswith(f"error: --json {str(blocker / 'x.json')!r}")
    assert "does not exist" in message
    message = _arena_exit(pure + ["--games", "2", "--json", str(tmp_path)], monkeypatch)
    assert "is a directory" in message
    if os.path.isdir("/proc/self"):  # not writable even for root
        message = _arena_exit(pure + ["--games", "2", "--json", "/proc/result.json"],
                              monkeypatch)
        assert message.startswith("error: --json '/proc/result.json' is not writable")

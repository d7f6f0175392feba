"""The game against the exact solver's longest defence
(benchmarks/connect_four_vs_solver.py): the solver's choice from a score vector,
and a whole game's bookkeeping on near-end positions, scored by a brute-force
negamax in Pons' convention instead of the C++ solver."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import connect_four_sets as cs
from benchmarks import connect_four_vs_solver as vs
from jaxpuct.testing import connect_four as c4

NAN = np.nan
ROOT = Path(__file__).resolve().parents[1]


def _shipped_agent(seed: int, pair: str = "share50") -> str:
    """The directory of a network in benchmarks/agents: the half-opened pair with the
    large buffer (``share50``) or the recipe's pair (``80min``)."""
    return str(ROOT / "benchmarks" / "agents" / f"connect_four_{pair}_s{seed}")


# Each shipped network: its pair's name, the game record naming it, its run.
SHIPPED = [("share50", 0, "connect_four_vs_solver_c4mix_444444_s0.json", "runs/c4mix_s0"),
           ("share50", 1, "connect_four_vs_solver_c4mix_444444_s1.json", "runs/c4mix_s1"),
           ("80min", 0, "connect_four_vs_solver_c4small.json", "runs/c4small_s0"),
           ("80min", 1, "connect_four_vs_solver_c4small.json", "runs/c4small_s1")]


def test_longest_defence_highest_score_then_centre_left_first():
    assert vs.longest_defence(np.array([-5, -3, -9, -3, -3, -4, -3.0])) == 3
    assert vs.longest_defence(np.array([NAN, 2, 2, -1, 2, NAN, 2])) == 2
    assert vs.longest_defence(np.array([-2, -2, -2, NAN, -2, -2, -2])) == 2
    assert vs.longest_defence(np.array([NAN, NAN, NAN, NAN, NAN, -1, -1])) == 5
    assert vs.longest_defence(np.array([7, NAN, NAN, NAN, NAN, NAN, 6])) == 0
    with pytest.raises(ValueError):
        vs.longest_defence(np.full(7, NAN))


@functools.cache
def _score(board: c4.Board) -> int:
    """The position's score for the player to move, by plain negamax."""
    best = None
    for col in np.flatnonzero(board.legal()):
        v = _move_score(board, int(col))
        best = v if best is None else max(best, v)
    return 0 if best is None else best


def _move_score(board: c4.Board, col: int) -> int:
    n = board.num_stones
    return (43 - n) // 2 if board.wins(col) else -_score(board.play(col))


def brute_scores(moves: str) -> np.ndarray:
    """``[7]`` every column's score after ``moves`` (NaN: full)."""
    board = c4.board_from_moves([int(ch) - 1 for ch in moves])
    return np.array([float(_move_score(board, c)) if board.legal()[c] else NAN
                     for c in range(7)])


def _start(min_stones: int, sign: int) -> str:
    """The first end_easy position with at least ``min_stones`` stones whose
    player to move has a best score of this sign."""
    s = cs.load("end_easy")
    for moves, best in zip(s.moves, s.best, strict=True):
        if len(moves) >= min_stones and np.sign(best) == sign:
            return moves
    raise AssertionError("no such position in end_easy")


def _perfect(moves: str) -> int:
    return vs.longest_defence(brute_scores(moves))


def test_perfect_agent_wins_in_exactly_the_moves_left():
    start = _start(32, +1)
    best = np.nanmax(brute_scores(start))
    seen: list[vs.Ply] = []
    game = vs.play_game(_perfect, brute_scores, agent_first=True, start=start,
                        on_ply=seen.append)
    plies = game["plies"]
    assert [dataclasses.asdict(p) for p in seen] == plies
    assert game["result"] == "win" and game["winner"] == "agent"
    # Both sides perfect, the loser as slow as it can: the game lasts exactly the
    # moves left of Pons' arithmetic (a quicker defence would end it sooner).
    assert len(plies) == cs.moves_left(int(best), len(start))
    assert game["moves"].startswith(start) and len(game["moves"]) == len(start) + len(plies)
    assert [p["mover"] for p in plies] == ["agent", "solver"] * (len(plies) // 2) + ["agent"]
    for p in plies:
        assert p["kept"] and p["optimal"]
        assert p["value"] == ("win" if p["mover"] == "agent" else "loss")
        if p["mover"] == "solver":
            assert p["column"] - 1 == vs.longest_defence(np.array(p["scores"], dtype=float))
    s = game["summary"]
    assert s["agent_moves"] == s["kept"] == s["optimal"] == (len(plies) + 1) // 2
    assert s["first_value_lost_at_ply"] is None
    # The board after the game really is a win for the agent's last move.
    final = c4.board_from_moves([int(ch) - 1 for ch in game["moves"][:-1]])
    assert final.wins(int(game["moves"][-1]) - 1)


def test_agent_that_throws_the_win_away_is_recorded():
    start = _start(32, +1)
    scores = brute_scores(start)
    losing = [c for c in range(7) if not np.isnan(scores[c]) and scores[c] <= 0]
    if not losing:
        pytest.skip("every move of this position keeps the win")

    def agent(moves: str) -> int:  # a bad first move, then perfect play
        return losing[0] if moves == start else _perfect(moves)

    game = vs.play_game(agent, brute_scores, agent_first=True, start=start)
    first = game["plies"][0]
    assert not first["kept"] and not first["optimal"]
    assert first["value"] == "win" and first["chosen"] == scores[losing[0]]
    assert game["summary"]["first_value_lost_at_ply"] == 0
    # From there the solver plays its best, so the agent cannot win.
    assert game["result"] == ("loss" if scores[losing[0]] < 0 else "draw")


def test_agent_second_and_illegal_moves():
    start = _start(32, -1)  # the solver, to move, is lost
    game = vs.play_game(_perfect, brute_scores, agent_first=False, start=start)
    assert game["plies"][0]["mover"] == "solver" and game["result"] == "win"
    full = next(c for c in range(7) if np.isnan(brute_scores(start)[c]))  # a full column
    with pytest.raises(RuntimeError, match="full"):
        vs.play_game(lambda moves: full, brute_scores, agent_first=True, start=start)


def test_a_players_root_is_kept_with_its_move():
    """A player that reports the root behind each move (the network agent's
    visits and ``Q``) has it in that ply's record, and the solver's plies have
    none; a player that reports none records None (the earlier records' shape)."""
    start = _start(32, +1)

    def agent(moves: str) -> tuple[int, dict[str, list[float]]]:
        column = _perfect(moves)
        return column, {"visits": [len(moves)] * 7, "q": [float(column)] * 7}

    game = vs.play_game(agent, brute_scores, agent_first=True, start=start)
    plain = vs.play_game(_perfect, brute_scores, agent_first=True, start=start)
    assert game["moves"] == plain["moves"]
    for p, q in zip(game["plies"], plain["plies"], strict=True):
        assert q["root"] is None
        if p["mover"] == "solver":
            assert p["root"] is None
        else:
            assert p["root"] == {"visits": [len(p["position"])] * 7,
                                 "q": [float(p["column"] - 1)] * 7}
        skip = ("root", "move_seconds", "solve_seconds")  # timings differ run to run
        assert {k: v for k, v in p.items() if k not in skip} == \
            {k: v for k, v in q.items() if k not in skip}


def test_book_of_the_shipped_sets():
    book = vs.labelled_positions()
    # The empty board, labelled in begin_hard.txt: only the centre column wins.
    assert np.array_equal(book[""], [-2, -1, 0, 1, 0, -1, -2])
    calls: list[str] = []

    def scorer(moves: str) -> np.ndarray:
        calls.append(moves)
        return brute_scores(moves)

    scored = vs.with_book(scorer, book)
    assert np.array_equal(scored(""), book[""]) and calls == []
    start = _start(32, +1)
    late = start + str(vs.longest_defence(brute_scores(start)) + 1)
    assert late not in book
    assert np.array_equal(scored(late), brute_scores(late), equal_nan=True)
    assert calls == [late]


def test_book_from_earlier_game_records(tmp_path):
    start = _start(32, +1)
    game = vs.play_game(_perfect, brute_scores, agent_first=True, start=start)
    path = tmp_path / "game.json"
    vs.write_json(str(path), {"complete": True, **game})
    book = vs.positions_of_games([str(path)])
    assert sorted(book) == sorted(p["position"] for p in game["plies"])
    for position, scores in book.items():
        assert np.array_equal(scores, brute_scores(position), equal_nan=True)
    calls: list[str] = []

    def scorer(moves: str) -> np.ndarray:
        calls.append(moves)
        return brute_scores(moves)

    again = vs.play_game(_perfect, vs.with_book(scorer, book), agent_first=True, start=start)
    assert again["moves"] == game["moves"] and calls == []
    # The sets' book and the record agree wherever they meet, and merge.
    merged = vs.merged_books(vs.labelled_positions(), book)
    assert set(book) <= set(merged)

    # A record that scores a known position differently is refused, naming it.
    edited = {"plies": [dict(game["plies"][0], scores=[0.0] * 7)]}
    other = tmp_path / "edited.json"
    vs.write_json(str(other), edited)
    with pytest.raises(ValueError, match=repr(start)):
        vs.positions_of_games([str(path), str(other)])
    with pytest.raises(ValueError, match=repr(start)):
        vs.merged_books(book, vs.positions_of_games([str(other)]))


@pytest.mark.parametrize("pair,seed,record_file,run", SHIPPED)
def test_shipped_networks_are_the_recorded_games_agents(pair, seed, record_file, run):
    """benchmarks/agents holds two pairs' networks (exported from the runs whose
    games against the solver are recorded in docs/): each passes its digests, is the
    iteration its record names, and its prior plays the centre, the only winning
    move, on the empty board."""
    pytest.importorskip("pgx")
    import re

    import jax

    from jaxpuct.alphazero import arena, checkpoints
    from jaxpuct.alphazero.trainer import Trainer
    agent_dir = _shipped_agent(seed, pair)
    config = checkpoints.load_config(agent_dir)
    trainer = Trainer(config, devices=jax.devices()[:1])
    iteration, params = arena.restore_network(agent_dir, trainer)
    with open(ROOT / "docs" / record_file) as f:
        record = json.load(f)
    assert re.search(re.escape(f"{run} at iteration {iteration}") + "[ ,]", record["player"])
    state = c4.pgx_states(np.full((1, cs.CELLS), -1, np.int32))
    logits, _ = trainer.apply_fn(params, state.observation)
    assert int(np.argmax(np.asarray(logits)[0])) == 3


def test_network_agents_move_comes_with_the_root_that_chose_it():
    """The benchmark's network agent (a shipped network, a small plain search)
    reports its root with each move: every simulation passes one root edge, the
    move is a most visited column, and a full column has neither visits nor Q."""
    pytest.importorskip("pgx")
    move, who = vs.agent_player(_shipped_agent(0), None, 16, solver=False, symmetry="none",
                                graph_search=False)
    assert "16 simulations" in who
    for moves in ("", "444444"):
        column, root = move(moves)
        visits, q = np.array(root["visits"]), np.array(root["q"])
        assert visits.shape == q.shape == (7,) and visits.sum() == 16
        assert visits[column] == visits.max()
        full = ~c4.board_from_moves([int(ch) - 1 for ch in moves]).legal()
        assert np.all(visits[full] == 0) and np.all(q[full] == 0.0)
        assert np.all(np.isfinite(q)) and np.all(np.abs(q) <= 1.0)

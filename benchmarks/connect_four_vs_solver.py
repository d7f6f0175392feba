"""A trained connect-four agent against the exact solver playing its longest defence.

The agent (a run of ``examples/selfplay.py``: its search, no root noise, the most
visited move, ``--simulations`` per move) plays one game from the empty board,
as the first player by default (perfect play wins for the first player: the
game was solved by James D. Allen and by Victor Allis in 1988). At the solver's
turn, every legal move is scored by the C++ solver of
:mod:`benchmarks.connect_four_sets` (Pascal Pons' convention: a faster win
scores more, a slower loss scores more, 0 a draw) and the solver plays the
highest score: when it is lost, that is the longest defence; when the
agent has thrown its win away, it is simply the solver's best move. Ties go to
the column nearest the centre, the left one first (Pons' move order
4, 3, 5, 2, 6, 1, 7).

At the agent's turns the solver scores the agent's options too, so the record
says, move by move, whether the agent kept the value of the position (a win
stays a win, a draw a draw) and whether its move was strong-optimal (the best
score).

    python -m benchmarks.connect_four_vs_solver --run-dir runs/c4 \\
        [--simulations 1024] [--agent-second] [--step N] [--start MOVES] [--json out.json]

The first positions take minutes each to solve on one core. Positions the
shipped sets already label (the empty board among them) are read from them
(``--no-book``: solve everything; the empty board alone then takes over 18
minutes from a cold table); with them a whole game took 15 minutes.
``--book-games`` adds the positions of earlier games' records (``--json``):
the solver's replies from the empty board repeat, so a game that follows an
earlier one for its first moves skips their minutes of solving.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks import connect_four_sets as cs
from jaxpuct.alphazero import arena
from jaxpuct.alphazero.config import SEARCH_SYMMETRIES
from jaxpuct.testing import connect_four as c4

# Columns (0-based) from the centre outwards, the left one first: the tie-break.
CENTRE_ORDER = (3, 2, 4, 1, 5, 0, 6)

# moves (digits 1-7 from the empty board) -> a column (0-based), or the column and
# the root that chose it ({"visits": [7], "q": [7]}, kept in the ply's record).
Player = Callable[[str], int | tuple[int, dict[str, list[float]]]]
# moves -> [7] each column's score for the player to move (NaN: full column).
Scorer = Callable[[str], np.ndarray]


def longest_defence(scores: np.ndarray) -> int:
    """The solver's move: the legal column (not NaN) of the highest score, ties
    to the column nearest the centre, left before right.

    Args:
      scores: ``[7]`` each column's score for the player to move, NaN when full.

    Raises:
      ValueError: no legal column.
    """
    scores = np.asarray(scores, dtype=float)
    legal = [c for c in CENTRE_ORDER if not np.isnan(scores[c])]
    if not legal:
        raise ValueError("no legal column")
    best = max(scores[c] for c in legal)
    return next(c for c in legal if scores[c] == best)


def value_name(score: float) -> str:
    """``"win"``, ``"draw"`` or ``"loss"`` for the player to move, from a score."""
    return "win" if score > 0 else "loss" if score < 0 else "draw"


@dataclasses.dataclass(frozen=True)
class Ply:
    """One move of the game.

    Attributes:
      ply: 0 for the first move.
      mover: ``"agent"`` or ``"solver"``.
      position: the moves before it (digits 1-7).
      scores: ``[7]`` each column's score for the mover (None: full column).
      column: the column played, 1-7 (Pons' notation).
      value: the position's value for the mover before the move (its best score's
        sign): ``"win"``, ``"draw"`` or ``"loss"``.
      best: the best score.
      chosen: the score of the move played.
      kept: the move keeps the value (same sign as the best; always true when lost).
      optimal: the move has the best score.
      solve_seconds: time to score the position.
      move_seconds: time the mover took to choose (0 for the solver: its choice is
        the scores).
      root: the agent's root where its player reports one (``{"visits": [7],
        "q": [7]}``, columns 1-7); None for the solver and players that do not.
    """

    ply: int
    mover: str
    position: str
    scores: list[float | None]
    column: int
    value: str
    best: float
    chosen: float
    kept: bool
    optimal: bool
    solve_seconds: float
    move_seconds: float
    root: dict[str, list[float]] | None = None


def judge_move(scores: np.ndarray, column: int) -> tuple[bool, bool]:
    """``(kept, optimal)`` of playing ``column`` (0-based) where the columns score
    ``scores [7]`` (by :func:`benchmarks.connect_four_sets.judge`)."""
    keeps, optimal = cs.judge(np.asarray(scores, dtype=float)[None], np.array([column]))
    return bool(keeps[0]), bool(optimal[0])


def play_game(agent: Player, scorer: Scorer, agent_first: bool = True, start: str = "",
              on_ply: Callable[[Ply], None] | None = None) -> dict[str, Any]:
    """Plays the agent against the longest defence from ``start`` to the end.

    Args:
      agent: the agent's move at a position.
      scorer: the exact scores of a position's moves.
      agent_first: the agent moves first from ``start``.
      start: the moves before the game (digits 1-7; "" the empty board).
      on_ply: called with each ply as soon as it is played.

    Returns:
      ``{"moves", "result", "winner", "plies": [Ply as dict], "summary"}``; ``moves``
      the whole game from the empty board, ``result`` from the agent's side
      (``"win"``, ``"draw"``, ``"loss"``).
    """
    board = c4.board_from_moves([int(ch) - 1 for ch in start])
    if board.is_terminal():
        raise ValueError(f"the game {start!r} is already over")
    moves, plies, winner = start, [], None
    agent_to_move = agent_first
    while True:
        t0 = time.perf_counter()
        scores = np.asarray(scorer(moves), dtype=float)
        t1 = time.perf_counter()
        if not np.array_equal(~np.isnan(scores), board.legal()):
            raise RuntimeError(f"position {moves!r}: the scorer's legal columns differ")
        root = None
        if agent_to_move:
            chosen = agent(moves)
            column, root = chosen if isinstance(chosen, tuple) else (chosen, None)
        else:
            column = longest_defence(scores)
        t2 = time.perf_counter()
        if not board.legal()[column]:
            raise RuntimeError(f"position {moves!r}: column {column + 1} is full")
        kept, optimal = judge_move(scores, column)
        best = float(np.nanmax(scores))
        ply = Ply(ply=len(plies), mover="agent" if agent_to_move else "solver",
                  position=moves, scores=[None if np.isnan(s) else float(s) for s in scores],
                  column=column + 1, value=value_name(best), best=best,
                  chosen=float(scores[column]), kept=kept, optimal=optimal,
                  solve_seconds=t1 - t0, move_seconds=(t2 - t1) if agent_to_move else 0.0,
                  root=root)
        plies.append(ply)
        if on_ply:
            on_ply(ply)
        won = board.wins(column)
        board = board.play(column)
        moves += str(column + 1)
        if won:
            winner = ply.mover
            break
        if board.num_empty == 0:
            break
        agent_to_move = not agent_to_move
    result = "draw" if winner is None else "win" if winner == "agent" else "loss"
    return {"moves": moves, "start": start, "agent_first": agent_first, "result": result,
            "winner": winner, "plies": [dataclasses.asdict(p) for p in plies],
            "summary": summarise(plies)}


def summarise(plies: Sequence[Ply]) -> dict[str, Any]:
    """The agent's moves: how many kept the value and were strong-optimal, and the
    first ply (if any) where it let a better value go."""
    mine = [p for p in plies if p.mover == "agent"]
    lost = [p.ply for p in mine if not p.kept]
    return {"agent_moves": len(mine), "kept": sum(p.kept for p in mine),
            "optimal": sum(p.optimal for p in mine),
            "first_value_lost_at_ply": lost[0] if lost else None,
            "agent_seconds": sum(p.move_seconds for p in mine),
            "solve_seconds": sum(p.solve_seconds for p in plies)}


def format_ply(p: Ply) -> str:
    """A markdown table row of one ply (header: :data:`TABLE_HEAD`)."""
    cells = " ".join("x" if s is None else f"{s:+.0f}" for s in p.scores)
    return (f"| {p.ply + 1} | {p.mover} | {p.position or '-'} | {cells} | {p.value} "
            f"{p.best:+.0f} | {p.column} ({p.chosen:+.0f}) | {'yes' if p.kept else 'NO'} | "
            f"{'yes' if p.optimal else 'no'} | {p.solve_seconds:.1f} | {p.move_seconds:.1f} |")


TABLE_HEAD = ("| ply | mover | position | scores of columns 1-7 | value, best | played (score) "
              "| kept | optimal | solve s | move s |\n|---|---|---|---|---|---|---|---|---|---|")


def labelled_positions() -> dict[str, np.ndarray]:
    """Every position of the shipped sets (:mod:`benchmarks.connect_four_sets`) and
    its ``[7]`` scores, by the same solver: a book for the slow opening positions."""
    book: dict[str, np.ndarray] = {}
    for name in cs.available():
        position_set = cs.load(name)
        book.update(zip(position_set.moves, position_set.scores, strict=True))
    return book


def positions_of_games(paths: Sequence[str]) -> dict[str, np.ndarray]:
    """Every position scored in earlier game records (this module's ``--json``
    files, complete or interrupted) and its ``[7]`` scores: the same solver's exact
    scores, so a later game along the same line need not solve them again.

    Raises:
      ValueError: two records score the same position differently (a record made
        by another solver or convention, or edited).
    """
    books = []
    for path in paths:
        with open(path) as f:
            plies = json.load(f)["plies"]
        books.append({ply["position"]: np.array([np.nan if v is None else v
                                                 for v in ply["scores"]], float)
                      for ply in plies})
    return merged_books(*books)


def merged_books(*books: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One book of several, refusing a position they score differently.

    Raises:
      ValueError: two books disagree on a position's scores.
    """
    merged: dict[str, np.ndarray] = {}
    for book in books:
        for moves, scores in book.items():
            known = merged.get(moves)
            if known is not None and not np.array_equal(
                    np.asarray(known, float), np.asarray(scores, float), equal_nan=True):
                raise ValueError(f"position {moves!r}: the books score it {known} and "
                                 f"{scores}")
            merged[moves] = scores
    return merged


def with_book(scorer: Scorer, book: dict[str, np.ndarray]) -> Scorer:
    """``scorer``, except for the positions of ``book``, read from it."""
    return lambda moves: book[moves] if moves in book else scorer(moves)


def agent_player(run_dir: str, step: int | None, simulations: int,
                 seed: int = 0, solver: bool | None = None,
                 symmetry: str | None = None,
                 ensemble: Sequence[str] = (),
                 graph_search: bool | None = None) -> tuple[Player, str]:
    """The run's greedy agent (:func:`jaxpuct.alphazero.arena.network_agent`) as a
    :data:`Player`, and its description. Each position is rebuilt as a pgx state
    from the empty board (moves padded to 42 plies, so one compile serves all).
    ``solver``: its search with the MCTS-solver or not; ``symmetry``: its network
    under the board's symmetries (``network_agent``'s; both default to the run's);
    ``ensemble``: other runs whose networks join the run's; ``graph_search``: its
    search as a graph or a tree (``network_agent``'s). Each move comes with its
    root's visit counts and ``Q`` per column (0 and 0.0 at a full column), so a
    game's record shows how close each choice was."""
    import jax

    act, game, who = arena.network_agent(run_dir, step, simulations, solver=solver,
                                         symmetry=symmetry, ensemble=ensemble,
                                         graph_search=graph_search, root_stats=True)
    if game != "connect_four":
        raise SystemExit(f"{run_dir} trained {game}, not connect_four")
    key = jax.random.key(seed)

    def move(moves: str) -> tuple[int, dict[str, list[float]]]:
        padded = np.full((1, cs.CELLS), -1, np.int32)
        padded[0, :len(moves)] = [int(ch) - 1 for ch in moves]
        state = c4.pgx_states(padded)
        legal = c4.board_from_moves(padded[0, :len(moves)]).legal()
        if not np.array_equal(np.asarray(state.legal_action_mask)[0], legal):
            raise RuntimeError(f"position {moves!r}: pgx's legal moves differ")
        action, visits, q = act(jax.random.split(jax.random.fold_in(key, len(moves)), 1),
                                state)
        return int(np.asarray(action)[0]), arena.root_record(visits[0], q[0])
    return move, who


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--run-dir", required=True)
    p.add_argument("--step", type=int, default=None, help="checkpoint step (default: newest)")
    p.add_argument("--simulations", type=int, default=1024)
    p.add_argument("--agent-second", action="store_true",
                   help="the solver moves first (perfect play then wins for it)")
    p.add_argument("--start", default="",
                   help="play from this position (digits 1-7) instead of the empty board")
    p.add_argument("--book", action=argparse.BooleanOptionalAction, default=True,
                   help="read the scores of positions in the shipped sets (the empty "
                   "board among them) instead of solving them again")
    p.add_argument("--book-games", default="",
                   help="earlier game records (--json files of this benchmark, separated "
                   "by commas) whose scored positions join the book: a game along a line "
                   "already played solves only its new positions")
    p.add_argument("--log2-entries", type=int, default=24,
                   help="solver transposition table: 2**N entries of 16 bytes")
    p.add_argument("--agent-solver", action=argparse.BooleanOptionalAction, default=None,
                   help="the agent's search with the MCTS-solver (default: as the run trained)")
    p.add_argument("--agent-symmetry", choices=SEARCH_SYMMETRIES, default=None,
                   help="the agent's network under the board's symmetries (default: as the "
                   "run trained)")
    p.add_argument("--agent-graph-search", action=argparse.BooleanOptionalAction, default=None,
                   help="the agent's search as a graph (default: as the run trained)")
    p.add_argument("--agent-ensemble", default="",
                   help="other runs of the same network, separated by commas, averaged with "
                   "the run's (jaxpuct.envs.ensemble); RUN@STEP for checkpoint STEP")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    agent, who = agent_player(a.run_dir, a.step, a.simulations, solver=a.agent_solver,
                              symmetry=a.agent_symmetry,
                              ensemble=arena.split_run_dirs(a.agent_ensemble),
                              graph_search=a.agent_graph_search)
    print(f"{who}\n  vs the exact solver, longest defence; agent "
          f"{'second' if a.agent_second else 'first'}\n{TABLE_HEAD}", flush=True)
    start = time.time()
    header = {"run_dir": a.run_dir, "player": who, "simulations": a.simulations}
    plies: list[Ply] = []

    def on_ply(ply: Ply) -> None:
        # The record so far goes to --json after every ply: an interrupted game
        # (the first positions take minutes each to solve) keeps its moves.
        print(format_ply(ply), flush=True)
        plies.append(ply)
        if a.json:
            write_json(a.json, {**header, "complete": False, "start": a.start,
                                "agent_first": not a.agent_second,
                                "seconds": time.time() - start,
                                "plies": [dataclasses.asdict(p) for p in plies],
                                "summary": summarise(plies)})

    with cs.ScoreSolver(a.log2_entries) as solver:
        book = merged_books(labelled_positions() if a.book else {},
                            positions_of_games([f.strip() for f in a.book_games.split(",")
                                               if f.strip()]))
        scorer = with_book(solver.move_scores, book)
        game = play_game(agent, scorer, agent_first=not a.agent_second,
                         start=a.start, on_ply=on_ply)
    s = game["summary"]
    print(f"game {game['moves']}: the agent's {game['result']}; it kept the value in "
          f"{s['kept']}/{s['agent_moves']} moves, strong-optimal {s['optimal']}/"
          f"{s['agent_moves']}; first value lost at ply "
          f"{'-' if s['first_value_lost_at_ply'] is None else s['first_value_lost_at_ply'] + 1}"
          f" ({time.time() - start:.0f} s)")
    if a.json:
        write_json(a.json, {**header, "complete": True, "seconds": time.time() - start,
                            **game})
    return 0


def write_json(path: str, record: dict[str, Any]) -> None:
    """Writes ``record`` to ``path`` whole (a temporary file, then a rename)."""
    with open(path + ".tmp", "w") as f:
        json.dump(record, f, indent=1)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())

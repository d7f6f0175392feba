"""What an agent's lost connect-four games are made of: its first one-move error.

    python -m benchmarks.connect_four_errors MATCH.json [MATCH.json ...] [--json out.json]

Reads the game records of ``examples/arena.py --json`` (``game_records``: who
moved first and the columns played) and replays each game the agent lost on a
NumPy board of its own (6 rows, 7 columns; a stone lands on the lowest empty cell
of its column; four in a row, column or diagonal wins). Every move of the agent
is checked against the position before it, and the game is filed under the
agent's first error:

* ``missed a win in one``: some legal move won at once, and the agent played
  another;
* ``let the opponent win at once``: no win in one, some legal move left the
  opponent without a winning reply, and the agent's move did not (it left a
  threat unparried, or dropped under one);
* ``no safe move``: the first position where every legal move lets the opponent
  win at once (a double threat, or a stone forced under a threat), reached without
  an error of the two kinds above: the opponent out-planned the agent;
* ``other``: none of these (not expected in a game lost on the board; counted so
  that a mistake in the records shows).

The records carry the columns only, so this needs no engine and no network. It is
a lower bound on what the agent got wrong: an error deeper than one move counts
as ``no safe move`` or not at all.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

import numpy as np

ROWS, COLUMNS = 6, 7
CATEGORIES = ("missed a win in one", "let the opponent win at once", "no safe move", "other")


def drop(board: np.ndarray, column: int, player: int) -> np.ndarray:
    """``board [6, 7]`` (0 empty, 1 first player, 2 second; row 0 the top) with
    ``player``'s stone in ``column``; ``ValueError`` for a full column."""
    empty = np.nonzero(board[:, column] == 0)[0]
    if empty.size == 0:
        raise ValueError(f"column {column} is full.")
    out = board.copy()
    out[empty.max(), column] = player
    return out


def has_four(board: np.ndarray, player: int) -> bool:
    """Whether ``player`` has four in a row, column or diagonal on ``board``."""
    mine = board == player
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(ROWS):
            for c in range(COLUMNS):
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= i < ROWS and 0 <= j < COLUMNS and mine[i, j] for i, j in cells):
                    return True
    return False


def legal_columns(board: np.ndarray) -> list[int]:
    return [c for c in range(COLUMNS) if board[0, c] == 0]


def winning_columns(board: np.ndarray, player: int) -> list[int]:
    """The legal columns where ``player``'s stone makes four at once."""
    return [c for c in legal_columns(board) if has_four(drop(board, c, player), player)]


def first_error(moves: Sequence[int], agent_first: bool) -> str:
    """The category (module docstring) of the agent's first one-move error in the
    game ``moves`` (columns, first player's move first)."""
    board = np.zeros((ROWS, COLUMNS), np.int8)
    agent = 1 if agent_first else 2
    for ply, column in enumerate(moves):
        player = 1 + ply % 2
        if player == agent:
            wins = winning_columns(board, player)
            if wins:
                if column not in wins:
                    return "missed a win in one"
            else:
                safe = [c for c in legal_columns(board)
                        if not winning_columns(drop(board, c, player), 3 - player)]
                if not safe:
                    return "no safe move"
                if column not in safe:
                    return "let the opponent win at once"
        board = drop(board, column, player)
    return "other"


def lost_games(records: Sequence[dict]) -> dict[str, int]:
    """Counts of :func:`first_error` over the records the agent lost (``result < 0``)."""
    counts = dict.fromkeys(CATEGORIES, 0)
    for record in records:
        if record["result"] < 0:
            counts[first_error(record["moves"], record["agent_first"])] += 1
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("matches", nargs="+", help="JSON files of examples/arena.py --json")
    parser.add_argument("--json", default=None, help="write the counts here")
    args = parser.parse_args(argv)
    rows = {}
    for path in args.matches:
        with open(path) as f:
            match = json.load(f)
        if "game_records" not in match:
            raise SystemExit(f"{path}: no game_records (write it with examples/arena.py --json).")
        counts = lost_games(match["game_records"])
        rows[path] = {"games": len(match["game_records"]), "lost": sum(counts.values()), **counts}
        print(f"{path}: {rows[path]['lost']} lost of {rows[path]['games']}: "
              + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

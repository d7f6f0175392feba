"""What an agent's lost connect-four games are made of: its first one-move error.

    python -m benchmarks.connect_four_errors MATCH.json [MATCH.json ...] [--json out.json]

Reads the game records of ``examples/arena.py --json`` (``game_records``: who
moved first and the columns played) and replays each game the agent lost with
:class:`jaxpuct.testing.connect_four.Board` (the exact solver's board). Every move
of the agent is checked against the position before it, and the game is filed
under the agent's first error:

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

from jaxpuct.testing.connect_four import EMPTY, Board

CATEGORIES = ("missed a win in one", "let the opponent win at once", "no safe move", "other")


def winning_columns(board: Board) -> list[int]:
    """The legal columns where the player to move makes four at once."""
    return [c for c, legal in enumerate(board.legal()) if legal and board.wins(c)]


def safe_columns(board: Board) -> list[int]:
    """The legal columns after which the opponent has no win in one."""
    return [c for c, legal in enumerate(board.legal())
            if legal and not winning_columns(board.play(c))]


def first_error(moves: Sequence[int], agent_first: bool) -> str:
    """The category (module docstring) of the agent's first one-move error in the
    game ``moves`` (columns, the first player's move first)."""
    board = EMPTY
    for ply, column in enumerate(moves):
        if (ply % 2 == 0) == agent_first:
            wins = winning_columns(board)
            if wins:
                if column not in wins:
                    return "missed a win in one"
            else:
                safe = safe_columns(board)
                if not safe:
                    return "no safe move"
                if column not in safe:
                    return "let the opponent win at once"
        board = board.play(int(column))
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

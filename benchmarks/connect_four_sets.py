"""Connect-four positions labelled by perfect play: the test protocol of Pascal Pons'
connect-four benchmark (blog.gamesolver.org, "Part 2 - Benchmarking solvers").

Positions come from uniformly random games (every legal move equally likely, played
to the end). Each set is a stage and a difficulty:

* stage: stones on the board, ``begin`` 0-14, ``middle`` 15-28, ``end`` 29 or more;
* difficulty: moves left until the end under perfect play (both sides: the winner
  wins as fast as it can, the loser loses as late as it can), ``easy`` under 14,
  ``medium`` 14-28, ``hard`` over 28.

Six of the nine pairs can happen (an end-stage position has at most 13 moves left,
a middle one at most 27): ``end_easy``, ``middle_easy``, ``middle_medium``,
``begin_easy``, ``begin_medium``, ``begin_hard``. Each position is labelled with the
exact score of each of its seven moves, computed by the C++ solver in
``benchmarks/connect_four_solver.cc`` (built on first use with ``g++``). The score
of a move is the score of the position it leaves, for the player who made it:
``22 - s`` when that player wins with its ``s``-th stone, ``s - 22`` when the
opponent wins with its ``s``-th stone, 0 for a draw. A move **keeps the value** when
its score has the sign of the best move's; it is **strong-optimal** when its score
equals the best.

Files (``benchmarks/data/connect_four/<set>.txt``), one position a line::

    <moves> <score of column 1> ... <score of column 7>

``<moves>`` the columns played from the empty board, digits ``1``-``7`` (Pons'
notation; ``-`` for the empty board), ``x`` for a full column.

    python -m benchmarks.connect_four_sets --generate [--per-set 1000] [--seed 0]
        [--sets end_easy,middle_easy,...] [--max-seconds 3600]
    python -m benchmarks.connect_four_sets --check   # re-solve a sample of each file
    python -m benchmarks.connect_four_sets --generate --seed 1 --sets middle_medium \\
        --data-dir runs/sets_seed1   # a second, independent set (not shipped)

Generation is in CPython except the solver; it stops a set at ``--per-set``
positions or when ``--max-seconds`` of solving are spent on it, whichever comes
first, and says which.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence

import numpy as np

from jaxpuct.testing import connect_four as c4

ROWS, COLUMNS, CELLS = 6, 7, 42
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "connect_four_solver.cc")
DATA_DIR = os.path.join(HERE, "data", "connect_four")

# (stage, difficulty) -> inclusive ranges of stones on the board and of moves left.
STAGES = {"begin": (0, 14), "middle": (15, 28), "end": (29, 41)}
DIFFICULTIES = {"easy": (1, 13), "medium": (14, 28), "hard": (29, 42)}
SET_NAMES = ("end_easy", "middle_easy", "middle_medium", "begin_easy", "begin_medium",
             "begin_hard")


def stage_and_difficulty(name: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The stone range and the moves-left range of the set called ``name``."""
    stage, difficulty = name.split("_")
    return STAGES[stage], DIFFICULTIES[difficulty]


def moves_left(score: int, stones: int) -> int:
    """Moves until the end under perfect play, for a position with ``stones`` stones
    whose player to move has the (best) ``score``."""
    if score == 0:
        return CELLS - stones
    # The winner's s-th stone ends the game, s = 22 - |score|; the player to move
    # places stones number stones + 1, stones + 3, ..., the opponent the others.
    s = 22 - abs(score)
    if score > 0:  # the player to move has stones // 2 on the board
        return 2 * (s - stones // 2) - 1
    opponent_before = (stones + 1) // 2
    return 2 * (s - opponent_before)


def solver_path(build_dir: str | None = None) -> str:
    """The solver binary, built with ``g++ -O2`` when missing or older than its
    source.

    Raises:
      RuntimeError: no ``g++``, or the build failed (its output in the message).
    """
    build_dir = build_dir or os.path.join(os.path.expanduser("~"), ".cache", "jaxpuct")
    os.makedirs(build_dir, exist_ok=True)
    binary = os.path.join(build_dir, "connect_four_solver")
    if os.path.exists(binary) and os.path.getmtime(binary) >= os.path.getmtime(SOURCE):
        return binary
    tmp = f"{binary}.{os.getpid()}.tmp"
    try:
        result = subprocess.run(["g++", "-O2", "-std=c++17", "-o", tmp, SOURCE],
                                capture_output=True, text=True)
    except FileNotFoundError as e:
        raise RuntimeError("building the connect-four solver needs g++ on PATH") from e
    if result.returncode != 0:
        raise RuntimeError(f"g++ failed on {SOURCE}:\n{result.stderr}")
    os.replace(tmp, binary)
    return binary


class ScoreSolver:
    """A running solver process: :meth:`move_scores` sends positions, one a line.

    The transposition table (``2 ** log2_entries`` entries of 16 bytes) persists
    between positions, which is exact (entries are keyed by the whole position).
    """

    def __init__(self, log2_entries: int = 24, build_dir: str | None = None):
        self._proc = subprocess.Popen([solver_path(build_dir), str(log2_entries)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, bufsize=1)
        self.nodes = 0

    def move_scores(self, moves: str) -> np.ndarray:
        """``[7]`` float: each column's score after ``moves`` (digits 1-7), NaN for a
        full column.

        Raises:
          ValueError: ``moves`` is not a legal game that is still going on.
        """
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(moves + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline().strip()
        if not line:
            raise RuntimeError("the solver process ended")
        if line.startswith("error"):
            raise ValueError(f"position {moves!r}: {line}")
        fields = line.split()
        self.nodes += int(fields[7])
        return np.array([np.nan if f == "x" else float(f) for f in fields[:7]])

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait(timeout=10)

    def __enter__(self) -> ScoreSolver:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class PositionSet:
    """One labelled set.

    Attributes:
      name: e.g. ``"middle_easy"``.
      moves: ``[N]`` str, the columns played (digits 1-7, ``""`` the empty board).
      scores: ``[N, 7]`` float, each move's exact score, NaN for a full column.
    """

    name: str
    moves: tuple[str, ...]
    scores: np.ndarray

    @property
    def best(self) -> np.ndarray:
        """``[N]`` the position's score (its best move's)."""
        return np.nanmax(self.scores, axis=1)

    @property
    def stones(self) -> np.ndarray:
        """``[N]`` stones on the board."""
        return np.array([len(m) for m in self.moves])

    def column_lists(self) -> list[list[int]]:
        """The moves as 0-based columns, as pgx actions."""
        return [[int(ch) - 1 for ch in m] for m in self.moves]


def judge(scores: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each chosen move keeps the value and whether it is strong-optimal.

    Args:
      scores: ``[N, 7]`` the moves' exact scores (NaN: full column).
      actions: ``[N]`` int, the chosen columns (0-based).

    Returns:
      ``(keeps [N] bool, optimal [N] bool)``; an illegal choice is neither.
    """
    scores = np.asarray(scores, dtype=float)
    actions = np.asarray(actions)
    best = np.nanmax(scores, axis=1)
    chosen = scores[np.arange(len(actions)), actions]
    legal = ~np.isnan(chosen)
    keeps = legal & (np.sign(np.where(legal, chosen, 0.0)) == np.sign(best))
    optimal = legal & (np.where(legal, chosen, -99.0) == best)
    return keeps, optimal


def critical(scores: np.ndarray) -> np.ndarray:
    """``[N]`` bool: positions where some legal move does not keep the value."""
    scores = np.asarray(scores, dtype=float)
    best = np.sign(np.nanmax(scores, axis=1))[:, None]
    legal = ~np.isnan(scores)
    return np.any(legal & (np.sign(np.where(legal, scores, 0.0)) != best), axis=1)


def random_game(rng: np.random.Generator) -> str:
    """A uniformly random game played to its end, as digits 1-7."""
    board, moves = c4.EMPTY, []
    while len(moves) < CELLS:
        col = int(rng.choice(np.flatnonzero(board.legal())))
        moves.append(col)
        if board.wins(col):
            break
        board = board.play(col)
    return "".join(str(c + 1) for c in moves)


def generate(names: Sequence[str], per_set: int, seed: int, max_seconds: float,
             solver: ScoreSolver, log=print) -> dict[str, PositionSet]:
    """Fills each set in ``names`` with distinct positions from random games.

    Sets of one stage share a stream of games (``seed`` and the stage): from each
    game, a ply in the stage is picked uniformly among the game's non-final
    positions and solved, and the position goes to the set of its difficulty unless
    that set is full or not asked for. A stage stops when its sets are full or
    after ``max_seconds`` of wall-clock time, whichever comes first.
    """
    out: dict[str, PositionSet] = {}
    for stage_index, (stage, (lo, hi)) in enumerate(STAGES.items()):
        wanted = [n for n in names if n.startswith(stage + "_")]
        if not wanted:
            continue
        rng = np.random.default_rng([seed, stage_index])
        seen: set[str] = set()
        found: dict[str, list[tuple[str, np.ndarray]]] = {n: [] for n in wanted}
        start = time.monotonic()
        tried = 0

        while (not all(len(v) >= per_set for v in found.values())
               and time.monotonic() - start < max_seconds):
            game = random_game(rng)
            last = min(hi, len(game) - 1)  # the final position is over: not a test
            if last < lo:
                continue
            ply = int(rng.integers(lo, last + 1))
            position = game[:ply]
            if position in seen:
                continue
            seen.add(position)
            tried += 1
            s = solver.move_scores(position)
            left = moves_left(int(np.nanmax(s)), ply)
            for name in wanted:
                dlo, dhi = DIFFICULTIES[name.split("_")[1]]
                if dlo <= left <= dhi and len(found[name]) < per_set:
                    found[name].append((position, s))
        seconds = time.monotonic() - start
        for name in wanted:
            rows = found[name]
            log(f"{name}: {len(rows)} positions ({tried} of stage {stage} solved, {seconds:.0f} s)"
                + ("" if len(rows) >= per_set else f"; stopped at --max-seconds {max_seconds:g}"))
            out[name] = PositionSet(name, tuple(m for m, _ in rows),
                                    np.array([s for _, s in rows]).reshape(-1, COLUMNS))
    return out


def save(position_set: PositionSet, directory: str = DATA_DIR) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{position_set.name}.txt")
    with open(path + ".tmp", "w") as f:
        for m, s in zip(position_set.moves, position_set.scores, strict=True):
            cells = ["x" if np.isnan(v) else str(int(v)) for v in s]
            f.write(f"{m or '-'} {' '.join(cells)}\n")
    os.replace(path + ".tmp", path)
    return path


def load(name: str, directory: str = DATA_DIR) -> PositionSet:
    """The set ``name`` from ``directory``.

    Raises:
      ValueError: a line without eight fields, or a move outside 1-7.
    """
    moves, scores = [], []
    with open(os.path.join(directory, f"{name}.txt")) as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if len(fields) != 8:
                raise ValueError(f"{name}.txt line {number}: expected 8 fields, got {len(fields)}")
            m = "" if fields[0] == "-" else fields[0]
            if any(ch not in "1234567" for ch in m):
                raise ValueError(
                    f"{name}.txt line {number}: moves {fields[0]!r} are not digits 1-7")
            moves.append(m)
            scores.append([np.nan if v == "x" else float(v) for v in fields[1:]])
    return PositionSet(name, tuple(moves), np.array(scores).reshape(-1, COLUMNS))


def available(directory: str = DATA_DIR) -> list[str]:
    return [n for n in SET_NAMES if os.path.exists(os.path.join(directory, f"{n}.txt"))]


def check(names: Iterable[str], sample: int, seed: int, solver: ScoreSolver, log=print,
          directory: str = DATA_DIR) -> bool:
    """Re-solves ``sample`` random lines of each file and checks each line's stage
    and difficulty; True when everything agrees."""
    ok = True
    rng = np.random.default_rng(seed)
    for name in names:
        s = load(name, directory)
        (lo, hi), (dlo, dhi) = stage_and_difficulty(name)
        stones = s.stones
        left = np.array([moves_left(int(b), int(n)) for b, n in zip(s.best, stones, strict=True)])
        bad_stage = int(np.sum((stones < lo) | (stones > hi)))
        bad_difficulty = int(np.sum((left < dlo) | (left > dhi)))
        duplicates = len(s.moves) - len(set(s.moves))
        picks = rng.choice(len(s.moves), size=min(sample, len(s.moves)), replace=False)
        wrong = sum(not np.array_equal(solver.move_scores(s.moves[i]), s.scores[i], equal_nan=True)
                    for i in picks)
        log(f"{name}: {len(s.moves)} positions; stage errors {bad_stage}, difficulty errors "
            f"{bad_difficulty}, duplicates {duplicates}; re-solved {len(picks)}, differing {wrong}")
        ok &= not (bad_stage or bad_difficulty or duplicates or wrong)
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--generate", action="store_true")
    p.add_argument("--check", action="store_true")
    p.add_argument("--sets", default=",".join(SET_NAMES))
    p.add_argument("--per-set", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=3600.0,
                   help="wall-clock seconds at most per set (the solver runs in its own process)")
    p.add_argument("--sample", type=int, default=50, help="--check: lines re-solved per set")
    p.add_argument("--data-dir", default=DATA_DIR,
                   help="where the set files are written and read (default: the shipped ones)")
    a = p.parse_args(argv)
    names = [n for n in a.sets.split(",") if n]
    for n in names:
        if n not in SET_NAMES:
            p.error(f"--sets: unknown set {n!r}; sets are {', '.join(SET_NAMES)}")
    with ScoreSolver() as solver:
        if a.generate:
            for s in generate(names, a.per_set, a.seed, a.max_seconds, solver).values():
                print("wrote", save(s, a.data_dir))
        if a.check:
            present = [n for n in names if n in available(a.data_dir)]
            return 0 if check(present, a.sample, a.seed, solver, directory=a.data_dir) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

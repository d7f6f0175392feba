"""Connect four: an exact end-game solver in plain Python, and end-game test sets.

An oracle for judging a trained network and a search on connect-four positions
with few empty cells (up to about 14): the exact game-theoretic value of a
position (+1 win, 0 draw, -1 loss for the player to move) and of each of its
moves, and sets of random end-game positions in pgx's observation layout
labelled with them.

Technique. Bitboards and the search enhancements follow John Tromp's
connect-four work (his 1995 database of 8-ply positions and the Fhourstones
solver) and Pascal Pons' tutorial "Solving Connect 4: how to build a perfect
AI" (blog.gamesolver.org, 2019); the code here is our own:

* a position is two Python ints: the stones of the player to move and of the
  opponent. Column ``c`` owns bits ``7c .. 7c + 6``, bit ``7c + r`` is row ``r``
  counted from the *bottom*; bit ``7c + 6`` is a guard row that is always empty,
  so that shifting a line of four across a column edge never finds stones;
* the cells where a player would complete four are found for the whole board at
  once with shifts (1 vertical, 7 horizontal, 6 and 8 diagonal);
* negamax with alpha-beta (Knuth & Moore 1975) on the three values -1/0/+1, a
  transposition table of lower/upper bounds keyed by ``mover + mask`` (a unique
  code of the position: see :func:`_key`), an immediate-win check, forced
  blocks (two open threats of the opponent lose at once), never a move directly
  below a cell where the opponent would win, and move ordering by the number of
  threats a move creates, centre columns first among equals.

Speed (CPython, one core of a loaded 2-core machine, a fresh table per position,
200 positions of :func:`endgame_positions`' mixture per row; ``python -m
benchmarks.connect_four_probe --solver-speed``): about 7 x 10^4 nodes per second;
:func:`move_values` (all seven moves) takes on average 0.5 ms per position at 8
empty cells, 0.8 ms at 10, 1.8 ms at 12 and 3 ms at 14 (at most 50 ms), and a
:func:`solve` at 22 empty cells about 0.15 s (at most about 1 s). Many random
end-games are decided by a win in one or a double threat, which is found at the
root: the median is well under a millisecond.

Layout of pgx's ``connect_four`` observation (checked by experiment, and in
the tests): ``obs [6, 7, 2]`` bool, row 0 the *top* row, column 0 the left one,
channel 0 the stones of the player to move (``state.current_player``), channel
1 the opponent's. pgx's action is the column.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = [
    "COLUMNS", "EMPTY", "ILLEGAL", "ROWS", "Board", "Solver", "board_from_moves",
    "board_from_pgx_obs", "endgame_positions", "load_or_make_endgame_set", "move_values",
    "optimal_moves", "pgx_states", "solve",
]

ROWS, COLUMNS = 6, 7
_H1 = ROWS + 1  # bits per column: six rows and the guard bit
# One bit at the bottom of every column; the six playable bits of every column.
_BOTTOM = sum(1 << (c * _H1) for c in range(COLUMNS))
_BOARD = _BOTTOM * ((1 << ROWS) - 1)
_COLUMN = tuple(((1 << ROWS) - 1) << (c * _H1) for c in range(COLUMNS))
# Columns by distance from the centre: moves there take part in more lines of
# four, so they are better on average and tried first (cuts come sooner).
_CENTRE_FIRST = (3, 2, 4, 1, 5, 0, 6)
# move_values' entry for a full column (illegal move).
ILLEGAL = float("nan")


def _winning_cells(stones: int, mask: int) -> int:
    """Empty cells (bits) where a stone would complete four for ``stones``.

    Each line direction is a shift ``d``; a cell wins if the three cells on one
    side are stones (``3d`` away, ...), or two on one side and one on the other.
    Python ints do not overflow, so left shifts may leave the board; the final
    ``& empty`` masks them off (with the guard bits, which are never stones).
    """
    # Vertical: only the three cells below can complete it.
    r = (stones << 1) & (stones << 2) & (stones << 3)
    for d in (_H1, _H1 - 1, _H1 + 1):  # horizontal, and the two diagonals
        p = (stones << d) & (stones << 2 * d)
        r |= p & (stones << 3 * d)
        r |= p & (stones >> d)
        p = (stones >> d) & (stones >> 2 * d)
        r |= p & (stones << d)
        r |= p & (stones >> 3 * d)
    return r & (_BOARD ^ mask)


def _has_four(stones: int) -> bool:
    """Whether ``stones`` hold a line of four (in any of the four directions)."""
    for d in (1, _H1, _H1 - 1, _H1 + 1):
        m = stones & (stones >> d)
        if m & (m >> 2 * d):
            return True
    return False


def _popcount(x: int) -> int:
    return bin(x).count("1")


def _key(mover: int, mask: int) -> int:
    """A unique code of a position: ``mover + mask`` adds, in each column, one to
    the bit just above the top stone and keeps the mover's stones below it, so
    the column's height and its stones can both be read back (Pons' key)."""
    return mover + mask


@dataclasses.dataclass(frozen=True)
class Board:
    """A connect-four position, from the view of the player to move.

    Attributes:
      mover: bitboard of the stones of the player to move (bit ``7c + r`` is
        column ``c``, row ``r`` from the bottom).
      opponent: bitboard of the other player's stones.
    """

    mover: int
    opponent: int

    @property
    def mask(self) -> int:
        """All stones."""
        return self.mover | self.opponent

    @property
    def heights(self) -> tuple[int, ...]:
        """``[7]`` stones in each column."""
        mask = self.mask
        return tuple(_popcount(mask & _COLUMN[c]) for c in range(COLUMNS))

    @property
    def num_stones(self) -> int:
        return _popcount(self.mask)

    @property
    def num_empty(self) -> int:
        return ROWS * COLUMNS - self.num_stones

    def legal(self) -> np.ndarray:
        """``[7]`` bool: the columns that are not full."""
        return np.array([h < ROWS for h in self.heights])

    def is_terminal(self) -> bool:
        """The game is over: someone has four (only the player who just moved can
        have them in a real game) or the board is full."""
        return _has_four(self.mover) or _has_four(self.opponent) or self.num_empty == 0

    def wins(self, column: int) -> bool:
        """Whether playing ``column`` (legal) completes four for the mover."""
        mask = self.mask
        move = (mask + (1 << (column * _H1))) & _COLUMN[column]
        return bool(_winning_cells(self.mover, mask) & move)

    def play(self, column: int) -> Board:
        """The position after the mover drops a stone in ``column`` (the players
        swap roles). Raises ``ValueError`` for a full or unknown column."""
        if not 0 <= column < COLUMNS:
            raise ValueError(f"column must be in 0..6, got {column}")
        mask = self.mask
        move = (mask + (1 << (column * _H1))) & _COLUMN[column]
        if not move:
            raise ValueError(f"column {column} is full")
        return Board(self.opponent, self.mover | move)

    def to_pgx_obs(self) -> np.ndarray:
        """``[6, 7, 2]`` bool in pgx's layout (row 0 at the top; channel 0 the mover's
        stones)."""
        obs = np.zeros((ROWS, COLUMNS, 2), bool)
        for ch, stones in enumerate((self.mover, self.opponent)):
            for c in range(COLUMNS):
                for r in range(ROWS):
                    if stones >> (c * _H1 + r) & 1:
                        obs[ROWS - 1 - r, c, ch] = True
        return obs

    def __str__(self) -> str:
        """The board, top row first: ``x`` the mover, ``o`` the opponent."""
        obs = self.to_pgx_obs()
        return "\n".join("".join("x" if obs[r, c, 0] else "o" if obs[r, c, 1] else "."
                                 for c in range(COLUMNS)) for r in range(ROWS))


EMPTY = Board(0, 0)


def board_from_moves(columns: Iterable[int]) -> Board:
    """The position after ``columns`` are played in turn from the empty board.

    Raises:
      ValueError: a full or unknown column, or a move after the game was won.
    """
    board = EMPTY
    for i, col in enumerate(columns):
        if _has_four(board.opponent):
            raise ValueError(f"move {i} ({col}) comes after the game was won")
        board = board.play(int(col))
    return board


def board_from_pgx_obs(obs: np.ndarray) -> Board:
    """The position of a pgx ``connect_four`` observation ``obs [6, 7, 2]`` (bool or
    0/1; row 0 at the top; channel 0 the player to move).

    Raises:
      ValueError: a wrong shape, a cell held by both players, or a stone above an
        empty cell.
    """
    obs = np.asarray(obs).astype(bool)
    if obs.shape != (ROWS, COLUMNS, 2):
        raise ValueError(f"obs must have shape (6, 7, 2), got {obs.shape}")
    if np.any(obs[..., 0] & obs[..., 1]):
        raise ValueError("a cell holds stones of both players")
    bits = [0, 0]
    for c in range(COLUMNS):
        filled = np.any(obs[::-1, c], axis=-1)  # bottom row first
        height = int(filled.sum())
        if not filled[:height].all():
            raise ValueError(f"column {c} has a stone above an empty cell")
        for r in range(height):
            ch = 0 if obs[ROWS - 1 - r, c, 0] else 1
            bits[ch] |= 1 << (c * _H1 + r)
    return Board(bits[0], bits[1])


class Solver:
    """Exact negamax with alpha-beta and a transposition table (kept between
    calls, so that the children of one position share their work).

    Attributes:
      nodes: positions searched so far (calls of the inner negamax).
      table: ``key -> (lower, upper)`` bounds of the mover's value.
    """

    def __init__(self):
        self.nodes = 0
        self.table: dict[int, tuple[int, int]] = {}

    def solve(self, board: Board) -> int:
        """The value (+1/0/-1) of ``board`` for the player to move.

        Raises:
          ValueError: the game is already over (a four on the board, or full).
        """
        if board.is_terminal():
            raise ValueError(f"the game is over:\n{board}")
        return self._negamax(board.mover, board.mask, -1, 1)

    def negamax(self, board: Board, alpha: int, beta: int) -> int:
        """Alpha-beta value of ``board`` (not over) in the window ``alpha < beta``
        (each in -1..1): a result ``<= alpha`` is an upper bound of the exact value,
        ``>= beta`` a lower bound, anything between is exact. ``(-1, 1)`` is
        :meth:`solve`; a null window such as ``(0, 1)`` answers "is it a win?"."""
        if board.is_terminal():
            raise ValueError(f"the game is over:\n{board}")
        if not -1 <= alpha < beta <= 1:
            raise ValueError(f"need -1 <= alpha < beta <= 1, got {alpha}, {beta}")
        return self._negamax(board.mover, board.mask, alpha, beta)

    def move_values(self, board: Board) -> np.ndarray:
        """``[7]`` float: the exact value of each move for the player to move
        (+1/0/-1), :data:`ILLEGAL` (NaN) for a full column; ``nanmax`` of it is
        :meth:`solve`'s value."""
        if board.is_terminal():
            raise ValueError(f"the game is over:\n{board}")
        out = np.full(COLUMNS, ILLEGAL)
        for c in range(COLUMNS):
            if board.heights[c] >= ROWS:
                continue
            if board.wins(c):
                out[c] = 1.0
                continue
            child = board.play(c)
            # No four was made, so the child is terminal only when full: a draw.
            out[c] = 0.0 if child.num_empty == 0 else -float(
                self._negamax(child.mover, child.mask, -1, 1))
        return out

    def _negamax(self, mover: int, mask: int, alpha: int, beta: int) -> int:
        """Value for ``mover`` to move, within the window: a value ``<= alpha`` is
        an upper bound of the true one, ``>= beta`` a lower bound, else exact. The
        position is not over (no four, not full)."""
        self.nodes += 1
        if mask == _BOARD:  # full, and no four was made on the way: a draw
            return 0
        opponent = mover ^ mask
        possible = (mask + _BOTTOM) & _BOARD  # the cell each open column plays to
        if _winning_cells(mover, mask) & possible:
            return 1
        threats = _winning_cells(opponent, mask)
        forced = possible & threats
        if forced:
            if forced & (forced - 1):  # two open threats: one block is not enough
                return -1
            possible = forced
        # A stone just below an opponent's winning cell lets them play there.
        possible &= ~(threats >> 1)
        if not possible:
            return -1

        key = _key(mover, mask)
        lower, upper = self.table.get(key, (-1, 1))
        if lower >= beta:
            return lower
        if upper <= alpha:
            return upper
        a, b = max(alpha, lower), min(beta, upper)
        if a >= b:
            return a

        # Most threats created first; centre first among equals (stable sort).
        moves = []
        for c in _CENTRE_FIRST:
            move = possible & _COLUMN[c]
            if move:
                own = mover | move
                moves.append((-_popcount(_winning_cells(own, mask | move)), move))
        moves.sort(key=lambda t: t[0])

        best, a0 = -1, a
        for _, move in moves:
            value = -self._negamax(opponent, mask | move, -b, -a)
            if value > best:
                best = value
                if value > a:
                    a = value
                    if a >= b:
                        break
        # A fail-low result is an upper bound, a fail-high one a lower bound.
        if best <= a0:
            upper = min(upper, best)
        elif best >= b:
            lower = max(lower, best)
        else:
            lower = upper = best
        self.table[key] = (lower, upper)
        return best


def solve(board: Board, solver: Solver | None = None) -> int:
    """The exact value (+1 win, 0 draw, -1 loss) of ``board`` for the player to
    move (a fresh :class:`Solver` unless one is given to share its table)."""
    return (solver or Solver()).solve(board)


def move_values(board: Board, solver: Solver | None = None) -> np.ndarray:
    """``[7]`` float32: the exact value of each move for the player to move, NaN
    (:data:`ILLEGAL`) for a full column. ``np.nanmax`` of it equals
    :func:`solve`; the optimal moves are where it equals that maximum."""
    return (solver or Solver()).move_values(board).astype(np.float32)


# ------------------------------------------------------------- end-game test sets


def _heuristic_move(board: Board, rng: np.random.Generator) -> int:
    """One-ply heuristic: win at once if possible, else block an immediate win of
    the opponent, else a uniform legal move."""
    legal = np.flatnonzero(board.legal())
    wins = [int(c) for c in legal if board.wins(int(c))]
    if wins:
        return int(rng.choice(wins))
    mask = board.mask
    threats = _winning_cells(board.opponent, mask) & ((mask + _BOTTOM) & _BOARD)
    blocks = [c for c in legal if threats & _COLUMN[c]]
    if blocks:
        return int(rng.choice(blocks))
    return int(rng.choice(legal))


def _random_position(num_empty: int, heuristic: bool, rng: np.random.Generator,
                     max_tries: int = 100_000) -> list[int]:
    """Moves of a game played to ``num_empty`` empty cells that is not over, by
    uniform or heuristic play (a game that ends earlier is thrown away)."""
    target = ROWS * COLUMNS - num_empty
    for _ in range(max_tries):
        board, moves = EMPTY, []
        for _ in range(target):
            col = (_heuristic_move(board, rng) if heuristic
                   else int(rng.choice(np.flatnonzero(board.legal()))))
            won = board.wins(col)
            board = board.play(col)
            moves.append(col)
            if won:
                break
        else:
            return moves
    raise RuntimeError(f"no game lasted {target} moves in {max_tries} tries")


def endgame_positions(n: int, min_empty: int = 8, max_empty: int = 14, seed: int = 0,
                      heuristic_fraction: float = 0.5) -> dict[str, np.ndarray]:
    """``n`` distinct non-terminal positions with ``min_empty .. max_empty`` empty
    cells, labelled with their exact values.

    How they are made: the number of empty cells is uniform over the range; the
    first ``round(heuristic_fraction * n)`` positions come from games where both
    sides play the one-ply heuristic (take an immediate win, else block an
    immediate loss, else a uniform move), the rest from uniformly random games.
    A game that ends before the target is thrown away and replayed, and so is a
    position seen before. Uniform play leaves many positions already decided by
    an open threat; the heuristic games look more like real play (their threats
    were blocked), so fewer positions are won in one move.

    Returns:
      ``obs [n, 6, 7, 2]`` bool in pgx's layout (channel 0 the player to move, row
      0 at the top), ``value [n]`` float32 exact value for the player to move,
      ``move_values [n, 7]`` float32 (NaN for a full column), ``legal [n, 7]``
      bool, ``moves [n, 42]`` int8 the columns played from the empty board (pgx
      actions), padded with -1, ``num_empty [n]`` int8, ``heuristic [n]`` bool
      (made by heuristic play), and ``solver_nodes [n]`` int64.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 1 <= min_empty <= max_empty <= ROWS * COLUMNS - 1:
        raise ValueError(f"need 1 <= min_empty <= max_empty <= 41, got {min_empty}, "
                         f"{max_empty}")
    if not 0.0 <= heuristic_fraction <= 1.0:
        raise ValueError(f"heuristic_fraction must be in [0, 1], got {heuristic_fraction}")
    rng = np.random.default_rng(seed)
    n_heuristic = int(round(heuristic_fraction * n))
    seen: set[tuple[int, int]] = set()
    out: dict[str, list] = {k: [] for k in ("obs", "value", "move_values", "legal", "moves",
                                            "num_empty", "heuristic", "solver_nodes")}
    while len(out["obs"]) < n:
        heuristic = len(out["obs"]) < n_heuristic
        empty = int(rng.integers(min_empty, max_empty + 1))
        moves = _random_position(empty, heuristic, rng)
        board = board_from_moves(moves)
        if (board.mover, board.opponent) in seen:
            continue
        seen.add((board.mover, board.opponent))
        solver = Solver()
        mv = move_values(board, solver)
        out["obs"].append(board.to_pgx_obs())
        out["value"].append(np.nanmax(mv))
        out["move_values"].append(mv)
        out["legal"].append(board.legal())
        out["moves"].append(np.pad(np.asarray(moves, np.int8), (0, ROWS * COLUMNS - len(moves)),
                                   constant_values=-1))
        out["num_empty"].append(empty)
        out["heuristic"].append(heuristic)
        out["solver_nodes"].append(solver.nodes)
    dtypes = {"obs": bool, "value": np.float32, "move_values": np.float32, "legal": bool,
              "moves": np.int8, "num_empty": np.int8, "heuristic": bool,
              "solver_nodes": np.int64}
    return {k: np.asarray(v, dtype=dtypes[k]) for k, v in out.items()}


# Bumped whenever the generator changes what it makes, so old cache files are remade.
_SET_VERSION = 1


def load_or_make_endgame_set(path: str, n: int, min_empty: int = 8, max_empty: int = 14,
                             seed: int = 0, heuristic_fraction: float = 0.5
                             ) -> dict[str, np.ndarray]:
    """:func:`endgame_positions` cached in the ``.npz`` file ``path``: loaded when it
    was made with the same arguments, else made and saved (through a temporary file
    and a rename, so an interrupted save leaves no half file)."""
    meta = np.array([_SET_VERSION, n, min_empty, max_empty, seed,
                     int(round(heuristic_fraction * 1_000_000))], np.int64)
    if os.path.exists(path):
        with np.load(path) as data:
            if "meta" in data and np.array_equal(data["meta"], meta):
                return {k: data[k] for k in data.files if k != "meta"}
    data = endgame_positions(n, min_empty, max_empty, seed, heuristic_fraction)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}.npz"
    try:
        # ``data`` maps array names to arrays; numpy's stub reads ``**`` as its keywords.
        np.savez_compressed(tmp, meta=meta, **data)  # pyright: ignore[reportArgumentType]
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return data


def pgx_states(moves: np.ndarray, env=None):
    """pgx ``connect_four`` states ``[n]`` after ``moves [n, L]`` (columns, -1
    padding at the end) from the initial state; a padded ply leaves a state as it
    is. Imports JAX and pgx (the rest of this module needs neither); ``env``:
    the pgx environment (default ``pgx.make("connect_four")``).

    Which player id moves first is pgx's random draw; the observation is from the
    player to move either way.
    """
    from jaxpuct.testing._common import replay_pgx
    if env is None:
        import pgx
        env = pgx.make("connect_four")
    return replay_pgx(env, moves)


def optimal_moves(move_vals: Sequence[float] | np.ndarray) -> np.ndarray:
    """``[7]`` bool: the moves whose value equals the best (NaN entries are not)."""
    mv = np.asarray(move_vals, np.float64)
    return np.nan_to_num(mv, nan=-np.inf) == np.nanmax(mv)

"""Tic-tac-toe: rules in NumPy and in JAX, and exact minimax over every position.

An exact oracle for tests and benchmarks of the search:

* NumPy / plain-Python rules on ``Position`` tuples, exact minimax values, Q-values
  and optimal moves of all 5478 reachable positions (4520 of them non-terminal),
  and lookup tables indexed by :func:`code`;
* batched, jit-able JAX rules (:class:`State`, :func:`step`) with the search
  functions :func:`root` and :func:`make_recurrent_fn` (the mctx-compatible
  interface of :mod:`jaxpuct.types`): uniform prior, value 0 (or the exact value),
  exact rewards, and an exact (collision-free) state hash.

Conventions (those of mctx and pgx):

* a value is from the view of the player to move at its node;
* a reward is from the view of the player who made the move;
* ``Q(s, a) = reward(s, a) + discount(s, a) * V(child)`` with ``discount = -1``;
* a terminal state has value 0 and no legal action: the outcome is in the reward
  of the move that reached it;
* an illegal move ends the game and its mover loses (reward -1); acting in a
  terminal state gives reward 0 and stays terminal (pgx does the same for illegal
  actions). A search should never do either; these rules make such a bug visible
  instead of undefined.

The prior logits are zero everywhere, also on illegal actions: the search is
expected to mask them with ``legal_action_mask`` (wrap the function with
:func:`jaxpuct.testing.mask_illegal_logits` for a search that does not, e.g. mctx).

Position code: ``code(pos) = sum_i digit_i * 3**i`` with digit 0 = empty, 1 = X,
2 = O. pgx's ``tic_tac_toe`` board (``-1`` empty, ``0`` X, ``1`` O) gives the same
code as ``sum_i (board_i + 1) * 3**i``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct._dataclass import Replaceable, pytree_dataclass
from jaxpuct.testing._common import RecurrentFn
from jaxpuct.types import RecurrentFnOutput, RootFnOutput

__all__ = [
    "EMPTY", "LINES", "NUM_ACTIONS", "NUM_CODES", "Position", "State", "all_positions",
    "batch", "code", "codes", "format_position", "initial", "is_terminal", "legal",
    "legal_moves", "make_recurrent_fn", "minimax_value", "optimal_move_table",
    "optimal_moves", "parse", "play", "qvalues", "recurrent_fn", "root", "state_hash",
    "step", "to_move", "unbatch", "value_table", "winner",
]

# --------------------------------------------------------------------------------------
# NumPy / plain-Python rules and exact minimax.
#
# A Position is a tuple of 9 ints, row-major (cell 0 top-left, 8 bottom-right), in
# absolute terms: 1 = X, -1 = O, 0 = empty. X moves first, so the player to move
# follows from the stone counts and a Position is a complete game state.
# --------------------------------------------------------------------------------------

Position = tuple[int, ...]

NUM_ACTIONS = 9
NUM_CODES = 3**9
EMPTY: Position = (0,) * 9
LINES = np.array(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8],  # rows
     [0, 3, 6], [1, 4, 7], [2, 5, 8],  # columns
     [0, 4, 8], [2, 4, 6]],  # diagonals
    dtype=np.int32,
)  # [8, 3]
_BASE3 = 3 ** np.arange(9, dtype=np.int64)  # [9]


def parse(text: str) -> Position:
    """Position from a string such as ``"XO. .X. ..O"``.

    ``X``/``x`` = X, ``O``/``o``/``0`` = O, ``.``/``-``/``_`` = empty; whitespace,
    ``/`` and ``|`` are ignored. Raises ``ValueError`` for an impossible stone count.
    """
    symbols = {"X": 1, "O": -1, "0": -1, ".": 0, "-": 0, "_": 0}
    cells = [symbols[c.upper()] for c in text if not (c.isspace() or c in "/|")]
    if len(cells) != 9:
        raise ValueError(f"expected 9 cells, got {len(cells)} in {text!r}")
    pos = tuple(cells)
    if pos.count(1) - pos.count(-1) not in (0, 1):
        raise ValueError(f"impossible stone counts in {text!r}")
    return pos


def format_position(pos: Position) -> str:
    """``"XO./.X./..O"``: the inverse of :func:`parse`."""
    chars = "".join({1: "X", -1: "O", 0: "."}[c] for c in pos)
    return "/".join(chars[i:i + 3] for i in range(0, 9, 3))


def to_move(pos: Position) -> int:
    """``1`` if X is to move, ``-1`` if O is."""
    return 1 if pos.count(1) == pos.count(-1) else -1


def winner(pos: Position) -> int:
    """``1`` if X has three in a row, ``-1`` if O has, ``0`` otherwise."""
    for line in LINES:
        s = sum(pos[i] for i in line)
        if abs(s) == 3:
            return s // 3
    return 0


def is_terminal(pos: Position) -> bool:
    """Whether someone has won or the board is full."""
    return winner(pos) != 0 or 0 not in pos


def legal_moves(pos: Position) -> list[int]:
    """Empty cells, ascending; ``[]`` at a terminal position."""
    return [] if is_terminal(pos) else [i for i, c in enumerate(pos) if c == 0]


def play(pos: Position, action: int) -> Position:
    """The position after the player to move plays ``action``. Raises if illegal."""
    if action not in legal_moves(pos):
        raise ValueError(f"illegal move {action} in {format_position(pos)}")
    cells = list(pos)
    cells[action] = to_move(pos)
    return tuple(cells)


def code(pos: Position) -> int:
    """Base-3 code of a position in ``[0, 3**9)``: digit ``i`` is cell ``i`` (O -> 2)."""
    return int(sum(_BASE3[i] * (2 if c == -1 else c) for i, c in enumerate(pos)))


@functools.cache
def minimax_value(pos: Position) -> int:
    """Exact game value (+1 win / 0 draw / -1 loss) for the player to move.

    Negamax (Knuth & Moore, "An analysis of alpha-beta pruning", 1975) memoised over
    positions. At a terminal position this is the outcome for the player to move
    (-1 if the opponent just completed a line, 0 for a full board) -- note that the
    search stores 0 there instead, the outcome being in the reward of the last move.
    """
    if is_terminal(pos):
        return -1 if winner(pos) != 0 else 0
    return max(-minimax_value(play(pos, a)) for a in legal_moves(pos))


def qvalues(pos: Position) -> np.ndarray:
    """``[9]`` exact ``Q(pos, a)`` for the player to move; NaN where ``a`` is illegal.

    Equals ``reward + (-1) * V(child)`` with the search's convention (``V = 0`` at a
    terminal child, +1 reward for a winning move).
    """
    q = np.full(9, np.nan)
    for a in legal_moves(pos):
        q[a] = -minimax_value(play(pos, a))
    return q


def optimal_moves(pos: Position) -> set[int]:
    """The legal moves that achieve the minimax value (empty at a terminal position)."""
    v = minimax_value(pos)
    return {a for a in legal_moves(pos) if -minimax_value(play(pos, a)) == v}


def _decode(codes: np.ndarray) -> np.ndarray:
    """``[N]`` codes -> ``[N, 9]`` int8 absolute boards (1 = X, -1 = O, 0 = empty)."""
    digits = (np.asarray(codes, np.int64)[:, None] // _BASE3) % 3  # [N, 9]
    return np.where(digits == 2, -1, digits).astype(np.int8)


def _winners(boards: np.ndarray) -> np.ndarray:
    """``[N, 9]`` absolute boards -> ``[N]`` int8 winner (1 = X, -1 = O, 0 = none)."""
    sums = boards[:, LINES].sum(-1, dtype=np.int32)  # [N, 8]
    return np.where((sums == 3).any(-1), 1, np.where((sums == -3).any(-1), -1, 0)).astype(np.int8)


@functools.cache
def _solved() -> tuple[np.ndarray, ...]:
    """Every reachable position, solved by backward induction over whole layers.

    Returns ``(codes [5478], terminal [5478] bool, values [3**9] int8, optimal
    [3**9, 9] bool)``: codes sorted by (stones, code); ``values`` the negamax value
    for the player to move at every reachable position (as :func:`minimax_value`,
    also at terminal ones), 0 elsewhere; ``optimal`` the moves achieving it at
    non-terminal positions. Layer by layer in NumPy (about 10 ms, where the memoised
    recursion over tuples took 1.5 s: every process that needs a table paid it);
    ``tests/test_oracles.py`` checks it against :func:`minimax_value` position by
    position.
    """
    layers, terminal_layers = [np.zeros(1, np.int64)], []
    for stones in range(10):
        boards = _decode(layers[-1])
        done = (_winners(boards) != 0) | (stones == 9)
        terminal_layers.append(done)
        if stones == 9:
            break
        digit = 1 if stones % 2 == 0 else 2  # X moves on even stone counts
        parents, cells = np.nonzero((boards == 0) & ~done[:, None])
        layers.append(np.unique(layers[-1][parents] + digit * _BASE3[cells]))
    values = np.zeros(NUM_CODES, np.int8)
    optimal = np.zeros((NUM_CODES, NUM_ACTIONS), bool)
    for stones in range(9, -1, -1):  # children before parents
        codes_, done = layers[stones], terminal_layers[stones]
        boards = _decode(codes_)
        # At a terminal position the player to move has lost (a line) or drawn.
        values[codes_[done]] = np.where(_winners(boards[done]) != 0, -1, 0)
        open_codes, empty = codes_[~done], boards[~done] == 0  # [M], [M, 9]
        digit = 1 if stones % 2 == 0 else 2
        children = open_codes[:, None] + digit * _BASE3[None, :]  # [M, 9]
        q = np.where(empty, -values[np.where(empty, children, 0)].astype(np.int32), -2)
        best = q.max(-1)
        values[open_codes] = best
        optimal[open_codes] = empty & (q == best[:, None])
    codes_ = np.concatenate(layers)
    terminal = np.concatenate(terminal_layers)
    for array in (codes_, terminal, values, optimal):
        array.setflags(write=False)
    return codes_, terminal, values, optimal


@functools.cache
def _reachable() -> tuple[Position, ...]:
    """Every position reachable from the empty board, sorted by (stones, code)."""
    return tuple(tuple(int(c) for c in row) for row in _decode(_solved()[0]))


def all_positions(include_terminal: bool = False) -> list[Position]:
    """Reachable positions in a fixed order (by number of stones, then :func:`code`).

    4520 non-terminal positions; 5478 with ``include_terminal=True``.
    """
    terminal = _solved()[1]
    return [p for p, done in zip(_reachable(), terminal, strict=True)
            if include_terminal or not done]


@functools.cache
def value_table() -> np.ndarray:
    """``[3**9]`` float32 exact values indexed by :func:`code`, in the search's convention.

    Minimax value for the player to move at reachable non-terminal positions; 0 at
    terminal and unreachable ones. Read-only.
    """
    codes_, terminal, values, _ = _solved()
    table = np.zeros(NUM_CODES, np.float32)
    table[codes_[~terminal]] = values[codes_[~terminal]]
    table.setflags(write=False)
    return table


def optimal_move_table() -> np.ndarray:
    """``[3**9, 9]`` bool: the minimax-optimal moves of every reachable non-terminal
    position, indexed by :func:`code` (all ``False`` elsewhere). Read-only."""
    return _solved()[3]


# --------------------------------------------------------------------------------------
# Tic-tac-toe in JAX.
# --------------------------------------------------------------------------------------


@pytree_dataclass
class State(Replaceable):
    """A batch of tic-tac-toe states (the search's embedding).

    Attributes:
      board: ``[B, 9]`` int8 relative board: +1 = stones of the player to move,
        -1 = the opponent's, 0 = empty. Relative, so that a value net could read it
        without knowing whose turn it is.
      player: ``[B]`` int8, +1 if X is to move, -1 if O is (``board * player`` is
        the absolute board).
      terminal: ``[B]`` bool, the game is over (a line, a full board, or an illegal
        move).
    """

    board: jax.Array
    player: jax.Array
    terminal: jax.Array


def initial(batch_size: int) -> State:
    """``batch_size`` empty boards with X to move."""
    return State(
        board=jnp.zeros((batch_size, 9), jnp.int8),
        player=jnp.ones((batch_size,), jnp.int8),
        terminal=jnp.zeros((batch_size,), bool),
    )


def batch(positions: Sequence[Position]) -> State:
    """A :class:`State` of batch ``len(positions)`` from absolute positions."""
    absolute = np.asarray(positions, np.int8).reshape(len(positions), 9)
    player = np.array([to_move(p) for p in positions], np.int8)
    terminal = np.array([is_terminal(p) for p in positions], bool)
    return State(
        board=jnp.asarray(absolute * player[:, None]),
        player=jnp.asarray(player),
        terminal=jnp.asarray(terminal),
    )


def pgx_states(positions: Sequence[Position], env: Any = None) -> Any:
    """pgx ``tic_tac_toe`` states ``[n]`` of non-terminal ``positions``, reached by
    playing X's cells and O's cells alternately (any order reaches the same board,
    and a non-terminal position has no line on the way). Imports pgx; ``env``: the
    pgx environment (default ``pgx.make("tic_tac_toe")``). pgx's board then gives
    the position's :func:`code` (see the module docstring).
    """
    from jaxpuct.testing._common import replay_pgx
    if env is None:
        import pgx
        env = pgx.make("tic_tac_toe")
    moves = np.full((len(positions), 9), -1, np.int32)
    for i, pos in enumerate(positions):
        if is_terminal(pos):
            raise ValueError(f"positions[{i}] is terminal: {format_position(pos)!r}")
        xs = [c for c in range(9) if pos[c] == 1]
        os_ = [c for c in range(9) if pos[c] == -1]
        order = [c for pair in zip(xs, os_ + [-1], strict=False) for c in pair if c >= 0]
        moves[i, :len(order)] = order
    return replay_pgx(env, moves)


def unbatch(state: State) -> list[Position]:
    """Absolute positions of a :class:`State` (the inverse of :func:`batch`)."""
    absolute = np.asarray(state.board, np.int64) * np.asarray(state.player, np.int64)[:, None]
    return [tuple(int(c) for c in row) for row in absolute]


def legal(state: State) -> jax.Array:
    """``[B, 9]`` bool: empty cells, none at a terminal state."""
    return (state.board == 0) & ~state.terminal[:, None]


def _has_line(board: jax.Array) -> jax.Array:
    """``[B]`` bool: the stones marked +1 in ``board [B, 9]`` contain a line."""
    return jnp.any(jnp.all(board[:, LINES] == 1, axis=-1), axis=-1)


def step(state: State, action: jax.Array) -> tuple[State, jax.Array, jax.Array]:
    """Plays ``action [B]`` int32 for the player to move.

    Returns:
      ``(new_state, reward [B] float32, terminal [B] bool)``; the reward is from the
      mover's view: +1 for completing a line, -1 for an illegal move (the game ends,
      board unchanged), 0 otherwise. A terminal state is absorbing (reward 0, state
      unchanged).
    """
    rows = jnp.arange(state.board.shape[0])
    is_legal = legal(state)[rows, action]
    placed = jnp.where(is_legal[:, None], state.board.at[rows, action].set(1), state.board)
    won = is_legal & _has_line(placed)
    illegal = ~is_legal & ~state.terminal
    terminal = state.terminal | won | illegal | jnp.all(placed != 0, axis=-1)
    reward = jnp.where(won, 1.0, jnp.where(illegal, -1.0, 0.0)).astype(jnp.float32)
    # Flip the view: the opponent is now to move (except in an absorbing state).
    moved = ~state.terminal
    new_state = State(
        board=jnp.where(moved[:, None], -placed, state.board),
        player=jnp.where(moved, -state.player, state.player),
        terminal=terminal,
    )
    return new_state, reward, terminal


def codes(state: State) -> jax.Array:
    """``[B]`` int32 :func:`code` of each absolute board."""
    absolute = state.board.astype(jnp.int32) * state.player.astype(jnp.int32)[:, None]
    digits = jnp.where(absolute == -1, 2, absolute)
    return digits @ jnp.asarray(_BASE3, jnp.int32)


def state_hash(state: State) -> jax.Array:
    """``[B, 2]`` uint32 state hash for graph search: exact, so collision-free.

    Word 0 is the board's :func:`code`; word 1 holds the player to move (bit 0) and
    the terminal flag (bit 1), which the board alone misses after an illegal move.
    """
    word1 = (state.player < 0).astype(jnp.uint32) | (state.terminal.astype(jnp.uint32) << 1)
    return jnp.stack([codes(state).astype(jnp.uint32), word1], axis=-1)


def _value(state: State, exact_value: bool) -> jax.Array:
    """``[B]`` float32 leaf value: 0, or the exact minimax value; 0 when terminal."""
    if not exact_value:
        return jnp.zeros(state.board.shape[:1], jnp.float32)
    value = jnp.asarray(value_table())[codes(state)]
    return jnp.where(state.terminal, 0.0, value)


def root(state: State, *, exact_value: bool = False, with_hash: bool = False) -> RootFnOutput:
    """Root of a search from ``state`` (``B`` boards).

    Uniform prior (zero logits ``[B, 9]``), value ``[B]`` 0 (or the exact minimax
    value with ``exact_value=True``), the legal mask ``[B, 9]``, and
    :func:`state_hash` ``[B, 2]`` if ``with_hash``.
    """
    return RootFnOutput(
        prior_logits=jnp.zeros(state.board.shape, jnp.float32),
        value=_value(state, exact_value),
        embedding=state,
        legal_action_mask=legal(state),
        state_hash=state_hash(state) if with_hash else None,
    )


def make_recurrent_fn(*, exact_value: bool = False, with_hash: bool = False) -> RecurrentFn:
    """A tic-tac-toe ``recurrent_fn(params, rng_key, action [B], state)``.

    ``params`` and ``rng_key`` are ignored. The output has the uniform prior (zero
    logits ``[B, 9]``), value ``[B]`` 0 at non-terminal states (the exact minimax
    value instead with ``exact_value=True``, a perfect evaluator) and 0 at terminal
    ones, the exact reward and terminal flag, discount -1, the legal mask of the new
    state and, with ``with_hash``, its :func:`state_hash`.
    """

    def recurrent_fn(params: Any, rng_key: jax.Array, action: jax.Array,
                     embedding: State) -> tuple[RecurrentFnOutput, State]:
        del params, rng_key
        new_state, reward, terminal = step(embedding, action)
        out = RecurrentFnOutput(
            reward=reward,
            discount=jnp.full_like(reward, -1.0),
            prior_logits=jnp.zeros(new_state.board.shape, jnp.float32),
            value=_value(new_state, exact_value),
            legal_action_mask=legal(new_state),
            terminal=terminal,
            state_hash=state_hash(new_state) if with_hash else None,
        )
        return out, new_state

    return recurrent_fn


recurrent_fn = make_recurrent_fn()

"""Connect four in pure JAX whose move checks only the lines through the new stone.

The same game as pgx's ``connect_four`` (Koyamada et al., "Pgx: Hardware-Accelerated
Parallel Game Simulators for Reinforcement Learning", NeurIPS 2023), laid out as pgx
lays it out (so that a network trained on pgx observations reads these): a 6 x 7
board whose row 0 is the top, actions the columns ``0..6``, the first player moving
first, observations ``[6, 7, 2]`` bool from the view of the player to move (its own
stones, then the opponent's), every action legal once the game is over. pgx decides
a win by testing all 69 lines of four on the board after every stone; a new four
can only pass through the new stone, so :func:`step` looks at the four directions
through it, three cells each way (24 cells). That is the rules' cost in a random
rollout, where every move is a step (:mod:`jaxpuct.envs.rollouts`).

Every function is batched (state leaves ``[B, ...]``) and jit-compatible.
:func:`environment` gives them as a :class:`jaxpuct.envs.adapter.Environment`, for
:func:`jaxpuct.envs.adapter.make_recurrent_fn` and
:func:`jaxpuct.envs.rollouts.make_recurrent_fn`, with :func:`state_hash`, the same
Zobrist hash as :func:`jaxpuct.envs.pgx_games.make_pgx_game`'s for the same position,
for graph search. A search that keeps pgx's states in its tree can still play its
rollouts on these rules: :func:`from_pgx` maps a pgx state to one of these
(``rollout_env`` and ``rollout_state`` of the rollouts' ``make_recurrent_fn``).

A move into a full column, into a column outside ``0..6`` or after the end of the
game changes nothing and earns nothing (pgx instead ends the game with a loss for an
illegal move; the searches and rollouts here only play legal moves).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.envs.adapter import Environment
from jaxpuct.envs.hashing import zobrist_hash

__all__ = ["COLUMNS", "ROWS", "State", "environment", "init", "legal_mask", "observe",
           "from_pgx", "reward", "state_hash", "step", "terminal"]

ROWS = 6
COLUMNS = 7


class State(NamedTuple):
    """A batch of connect-four positions.

    Attributes:
      board: ``[B, 6, 7]`` int8: 0 empty, 1 a stone of the first player, 2 of the
        second; row 0 is the top.
      heights: ``[B, 7]`` int32: stones in each column.
      colour: ``[B]`` int32: the player to move, 0 (first) or 1.
      winner: ``[B]`` int32: -1 while nobody has four in a row, else 0 or 1.
      moves: ``[B]`` int32: stones on the board.
    """

    board: jax.Array
    heights: jax.Array
    colour: jax.Array
    winner: jax.Array
    moves: jax.Array


def _ray_offsets() -> tuple[np.ndarray, np.ndarray]:
    """``[4, 2, 3]`` row and column offsets: for each direction (horizontal,
    vertical, and the two diagonals), each side of the new stone, 1 to 3 cells away."""
    directions = np.array([(0, 1), (1, 0), (1, 1), (1, -1)])
    sides = np.array([1, -1])
    distance = np.arange(1, 4)
    scaled = sides[None, :, None, None] * distance[None, None, :, None] * directions[:, None, None]
    return scaled[..., 0].astype(np.int32), scaled[..., 1].astype(np.int32)


_ROW_OFFSETS, _COLUMN_OFFSETS = _ray_offsets()


def init(batch: int) -> State:
    """``batch`` empty boards, the first player to move."""
    zeros = jnp.zeros((batch,), jnp.int32)
    return State(board=jnp.zeros((batch, ROWS, COLUMNS), jnp.int8),
                 heights=jnp.zeros((batch, COLUMNS), jnp.int32), colour=zeros,
                 winner=zeros - 1, moves=zeros)


def terminal(state: State) -> jax.Array:
    """``[B]`` bool: someone has four in a row, or the board is full."""
    return (state.winner >= 0) | (state.moves >= ROWS * COLUMNS)


def legal_mask(state: State) -> jax.Array:
    """``[B, 7]`` bool: the columns that are not full; all ``True`` once the game is
    over (as pgx)."""
    return (state.heights < ROWS) | terminal(state)[:, None]


def observe(state: State) -> jax.Array:
    """``[B, 6, 7, 2]`` bool: the stones of the player to move, then the opponent's."""
    mine = (state.colour + 1).astype(jnp.int8)[:, None, None]
    theirs = (2 - state.colour).astype(jnp.int8)[:, None, None]
    return jnp.stack([state.board == mine, state.board == theirs], axis=-1)


def step(state: State, action: jax.Array) -> State:
    """The positions after the player to move drops a stone into column ``action``.

    Args:
      state: ``[B]`` positions.
      action: ``[B]`` int, the columns.

    Returns:
      ``[B]`` positions. Where the column is full or outside ``0..6``, or the game
      is over, the position is unchanged.

    Raises:
      ValueError: ``action`` is not ``[B]``.
    """
    if action.shape != state.colour.shape:
        raise ValueError(f"connect_four.step: action must be [B] = {list(state.colour.shape)}"
                         f" (one column per position), got shape {list(action.shape)}")
    batch = jnp.arange(state.board.shape[0])
    on_board = (action >= 0) & (action < COLUMNS)
    action = jnp.clip(action.astype(jnp.int32), 0, COLUMNS - 1)
    height = state.heights[batch, action]
    plays = on_board & (height < ROWS) & ~terminal(state)
    row = jnp.clip(ROWS - 1 - height, 0, ROWS - 1)
    stone = (state.colour + 1).astype(jnp.int8)
    board = state.board.at[batch, row, action].set(
        jnp.where(plays, stone, state.board[batch, row, action]))
    # Four in a row through the new stone: along each direction, the run of the
    # mover's stones on either side (a cell off the board ends the run).
    rows = row[:, None, None, None] + _ROW_OFFSETS
    columns = action[:, None, None, None] + _COLUMN_OFFSETS
    inside = (rows >= 0) & (rows < ROWS) & (columns >= 0) & (columns < COLUMNS)
    cells = board[batch[:, None, None, None], jnp.clip(rows, 0, ROWS - 1),
                  jnp.clip(columns, 0, COLUMNS - 1)]
    same = inside & (cells == stone[:, None, None, None])
    run = jnp.cumprod(same.astype(jnp.int32), axis=-1).sum(-1)  # [B, 4, 2]
    won = plays & jnp.any(1 + run.sum(-1) >= 4, axis=-1)
    return State(board=board,
                 heights=state.heights.at[batch, action].add(plays.astype(jnp.int32)),
                 colour=jnp.where(plays, 1 - state.colour, state.colour),
                 winner=jnp.where(won, state.colour, state.winner),
                 moves=state.moves + plays.astype(jnp.int32))


def reward(prev: State, new: State) -> jax.Array:
    """``[B]`` float32: 1 to the player who moved in ``prev`` where that move won,
    else 0 (a connect-four move never loses at once)."""
    return (new.winner != prev.winner).astype(jnp.float32)


def from_pgx(state: Any) -> State:
    """The positions of a batch of pgx connect-four states (leaves ``[B, ...]``), for
    rollouts on these rules from a tree of pgx states
    (:func:`jaxpuct.envs.rollouts.make_recurrent_fn`'s ``rollout_state``)."""
    game = state._x  # pgx's game state: board [B, 42] (-1 empty, else the colour)
    board = (game.board + 1).astype(jnp.int8).reshape(-1, ROWS, COLUMNS)
    stones = (board > 0).astype(jnp.int32)
    return State(board=board, heights=stones.sum(1), colour=game.color.astype(jnp.int32),
                 winner=game.winner.astype(jnp.int32), moves=stones.sum((1, 2)))


def state_hash(state: State) -> jax.Array:
    """``[B, 2]`` uint32 Zobrist hash of the board and the player to move: pgx's board
    (-1 empty, else the colour) plus one is this board, so the hash is
    :mod:`jaxpuct.envs.pgx_games`' for the same position."""
    return zobrist_hash(state.board.reshape(state.board.shape[0], ROWS * COLUMNS),
                        state.colour, num_values=3)


def environment() -> Environment:
    """The rules above as an :class:`~jaxpuct.envs.adapter.Environment`, with
    :func:`state_hash`."""
    return Environment(step=step, observe=observe, legal_mask=legal_mask, terminal=terminal,
                       reward=reward, state_hash=state_hash)

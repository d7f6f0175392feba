"""Zobrist hashing of board positions into two ``uint32`` words.

Graph search (:mod:`jaxpuct.graph`) merges states reached by different move orders; it
finds them by a state hash of at least 64 bits that includes the player to move.
Zobrist hashing (A. L. Zobrist, "A new hashing method with application for game
playing", 1970) gives each (cell, content) pair and each player to move a fixed
random key and XORs the keys of a position together. Two ``uint32`` words make a
64-bit key without enabling ``jax_enable_x64``.

The random table is drawn once per ``(num_cells, num_values, num_players, seed)``
with NumPy's PCG64 generator (stable across NumPy versions by NumPy's policy), so
a hash does not change when JAX's random number generator does.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np


@functools.lru_cache(maxsize=64)
def zobrist_tables(num_cells: int, num_values: int, num_players: int = 2,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The fixed random keys.

    Args:
      num_cells: ``C``, the number of board cells (or other features).
      num_values: ``V``, the number of values a cell can hold.
      num_players: ``P``, the number of players who can be to move.
      seed: the NumPy seed.

    Returns:
      ``(cell_keys [C, V, 2] uint32, player_keys [P, 2] uint32)``, read-only.
    """
    for name, value in (("num_cells", num_cells), ("num_values", num_values),
                        ("num_players", num_players)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    rng = np.random.default_rng(seed)
    cell_keys = rng.integers(0, 2**32, size=(num_cells, num_values, 2), dtype=np.uint32)
    player_keys = rng.integers(0, 2**32, size=(num_players, 2), dtype=np.uint32)
    cell_keys.flags.writeable = False
    player_keys.flags.writeable = False
    return cell_keys, player_keys


def _xor_reduce(x: jax.Array, axis: int) -> jax.Array:
    return jax.lax.reduce(x, np.uint32(0), jax.lax.bitwise_xor, (axis,))


def zobrist_hash(board: jax.Array, to_move: jax.Array, *, num_values: int,
                 num_players: int = 2, seed: int = 0) -> jax.Array:
    """Zobrist hash of a batch of positions.

    ``hash = XOR_c cell_keys[c, board[c]]  XOR  player_keys[to_move]``, per word.

    Args:
      board: ``[B, C]`` integer array, each entry in ``[0, num_values)`` (shift
        boards that use ``-1`` for a colour, e.g. pass ``board + 1``). Extra
        features that define the position (a ko point, a pass counter) can be
        appended as further cells. Out-of-range values are clamped.
      to_move: ``[B]`` integer in ``[0, num_players)``, the player (or colour) to
        move.
      num_values: ``V``, the number of distinct cell values.
      num_players: ``P``.
      seed: selects the fixed random table.

    Returns:
      ``[B, 2]`` uint32.
    """
    if board.ndim != 2:
        raise ValueError(f"board must be [B, cells], got shape {board.shape}")
    cell_keys, player_keys = zobrist_tables(board.shape[1], num_values, num_players, seed)
    values = jnp.clip(board.astype(jnp.int32), 0, num_values - 1)
    # [B, C, 2]: the key of each cell's content.
    keys = jnp.asarray(cell_keys)[jnp.arange(board.shape[1])[None, :], values]
    player = jnp.asarray(player_keys)[jnp.clip(to_move.astype(jnp.int32), 0, num_players - 1)]
    return _xor_reduce(keys, axis=1) ^ player

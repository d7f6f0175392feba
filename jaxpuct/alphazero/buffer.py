"""A fixed-size circular replay buffer of training rows, and its pure functions.

Rows are ``(observation, search policy, outcome)``, and optionally the root's
search value; the buffer is a pytree of
preallocated arrays so that writes and samples run inside ``jax.jit`` (and the
buffer can be donated, i.e. updated in place).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxpuct._dataclass import Replaceable, mutable_pytree_dataclass

__all__ = ["ReplayBuffer", "empty_buffer", "filled_rows", "sample", "sample_rows",
           "write_trajectories"]

# ``num_added`` is an int32 counter: it saturates at the largest int32 rather
# than wrapping negative (only ``min(num_added, size)`` is ever used).
_INT32_MAX = 2**31 - 1


@mutable_pytree_dataclass
class ReplayBuffer(Replaceable):
    """Circular buffer of training rows; rows ``[0, min(num_added, N))`` are filled.

    Attributes:
      obs: ``[N, ...]`` observations (player-to-move view).
      policy: ``[N, A]`` search policies (the policy targets).
      outcome: ``[N]`` final result of the game from the view of the player to
        move at that position: ``1`` win, ``0`` draw, ``-1`` loss.
      next_row: ``[]`` int32, where the next row is written.
      num_added: ``[]`` int32, rows written so far (saturates at ``2**31 - 1``).
      root_value: ``[N]`` the search's root value at that position, from the
        view of the player to move (for value targets that mix it with the
        outcome); ``None`` when not kept, so that a buffer without it has the
        same pytree structure (and checkpoints) as before it existed.
    """

    obs: jax.Array
    policy: jax.Array
    outcome: jax.Array
    next_row: jax.Array
    num_added: jax.Array
    root_value: jax.Array | None = None


def empty_buffer(size: int, obs_shape: tuple[int, ...], obs_dtype, num_actions: int,
                 root_value: bool = False) -> ReplayBuffer:
    """A buffer of ``size`` zero rows, none filled (with a ``root_value`` column
    if asked)."""
    return ReplayBuffer(
        obs=jnp.zeros((size, *obs_shape), obs_dtype),
        policy=jnp.zeros((size, num_actions), jnp.float32),
        outcome=jnp.zeros((size,), jnp.float32),
        next_row=jnp.zeros((), jnp.int32),
        num_added=jnp.zeros((), jnp.int32),
        root_value=jnp.zeros((size,), jnp.float32) if root_value else None)


def filled_rows(buffer: ReplayBuffer) -> jax.Array:
    """``[]`` int32: rows holding data (at most the buffer size)."""
    return jnp.minimum(buffer.num_added, buffer.outcome.shape[0])


def write_trajectories(buffer: ReplayBuffer, obs: jax.Array, policy: jax.Array,
                       outcome: jax.Array, written: jax.Array,
                       root_value: jax.Array | None = None) -> ReplayBuffer:
    """Appends the rows of ``B`` trajectories where ``written``, in order.

    Args:
      buffer: the buffer (``N`` rows).
      obs: ``[B, T, ...]`` observations.
      policy: ``[B, T, A]`` search policies.
      outcome: ``[B, T]`` outcomes.
      written: ``[B, T]`` bool, the rows to append (a finished game's plies).
      root_value: ``[B, T]`` root search values, required when the buffer keeps
        them (ignored otherwise).

    Returns:
      The buffer with the rows appended contiguously, game after game, from
      ``next_row`` (wrapping around and overwriting the oldest rows).
    """
    b, t = written.shape
    n = buffer.outcome.shape[0]
    flat = written.reshape(-1)
    offsets = jnp.cumsum(flat) - 1
    # Rows not written are sent to index n, out of bounds, and dropped.
    index = jnp.where(flat, (buffer.next_row + offsets) % n, n)
    num_new = jnp.sum(flat).astype(jnp.int32)

    def put(dest, src):
        return dest.at[index].set(src.reshape(b * t, *src.shape[2:]).astype(dest.dtype),
                                  mode="drop")

    return ReplayBuffer(
        obs=put(buffer.obs, obs),
        policy=put(buffer.policy, policy),
        outcome=put(buffer.outcome, outcome),
        next_row=(buffer.next_row + num_new) % n,
        num_added=jnp.minimum(buffer.num_added, _INT32_MAX - num_new) + num_new,
        root_value=None if buffer.root_value is None else put(buffer.root_value, root_value))


def sample(buffer: ReplayBuffer, rng: jax.Array, batch_size: int
           ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A uniform minibatch (with replacement) of the filled rows.

    Returns:
      ``(obs [M, ...], policy [M, A], outcome [M])`` with ``M = batch_size``. An
      empty buffer yields copies of row 0 (zeros).
    """
    obs, policy, outcome, _ = sample_rows(buffer, rng, batch_size)
    return obs, policy, outcome


def sample_rows(buffer: ReplayBuffer, rng: jax.Array, batch_size: int
                ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array | None]:
    """:func:`sample` with the rows' root values (``[M]``, or ``None`` when the
    buffer does not keep them)."""
    filled = jnp.maximum(filled_rows(buffer), 1)
    index = jax.random.randint(rng, (batch_size,), 0, filled)
    root_value = None if buffer.root_value is None else buffer.root_value[index]
    return buffer.obs[index], buffer.policy[index], buffer.outcome[index], root_value

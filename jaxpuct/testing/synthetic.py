"""A cheap synthetic game for benchmarks: states are hashed integers, no network.

A state is a ``uint32`` id; action ``a`` leads to ``mix32(id * k + a + 1)``, so no
two paths meet (a tree, in practice: a 32-bit collision is possible but rare).
Prior logits and value are sin/cos of the id, rewards 0, discounts -1 (two
players). The time a search spends on it is nearly all its own tree work.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxpuct.types import RecurrentFnOutput, RootFnOutput

__all__ = ["factored_synthetic_game", "mix32", "synthetic_game", "synthetic_hash"]

_HASH_SALT = 0x5BD1E995


def mix32(x: jax.Array) -> jax.Array:
    """A 32-bit integer hash, ``uint32 [...] -> uint32 [...]``.

    ``lowbias32`` by C. Wellons ("Prospecting for hash functions", 2018): an
    xorshift-multiply finalizer in the style of MurmurHash3's ``fmix32``.
    """
    x = jnp.asarray(x).astype(jnp.uint32)
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def synthetic_hash(ids: jax.Array) -> jax.Array:
    """``[B, 2]`` uint32 state hash of ids ``[B]`` uint32: the id and a second,
    independent 32-bit word (``mix32(id ^ salt)``)."""
    return jnp.stack([ids, mix32(ids ^ jnp.uint32(_HASH_SALT))], axis=-1)


def _evaluate(ids: jax.Array, num_actions: int, logit_scale: float,
              value_scale: float) -> tuple[jax.Array, jax.Array]:
    """``(logits [B, A], value [B])`` float32 of states ``ids [B]`` uint32, from sin/cos."""
    u1 = (ids & jnp.uint32(0xFFFF)).astype(jnp.float32) * (2 * math.pi / 65536)
    u2 = (ids >> 16).astype(jnp.float32) * (2 * math.pi / 65536)
    actions = jnp.arange(num_actions, dtype=jnp.float32)
    logits = logit_scale * jnp.sin(u1[:, None] + actions * u2[:, None])
    value = value_scale * jnp.cos(3.0 * u1 + u2)
    return logits, value


def synthetic_game(batch_size: int, num_actions: int, logit_scale: float = 3.0,
                   value_scale: float = 1.0, *, with_hash: bool = False
                   ) -> tuple[RootFnOutput, Callable]:
    """A deterministic two-player game without a network.

    Args:
      batch_size: ``B``.
      num_actions: ``A``; every action is legal everywhere and no state is terminal.
      logit_scale: prior logits are ``logit_scale * sin(u1 + a * u2)`` with ``u1``,
        ``u2`` the id's two 16-bit halves as angles (0: a uniform prior).
      value_scale: value ``value_scale * cos(3 u1 + u2)`` (0: zero values).
      with_hash: add :func:`synthetic_hash` (``[B, 2]`` uint32) to the root and to
        every output, for graph search.

    Returns:
      ``(root, recurrent_fn)``: ``root.embedding`` is the ``[B]`` uint32 ids;
      ``recurrent_fn(params, rng_key, action [B], ids [B])`` ignores ``params`` and
      ``rng_key`` and returns a :class:`jaxpuct.RecurrentFnOutput` (reward 0,
      discount -1, no legal mask, no terminal flag: mctx's fields plus the hash).
    """
    ids = mix32(jnp.arange(batch_size, dtype=jnp.uint32) + jnp.uint32(12345))
    logits, value = _evaluate(ids, num_actions, logit_scale, value_scale)
    root = RootFnOutput(prior_logits=logits, value=value, embedding=ids,
                        state_hash=synthetic_hash(ids) if with_hash else None)

    def recurrent_fn(params, rng_key, action, ids):
        del params, rng_key
        new = mix32(ids * jnp.uint32(0x9E3779B1) + action.astype(jnp.uint32) + jnp.uint32(1))
        logits, value = _evaluate(new, num_actions, logit_scale, value_scale)
        zeros = jnp.zeros_like(value)
        out = RecurrentFnOutput(reward=zeros, discount=zeros - 1.0, prior_logits=logits,
                                value=value,
                                state_hash=synthetic_hash(new) if with_hash else None)
        return out, new

    return root, recurrent_fn


def _factor_logits(ids: jax.Array, factor_sizes: tuple[int, ...],
                   logit_scale: float) -> jax.Array:
    """``[B, Σ n_f]`` float32: factor ``f``'s value ``v`` scores
    ``logit_scale * sin(u1 + (v + f) * u2)``."""
    u1 = (ids & jnp.uint32(0xFFFF)).astype(jnp.float32) * (2 * math.pi / 65536)
    u2 = (ids >> 16).astype(jnp.float32) * (2 * math.pi / 65536)
    values = jnp.concatenate([jnp.arange(n, dtype=jnp.float32) + f
                              for f, n in enumerate(factor_sizes)])
    return logit_scale * jnp.sin(u1[:, None] + values * u2[:, None])


def _joint_logits(factor_logits: jax.Array, factor_sizes: tuple[int, ...]) -> jax.Array:
    """``[B, Π n_f]``: the outer sum of the factor logits, joint id in mixed radix
    (factor 0 most significant), so that softmax of it is the product policy."""
    joint, start = jnp.zeros((factor_logits.shape[0], 1)), 0
    for n in factor_sizes:
        part = factor_logits[:, start:start + n]
        joint = (joint[:, :, None] + part[:, None, :]).reshape(factor_logits.shape[0], -1)
        start += n
    return joint


def factored_synthetic_game(batch_size: int, factor_sizes: tuple[int, ...],
                            logit_scale: float = 1.0, *, joint: bool = False
                            ) -> tuple[RootFnOutput, Callable]:
    """:func:`synthetic_game` with ``A = Π n_f`` joint actions and a factored policy
    ``π = Π_f π_f`` (one head per factor, as for the joint move of several agents).

    Args:
      batch_size: ``B``.
      factor_sizes: ``(n_1, …, n_F)``.
      logit_scale: scale of each factor's sin logits.
      joint: give the ``[B, A]`` joint logits (their outer sum, the same policy:
        for full-width search and ``DiscreteActions``) instead of the ``[B, Σ n_f]``
        factor logits (for ``jaxpuct.sampled.FactoredActions``).

    Returns:
      ``(root, recurrent_fn)`` as :func:`synthetic_game` (``action [B]`` a joint id).
    """
    def policy(ids):
        logits = _factor_logits(ids, factor_sizes, logit_scale)
        return _joint_logits(logits, factor_sizes) if joint else logits

    ids = mix32(jnp.arange(batch_size, dtype=jnp.uint32) + jnp.uint32(12345))
    value = jnp.cos(3.0 * (ids & jnp.uint32(0xFFFF)).astype(jnp.float32) * (2 * math.pi / 65536))
    root = RootFnOutput(prior_logits=policy(ids), value=value, embedding=ids)

    def recurrent_fn(params, rng_key, action, ids):
        del params, rng_key
        new = mix32(ids * jnp.uint32(0x9E3779B1) + action.astype(jnp.uint32) + jnp.uint32(1))
        u1 = (new & jnp.uint32(0xFFFF)).astype(jnp.float32) * (2 * math.pi / 65536)
        zeros = jnp.zeros_like(u1)
        out = RecurrentFnOutput(reward=zeros, discount=zeros - 1.0, prior_logits=policy(new),
                                value=jnp.cos(3.0 * u1))
        return out, new

    return root, recurrent_fn

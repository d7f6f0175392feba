"""Search functions of a "pure" search: a uniform prior and a zero value.

The PUCT search of AlphaZero (Silver et al., "A general reinforcement learning
algorithm that masters chess, shogi, and Go through self-play", Science 2018) with
its network replaced by a uniform prior and a zero value: everything the search
knows comes from the exact rewards of terminal states. A baseline opponent, and a
network-free way to run the search on a real game.

:func:`make_pure_search_fns` builds the pair for any batched
:class:`jaxpuct.envs.adapter.Environment` (e.g. a pgx game from
:func:`jaxpuct.envs.pgx_games.make_pgx_game`), through the same adapter as a
network, so the conventions (illegal logits masked, value 0 and no legal action
at a terminal state, discount 0 after it) are the adapter's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from jaxpuct.envs.adapter import ApplyFn, Environment, make_recurrent_fn, make_root_fn

__all__ = ["make_pure_search_fns", "zero_apply"]


def zero_apply(num_actions: int) -> ApplyFn:
    """``apply_fn(params, obs [B, ...]) -> (zero logits [B, A], zero value [B])``,
    float32; ``params`` is ignored."""

    def apply_fn(params: Any, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        del params
        batch = obs.shape[0]
        return (jnp.zeros((batch, num_actions), jnp.float32),
                jnp.zeros((batch,), jnp.float32))

    return apply_fn


def make_pure_search_fns(env: Environment, num_actions: int, *, discount: float = -1.0
                         ) -> tuple[Callable, Callable]:
    """``(root_fn(params, rng_key, state), recurrent_fn(params, rng_key, action, state))``
    of a search with a uniform prior and zero value on ``env``.

    Args:
      env: batched environment functions (every state leaf ``[B, ...]``).
      num_actions: ``A``.
      discount: between a node and its child (``-1``: two-player zero-sum).

    The functions ignore ``params`` (pass ``None``) and ``rng_key``; see
    :func:`jaxpuct.envs.adapter.make_root_fn` and ``make_recurrent_fn`` for the
    outputs (``state_hash`` whenever ``env.state_hash`` is set).
    """
    apply_fn = zero_apply(num_actions)
    return (make_root_fn(apply_fn, env),
            make_recurrent_fn(apply_fn, env, discount=discount))

"""Types and small helpers shared by the modules of :mod:`jaxpuct.testing`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.types import RecurrentFnOutput, RootFnOutput

# ``recurrent_fn(params, rng_key, action [B], embedding) -> (RecurrentFnOutput, embedding)``
RecurrentFn = Callable[[Any, jax.Array, jax.Array, Any], tuple[RecurrentFnOutput, Any]]

# Finite (not -inf) so that softmax, temperature or noise never produce NaN, yet
# exp(MASKED_LOGIT - max) underflows to exactly 0 in float32.
MASKED_LOGIT = -1e9


def masked_logits(logits: jax.Array, legal: jax.Array | None) -> jax.Array:
    """``[B, A]`` logits with illegal entries (``legal [B, A]`` False) set to ``MASKED_LOGIT``;
    unchanged without a mask (every action legal)."""
    if legal is None:
        return logits
    return jnp.where(legal, logits, jnp.asarray(MASKED_LOGIT, logits.dtype))


def mask_illegal_logits(recurrent_fn: RecurrentFn) -> RecurrentFn:
    """Wraps ``recurrent_fn`` so that its prior puts zero mass on illegal actions.

    For searches that ignore ``legal_action_mask`` below the root (mctx): they can
    still pick an illegal action when every legal one scores lower, so equality with
    such a search only holds on games where every action is legal.
    """

    def fn(params: Any, rng_key: jax.Array, action: jax.Array, embedding: Any):
        out, new_embedding = recurrent_fn(params, rng_key, action, embedding)
        logits = masked_logits(out.prior_logits, out.legal_action_mask)
        return out.replace(prior_logits=logits), new_embedding

    return fn


def mask_root_logits(root: RootFnOutput) -> RootFnOutput:
    """``root`` with its prior's illegal entries set to ``MASKED_LOGIT``."""
    return root.replace(prior_logits=masked_logits(root.prior_logits, root.legal_action_mask))


def replay_pgx(env: Any, moves: Any) -> Any:
    """pgx states ``[n]`` of ``env`` after ``moves [n, L]`` (actions, -1 padding at
    the end) from the initial state; a padded ply leaves a state as it is. The
    initial states' keys are fixed (``jax.random.key(0)`` split), so the same moves
    give the same states."""

    @jax.jit
    def run(moves):
        def body(i, state):
            action = moves[:, i]
            nxt = jax.vmap(env.step)(state, jnp.maximum(action, 0))
            keep = action < 0
            return jax.tree.map(lambda old, new: jnp.where(
                keep.reshape((-1,) + (1,) * (new.ndim - 1)), old, new), state, nxt)

        state = jax.vmap(env.init)(jax.random.split(jax.random.key(0), moves.shape[0]))
        return jax.lax.fori_loop(0, moves.shape[1], body, state)

    return run(jnp.asarray(np.asarray(moves), jnp.int32))

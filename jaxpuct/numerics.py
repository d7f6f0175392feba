"""Small numerical helpers shared by the search modules.

Each one keeps a single bad number (NaN, infinity, an empty row) local to the
row it belongs to, so one diverged evaluation cannot poison its tree or any
other tree of the batch.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxpuct import prng
from jaxpuct.indexing import row_take

# Smallest divisor used when normalising non-negative weights: far below any
# weight that matters, far above float32's smallest normal (1e-38).
WEIGHT_FLOOR = 1e-30


def gather_rows(array: jax.Array, index: jax.Array) -> jax.Array:
    """``array[b, index[b]]`` for every ``b``: ``[B, N, ...]``, ``[B]`` -> ``[B, ...]``.

    One gather (:func:`jaxpuct.indexing.row_take`); an index out of range reads the
    nearest entry."""
    return row_take(array, index)


def batch_where(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Per batch element, ``on_true`` where ``pred [B]`` else ``on_false``: two
    pytrees of the same structure with leaves ``[B, ...]``."""

    def pick(x, y):
        return jnp.where(pred.reshape(pred.shape + (1,) * (x.ndim - 1)), x, y)

    return jax.tree.map(pick, on_true, on_false)


def key_uniform(rng_keys: jax.Array, width: int, salt: int) -> jax.Array:
    """``[B, width]`` uniform draws in [0, 1), row ``b`` from ``rng_keys[b]`` folded
    with ``salt`` (so draws for different purposes from the same keys differ)."""
    return prng.uniform(prng.fold_in(rng_keys, salt), (width,))


def argmax_by_priority(scores: jax.Array, priority: jax.Array) -> jax.Array:
    """``[B]`` int32: among the entries of ``scores [B, W]`` equal to the row's
    maximum (and above ``-inf``), the one of highest ``priority [B, W]``; 0 where
    every score is ``-inf``."""
    tied = (scores == jnp.max(scores, axis=-1, keepdims=True)) & (scores > -jnp.inf)
    return jnp.argmax(jnp.where(tied, priority, -1.0), axis=-1).astype(jnp.int32)


def finite_or_zero(x: jax.Array) -> jax.Array:
    """``x`` as float32 with NaN and +-inf replaced by 0 (a diverged network's value)."""
    x = x.astype(jnp.float32)
    return jnp.where(jnp.isfinite(x), x, 0.0)


def normalize(weights: jax.Array) -> jax.Array:
    """``[B, A]`` non-negative weights divided by their row sum; rows summing to 0 stay 0."""
    total = jnp.sum(weights, axis=-1, keepdims=True)
    return jnp.where(total > 0, weights / jnp.maximum(total, WEIGHT_FLOOR), 0.0)


def is_masked_logit(logits: jax.Array) -> jax.Array:
    """``[B, A]`` bool: the logit masks its action (``-inf`` or ``<= finfo(dtype).min``).

    NaN is not a mask (it is a diverged network, see :func:`prior_and_legal`).
    Integer logits mask nothing.
    """
    logits = jnp.asarray(logits)
    if not jnp.issubdtype(logits.dtype, jnp.floating):
        return jnp.zeros(logits.shape, jnp.bool_)
    return logits <= jnp.finfo(logits.dtype).min


def prior_and_legal(logits: jax.Array, legal: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The prior ``[B, A]`` and the legal mask ``[B, A]`` the search uses.

    * A legal action whose logit is ``-inf`` or the lowest finite number of
      its dtype (``jnp.finfo(logits.dtype).min``) has probability zero and
      becomes illegal: these are the two ways mctx users mask moves inside the
      tree, where mctx has no legal mask (mctx masks ``invalid_actions`` with
      ``finfo.min``, and so does pgx's AlphaZero example), so such a move is
      never searched nor played.
    * A row where a legal action's logit is NaN or ``+inf`` (a diverged
      network), or where every legal logit is masked so (``-inf`` or
      ``finfo.min``) or is ``-inf`` after the cast to float32 (a float64 logit
      below float32's range), gets the uniform distribution over its legal
      actions, and its mask is kept.
    * A row with no legal action gets all zeros.

    Args:
      logits: ``[B, A]`` policy logits, any float dtype.
      legal: ``[B, A]`` bool.

    Returns:
      ``(prior [B, A] float32, legal [B, A] bool)``.
    """
    # Compared in the input dtype: bfloat16's minimum is above float32's, and
    # float64's becomes -inf in float32, so the cast would hide either.
    masked = is_masked_logit(logits)
    logits = logits.astype(jnp.float32)
    legal = legal.astype(jnp.bool_)
    possible = legal & ~masked
    # One row reduction decides the row and gives its softmax shift: a diverged
    # legal logit (NaN, +inf) ranks +inf, a masked or illegal one -inf, so the row
    # maximum is finite exactly when no legal logit diverged and some legal one is
    # unmasked, and then it is the maximum over the unmasked legal logits. Each
    # row reduction is a kernel of its own in the compiled search (this runs at
    # every expansion), and two any()s and a max took three.
    diverged = legal & (jnp.isnan(logits) | (logits == jnp.inf))
    ranked = jnp.where(diverged, jnp.inf, jnp.where(possible, logits, -jnp.inf))
    top = jnp.max(ranked, axis=-1, keepdims=True)
    fallback = ~jnp.isfinite(top)
    legal = jnp.where(fallback, legal, possible)
    # A fallback row is uniform over its legal actions: logits 0, shift 0.
    logits = jnp.where(fallback, 0.0, logits)
    logits = jnp.where(legal, logits, -jnp.inf)
    top = jnp.where(fallback, 0.0, top)
    return normalize(jnp.where(legal, jnp.exp(logits - top), 0.0)), legal


def masked_softmax(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """``[B, A]`` softmax of ``logits [B, A]`` over ``legal [B, A]``; see
    :func:`prior_and_legal` for ``-inf``, NaN and empty rows."""
    return prior_and_legal(logits, legal)[0]

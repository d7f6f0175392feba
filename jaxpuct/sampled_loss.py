"""The policy loss on a sampled search's target.

A sampled search (:func:`jaxpuct.sampled_policy`, :func:`jaxpuct.sampled_gumbel_policy`)
returns its target over the root's ``K`` sampled actions: ``action_weights [B, K]``
over ``sampled_actions`` (``[B, K]`` ids or ``[B, K, D]`` vectors). Hubert et al.
("Learning and Planning in Complex Action Spaces", ICML 2021, section 4) train the
policy network on it with the cross-entropy evaluated at the sampled actions only,

    ``loss = -Σ_k w_k log π(a_k)``,

where ``π`` is the network's full distribution (not renormalised over the samples):
the gradient raises the log-probability of the actions the search preferred and,
through ``π``'s normalisation, lowers every other. For a discrete space that is the
ordinary cross-entropy with a target that is zero off the samples; for a continuous
one the only form there is.

``log π`` for each space, from the network's ``prior_logits`` (the same numbers the
search reads):

* :class:`~jaxpuct.sampled.DiscreteActions`: ``log_softmax(logits)`` at the ids, with
  ``-inf`` / ``finfo.min`` logits masked as in the search;
* :class:`~jaxpuct.sampled.FactoredActions`: the sum over factors of each factor's
  ``log_softmax`` at the id's factor value, ``log Π_f π_f(a_f)``, which equals the
  discrete case over the materialised ``Π n_f`` joint logits ``Σ_f logit_f(a_f)``
  (without materialising them);
* :class:`~jaxpuct.sampled.GaussianActions`: the diagonal Gaussian's log density
  (:meth:`~jaxpuct.sampled.GaussianActions.log_prob`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxpuct.numerics import is_masked_logit
from jaxpuct.sampled import ActionSpace, DiscreteActions, FactoredActions, GaussianActions

__all__ = ["sampled_log_prob", "sampled_policy_loss"]


def _log_softmax(logits: jax.Array) -> jax.Array:
    """``log_softmax`` over the last axis with ``-inf`` / ``finfo.min`` logits masked
    (probability 0). A row with every logit masked (no legal action: its weights are
    0) reads as uniform, so that neither it nor its gradient is NaN."""
    masked = is_masked_logit(logits)  # in the input dtype: bfloat16's minimum differs
    none_left = jnp.all(masked, axis=-1, keepdims=True)
    x = jnp.where(none_left, 0.0, jnp.where(masked, -jnp.inf, logits.astype(jnp.float32)))
    return jax.nn.log_softmax(x, axis=-1)


def sampled_log_prob(space: ActionSpace, prior_logits: jax.Array,
                     actions: jax.Array) -> jax.Array:
    """``log π(a_k)`` of the network's policy at sampled actions.

    Args:
      space: the action space the search used.
      prior_logits: ``[B, W]`` the network's policy head (``W = space.params_width``).
      actions: ``[B, K]`` int32 ids, or ``[B, K, D]`` vectors with ``GaussianActions``;
        ids outside ``[0, A)`` give finite, meaningless numbers, as does the
        placeholder id of a slot the search could not fill: weight them 0.

    Returns:
      ``[B, K]`` float32 log-probabilities.
    """
    if prior_logits.ndim != 2 or prior_logits.shape[1] != space.params_width:
        raise ValueError(f"prior_logits must be [B, {space.params_width}] for {space}, got "
                         f"shape {list(prior_logits.shape)}.")
    expected_ndim = 3 if isinstance(space, GaussianActions) else 2
    if actions.ndim != expected_ndim or actions.shape[0] != prior_logits.shape[0]:
        want = "[B, K, D]" if expected_ndim == 3 else "[B, K]"
        raise ValueError(f"actions must be {want} with B = {prior_logits.shape[0]} for "
                         f"{space}, got shape {list(actions.shape)}.")
    if isinstance(space, GaussianActions):
        if actions.shape[2] != space.action_dim:
            raise ValueError(f"actions must be [B, K, {space.action_dim}] for {space}, got "
                             f"shape {list(actions.shape)}.")
        return space.log_prob(prior_logits.astype(jnp.float32), actions.astype(jnp.float32))
    ids = jnp.clip(actions.astype(jnp.int32), 0, space.num_actions - 1)
    if isinstance(space, DiscreteActions):
        return jnp.take_along_axis(_log_softmax(prior_logits), ids, axis=-1)
    assert isinstance(space, FactoredActions)
    values = space.decode(ids)  # [B, K, F]
    total = jnp.zeros(ids.shape, jnp.float32)
    start = 0
    for f, n in enumerate(space.factor_sizes):
        log_pi = _log_softmax(prior_logits[:, start:start + n])  # [B, n_f]
        total = total + jnp.take_along_axis(log_pi, values[..., f], axis=-1)
        start += n
    return total


def sampled_policy_loss(space: ActionSpace, prior_logits: jax.Array, actions: jax.Array,
                        weights: jax.Array) -> jax.Array:
    """``-Σ_k w_k log π(a_k)`` per row (module docstring).

    Args:
      space: the action space the search used.
      prior_logits: ``[B, W]`` the network's policy head.
      actions: the search's ``sampled_actions``: ``[B, K]`` ids or ``[B, K, D]``.
      weights: ``[B, K]`` the search's ``action_weights`` (or any non-negative target;
        slots of weight 0 contribute nothing, even where ``log π`` is ``-inf``).

    Returns:
      ``[B]`` float32 losses (average them over the batch yourself).
    """
    log_prob = sampled_log_prob(space, prior_logits, actions)
    if weights.shape != log_prob.shape:
        raise ValueError(f"weights must be [B, K] = {list(log_prob.shape)} (one per sampled "
                         f"action), got shape {list(weights.shape)}.")
    weights = weights.astype(jnp.float32)
    return -jnp.sum(jnp.where(weights > 0, weights * log_prob, 0.0), axis=-1)

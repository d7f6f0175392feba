"""``K`` joint actions without replacement from a factored policy, never
materialising the ``A = n_1 · … · n_F`` joint logits.

A factored policy is ``π(a) = Π_f π_f(a_f)`` over ``F`` factors (the joint
action of several agents, each with its own head). The ``K`` largest of
``log π(a) + g(a)``, ``g`` i.i.d. Gumbel(0, 1) over all ``A`` joint actions, are
``K`` draws without replacement from ``π`` (Gumbel-top-``K``). Stochastic beam
search (Kool, van Hoof and Welling, "Stochastic Beams and Where to Find Them:
The Gumbel-Top-k Trick for Sampling Sequences Without Replacement", ICML 2019)
finds them factor by factor, top-down: the perturbed value of a partial action
``(a_1 .. a_f)`` is the maximum of ``log π + g`` over its completions, which is
Gumbel with location ``log π_1..f``; given a parent's value ``G``, its children's
values are Gumbels with their own locations *conditioned on their maximum being
``G``* (a truncated Gumbel, sampled exactly); and the ``K`` largest complete
values can only descend from the ``K`` largest partial ones at every level. So
keeping ``K + 1`` beams per factor returns **exactly** (in distribution, not an
approximation) the ``K + 1`` largest perturbed values of the joint and their
actions: the ``K`` samples and the threshold ``κ`` (the ``(K + 1)``-th value)
that the inclusion-probability prior of :mod:`jaxpuct.sampled` reads. With the
same keys the draw differs from Gumbel-top-``K`` over materialised logits
(other random numbers), not its distribution.

Cost per row: ``F`` steps of ``(K + 1) · n_f`` Gumbel draws and one ``top_k`` of
that width: ``O(K · Σ_f n_f)``, never ``O(A)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from jaxpuct import prng


def _log1mexp(x: jax.Array) -> jax.Array:
    """``log(1 - exp(x))`` for ``x <= 0``, stable at both ends (Mächler 2012)."""
    return jnp.where(x > -0.6931472, jnp.log(-jnp.expm1(x)), jnp.log1p(-jnp.exp(x)))


def truncated_gumbel(location_max: jax.Array, perturbed: jax.Array,
                     target: jax.Array) -> jax.Array:
    """Gumbels ``perturbed [..., n]`` (with their own locations) conditioned on
    their maximum being ``target [..., 1]`` (Kool et al. 2019, appendix B: the
    numerically stable form).

    Args:
      location_max: ``[..., 1]`` the maximum of ``perturbed`` over its last axis.
      perturbed: ``[..., n]`` unconditioned draws, ``-inf`` where impossible.
      target: ``[..., 1]`` the maximum to condition on, ``-inf`` where the parent
        is impossible.

    Returns:
      ``[..., n]``: the maximum entry becomes ``target``, the others shrink below
      it; ``-inf`` where the child or the parent is impossible.
    """
    ok = (perturbed > -jnp.inf) & (target > -jnp.inf)
    safe_perturbed = jnp.where(ok, perturbed, 0.0)
    safe_target = jnp.where(ok, target, 0.0)
    safe_max = jnp.where(ok, location_max, 0.0)
    v = safe_target - safe_perturbed + _log1mexp(jnp.minimum(safe_perturbed - safe_max, 0.0))
    value = safe_target - jnp.maximum(v, 0.0) - jnp.log1p(jnp.exp(-jnp.abs(v)))
    return jnp.where(ok, value, -jnp.inf)


def stochastic_beam_top_k(keys: jax.Array, factor_log_probs: Sequence[jax.Array],
                          num_beams: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The ``num_beams`` largest ``log π(a) + g(a)`` over the joint actions of a
    factored policy, by stochastic beam search (module docstring).

    Args:
      keys: ``[M]`` keys (raw ``uint32 [M, 2]`` or typed), one per row; factor
        ``f`` draws with ``fold_in(key, f)``, the empty prefix with
        ``fold_in(key, F)``.
      factor_log_probs: ``F`` arrays ``[M, n_f]``: ``log π_f`` (``-inf`` at
        values never to draw).
      num_beams: how many joint actions to return (``K + 1`` for ``K`` samples
        and their threshold).

    Returns:
      ``(ids [M, W] int32, log_prior [M, W], perturbed [M, W])`` with
      ``W = min(num_beams, A)``, in decreasing ``perturbed`` order: the joint id
      in mixed radix (factor 0 most significant: ``a = ((a_0 · n_1) + a_1) · n_2
      + …``), ``log π`` of the joint action, and its perturbed value
      ``log π + g``; ``-inf`` perturbed values mark rows with fewer possible
      joint actions than ``W``.
    """
    rows = keys.shape[0]
    ids = jnp.zeros((rows, 1), jnp.int32)
    log_prior = jnp.zeros((rows, 1), jnp.float32)
    # The empty prefix's value is the maximum over all joint actions: Gumbel with
    # location log 1 = 0. Drawn, not fixed: the inclusion probabilities read κ on
    # the absolute scale of log π + g (a constant would shift every value by it).
    num_factors = len(factor_log_probs)
    perturbed = prng.gumbel(prng.fold_in(keys, num_factors), (1,))
    for f, logp in enumerate(factor_log_probs):
        n = logp.shape[-1]
        width = ids.shape[1]
        child_logp = log_prior[:, :, None] + logp[:, None, :].astype(jnp.float32)
        gumbel = prng.gumbel(prng.fold_in(keys, f), (width, n))
        free = jnp.where(child_logp > -jnp.inf, child_logp + gumbel, -jnp.inf)
        top = jnp.max(free, axis=-1, keepdims=True)
        child = truncated_gumbel(top, free, perturbed[:, :, None])
        keep = min(num_beams, width * n)
        perturbed, flat = jax.lax.top_k(child.reshape(rows, width * n), keep)
        parent, value = flat // n, flat % n
        ids = jnp.take_along_axis(ids, parent, axis=1) * n + value.astype(jnp.int32)
        log_prior = jnp.take_along_axis(child_logp.reshape(rows, width * n), flat, axis=1)
    return ids, log_prior, perturbed

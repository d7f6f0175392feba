"""Several policy-value networks as one: their policies and values averaged.

An ensemble of independently trained networks is a stronger evaluator than any of
its members (Lakshminarayanan et al., "Simple and Scalable Predictive Uncertainty
Estimation using Deep Ensembles", NeurIPS 2017); two runs trained side by side, one
per core, cost the wall time of one. The ensemble is one more ``apply_fn``, so every
search, symmetry mode and adapter takes it unchanged:

* the members' parameters are stacked on a new leading axis ``[M, ...]``
  (:func:`stack_params`) and passed wherever one network's parameters go;
* :func:`ensemble_apply` evaluates each member on the same batch and returns the
  mixture: probabilities (softmax of the logits) and values averaged, as
  :func:`jaxpuct.envs.symmetries.symmetric_apply` averages over symmetries
  (:func:`mixture`, shared by both).

The members run one after the other in the program (a loop unrolled at trace time,
``M`` is small), not under ``vmap``, so that each member's network is the same program
as when it runs alone (under ``vmap`` over the parameters a convolution would become
a convolution with batched weights, whose speed on each backend was not measured).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from jaxpuct.envs.adapter import ApplyFn

__all__ = ["ensemble_apply", "ensemble_size", "mixture", "stack_params"]


def mixture(logits: jax.Array, value: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The average of ``M`` policy-value outputs.

    Args:
      logits: ``[M, B, A]``.
      value: ``[M, B]``.

    Returns:
      ``(logits [B, A], value [B])`` float32: the log of the mean of the ``M``
      softmax probabilities (a mixture of the policies, not a product; floored at
      the smallest normal float, so finite) and the mean value.
    """
    probs = jnp.mean(jax.nn.softmax(logits.astype(jnp.float32), axis=-1), axis=0)
    tiny = jnp.finfo(jnp.float32).tiny
    return jnp.log(jnp.maximum(probs, tiny)), jnp.mean(value.astype(jnp.float32), axis=0)


def stack_params(params: Sequence[Any]) -> Any:
    """The members' parameters (pytrees of one structure and shapes) stacked on a
    new leading axis: every leaf ``[M, ...]``.

    Raises:
      ValueError: no member, or members of different structures or shapes (the
        first differing member is named).
    """
    if not params:
        raise ValueError("stack_params needs at least one member's parameters")
    first = jax.tree.structure(params[0])
    shapes = [jnp.shape(x) for x in jax.tree.leaves(params[0])]
    for i, member in enumerate(params[1:], start=1):
        if jax.tree.structure(member) != first:
            raise ValueError(f"params[{i}] has another structure than params[0]: "
                             "ensemble members must share one architecture")
        other = [jnp.shape(x) for x in jax.tree.leaves(member)]
        if other != shapes:
            raise ValueError(f"params[{i}] has other shapes than params[0]: ensemble "
                             "members must share one architecture")
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *params)


def ensemble_size(stacked: Any) -> int:
    """``M``, the leading axis of :func:`stack_params`' leaves."""
    leaves = jax.tree.leaves(stacked)
    if not leaves:
        raise ValueError("the stacked parameters have no leaves")
    return int(jnp.shape(leaves[0])[0])


def ensemble_apply(apply_fn: ApplyFn) -> ApplyFn:
    """The averaged network of an ensemble.

    Args:
      apply_fn: one member's ``(params, obs [B, ...]) -> (logits [B, A], value [B])``.

    Returns:
      ``apply(stacked, obs [B, ...]) -> (logits [B, A], value [B])``, ``stacked``
      from :func:`stack_params` (leaves ``[M, ...]``); the mixture of the ``M``
      members' outputs (:func:`mixture`). With ``M = 1`` the policy is the member's
      (its logits up to a constant) and the value its value.
    """

    def apply(stacked: Any, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        outputs = [apply_fn(jax.tree.map(lambda x, m=m: x[m], stacked), obs)
                   for m in range(ensemble_size(stacked))]
        logits = jnp.stack([out[0] for out in outputs])
        value = jnp.stack([out[1] for out in outputs])
        return mixture(logits, value)

    return apply

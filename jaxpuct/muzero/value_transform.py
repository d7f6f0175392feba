"""The invertible value transform and the categorical support of MuZero's heads.

MuZero (Schrittwieser et al. 2020, appendix F) predicts rewards and values as
distributions over a support of integers after squashing the scalar with the
transform of Pohlen et al. 2018 ("Observe and look further: achieving
consistent performance on Atari", eq. 5)::

    h(x) = sign(x) * (sqrt(|x| + 1) - 1) + eps * x,      eps = 1e-3

and its closed-form inverse (``u = sqrt(|x| + 1)`` solves
``eps * u**2 + u - (1 + eps + |y|) = 0``)::

    h^-1(y) = sign(y) * (B**2 - 1),   B = (sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps)

Both are written here without cancellation, so that they keep float32's
relative precision at every magnitude (``tests/test_muzero.py`` measures the
round trip from 0 to 1e6):

* ``sqrt(|x| + 1) - 1 = |x| / (sqrt(|x| + 1) + 1)``;
* ``B - 1 = 2 |y| / (s + 1 + 2 eps)`` with ``s = sqrt(1 + 4 eps (|y| + 1 + eps))``
  (multiply ``s - (1 + 2 eps)`` by its conjugate), and
  ``B**2 - 1 = (B - 1) (B + 1)``. The textbook form of ``B`` cancels in float32:
  it gives ``h^-1(0) ~ -3e-5`` and ``h^-1(h(1)) ~ 0.9999``.

A support of size ``n`` has the ``2n + 1`` atoms ``-n, ..., n``. A scalar ``x``
becomes a *two-hot* target: ``y = clip(h(x), -n, n)`` splits its mass between the
two atoms around it in proportion to closeness (3.7 puts 0.3 on 3 and 0.7 on 4).
A head's logits become a scalar by softmax, the expectation over the atoms, and
``h^-1`` of that expectation (the order of the paper and of muzero-general and
LightZero).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

__all__ = ["EPSILON", "Support", "h", "h_inverse", "logits_to_scalar", "scalar_to_two_hot",
           "two_hot_to_scalar"]

# Pohlen et al. 2018 and MuZero use 1e-3.
EPSILON = 1e-3


def h(x: jax.Array, eps: float = EPSILON) -> jax.Array:
    """The value transform ``sign(x) (sqrt(|x| + 1) - 1) + eps x``, elementwise.

    Args:
      x: ``[...]`` float values.
      eps: the linear term's weight (> 0 for an invertible transform).

    Returns:
      ``[...]`` float32, same shape.
    """
    x = jnp.asarray(x, jnp.float32)
    ax = jnp.abs(x)
    # |x| / (sqrt(|x| + 1) + 1) equals sqrt(|x| + 1) - 1 without its cancellation
    # near 0.
    return jnp.sign(x) * ax / (jnp.sqrt(ax + 1.0) + 1.0) + eps * x


def h_inverse(y: jax.Array, eps: float = EPSILON) -> jax.Array:
    """The exact inverse of :func:`h`, elementwise (module docstring).

    Args:
      y: ``[...]`` transformed values.
      eps: the same ``eps`` as the forward transform (> 0).

    Returns:
      ``[...]`` float32 ``x`` with ``h(x) == y``.
    """
    y = jnp.asarray(y, jnp.float32)
    ay = jnp.abs(y)
    s = jnp.sqrt(1.0 + 4.0 * eps * (ay + 1.0 + eps))
    b_minus_1 = 2.0 * ay / (s + 1.0 + 2.0 * eps)
    return jnp.sign(y) * b_minus_1 * (b_minus_1 + 2.0)


@dataclasses.dataclass(frozen=True)
class Support:
    """The integer atoms ``-size, ..., size`` of a categorical head (static; hashable).

    Attributes:
      size: ``n`` >= 1; the head has ``2n + 1`` logits. With ``h`` a support of
        ``n`` covers ``|x| <= h^-1(n)`` (``n = 10``: ~117; ``n = 300``: ~5.9e4).
      eps: the transform's ``eps`` (1e-3).
    """

    size: int
    eps: float = EPSILON

    def __post_init__(self):
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 1:
            raise ValueError(f"Support.size must be an int >= 1, got {self.size!r}.")
        if not self.eps > 0:
            raise ValueError(f"Support.eps must be > 0, got {self.eps!r}.")

    @property
    def num_atoms(self) -> int:
        """``2 * size + 1``."""
        return 2 * self.size + 1

    @property
    def atoms(self) -> jax.Array:
        """``[2n + 1]`` float32 ``-n, ..., n``."""
        return jnp.arange(-self.size, self.size + 1, dtype=jnp.float32)


def scalar_to_two_hot(x: jax.Array, support: Support) -> jax.Array:
    """Two-hot target of ``h(x)`` on the support.

    Args:
      x: ``[...]`` scalars (untransformed).
      support: the atoms.

    Returns:
      ``[..., 2n + 1]`` float32 probabilities: ``y = clip(h(x), -n, n)`` puts
      ``ceil-weight = y - floor(y)`` on the atom above ``floor(y)`` and the rest
      on ``floor(y)``, so the expectation over the atoms is ``y``.
    """
    n = support.size
    y = jnp.clip(h(x, support.eps), -n, n)
    low = jnp.floor(y)
    upper_weight = y - low
    # At y == n the upper atom would be n + 1 with weight 0: clip its index so
    # that one_hot does not drop it (the weight stays on the last atom).
    low_index = (low + n).astype(jnp.int32)
    high_index = jnp.minimum(low_index + 1, 2 * n)
    return ((1.0 - upper_weight)[..., None] * jax.nn.one_hot(low_index, support.num_atoms)
            + upper_weight[..., None] * jax.nn.one_hot(high_index, support.num_atoms))


def two_hot_to_scalar(probs: jax.Array, support: Support) -> jax.Array:
    """``h^-1`` of the expectation of ``probs [..., 2n + 1]`` over the atoms -> ``[...]``."""
    return h_inverse(jnp.sum(probs * support.atoms, axis=-1), support.eps)


def logits_to_scalar(logits: jax.Array, support: Support) -> jax.Array:
    """A categorical head's scalar: softmax of ``logits [..., 2n + 1]``, expectation
    over the atoms, ``h^-1``; ``[...]`` float32."""
    if logits.shape[-1] != support.num_atoms:
        raise ValueError(f"logits must have {support.num_atoms} atoms in the last axis "
                         f"(support size {support.size}), got shape {tuple(logits.shape)}.")
    return two_hot_to_scalar(jax.nn.softmax(logits.astype(jnp.float32), axis=-1), support)

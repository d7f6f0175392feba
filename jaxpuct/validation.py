"""Trace-time checks of shapes and configuration.

Every check raises ``ValueError`` naming the argument, what was expected and
what was given, before anything is compiled. Checks of *values* (NaN, an empty
legal mask) cannot happen at trace time; the search handles those in defined
ways documented where they happen.
"""

from __future__ import annotations

import numbers
from typing import Any

import chex
import jax
import jax.numpy as jnp


def check_int(name: str, value: Any, minimum: int) -> int:
    """A Python integer ``>= minimum`` (static: it shapes the computation)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a Python int >= {minimum}, got {value!r} "
                         f"of type {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    return int(value)


def check_shape(name: str, array: Any, expected: tuple[int, ...]) -> None:
    """``array.shape == expected`` or a ValueError saying both."""
    shape = getattr(array, "shape", None)
    if shape is None:
        raise ValueError(f"{name} must be an array of shape {list(expected)}, "
                         f"got {type(array).__name__}.")
    if tuple(shape) != tuple(expected):
        raise ValueError(f"{name} must have shape {list(expected)}, got {list(shape)}.")


def check_root(root: Any) -> tuple[int, int]:
    """Checks a ``RootFnOutput``-like object; returns ``(batch_size, num_actions)``."""
    logits = getattr(root, "prior_logits", None)
    if getattr(logits, "ndim", None) != 2:
        got = None if logits is None else list(getattr(logits, "shape", ()))
        raise ValueError(f"root.prior_logits must have shape [B, num_actions], got {got}.")
    batch_size, num_actions = logits.shape
    if num_actions < 1:
        raise ValueError(f"root.prior_logits must have num_actions >= 1, got {num_actions}.")
    check_shape("root.value", getattr(root, "value", None), (batch_size,))
    check_batched_pytree("root.embedding", getattr(root, "embedding", None), batch_size)
    mask = getattr(root, "legal_action_mask", None)
    if mask is not None:
        check_shape("root.legal_action_mask", mask, (batch_size, num_actions))
    state_hash = getattr(root, "state_hash", None)
    if state_hash is not None:
        check_hash("root.state_hash", state_hash, batch_size)
    return batch_size, num_actions


def check_batched_pytree(name: str, tree: Any, batch_size: int) -> None:
    """Every leaf of ``tree`` has leading dimension ``batch_size``."""
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    if not leaves:
        raise ValueError(f"{name} must be a pytree with at least one array leaf [B, ...].")
    for path, leaf in leaves:
        shape = getattr(leaf, "shape", ())
        if len(shape) < 1 or shape[0] != batch_size:
            where = jax.tree_util.keystr(path)
            raise ValueError(f"{name}{where} must have leading dimension B={batch_size}, "
                             f"got shape {list(shape)}.")


def check_hash(name: str, state_hash: Any, batch_size: int) -> None:
    check_shape(name, state_hash, (batch_size, 2))
    if state_hash.dtype != jnp.uint32:
        raise ValueError(f"{name} must have dtype uint32, got {state_hash.dtype}.")


def check_recurrent_output(output: Any, embedding: Any, batch_size: int,
                           num_actions: int, embedding_like: Any) -> None:
    """Checks what ``recurrent_fn`` returned against the root's shapes."""
    for field in ("reward", "discount", "value"):
        check_shape(f"recurrent_fn output .{field}", getattr(output, field, None),
                    (batch_size,))
    check_shape("recurrent_fn output .prior_logits", getattr(output, "prior_logits", None),
                (batch_size, num_actions))
    mask = getattr(output, "legal_action_mask", None)
    if mask is not None:
        check_shape("recurrent_fn output .legal_action_mask", mask,
                    (batch_size, num_actions))
    terminal = getattr(output, "terminal", None)
    if terminal is not None:
        check_shape("recurrent_fn output .terminal", terminal, (batch_size,))
    state_hash = getattr(output, "state_hash", None)
    if state_hash is not None:
        check_hash("recurrent_fn output .state_hash", state_hash, batch_size)
    expected = jax.tree.structure(embedding_like)
    got = jax.tree.structure(embedding)
    if expected != got:
        raise ValueError("recurrent_fn must return an embedding with the same structure as "
                         f"root.embedding: expected {expected}, got {got}.")
    for (path, new_leaf), old_leaf in zip(jax.tree_util.tree_leaves_with_path(embedding),
                                          jax.tree.leaves(embedding_like), strict=True):
        if new_leaf.shape != old_leaf.shape:
            raise ValueError(
                f"recurrent_fn embedding{jax.tree_util.keystr(path)} must have shape "
                f"{list(old_leaf.shape)} like root.embedding, got {list(new_leaf.shape)}.")


def split_keys(rng_key: chex.PRNGKey, batch_size: int) -> tuple[chex.PRNGKey, chex.Array]:
    """Accepts one key or a batch of keys; returns ``(shared_key, per_element_keys [B])``.

    With a batch of keys, element ``b`` uses only ``rng_key[b]`` for its own
    randomness (noise, sampling), so a batch searched together equals its
    elements searched alone with the matching keys. The shared key (for
    ``recurrent_fn``) is then derived from ``rng_key[0]``.
    """
    key = jnp.asarray(rng_key)
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    single_ndim = 0 if typed else 1
    if key.ndim == single_ndim:
        shared, per_element = jax.random.split(key)
        return shared, jax.random.split(per_element, batch_size)
    if key.ndim == single_ndim + 1:
        if key.shape[0] != batch_size:
            raise ValueError(f"rng_key must be one key or a batch of B={batch_size} keys, "
                             f"got shape {list(key.shape)}.")
        return jax.random.fold_in(key[0], 0x5EED), key
    raise ValueError(f"rng_key must be one key or a batch of B={batch_size} keys, "
                     f"got shape {list(key.shape)}.")

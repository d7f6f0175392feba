"""Per-tree reads and writes of the batched tree arrays, each one XLA gather or scatter.

Every tree array is ``[B, N, ...]`` (or ``[B, N, A, ...]``) and almost every access
reads or writes one entry per tree: ``array[b, index[b]]``. Written with NumPy
indexing (``array[jnp.arange(B), index]``), each such access traces to about ten
operations: an iota for the rows, a compare-add-select per index to wrap negative
indices, broadcasts and a concatenate to build the index matrix, then the gather.
The search does some sixty of them per simulation, so they were about 40% of its
program, and its trace, lowering and compile time grew with them. Here the batch
axis is a *batching dimension* of the gather or scatter (XLA's
``operand_batching_dims``), so an access is the gather or scatter alone.

Semantics differ from NumPy indexing in one way, on purpose: a negative index is
not wrapped. Reads clamp an out-of-range index into range (XLA's gather rule);
writes drop it (``mode="drop"``), which is how callers skip a tree: they point it
past the end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["row_add", "row_set", "row_take", "row_take_once", "take_once"]


# Batching dimensions of gather/scatter came with jax 0.4.31. On older versions the
# tree index is written out as an explicit iota column (one more operation).
_BATCHING_DIMS = "operand_batching_dims" in lax.GatherDimensionNumbers._fields


def _index_matrix(index: tuple[jax.Array, ...], tree_axis: int) -> jax.Array:
    """``[*I, k]`` int32 from ``k`` index arrays of one shape ``I`` (``[*I, k + 1]``,
    the tree index first, where gathers have no batching dimensions)."""
    shape = jnp.shape(index[0])
    for i in index[1:]:
        if jnp.shape(i) != shape:
            shapes = [jnp.shape(j) for j in index]
            raise ValueError(f"index arrays must share one shape; got {shapes}")
    columns = [jnp.asarray(i, jnp.int32) for i in index]
    if not _BATCHING_DIMS:
        columns.insert(0, lax.broadcasted_iota(jnp.int32, shape, tree_axis))
    return jnp.stack(columns, axis=-1)


def _batching(operand_key: str, indices_key: str, tree_axis: int) -> dict:
    """The dimension numbers' batching fields, or none on old jax."""
    return {operand_key: (0,), indices_key: (tree_axis,)} if _BATCHING_DIMS else {}


def _indexed_dims(k: int) -> tuple[int, ...]:
    """The operand dimensions the index columns address."""
    return tuple(range(1, 1 + k)) if _BATCHING_DIMS else tuple(range(0, 1 + k))


def row_take(array: jax.Array, *index: jax.Array, tree_axis: int = 0) -> jax.Array:
    """``array[b, i1[b, ...], ..., ik[b, ...]]`` for every tree ``b``.

    Args:
      array: ``[B, N1, ..., Nk, *T]``.
      *index: ``k`` integer arrays of one shape ``I`` that has ``B`` at axis
        ``tree_axis`` (``[B]``, ``[B, A]``, or ``[K, B]`` with ``tree_axis=1``).
      tree_axis: the axis of the index arrays that runs over trees.

    Returns:
      ``[*I, *T]``. An index outside ``[0, N)`` reads the nearest entry.
    """
    k = len(index)
    indices = _index_matrix(index, tree_axis)
    batch_rank = indices.ndim - 1  # len(I)
    trailing = array.shape[1 + k:]
    numbers = lax.GatherDimensionNumbers(
        offset_dims=tuple(range(batch_rank, batch_rank + len(trailing))),
        collapsed_slice_dims=_indexed_dims(k),
        start_index_map=_indexed_dims(k),
        **_batching("operand_batching_dims", "start_indices_batching_dims", tree_axis))
    return lax.gather(array, indices, numbers, slice_sizes=(1,) * (1 + k) + trailing,
                      mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _scatter(array: jax.Array, index: tuple[jax.Array, ...], update, op,
             tree_axis: int) -> jax.Array:
    k = len(index)
    indices = _index_matrix(index, tree_axis)
    batch_rank = indices.ndim - 1
    trailing = array.shape[1 + k:]
    update = jnp.broadcast_to(jnp.asarray(update, array.dtype),
                              indices.shape[:-1] + trailing)
    numbers = lax.ScatterDimensionNumbers(
        update_window_dims=tuple(range(batch_rank, batch_rank + len(trailing))),
        inserted_window_dims=_indexed_dims(k),
        scatter_dims_to_operand_dims=_indexed_dims(k),
        **_batching("operand_batching_dims", "scatter_indices_batching_dims", tree_axis))
    return op(array, indices, update, numbers, mode=lax.GatherScatterMode.FILL_OR_DROP)


def row_set(array: jax.Array, index: jax.Array | tuple[jax.Array, ...],
            update, *, tree_axis: int = 0) -> jax.Array:
    """``array`` with ``array[b, index[b]] = update[b]`` for every tree ``b``.

    Args:
      array: ``[B, N1, ..., Nk, *T]``.
      index: one integer array of shape ``I`` (``B`` at axis ``tree_axis``), or a
        tuple of ``k`` of them.
      update: ``[*I, *T]`` or anything that broadcasts to it (a scalar).
      tree_axis: the axis of the index arrays that runs over trees.

    Returns:
      ``array``'s shape and dtype. An index outside ``[0, N)`` writes nothing; two
      equal indices of one tree write one of their updates.
    """
    index = index if isinstance(index, tuple) else (index,)
    return _scatter(array, index, update, lax.scatter, tree_axis)


def row_add(array: jax.Array, index: jax.Array | tuple[jax.Array, ...],
            update, *, tree_axis: int = 0) -> jax.Array:
    """``array`` with ``update[b]`` added at ``array[b, index[b]]``; as :func:`row_set`,
    but equal indices of one tree add up."""
    index = index if isinstance(index, tuple) else (index,)
    return _scatter(array, index, update, lax.scatter_add, tree_axis)


def take_once(counter: jax.Array | int, take: Callable[[jax.Array], Any],
              index: jax.Array, batch_size: int) -> Any:
    """``take(index)`` (gathers from tree arrays), materialised once where the
    batch holds one tree.

    XLA re-reads a plain gather inside each fusion that uses its result. With one
    tree the writes to the tree arrays become in-place dynamic-update-slices, and
    any such read that is not ordered before a later write of the array makes XLA
    copy the whole array to keep the old values (at every loop step). Gathered
    inside a conditional, the values are a buffer of their own. ``counter`` is a
    loop counter (``>= 0``): the predicate is always true but unknown to the
    compiler (a Python int is known, and XLA then drops the conditional), and the
    branches agree anyway (``take`` must read a negative index as entry 0, as
    :func:`row_take` does). With more trees (``batch_size > 1``) the writes stay
    scatters, which XLA updates in place without a copy, and the plain gather is
    cheaper (the conditional cost 2-6% at B = 8 and 64), so it is used there.
    """
    if batch_size > 1:
        return take(index)
    return lax.cond(jnp.asarray(counter) >= 0, take,
                    lambda idx: take(jnp.maximum(idx, 0)), index)


def row_take_once(counter: jax.Array | int, array: jax.Array, *index: jax.Array,
                  tree_axis: int = 0) -> jax.Array:
    """:func:`row_take` through :func:`take_once` (``array``'s first axis is the
    batch)."""
    return take_once(counter, lambda idx: row_take(array, *idx, tree_axis=tree_axis),
                     jnp.stack(index), array.shape[0])

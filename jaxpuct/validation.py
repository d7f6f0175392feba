"""Trace-time checks of shapes, types and configuration: one style for the library.

Every check raises ``ValueError`` naming the argument, what was expected and
what was given, before anything is compiled. Values can be checked only when
they are concrete (Python numbers, NumPy or committed JAX arrays); a *traced*
value cannot be read at trace time, so each function that takes one documents
what it does with an out-of-range value and offers a ``checkify`` check
(:func:`debug_check_range`) that fires when the caller wraps it with
``jax.experimental.checkify.checkify``. Value problems inside the search (NaN
from a network, an empty legal mask) are handled in defined ways documented
where they happen.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import jax
import jax.core  # jax.core.Tracer: is a value known at trace time
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from jaxpuct import prng
from jaxpuct.tree import Tree

# Salt that derives the batch-shared key from the first per-element key, so the
# shared stream differs from element 0's own stream.
SHARED_KEY_SALT = 0x5EED


def check_int(name: str, value: Any, minimum: int) -> int:
    """A Python integer ``>= minimum`` (static: it shapes the computation)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a Python int >= {minimum}, got {value!r} "
                         f"of type {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    return int(value)


def check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    """``value`` is one of the string ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}.")


def check_instance(name: str, value: Any, cls: type, allow_none: bool = False) -> None:
    """``value`` is an instance of ``cls`` (or ``None`` when allowed)."""
    if value is None and allow_none:
        return
    if not isinstance(value, cls):
        expected = f"a {cls.__name__}" + (" or None" if allow_none else "")
        raise ValueError(f"{name} must be {expected}, got {value!r} of type "
                         f"{type(value).__name__}.")


def concrete_value(value: Any) -> np.ndarray | None:
    """``value`` as a NumPy array when it is known at trace time, else ``None``."""
    if isinstance(value, jax.core.Tracer):
        return None
    try:
        return np.asarray(value)
    except (TypeError, ValueError, jax.errors.ConcretizationTypeError):
        return None


def check_range(name: str, value: Any, low: float, high: float = float("inf")) -> None:
    """Every element of a concrete ``value`` lies in ``[low, high]``.

    Traced values pass unchecked here; see :func:`debug_check_range`.
    """
    array = concrete_value(value)
    if array is None:
        return
    if not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}.")
    bad = ~((array >= low) & (array <= high))
    if np.any(bad):
        shown = array[bad].ravel()[:4].tolist()
        raise ValueError(f"{name} must be in [{low}, {high}], got {shown}"
                         + (" (first of several)" if bad.sum() > 4 else "") + ".")


def check_positive(name: str, value: Any) -> None:
    """Every element of a concrete ``value`` is ``> 0`` (traced values pass)."""
    array = concrete_value(value)
    if array is not None and np.any(~(array > 0)):
        raise ValueError(f"{name} must be > 0, got {array[~(array > 0)].ravel()[0]}.")


def debug_check_range(name: str, value: jax.Array, low: float,
                      high: float = float("inf")) -> None:
    """A ``checkify`` check that every element of ``value`` is in ``[low, high]``.

    A no-op unless the caller runs under ``checkify.checkify(...)``, where an
    out-of-range traced value then raises through ``err.throw()``. A value known
    at trace time adds nothing: :func:`check_range` has checked it already, and a
    check in the program, even one that never fires, is an effect that keeps
    ``jax.jit`` off its C++ dispatch path on every call (about 60 us a call on
    this project's CPU: a tenth of a B = 1 tic-tac-toe search).
    """
    if concrete_value(value) is not None:
        return
    value = jnp.asarray(value)
    checkify.debug_check(jnp.all((value >= low) & (value <= high)),
                         f"{name} must be in [{low}, {high}]")


def check_shape(name: str, array: Any, expected: tuple[int, ...]) -> None:
    """``array.shape == expected`` or a ValueError saying both."""
    shape = getattr(array, "shape", None)
    if shape is None:
        raise ValueError(f"{name} must be an array of shape {list(expected)}, "
                         f"got {type(array).__name__}.")
    if tuple(shape) != tuple(expected):
        raise ValueError(f"{name} must have shape {list(expected)}, got {list(shape)}.")


def check_mask(name: str, mask: Any, expected: tuple[int, ...]) -> None:
    """A boolean mask of shape ``expected``: bool dtype, or integers that are (where
    concrete) all 0 or 1. A float mask is an error: 0.5 would silently read as
    True."""
    check_shape(name, mask, expected)
    dtype = jnp.asarray(mask).dtype if not hasattr(mask, "dtype") else mask.dtype
    if jnp.issubdtype(dtype, jnp.bool_):
        return
    if not jnp.issubdtype(dtype, jnp.integer):
        raise ValueError(f"{name} must be a bool mask, got dtype {dtype}.")
    values = concrete_value(mask)
    if values is not None and not np.isin(values, (0, 1)).all():
        raise ValueError(f"{name} must be a bool mask (0 or 1), got values "
                         f"{sorted(set(np.unique(values).tolist()) - {0, 1})[:5]}.")


def check_actions(name: str, actions: Any, num_actions: int) -> None:
    """Integer actions; concrete ones below ``num_actions`` (negative: no move)."""
    dtype = getattr(actions, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.integer):
        raise ValueError(f"{name} must hold integer actions, got dtype {dtype} "
                         "(a float action would be truncated).")
    values = concrete_value(actions)
    if values is not None and (values >= num_actions).any():
        raise ValueError(f"{name} must be < num_actions={num_actions} (or negative for "
                         f"no move), got {int(values.max())}.")


def check_scalar_or_batch(name: str, value: Any, batch_size: int) -> None:
    """``value`` is a scalar or has shape ``[B]``."""
    shape = tuple(getattr(value, "shape", ()))
    if shape not in ((), (batch_size,)):
        raise ValueError(f"{name} must be a scalar or have shape [B]=[{batch_size}], "
                         f"got shape {list(shape)}.")


def check_root(root: Any) -> tuple[int, int]:
    """Checks a ``RootFnOutput``-like object; returns ``(batch_size, num_actions)``."""
    logits = getattr(root, "prior_logits", None)
    if logits is None or getattr(logits, "ndim", None) != 2:
        got = None if logits is None else list(getattr(logits, "shape", ()))
        raise ValueError(f"root.prior_logits must have shape [B, num_actions], got {got}.")
    batch_size, num_actions = logits.shape
    if batch_size < 1:
        # Caught here: B = 0 would otherwise fail deep inside a reduction of jax.numpy.
        raise ValueError("root.prior_logits must have a batch size B >= 1, got "
                         f"B={batch_size} (shape {list(logits.shape)}).")
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


# What a reader of a finished tree (``visualize.to_dot``) needs; a duck-typed tree
# with these (e.g. a wrapper adding a ``proven`` field) is read like a Tree.
_TREE_FIELDS = ("batch_size", "num_actions", "children_index", "children_prior",
                "edge_visits", "node_visits", "node_values", "num_nodes")


def check_tree_object(name: str, tree: Any, *, allow_none: bool = False,
                      structural: bool = False, concrete: bool = False) -> None:
    """``tree`` is a ``jaxpuct.Tree`` (``None`` when allowed), else a ValueError that
    says what was given and what to pass instead.

    Other objects fail here rather than later with a bare ``AttributeError``: mctx's
    tree shares field names (``children_index``) but not the layout, and a
    ``PolicyOutput`` holds the tree in ``.search_tree``.

    Args:
      name: the argument's name, for the message.
      tree: the object given.
      allow_none: ``None`` passes.
      structural: accept any object with the fields of a ``Tree`` that readers use
        (``_TREE_FIELDS``), not only ``Tree`` instances.
      concrete: the arrays must be readable on the host, not traced (``jax.jit``).
    """
    if tree is None and allow_none:
        return
    is_tree = isinstance(tree, Tree) or (
        structural and all(hasattr(tree, field) for field in _TREE_FIELDS))
    if not is_tree:
        cls = type(tree)
        module = cls.__module__.split(".")[0]
        got = (cls.__name__ if module in ("builtins", "jaxpuct", "__main__")
               else f"{module}.{cls.__name__}")
        if module == "mctx" and hasattr(tree, "search_tree"):
            hint = "; jaxpuct reads only its own trees (search with jaxpuct)"
        elif module == "mctx":
            hint = ("; jaxpuct continues only its own trees: search from the root with "
                    "jaxpuct (pass root=, not tree=)")
        elif hasattr(tree, "search_tree"):
            hint = f"; pass its .search_tree ({name}=policy_output.search_tree)"
        else:
            hint = ""
        raise ValueError(f"{name} must be a jaxpuct.Tree, got {got}{hint}.")
    if concrete and any(isinstance(getattr(tree, field), jax.core.Tracer)
                        for field in ("children_index", "num_nodes")):
        raise ValueError(f"{name} must hold concrete arrays, got traced ones (inside "
                         "jax.jit, vmap or grad): call this on the tree a jitted function "
                         "returned, outside the transformation.")


def check_tree_fits(name: str, tree: Any, batch_size: int | None,
                    num_actions: int | None) -> None:
    """A given ``tree`` has the batch size and action count of the rest of the call."""
    check_tree_object(name, tree)
    index = tree.children_index
    if index.ndim != 3:
        raise ValueError(f"{name}.children_index must have shape [B, N, A], got "
                         f"{list(index.shape)} (a tree with extra leading axes, from "
                         "jax.vmap, is used under the same vmap).")
    tree_batch, _, tree_actions = index.shape
    if batch_size is not None and tree_batch != batch_size:
        raise ValueError(f"{name} has batch size {tree_batch}, but the call has "
                         f"B={batch_size}.")
    if num_actions is not None and tree_actions != num_actions:
        raise ValueError(f"{name} has {tree_actions} actions, but the call has "
                         f"num_actions={num_actions}.")


def check_root_fits_tree(root: Any, tree: Any) -> tuple[int, int]:
    """A tree to continue matches the root given with it (when one is given);
    returns the tree's ``(batch_size, num_actions)``."""
    if root is None:
        check_tree_fits("tree", tree, None, None)
    else:
        check_tree_fits("tree", tree, *check_root(root))
    return tree.children_index.shape[0], tree.children_index.shape[2]


def check_continued_tree(tree: Any, root: Any, max_nodes: int | None,
                         graph: Any) -> tuple[int, int]:
    """A tree to continue: a jaxpuct tree that fits ``root`` (when given), whose
    capacity is ``max_nodes`` (when given) and whose ``GraphConfig`` is ``graph``
    (when given; a config that differs only in how it walks,
    ``stop_at_transposition``, is accepted). Returns its ``(batch_size,
    num_actions)``."""
    batch_size, num_actions = check_root_fits_tree(root, tree)
    if max_nodes is not None and max_nodes != tree.max_nodes:
        raise ValueError(
            f"max_nodes={max_nodes} does not match the tree to continue: its capacity is "
            f"max_nodes={tree.max_nodes} and cannot change (omit max_nodes, or build a "
            "new tree).")
    if graph is not None and (tree.graph is None or not graph.same_storage(tree.graph)):
        built = "tree search" if tree.graph is None else repr(tree.graph)
        raise ValueError(
            f"graph={graph!r} does not match the tree to continue, which was built for "
            f"{built}: edge_rewards, max_probes, table_factor and hash_fn shape what it stores "
            "(omit graph= to continue it as it was built).")
    return batch_size, num_actions


def check_trees_fit_device(root: Any, max_nodes: int, graph: Any) -> None:
    """New trees for ``root`` with ``max_nodes`` slots fit in device memory, where its
    size is known (see :func:`jaxpuct.memory.check_trees_fit`)."""
    # Imported here: jaxpuct.memory builds trees with jaxpuct.roots, which imports
    # this module, and ``import jaxpuct`` leaves jaxpuct.memory unloaded.
    from jaxpuct.memory import check_trees_fit

    batch_size, num_actions = root.prior_logits.shape
    state = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype),
                         root.embedding)
    check_trees_fit(batch_size, num_actions, max_nodes, embedding=state, graph=graph)


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
    """A ``[B, 2]`` uint32 state hash."""
    check_shape(name, state_hash, (batch_size, 2))
    if state_hash.dtype != jnp.uint32:
        raise ValueError(f"{name} must have dtype uint32, got {state_hash.dtype}.")


def unpack_recurrent_result(result: Any) -> tuple[Any, Any]:
    """``recurrent_fn``'s return value as ``(output, new_embedding)``."""
    if not (isinstance(result, tuple) and len(result) == 2):
        got = (f"a tuple of {len(result)}" if isinstance(result, tuple)
               else type(result).__name__)
        raise ValueError("recurrent_fn must return a pair (RecurrentFnOutput, "
                         f"new_embedding), got {got}.")
    return result


def check_recurrent_output(output: Any, embedding: Any, batch_size: int,
                           num_actions: int, embedding_like: Any) -> None:
    """Checks what ``recurrent_fn`` returned against the root's shapes and dtypes."""
    missing = [f for f in ("reward", "discount", "prior_logits", "value")
               if not hasattr(output, f)]
    if missing:
        keys = f" with keys {sorted(output)}" if isinstance(output, dict) else ""
        raise ValueError(f"recurrent_fn output .{missing[0]} is missing: recurrent_fn must "
                         "return (RecurrentFnOutput, new_embedding) with a "
                         "jaxpuct.RecurrentFnOutput or mctx.RecurrentFnOutput first (reward "
                         f"[B]=[{batch_size}], discount, prior_logits, value), got "
                         f"{type(output).__name__}{keys}.")
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
        where = jax.tree_util.keystr(path)
        if new_leaf.shape != old_leaf.shape:
            raise ValueError(
                f"recurrent_fn embedding{where} must have shape "
                f"{list(old_leaf.shape)} like root.embedding, got {list(new_leaf.shape)}.")
        if new_leaf.dtype != old_leaf.dtype:
            raise ValueError(
                f"recurrent_fn embedding{where} must have dtype {old_leaf.dtype} like "
                f"root.embedding (the tree stores it), got {new_leaf.dtype}.")


def split_keys(rng_key: jax.Array, batch_size: int) -> tuple[jax.Array, jax.Array]:
    """Accepts one key or a batch of keys; returns ``(shared_key, per_element_keys [B])``.

    With a batch of keys, element ``b`` uses only ``rng_key[b]`` for its own
    randomness (noise, sampling), so a batch searched together equals its
    elements searched alone with the matching keys. The shared key (for
    ``recurrent_fn``) is then derived from ``rng_key[0]``.
    """
    key = jnp.asarray(rng_key)
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    single_ndim = 0 if typed else 1
    if key.ndim == single_ndim:
        shared, per_element = prng.split(key, 2)
        return shared, prng.split(per_element, batch_size)
    if key.ndim == single_ndim + 1:
        if key.shape[0] != batch_size:
            raise ValueError(f"rng_key must be one key or a batch of B={batch_size} keys, "
                             f"got shape {list(key.shape)}.")
        return prng.fold_in(key[0], SHARED_KEY_SALT), key
    raise ValueError(f"rng_key must be one key or a batch of B={batch_size} keys, "
                     f"got shape {list(key.shape)}.")

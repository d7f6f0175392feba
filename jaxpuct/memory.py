"""How many search trees fit in a device's memory.

The tree is the search's largest array set: ``B`` trees of ``N`` node slots cost
``B * N * bytes_per_node`` plus a few bytes per tree (the root prior and the node
count). :meth:`jaxpuct.Tree.bytes_per_node` gives the per-node cost of every
stored array, so the calculator builds one tree (``B = 1``) of the requested shape
and reads it off
(shapes only, with ``jax.eval_shape``). Only the tree is counted: the network's activations, the
optimiser state, a replay buffer and XLA's temporaries need their own share of
memory (pass ``fraction < 1`` to keep it free).

:func:`check_trees_fit` runs when a search builds new trees (at trace time, before
anything is compiled): where the device's memory is known it raises a ``ValueError``
for trees that cannot fit, instead of a compilation that ends in XLA's
``RESOURCE_EXHAUSTED``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.graph import GraphConfig
from jaxpuct.roots import new_tree
from jaxpuct.tree import Tree
from jaxpuct.types import RootFnOutput

__all__ = ["GIB", "TreeMemory", "check_trees_fit", "device_memory_bytes", "tree_memory",
           "trees_that_fit"]

GIB = 1 << 30


@dataclasses.dataclass(frozen=True)
class TreeMemory:
    """Memory of one tree of a given shape.

    Attributes:
      num_actions: ``A``.
      max_nodes: ``N``.
      bytes_per_node: ``sum(Tree.bytes_per_node().values())``: node, edge,
        embedding and (graph search) hash arrays per node slot.
      bytes_per_tree: exact bytes of one tree: every array of a ``B = 1`` tree,
        i.e. ``N * bytes_per_node`` plus the ``[A]`` root prior and ``num_nodes``
        (and the rounding of a graph's transposition table).
      by_array: ``Tree.bytes_per_node()``, per array name.
    """

    num_actions: int
    max_nodes: int
    bytes_per_node: int
    bytes_per_tree: int
    by_array: dict[str, int]


def _check_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def _one_tree(num_actions: int, max_nodes: int, embedding: Any,
              graph: GraphConfig | None) -> Tree:
    """A ``B = 1`` tree holding only its root; ``embedding`` leaves get a batch axis."""
    embedding = jax.tree.map(lambda x: jnp.zeros((1,) + tuple(x.shape), x.dtype), embedding)
    root = RootFnOutput(
        prior_logits=jnp.zeros((1, num_actions), jnp.float32),
        value=jnp.zeros((1,), jnp.float32),
        embedding=embedding,
        state_hash=None if graph is None else jnp.zeros((1, 2), jnp.uint32),
    )
    # new_tree, not init_tree: init_tree's checks call check_trees_fit, which calls this.
    return new_tree(root, max_nodes, None, None, graph)


def tree_memory(num_actions: int, max_nodes: int, *, embedding: Any = None,
                graph: GraphConfig | None = None) -> TreeMemory:
    """Bytes of one tree with ``A = num_actions`` and ``N = max_nodes``.

    Args:
      num_actions: ``A`` (e.g. 82 for 9x9 Go with the pass, 362 for 19x19).
      max_nodes: ``N`` node slots per tree (``num_simulations + 1`` by default).
      embedding: the embedding of *one* state, without the batch axis: a pytree
        of arrays or ``jax.ShapeDtypeStruct`` (e.g.
        ``jax.eval_shape(pgx_env.init, key)``); ``None`` stores nothing.
      graph: graph-search options (adds the state hashes, the transposition
        table and, with ``edge_rewards``, two ``[N, A]`` float32 arrays).

    Returns:
      :class:`TreeMemory`, read from :meth:`Tree.bytes_per_node` of a ``B = 1``
      tree whose shapes come from ``jax.eval_shape`` (nothing is allocated).
    """
    _check_positive_int("num_actions", num_actions)
    _check_positive_int("max_nodes", max_nodes)
    if embedding is None:
        # The search needs an array leaf; a zero-width one costs nothing.
        embedding = jax.ShapeDtypeStruct((0,), jnp.int8)
    # Shapes only: nothing is computed or allocated on the device. Zero-stride
    # NumPy views give ``bytes_per_node`` arrays to index without the memory.
    shapes = jax.eval_shape(lambda: _one_tree(num_actions, max_nodes, embedding, graph))
    tree = jax.tree.map(lambda s: np.broadcast_to(np.zeros((), s.dtype), s.shape), shapes)
    by_array = tree.bytes_per_node()
    total = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree))
    return TreeMemory(num_actions=num_actions, max_nodes=max_nodes,
                      bytes_per_node=sum(by_array.values()), bytes_per_tree=int(total),
                      by_array=by_array)


def trees_that_fit(device_bytes: int, num_actions: int, max_nodes: int, *,
                   embedding: Any = None, graph: GraphConfig | None = None,
                   fraction: float = 1.0) -> int:
    """The largest batch ``B`` of trees whose arrays fit in ``fraction * device_bytes``.

    Args:
      device_bytes: memory of one device, in bytes (e.g. ``80 * GIB``).
      num_actions, max_nodes, embedding, graph: as in :func:`tree_memory`.
      fraction: the share of the device given to the trees, in ``(0, 1]``; the
        rest is left for the network, the search's temporaries and XLA.

    Returns:
      ``floor(fraction * device_bytes / bytes_per_tree)``.
    """
    _check_positive_int("device_bytes", device_bytes)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    memory = tree_memory(num_actions, max_nodes, embedding=embedding, graph=graph)
    return int(fraction * device_bytes) // memory.bytes_per_tree


def device_memory_bytes() -> int | None:
    """Memory the search may use on the devices, in bytes, or ``None`` where unknown.

    The ``bytes_limit`` of ``jax.devices()[0].memory_stats()`` (GPUs and TPUs
    report it; the CPU backend usually reports nothing) times the number of
    devices, since ``jax.jit`` may shard a batch of trees over all of them.
    """
    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # noqa: BLE001 - a backend without memory statistics
        return None
    limit = (stats or {}).get("bytes_limit")
    return None if not limit else int(limit) * jax.device_count()


@functools.lru_cache(maxsize=256)
def _bytes_per_tree(num_actions: int, max_nodes: int, embedding: tuple,
                    graph: GraphConfig | None) -> int:
    """:func:`tree_memory`'s ``bytes_per_tree``, cached (a search is traced often);
    ``embedding``: ``(treedef, ((shape, dtype), ...))`` of one state."""
    treedef, leaves = embedding
    spec = jax.tree.unflatten(treedef, [jax.ShapeDtypeStruct(shape, dtype)
                                        for shape, dtype in leaves])
    return tree_memory(num_actions, max_nodes, embedding=spec, graph=graph).bytes_per_tree


def check_trees_fit(batch_size: int, num_actions: int, max_nodes: int, *,
                    embedding: Any = None, graph: GraphConfig | None = None,
                    device_bytes: int | None = None) -> None:
    """Raises ``ValueError`` when ``batch_size`` trees cannot fit in device memory.

    Only the trees are counted (see the module docstring), so a search that
    passes may still run out of memory; one that fails here cannot run.

    Args:
      batch_size: ``B``.
      num_actions, max_nodes, embedding, graph: as in :func:`tree_memory`
        (``embedding``: one state, without the batch axis).
      device_bytes: the memory to fit in; default :func:`device_memory_bytes`.
        Where it is unknown (``None``, as on CPU) nothing is checked.

    Raises:
      ValueError: saying how many bytes the trees need, the memory available, and
        the largest batch that fits (:func:`trees_that_fit`).
    """
    if device_bytes is None:
        device_bytes = device_memory_bytes()
    if device_bytes is None:
        return
    flat, treedef = jax.tree.flatten(jax.ShapeDtypeStruct((0,), jnp.int8)
                                     if embedding is None else embedding)
    leaves = tuple((tuple(x.shape), np.dtype(x.dtype)) for x in flat)
    per_tree = _bytes_per_tree(num_actions, max_nodes, (treedef, leaves), graph)
    need = batch_size * per_tree
    if need <= device_bytes:
        return
    raise ValueError(
        f"the search trees need {need:,} bytes ({need / GIB:.1f} GiB: B={batch_size} trees "
        f"of max_nodes={max_nodes} slots and {num_actions} actions, {per_tree:,} bytes "
        f"each), more than the {device_bytes:,} bytes of device memory. Lower max_nodes "
        "(default num_simulations + 1) or the batch size: "
        "jaxpuct.memory.trees_that_fit(device_bytes, num_actions, max_nodes, "
        f"embedding=...) gives the largest batch that fits ({device_bytes // per_tree} "
        "here).")

"""How many search trees fit in a device's memory.

The tree is the search's largest array set: ``B`` trees of ``N`` node slots cost
``B * N * bytes_per_node`` plus a few bytes per tree (the root prior and the node
count). :meth:`jaxpuct.Tree.bytes_per_node` gives the per-node cost of every
stored array, so the calculator builds one tree (``B = 1``) of the requested shape
and reads it off
(shapes only, with ``jax.eval_shape``). Only the tree is counted: the network's activations, the
optimiser state, a replay buffer and XLA's temporaries need their own share of
memory (pass ``fraction < 1`` to keep it free).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.graph import GraphConfig
from jaxpuct.roots import init_tree
from jaxpuct.tree import Tree
from jaxpuct.types import RootFnOutput

__all__ = ["GIB", "TreeMemory", "tree_memory", "trees_that_fit"]

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
    return init_tree(root, max_nodes, graph=graph)


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

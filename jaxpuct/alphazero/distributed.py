"""Several processes, one run: ``jax.distributed`` set-up and host reads of the state.

Every process runs the same program (SPMD). After :func:`initialize`,
``jax.devices()`` lists the devices of all processes, so ``Trainer(config)`` builds
its mesh over all of them: each process holds the games of its own devices
(``NamedSharding(mesh, P("batch"))``) and a copy of everything replicated, and the
train step's gradient average runs as a cross-process all-reduce. See "Multi-host"
in the JAX documentation ("Using JAX in multi-host and multi-process
environments").

On CPU, cross-process collectives need an implementation chosen before the
backend starts: :func:`initialize` selects Gloo (``jax_cpu_collectives_implementation
= "gloo"``), which ships with jaxlib. GPUs and TPUs bring their own (NCCL, ICI) and
ignore that option.

A sharded array is not readable as a whole from one process (its other shards
live in other processes): :func:`host_value` gathers it onto every process first
(replicated by a jitted identity, or ``multihost_utils.process_allgather``), and
:func:`digest` hashes what it gathers, the same on every process and the same as a
one-process run of the same batch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["BatchMesh", "digest", "host_value", "initialize"]


class BatchMesh(NamedTuple):
    """A one-axis mesh ``"batch"`` over the devices, and its two placements: ``batch``
    splits a leading axis over the devices (the games, a training batch's rows),
    ``replicated`` keeps a copy on each (network, optimiser state, replay buffer).
    AlphaZero's ``Trainer`` and the MuZero example place their state with it."""

    mesh: Mesh
    batch: NamedSharding
    replicated: NamedSharding

    @classmethod
    def over(cls, devices: Sequence[Any] | None = None, **sizes: int) -> BatchMesh:
        """The mesh over ``devices`` (default: all of ``jax.devices()``).

        Raises:
          ValueError: one of ``sizes`` (``name=size``, the axes that will be split) is
            not a multiple of the number of devices.
        """
        devices = list(devices) if devices is not None else jax.devices()
        for name, size in sizes.items():
            if size % len(devices):
                raise ValueError(f"{name} ({size}) must be a multiple of the number of "
                                 f"devices ({len(devices)})")
        mesh = Mesh(np.array(devices), ("batch",))
        return cls(mesh, NamedSharding(mesh, PartitionSpec("batch")),
                   NamedSharding(mesh, PartitionSpec()))


def initialize(coordinator_address: str, num_processes: int, process_id: int, *,
               cpu_collectives: str = "gloo") -> None:
    """Joins this process to a run of ``num_processes`` (call before any other JAX
    use: the backend must not have started).

    Args:
      coordinator_address: ``"host:port"`` of process 0 (it listens there).
      num_processes: processes in the run, ``>= 1``.
      process_id: this process, in ``[0, num_processes)``.
      cpu_collectives: CPU cross-process collectives (``"gloo"``, or ``"mpi"`` where
        jaxlib was built with it).

    Raises:
      ValueError: a bad argument (named, with the expected and the actual value).
    """
    if isinstance(num_processes, bool) or not isinstance(num_processes, int) \
            or num_processes < 1:
        raise ValueError(f"num_processes must be an int >= 1, got {num_processes!r}")
    if isinstance(process_id, bool) or not isinstance(process_id, int) \
            or not 0 <= process_id < num_processes:
        raise ValueError(f"process_id must be an int in [0, {num_processes}), "
                         f"got {process_id!r}")
    if not isinstance(coordinator_address, str) or ":" not in coordinator_address:
        raise ValueError(f"coordinator_address must be 'host:port', got "
                         f"{coordinator_address!r}")
    jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    jax.distributed.initialize(coordinator_address=coordinator_address,
                               num_processes=num_processes, process_id=process_id)


def _is_split(x: Any) -> bool:
    """A ``jax.Array`` with shards in other processes."""
    return isinstance(x, jax.Array) and not (x.is_fully_addressable or x.is_fully_replicated)


def host_value(tree: Any) -> Any:
    """``tree`` with every array leaf as a whole NumPy array on this host (sharded
    leaves gathered from all processes; a collective: call it in every process).

    The leaves on a ``NamedSharding`` are replicated by one jitted identity (one
    compilation for the whole tree, where ``process_allgather`` compiles one per
    leaf shape); others go through ``process_allgather``.
    """
    leaves, treedef = jax.tree.flatten(tree)
    named = [i for i, x in enumerate(leaves)
             if _is_split(x) and isinstance(x.sharding, NamedSharding)]
    if named:
        out = tuple(NamedSharding(leaves[i].sharding.mesh, PartitionSpec()) for i in named)
        gathered = jax.jit(lambda *xs: xs, out_shardings=out)(*(leaves[i] for i in named))
        for i, x in zip(named, gathered, strict=True):
            leaves[i] = x
    if any(_is_split(x) for x in leaves):
        from jax.experimental import multihost_utils
        leaves = [multihost_utils.process_allgather(x, tiled=True) if _is_split(x) else x
                  for x in leaves]
    return treedef.unflatten([np.asarray(jax.device_get(x)) for x in leaves])


def digest(tree: Any) -> str:
    """SHA-256 over the dtypes, shapes and bytes of :func:`host_value` of ``tree``'s
    leaves, in tree order (a collective: call it in every process)."""
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(host_value(tree)):
        array = np.ascontiguousarray(leaf)
        h.update(f"{array.dtype}{array.shape}".encode())
        h.update(array.tobytes())
    return h.hexdigest()

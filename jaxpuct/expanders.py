"""Expanders: what an unexpanded edge becomes when the search evaluates it.

An expander is called once per search step on all the leaf edges of the batch
(``M = B * K`` edges with ``K`` leaves per step, row ``b * K + k``)::

    expander(params, key, embedding [M, ...], action [M], needed [M])
        -> (NodeData [M], counts)

``embedding`` holds the parents' stored embeddings, ``action`` the edges taken,
``needed`` which rows will be stored (the others are walks that ended on an
existing node; an expander may skip work for them, but must return data of the
same shapes). ``counts`` is any pytree of scalars that the engine sums over the
search (for example the model calls made), ``None`` for none; the expander's
``initial_counts()`` gives its zeros.

:class:`RecurrentExpander` is the mctx ``recurrent_fn`` contract. The chance
nodes of Stochastic MuZero have their own (:mod:`jaxpuct.stochastic`), and a
learned model or a sampled-action model is another expander; the engine sees
them only through this signature.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import jax
import jax.numpy as jnp

from jaxpuct import graph as graph_lib
from jaxpuct import validation
from jaxpuct.indexing import row_take, take_once
from jaxpuct.numerics import finite_or_zero, prior_and_legal
from jaxpuct.tree import NodeData, Tree
from jaxpuct.types import RecurrentFn
from jaxpuct.walk import Walk


class Expander(Protocol):
    """``(params, key, embedding [M, ...], action [M], needed [M]) -> (NodeData
    [M], counts)`` with ``initial_counts()`` (module docstring)."""

    def __call__(self, params: Any, rng_key: jax.Array, embedding: Any,
                 action: jax.Array, needed: jax.Array) -> tuple[NodeData, Any]: ...

    def initial_counts(self) -> Any: ...


@dataclasses.dataclass(frozen=True)
class RecurrentExpander:
    """An mctx ``recurrent_fn`` as an expander, with its output sanitised:
    non-finite rewards, discounts and values read as 0, priors from
    :func:`jaxpuct.numerics.prior_and_legal`, and a state with no legal action is
    terminal. The new embedding must have the parent's structure, shapes and
    dtypes.

    Attributes:
      recurrent_fn: ``(params, key, action [M], embedding) -> (RecurrentFnOutput,
        embedding)``.
      num_actions: ``A``.
      graph: the tree's ``GraphConfig`` (the expander then reads state hashes),
        or ``None``.
    """

    recurrent_fn: RecurrentFn
    num_actions: int
    graph: graph_lib.GraphConfig | None = None

    def __call__(self, params: Any, rng_key: jax.Array, embedding: Any,
                 action: jax.Array, needed: jax.Array) -> tuple[NodeData, Any]:
        del needed  # one call on every row: the network sees a fixed batch
        batch_size, num_actions = action.shape[0], self.num_actions
        output, new_embedding = validation.unpack_recurrent_result(
            self.recurrent_fn(params, rng_key, action, embedding))
        validation.check_recurrent_output(output, new_embedding, batch_size, num_actions,
                                          embedding)
        legal = getattr(output, "legal_action_mask", None)
        legal = (jnp.ones((batch_size, num_actions), jnp.bool_) if legal is None
                 else legal.astype(jnp.bool_))
        terminal = getattr(output, "terminal", None)
        terminal = (jnp.zeros((batch_size,), jnp.bool_) if terminal is None
                    else terminal.astype(jnp.bool_))
        prior, legal = prior_and_legal(output.prior_logits, legal)
        state_hash = None
        if self.graph is not None:
            state_hash = graph_lib.state_hash(self.graph, output, new_embedding,
                                              "recurrent_fn output")
            validation.check_hash("recurrent_fn state hash", state_hash, batch_size)
        node = NodeData(
            reward=finite_or_zero(output.reward),
            discount=finite_or_zero(output.discount),
            value=finite_or_zero(output.value),
            prior=prior,
            legal=legal,
            terminal=terminal | ~jnp.any(legal, axis=-1),
            embedding=new_embedding,
            state_hash=state_hash,
        )
        return node, None

    def initial_counts(self) -> Any:
        return None


def evaluate_walks(params: Any, rng_key: jax.Array, tree: Tree, walks: Walk,
                   expander: Expander, step: jax.Array | None = None) -> tuple[NodeData, Any]:
    """Calls ``expander`` once on the last edges of ``walks [K, B]`` (one call on
    ``[B * K]`` rows, row ``b * K + k``) and returns the new nodes ``[K, B, ...]``
    (the layout of the path records) and the expander's counts.

    ``step`` (a scalar ``>= 0``, the search loop's counter) is only the counter of
    :func:`jaxpuct.indexing.take_once`; without it the parents' smallest index
    serves."""
    batch_size, num_walks = tree.batch_size, walks.num_walks
    parents, actions = walks.leaf_edge()

    def gather(nodes: jax.Array) -> Any:
        return jax.tree.map(
            lambda x: row_take(x, nodes.T).reshape((-1,) + x.shape[2:]), tree.embeddings)

    # With one tree, XLA re-gathered the parents' embeddings inside every fusion
    # that reads them, not ordered before the new nodes' writes, and copied every
    # embedding array of the tree twice per simulation: 2.4x the time of a B = 1
    # tic-tac-toe simulation on CPU (``benchmarks/single_search.py``).
    counter = jnp.min(parents) if step is None else step
    embedding = take_once(counter, gather, parents, batch_size)
    flat, counts = expander(params, rng_key, embedding, actions.T.reshape(-1),
                            walks.expand.T.reshape(-1))
    leaves = jax.tree.map(
        lambda x: jnp.swapaxes(x.reshape((batch_size, num_walks) + x.shape[1:]), 0, 1), flat)
    return leaves, counts

"""New trees from the roots: ``init_tree`` and the root's legal mask.

Kept apart from ``tree`` (the data layout) and ``search`` (the loop) because
both the search, the policies and tree reuse start trees from roots.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp

from jaxpuct import graph as graph_lib
from jaxpuct import validation
from jaxpuct.graph import GraphConfig
from jaxpuct.numerics import finite_or_zero, prior_and_legal
from jaxpuct.tree import ILLEGAL, UNEXPANDED, Tree


def root_legal_mask(root: Any, invalid_actions: chex.Array | None) -> chex.Array:
    """``[B, A]`` bool: the root's legal mask AND NOT ``invalid_actions``
    (shapes checked by the caller). ``-inf`` logits are handled by
    :func:`jaxpuct.numerics.prior_and_legal`, not here."""
    batch_size, num_actions = root.prior_logits.shape
    legal = getattr(root, "legal_action_mask", None)
    legal = (jnp.ones((batch_size, num_actions), jnp.bool_) if legal is None
             else legal.astype(jnp.bool_))
    if invalid_actions is not None:
        legal = legal & ~invalid_actions.astype(jnp.bool_)
    return legal


def root_prior_and_legal(root: Any, invalid_actions: chex.Array | None
                         ) -> tuple[chex.Array, chex.Array]:
    """The root's network prior ``[B, A]`` and legal mask ``[B, A]``."""
    return prior_and_legal(root.prior_logits, root_legal_mask(root, invalid_actions))


def check_init_args(root: Any, max_nodes: int, root_prior: chex.Array | None,
                    invalid_actions: chex.Array | None, graph: GraphConfig | None
                    ) -> tuple[int, int]:
    """Checks ``init_tree``'s arguments; returns ``(batch_size, num_actions)``."""
    batch_size, num_actions = validation.check_root(root)
    validation.check_int("max_nodes", max_nodes, 1)
    if root_prior is not None:
        validation.check_shape("root_prior", root_prior, (batch_size, num_actions))
    if invalid_actions is not None:
        validation.check_shape("invalid_actions", invalid_actions, (batch_size, num_actions))
    validation.check_instance("graph", graph, GraphConfig, allow_none=True)
    validation.check_trees_fit_device(root, max_nodes, graph)
    return batch_size, num_actions


def init_tree(
    root: Any,
    max_nodes: int,
    root_prior: chex.Array | None = None,
    invalid_actions: chex.Array | None = None,
    graph: GraphConfig | None = None,
) -> Tree:
    """A batch of trees holding only their roots.

    Args:
      root: ``RootFnOutput`` (jaxpuct's or mctx's): ``prior_logits [B, A]``,
        ``value [B]``, ``embedding [B, ...]``, optional ``legal_action_mask``.
      max_nodes: node capacity ``N`` of each tree (>= 1).
      root_prior: optional ``[B, A]`` prior to select with at the root (e.g.
        with Dirichlet noise); defaults to the network prior.
      invalid_actions: optional ``[B, A]`` bool, ``True`` where an action must
        not be taken at the root (mctx's convention).
      graph: graph-search options; the root's hash is read from
        ``root.state_hash`` or ``graph.hash_fn(root.embedding)``.

    Returns:
      ``Tree`` with ``[B, max_nodes, ...]`` arrays and ``num_nodes == 1``.
    """
    check_init_args(root, max_nodes, root_prior, invalid_actions, graph)
    return new_tree(root, max_nodes, root_prior, invalid_actions, graph)


def new_tree(root: Any, max_nodes: int, root_prior: chex.Array | None,
             invalid_actions: chex.Array | None, graph: GraphConfig | None) -> Tree:
    """``init_tree`` without the argument checks (callers checked them once)."""
    prior, legal = root_prior_and_legal(root, invalid_actions)
    return build_tree(root, prior, legal, max_nodes, root_prior, graph)


def build_tree(root: Any, prior: chex.Array, legal: chex.Array, max_nodes: int,
               root_prior: chex.Array | None, graph: GraphConfig | None) -> Tree:
    """A tree of roots from their network ``prior [B, A]`` and ``legal [B, A]`` mask
    (from :func:`root_prior_and_legal`), selecting with ``root_prior [B, A]`` at the
    root (default: ``prior``)."""
    batch_size, num_actions = prior.shape
    if root_prior is None:
        root_prior = prior
    value = finite_or_zero(root.value)

    def node_array(root_value, fill, dtype):
        array = jnp.full((batch_size, max_nodes), fill, dtype)
        return array.at[:, Tree.ROOT_INDEX].set(root_value)

    def edge_array(root_row, fill, dtype):
        array = jnp.full((batch_size, max_nodes, num_actions), fill, dtype)
        return array.at[:, Tree.ROOT_INDEX].set(root_row)

    embeddings = jax.tree.map(
        lambda x: jnp.zeros((batch_size, max_nodes) + x.shape[1:], x.dtype)
        .at[:, Tree.ROOT_INDEX].set(x), root.embedding)
    tree = Tree(
        node_visits=node_array(1, 0, jnp.int32),
        raw_values=node_array(value, 0.0, jnp.float32),
        node_values=node_array(value, 0.0, jnp.float32),
        node_rewards=jnp.zeros((batch_size, max_nodes), jnp.float32),
        node_discounts=jnp.zeros((batch_size, max_nodes), jnp.float32),
        node_terminal=node_array(~jnp.any(legal, axis=-1), False, jnp.bool_),
        embeddings=embeddings,
        children_index=edge_array(jnp.where(legal, UNEXPANDED, ILLEGAL), UNEXPANDED,
                                  jnp.int32),
        children_prior=edge_array(prior, 0.0, jnp.float32),
        edge_visits=jnp.zeros((batch_size, max_nodes, num_actions), jnp.int32),
        root_prior=jnp.where(legal, root_prior.astype(jnp.float32), 0.0),
        num_nodes=jnp.ones((batch_size,), jnp.int32),
    )
    if graph is None:
        return tree
    root_hash = graph_lib.state_hash(graph, root, root.embedding, "root")
    validation.check_hash("root state hash", root_hash, batch_size)
    return graph_lib.with_graph_arrays(tree, graph, root_hash)

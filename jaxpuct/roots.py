"""Trees from roots: ``init_tree``, the root's legal mask, Dirichlet noise on the
root prior, and the tree a search starts from (:func:`prepare_tree`: a new tree,
or a continued one restricted to the root's new mask and prior, with every
extension's fields).

Kept apart from ``tree`` (the data layout) and ``engine`` (the loop) because
the search, the policies and tree reuse all start trees from roots.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import chex
import jax
import jax.numpy as jnp

from jaxpuct import extensions as ext_lib
from jaxpuct import graph as graph_lib
from jaxpuct import prng, validation
from jaxpuct.extensions import Extension
from jaxpuct.graph import GraphConfig
from jaxpuct.numerics import finite_or_zero, masked_softmax, prior_and_legal
from jaxpuct.tree import ILLEGAL, UNEXPANDED, Tree


def root_legal_mask(root: Any, invalid_actions: jax.Array | None) -> jax.Array:
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


def root_prior_and_legal(root: Any, invalid_actions: jax.Array | None
                         ) -> tuple[jax.Array, jax.Array]:
    """The root's network prior ``[B, A]`` and legal mask ``[B, A]``."""
    return prior_and_legal(root.prior_logits, root_legal_mask(root, invalid_actions))


def check_init_args(root: Any, max_nodes: int, root_prior: jax.Array | None,
                    invalid_actions: jax.Array | None, graph: GraphConfig | None
                    ) -> tuple[int, int]:
    """Checks ``init_tree``'s arguments; returns ``(batch_size, num_actions)``."""
    batch_size, num_actions = validation.check_root(root)
    validation.check_int("max_nodes", max_nodes, 1)
    if root_prior is not None:
        validation.check_shape("root_prior", root_prior, (batch_size, num_actions))
    if invalid_actions is not None:
        validation.check_mask("invalid_actions", invalid_actions, (batch_size, num_actions))
    validation.check_instance("graph", graph, GraphConfig, allow_none=True)
    validation.check_trees_fit_device(root, max_nodes, graph)
    return batch_size, num_actions


def init_tree(
    root: Any,
    max_nodes: int,
    root_prior: jax.Array | None = None,
    invalid_actions: jax.Array | None = None,
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
    return _jitted_new_tree(root, max_nodes, root_prior, invalid_actions, graph)


def new_tree(root: Any, max_nodes: int, root_prior: jax.Array | None,
             invalid_actions: jax.Array | None, graph: GraphConfig | None) -> Tree:
    """``init_tree`` without the argument checks (callers checked them once)."""
    prior, legal = root_prior_and_legal(root, invalid_actions)
    return build_tree(root, prior, legal, max_nodes, root_prior, graph)


# A tree is a few dozen array operations: called outside jit, each would compile on
# its own (about 1.1 CPU-s per new shape on CPU, against 0.2-0.3 s as one program).
# Under an enclosing jit the inner one is inlined.
_jitted_new_tree = jax.jit(new_tree, static_argnums=(1, 4))


def build_tree(root: Any, prior: jax.Array, legal: jax.Array, max_nodes: int,
               root_prior: jax.Array | None, graph: GraphConfig | None) -> Tree:
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


def prepare_tree(
    root: Any,
    num_simulations: int,
    *,
    max_nodes: int | None,
    invalid_actions: jax.Array | None,
    root_prior: jax.Array | None,
    tree: Tree | None,
    graph: GraphConfig | None,
    extensions: Sequence[Extension] = (),
    root_prior_legal: tuple[jax.Array, jax.Array] | None = None,
) -> Tree:
    """Checks a search's tree arguments once and returns the tree to search.

    A new tree is built from ``root`` (``root_prior_legal``: its ``(prior, legal)``
    when the caller computed them already) with capacity ``max_nodes`` (default
    ``num_simulations + 1``). A given ``tree`` gets ``invalid_actions`` and
    ``root_prior`` applied to its root; its capacity and ``GraphConfig`` are its
    own, so ``max_nodes`` and ``graph``, when given, must agree with them. Then
    every extension's ``prepare`` runs; a continued tree's solver proofs are
    dropped when no extension keeps them up to date, and its early-stopping
    state always (each search makes its own).
    """
    validation.check_int("num_simulations", num_simulations, 1)
    validation.check_instance("graph", graph, GraphConfig, allow_none=True)
    continued = tree is not None
    if tree is None:
        if max_nodes is None:
            max_nodes = num_simulations + 1
        check_init_args(root, max_nodes, root_prior, invalid_actions, graph)
        if max_nodes < num_simulations + 1:
            warnings.warn(
                f"max_nodes={max_nodes} < num_simulations + 1 = {num_simulations + 1}: "
                "the tree fills up and later leaves are evaluated but not stored, which "
                "weakens the search. Give max_nodes >= num_simulations + 1 (more with "
                "tree reuse).", UserWarning, stacklevel=4)
        prior, legal = (root_prior_and_legal(root, invalid_actions)
                        if root_prior_legal is None else root_prior_legal)
        tree = build_tree(root, prior, legal, max_nodes, root_prior, graph)
    else:
        validation.check_continued_tree(tree, root, max_nodes, graph)
        shape = (tree.batch_size, tree.num_actions)
        if invalid_actions is not None:
            validation.check_mask("invalid_actions", invalid_actions, shape)
        if root_prior is not None:
            validation.check_shape("root_prior", root_prior, shape)
        if tree.max_nodes < num_simulations + 1:
            warnings.warn(
                f"the tree to continue has max_nodes={tree.max_nodes} < num_simulations + 1 "
                f"= {num_simulations + 1}: even with nothing inherited, later leaves are "
                "evaluated but not stored (summary().unstored_leaves counts them). Build "
                "trees for reuse with room for the kept subtree and a new search, e.g. "
                "max_nodes = 2 * num_simulations.", UserWarning, stacklevel=4)
        tree = restrict_root(tree, invalid_actions, root_prior)
        if graph is not None:
            tree = tree.replace(graph=graph)  # same storage: only the walk may differ
    if not any(getattr(e, "keeps_proofs", False) for e in extensions):
        tree = tree.replace(proof_plies=None)
    # Early stopping's state belongs to one search: a new one starts without it.
    tree = tree.replace(early_stop=None)
    return ext_lib.prepare(extensions, tree, continued)


def restrict_root(tree: Tree, invalid_actions: jax.Array | None,
                  root_prior: jax.Array | None) -> Tree:
    """Applies a new root mask and root prior (``[B, A]``, shapes checked) to an
    existing tree. An action made invalid loses its subtree from the root's view."""
    children = tree.children_index[:, Tree.ROOT_INDEX]
    if invalid_actions is not None:
        children = jnp.where(invalid_actions.astype(jnp.bool_), ILLEGAL, children)
    legal = children != ILLEGAL
    prior = tree.root_prior if root_prior is None else root_prior
    return tree.replace(
        children_index=tree.children_index.at[:, Tree.ROOT_INDEX].set(children),
        root_prior=jnp.where(legal, prior.astype(jnp.float32), 0.0),
        node_terminal=tree.node_terminal.at[:, Tree.ROOT_INDEX].set(
            tree.node_terminal[:, Tree.ROOT_INDEX] | ~jnp.any(legal, axis=-1)))


def dirichlet_noise(
    rng_keys: jax.Array,
    prior: jax.Array,
    legal: jax.Array,
    fraction: chex.Numeric,
    alpha: chex.Numeric,
) -> jax.Array:
    """``(1 - fraction) * P + fraction * Dir(alpha)`` over the legal actions only.

    AlphaZero (Silver et al. 2018) uses ``fraction = 0.25`` and ``alpha``
    about 10 / (typical number of legal moves): 0.3 for chess, 0.03 for Go.

    Args:
      rng_keys: ``[B]`` keys, one per tree.
      prior: ``[B, A]`` probabilities (zero at illegal actions).
      legal: ``[B, A]`` bool.
      fraction: mixing weight in [0, 1].
      alpha: concentration (> 0).

    Returns:
      ``[B, A]`` probabilities; illegal actions keep zero mass.
    """
    num_actions = prior.shape[-1]
    # Normalised in log space (Dirichlet = gammas over their sum): with Go's alpha of
    # 0.03 most gamma draws are below float32's smallest number, their logs are not.
    log_gammas = jnp.where(legal, prng.log_gamma(rng_keys, alpha, (num_actions,)), -jnp.inf)
    top = jnp.max(log_gammas, axis=-1, keepdims=True)
    weights = jnp.exp(log_gammas - jnp.where(jnp.isfinite(top), top, 0.0))
    total = jnp.sum(weights, axis=-1, keepdims=True)
    count = jnp.maximum(jnp.sum(legal, axis=-1, keepdims=True), 1)
    # A traced alpha that is not a positive finite number gives NaN draws: uniform.
    drawn = (total > 0) & jnp.isfinite(total)
    noise = jnp.where(drawn, weights / jnp.where(drawn, total, 1.0), legal / count)
    return jnp.asarray((1.0 - fraction) * prior + fraction * noise)


def root_noise(rng_keys: jax.Array, prior: jax.Array, legal: jax.Array,
               fraction: chex.Numeric, alpha: chex.Numeric,
               noise: jax.Array | None = None) -> jax.Array:
    """The root prior ``[B, A]`` to select with: ``prior [B, A]`` mixed with
    Dirichlet noise drawn per tree (:func:`dirichlet_noise`, over ``legal [B, A]``),
    or with the given ``noise [B, A]`` probabilities.

    Given noise is mixed as ``mctx.muzero_policy`` mixes its own draw,
    ``(1 - fraction) * prior + fraction * noise``, and made a prior the way mctx
    makes one from the result: the softmax of ``log(max(p, tiny))``, here over the
    legal actions. So ``noise = jax.random.dirichlet(jax.random.split(key, 3)[1],
    jnp.full([A], alpha), (B,))`` reproduces mctx's root prior for ``key``.
    """
    if noise is None:
        return dirichlet_noise(rng_keys, prior, legal, fraction, alpha)
    validation.check_shape("dirichlet", noise, prior.shape)
    mixed = (1 - fraction) * prior + fraction * jnp.asarray(noise, jnp.float32)
    return masked_softmax(jnp.log(jnp.maximum(mixed, jnp.finfo(jnp.float32).tiny)), legal)

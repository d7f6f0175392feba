"""The batch of search trees: one frozen dataclass of fixed-size arrays.

Layout (``B`` trees, ``N = max_nodes`` node slots, ``A`` actions):

* node arrays ``[B, N]``: visit count, raw network value ``U(n)``, search value
  ``Q(n)``, the reward and discount of the edge that leads *into* the node,
  and a terminal flag; the embedding pytree ``[B, N, ...]``.
* edge arrays ``[B, N, A]``: child index, prior probability and edge visit
  count ``N(n, a)``. Nothing else is stored per edge: an edge's reward and
  discount live on the child it leads to (in a tree every node has exactly one
  incoming edge; graph search assumes they are a function of the child state),
  an edge's Q is read from the child, and legality is a child-index code
  (``ILLEGAL``). That is 12 bytes per edge where mctx stores 24.

A node slot is used when its index is below ``num_nodes``. Node 0 is the root.
The root is created with one visit (its own evaluation), so after ``S``
simulations ``node_visits[:, 0] == S + 1`` and the root's edge visits sum to
``S`` (mctx's convention).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import jax
import jax.numpy as jnp

from jaxpuct._dataclass import Replaceable, pytree_dataclass
from jaxpuct.indexing import row_set, row_take
from jaxpuct.numerics import gather_rows
from jaxpuct.types import SearchSummary

if TYPE_CHECKING:
    from jaxpuct.early_stop import StopState
    from jaxpuct.graph import GraphConfig

_T = TypeVar("_T")

UNEXPANDED = -1  # a legal edge with no child node yet
ILLEGAL = -2  # an edge that may never be selected


@dataclasses.dataclass(frozen=True)
class ChanceLayout:
    """The node kinds of a tree with chance nodes (static; hashable).

    Attributes:
      num_actions: ``A``, edges of a decision node.
      num_outcomes: ``C``, edges of a chance node. The edge arrays have width
        ``max(A, C)``; the edges past a node's own count are ``ILLEGAL``.
    """

    num_actions: int
    num_outcomes: int

    @property
    def width(self) -> int:
        return max(self.num_actions, self.num_outcomes)


@dataclasses.dataclass(frozen=True)
class SampledLayout:
    """The edge layout of a tree of sampled actions (static; hashable;
    :mod:`jaxpuct.sampled`).

    Attributes:
      num_samples: ``K``, the edge slots of every node (the width of the edge
        arrays); slot ``k`` of node ``n`` stands for the action stored in
        ``tree.embeddings.actions[:, n, k]``.
      space: the action space the samples were drawn from (a frozen
        :class:`jaxpuct.sampled.DiscreteActions` or
        :class:`jaxpuct.sampled.GaussianActions`).
      prior_correction: how the prior over the slots was made
        (``"inclusion"`` or ``"uniform"``, see :mod:`jaxpuct.sampled`).
    """

    num_samples: int
    space: Any
    prior_correction: str = "inclusion"


@dataclasses.dataclass(frozen=True)
class Tree:
    """A batch of search trees (or graphs, when ``graph`` is set).

    Three fields are static (part of the pytree structure, not arrays): ``graph``,
    the ``GraphConfig`` the tree was built for (``None`` for a tree),
    ``chance``, the :class:`ChanceLayout` of a tree with chance nodes (``None``
    without), and ``sampled``, the :class:`SampledLayout` of a tree whose edges
    are ``K`` sampled actions (``None`` for one whose edges are all ``A``
    actions). A continued search and tree reuse read them, so they cannot
    disagree with how the tree was built.

    Attributes:
      node_visits: ``[B, N]`` int32 visit count ``N(n)``.
      raw_values: ``[B, N]`` float32 network value ``U(n)`` (exact if terminal).
      node_values: ``[B, N]`` float32 search value ``Q(n)``, from the view of
        the player to move at ``n``.
      node_rewards: ``[B, N]`` float32 reward of the edge into ``n``.
      node_discounts: ``[B, N]`` float32 discount of the edge into ``n``.
      node_terminal: ``[B, N]`` bool, ``True`` for nodes that are never
        expanded: terminal states and states with no legal action.
      embeddings: pytree with leaves ``[B, N, ...]``.
      children_index: ``[B, N, A]`` int32 child node, ``UNEXPANDED`` (-1) or
        ``ILLEGAL`` (-2).
      children_prior: ``[B, N, A]`` float32 prior probability from the network
        (never noised; root noise lives in ``root_prior``).
      edge_visits: ``[B, N, A]`` int32 edge visit count ``N(n, a)``.
      root_prior: ``[B, A]`` float32 prior used for selection at the root (the
        network prior, with Dirichlet noise if the policy added it).
      num_nodes: ``[B]`` int32 number of used node slots.
      node_hash: ``[B, N, 2]`` uint32 state hashes (graph search) or ``None``.
      hash_table: ``[B, T]`` int32 transposition table (graph search) or
        ``None``.
      edge_rewards: ``[B, N, A]`` float32 reward per edge, or ``None``. Only
        graph search with ``GraphConfig(edge_rewards=True)`` stores them: there
        a child can be reached through edges with different rewards.
      edge_discounts: ``[B, N, A]`` float32 discount per edge, or ``None``
        (stored with ``edge_rewards``).
      node_sq_values: ``[B, N]`` float32 mean of the *squared* returns backed
        up through each node (the second moment next to ``node_values``), or
        ``None``. Stored only when something needs the variance of a node's
        returns (LCB move selection, variance-scaled cPUCT); 4 bytes per node.
      proof_plies: ``[B, N]`` int32 MCTS-solver proofs (``jaxpuct.solver``), or
        ``None`` when the solver is off: ``-1`` for an unproven node, else the
        plies of its proof (0 at a terminal node). A proven node's ``node_values``
        holds its exact value. 4 bytes per node.
      early_stop: :class:`jaxpuct.early_stop.StopState` (``[B]`` arrays: the
        walks left, which trees may stop, the walks a stopped tree skipped) of a
        search with early stopping, or ``None``. It belongs to one search: a continued
        search or ``subtree`` starts without it.
      minmax_low: ``[B]`` float32 the lowest ``Q(s, a)`` any backup of this
        search wrote anywhere in the tree, or ``None``: the tree-wide min-max
        bounds of ``PUCTConfig(minmax_bounds="tree")`` (:class:`jaxpuct.extensions.TreeMinMax`;
        ``+inf`` before the first backup).
      minmax_high: ``[B]`` float32 the highest such ``Q(s, a)`` (``-inf`` before the
        first backup), or ``None``.
      graph: static ``GraphConfig`` of a graph, or ``None``.
      chance: static :class:`ChanceLayout` of a tree with chance nodes, or ``None``.
      sampled: static :class:`SampledLayout` of a tree of sampled actions, or
        ``None``.
    """

    node_visits: jax.Array
    raw_values: jax.Array
    node_values: jax.Array
    node_rewards: jax.Array
    node_discounts: jax.Array
    node_terminal: jax.Array
    embeddings: Any
    children_index: jax.Array
    children_prior: jax.Array
    edge_visits: jax.Array
    root_prior: jax.Array
    num_nodes: jax.Array
    node_hash: jax.Array | None = None
    hash_table: jax.Array | None = None
    edge_rewards: jax.Array | None = None
    edge_discounts: jax.Array | None = None
    node_sq_values: jax.Array | None = None
    proof_plies: jax.Array | None = None
    early_stop: StopState | None = None
    minmax_low: jax.Array | None = None
    minmax_high: jax.Array | None = None
    graph: GraphConfig | None = None
    chance: ChanceLayout | None = None
    sampled: SampledLayout | None = None

    ROOT_INDEX: ClassVar[int] = 0

    def replace(self, **changes: Any) -> Tree:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    @property
    def kind(self) -> str:
        """``"tree"``, ``"graph"``, ``"stochastic"`` (chance nodes) or ``"sampled"``
        (sampled actions)."""
        if self.chance is not None:
            return "stochastic"
        if self.sampled is not None:
            return "sampled"
        return "graph" if self.graph is not None else "tree"

    @property
    def batch_size(self) -> int:
        return self.children_index.shape[0]

    @property
    def max_nodes(self) -> int:
        return self.children_index.shape[1]

    @property
    def num_actions(self) -> int:
        return self.children_index.shape[2]

    @property
    def is_graph(self) -> bool:
        return self.graph is not None

    def qvalues(self, node_index: jax.Array) -> jax.Array:
        """``[B, A]`` edge values ``Q(n, a) = r + discount * Q(child)``.

        ``node_index`` is ``[B]``; edges with no child node read 0.
        """
        children = gather_rows(self.children_index, node_index)
        return edge_qvalues(self, node_index, children)

    def summary(self) -> SearchSummary:
        """Root statistics: visit counts ``[B, A]``, their normalisation, ``Q(root)``
        ``[B]`` and ``Q(root, a)`` ``[B, A]``.

        A tree with extra leading axes (returned by ``jax.vmap`` over a policy:
        ``[V, B, N, A]`` edge arrays) gives one summary per batch, ``[V, B, A]``.
        """
        if self.children_index.ndim > 3:
            # Every leaf carries the extra axes (vmap maps them all): map them off.
            return jax.vmap(Tree.summary)(self)
        root = jnp.full((self.batch_size,), self.ROOT_INDEX, jnp.int32)
        counts = self.edge_visits[:, self.ROOT_INDEX]
        total = jnp.sum(counts, axis=-1, keepdims=True)
        probs = jnp.where(total > 0, counts / jnp.maximum(total, 1), 0.0)
        return SearchSummary(
            visit_counts=counts,
            visit_probs=probs.astype(jnp.float32),
            value=self.node_values[:, self.ROOT_INDEX],
            qvalues=self.qvalues(root),
            unstored_leaves=self.unstored_leaves(),
            simulations_saved=None if self.early_stop is None else self.early_stop.saved,
        )

    def unstored_leaves(self) -> jax.Array:
        """``[B]`` int32 leaves evaluated but not stored (the tree was full): the
        visits of edges that still have no child. Every other visited edge got its
        child when its leaf was stored, so this is exact; it includes those a
        reused subtree inherited. O(B * N * A), outside the search loop."""
        unstored = self.children_index == UNEXPANDED
        return jnp.sum(jnp.where(unstored, self.edge_visits, 0), axis=(1, 2), dtype=jnp.int32)

    def bytes_per_node(self) -> dict[str, int]:
        """Bytes each stored array costs per node slot (per tree), by name."""
        out = {}
        for name in ("node_visits", "raw_values", "node_values", "node_rewards",
                     "node_discounts", "node_terminal", "children_index",
                     "children_prior", "edge_visits", "node_hash", "edge_rewards",
                     "edge_discounts", "node_sq_values", "proof_plies"):
            array = getattr(self, name)
            if array is not None:
                out[name] = array[0, 0].size * array.dtype.itemsize
        out["embeddings"] = sum(x[0, 0].size * x.dtype.itemsize
                                for x in jax.tree.leaves(self.embeddings))
        if self.hash_table is not None:
            table_bytes = self.hash_table[0].size * self.hash_table.dtype.itemsize
            out["hash_table"] = table_bytes // self.max_nodes
        return out


_TREE_META = ("graph", "chance", "sampled")
jax.tree_util.register_dataclass(
    Tree, data_fields=[f.name for f in dataclasses.fields(Tree) if f.name not in _TREE_META],
    meta_fields=list(_TREE_META))


@pytree_dataclass
class NodeData(Replaceable):
    """What a new node holds, for each tree of the batch (already sanitised).

    Attributes:
      reward: ``[B]`` reward of the edge into the node.
      discount: ``[B]`` discount of that edge.
      value: ``[B]`` network value ``U(n)`` (exact when ``terminal``).
      prior: ``[B, A]`` prior probabilities (zero at illegal actions).
      legal: ``[B, A]`` bool.
      terminal: ``[B]`` bool: never expanded.
      embedding: pytree with leaves ``[B, ...]``.
      state_hash: ``[B, 2]`` uint32 (graph search) or ``None``.
    """

    reward: jax.Array
    discount: jax.Array
    value: jax.Array
    prior: jax.Array
    legal: jax.Array
    terminal: jax.Array
    embedding: Any
    state_hash: jax.Array | None = None


def present(value: _T | None, name: str) -> _T:
    """``value``, an optional field that the tree's mode guarantees is set (a graph's
    hash table, the solver's proof plies, the edge discounts beside the edge rewards).

    Raises ``ValueError`` naming the field when it is ``None`` (a broken invariant, not
    a user's input); for a type checker it narrows ``T | None`` to ``T``.
    """
    if value is None:
        raise ValueError(f"{name} is None here; this tree's mode requires it to be set.")
    return value


def write_nodes(tree: Tree, slot: jax.Array, node: NodeData) -> Tree:
    """Writes ``node`` into slot ``slot [B]`` of each tree, with one visit.

    A slot ``>= max_nodes`` writes nothing for that tree (``mode="drop"``), so
    callers mask trees that store nothing by pointing them past the end.
    ``num_nodes`` is not changed here.
    """
    tree_axis = slot.ndim - 1  # slot [B], or [K, B] for K leaves of each tree

    def put(array, update):
        return row_set(array, slot, update, tree_axis=tree_axis)

    edge_codes = jnp.where(node.legal, UNEXPANDED, ILLEGAL).astype(jnp.int32)
    tree = tree.replace(
        node_visits=put(tree.node_visits, 1),
        raw_values=put(tree.raw_values, node.value),
        node_values=put(tree.node_values, node.value),
        node_rewards=put(tree.node_rewards, node.reward),
        node_discounts=put(tree.node_discounts, node.discount),
        node_terminal=put(tree.node_terminal, node.terminal),
        embeddings=jax.tree.map(put, tree.embeddings, node.embedding),
        children_index=put(tree.children_index, edge_codes),
        children_prior=put(tree.children_prior, node.prior),
        edge_visits=put(tree.edge_visits, jnp.zeros_like(tree.edge_visits[:, 0])),
    )
    if tree.is_graph:
        tree = tree.replace(node_hash=put(tree.node_hash, node.state_hash))
    if tree.node_sq_values is not None:
        tree = tree.replace(node_sq_values=put(tree.node_sq_values, node.value * node.value))
    if tree.proof_plies is not None:
        # The solver's seeds: a terminal node's value is exact, proven in 0 plies.
        tree = tree.replace(proof_plies=put(tree.proof_plies, jnp.where(node.terminal, 0, -1)))
    return tree


def with_second_moment(tree: Tree) -> Tree:
    """``tree`` with ``node_sq_values [B, N]`` (unchanged if it has them).

    Added to a searched tree, the second moment starts at ``Q(n)**2``: the
    variance of the returns seen so far reads as 0 until new returns arrive.
    """
    if tree.node_sq_values is not None:
        return tree
    return tree.replace(node_sq_values=tree.node_values * tree.node_values)


def store_nodes(tree: Tree, parent: jax.Array, action: jax.Array, store: jax.Array,
                node: NodeData) -> Tree:
    """Stores ``node`` as the child of edge ``(parent [B], action [B])`` in the next
    free slot of each tree where ``store [B]`` (the caller checked there is room)."""
    slot = jnp.where(store, tree.num_nodes, tree.max_nodes)
    tree = write_nodes(tree, slot, node)
    tree = tree.replace(num_nodes=tree.num_nodes + store.astype(jnp.int32))
    return link_children(tree, parent, action, slot, store)


def link_children(tree: Tree, parent: jax.Array, action: jax.Array,
                  child: jax.Array, where: jax.Array) -> Tree:
    """Points edge ``(parent [B], action [B])`` at ``child [B]`` where ``where [B]``."""
    parent = jnp.where(where, parent, tree.max_nodes)
    return tree.replace(children_index=row_set(tree.children_index, (parent, action), child))


def edge_qvalues(tree: Tree, node: jax.Array, children: jax.Array) -> jax.Array:
    """``[B, A]`` values ``Q(n, a) = r(n, a) + discount(n, a) * Q(child)``; 0 where no child.

    ``node`` is ``[B]``, ``children`` its ``[B, A]`` child indices (negative
    for none). Rewards and discounts come from the edge arrays when the tree
    stores them, else from the child node.
    """
    has_child = children >= 0
    safe = jnp.where(has_child, children, 0)
    if tree.edge_rewards is not None:
        reward = gather_rows(tree.edge_rewards, node)
        discount = gather_rows(present(tree.edge_discounts, "tree.edge_discounts"), node)
    else:
        reward = row_take(tree.node_rewards, safe)
        discount = row_take(tree.node_discounts, safe)
    q = reward + discount * row_take(tree.node_values, safe)
    return jnp.where(has_child, q, 0.0)

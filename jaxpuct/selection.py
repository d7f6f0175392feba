"""The PUCT family of selection rules, as one configuration and one score function.

The score of action ``a`` at a node ``s`` is ``Q̃(s, a) + U(s, a)`` and the
search takes the legal action with the highest score (lowest index on ties, or one
of them at random: ``tie_break``).

Exploration term ``U`` (``form``):

* ``"puct"``: ``c(s) * P(s, a) * N(s)**exponent / (1 + N(s, a))`` -- AlphaGo
  (Silver et al. 2016) and AlphaZero (Silver et al. 2018) with
  ``exponent = 0.5``; other exponents give "polynomial PUCT".
* ``"uct_log"``: ``c(s) * P(s, a) * sqrt(log(1 + N(s) + log_offset) / (1 + N(s, a)))``,
  the UCB1-like variant of the PUCT literature (Rosin 2011, "Multi-armed bandits
  with episode context").
* ``"ucb1"``: ``c(s) * sqrt(log(N(s) + log_offset) / N(s, a))`` with ``N(s, a)``
  floored at 1 and ``N(s)`` at 1: UCT's exploration term (Kocsis and Szepesvari
  2006, from UCB1 of Auer et al. 2002), which ignores the prior. UCT tries every
  unvisited action first: :meth:`PUCTConfig.uct` pairs the form with
  ``unvisited_q="fixed"`` at :data:`UNVISITED_FIRST`, as OpenSpiel's ``MCTSBot``.

Exploration weight ``c(s)``: ``c_init`` when ``c_base is None``, else the
AlphaZero schedule ``c_init + log((N(s) + c_base + 1) / c_base)``.

Parent count ``N(s)`` (``parent_visits``): ``"edge_sum"`` is ``Σ_b N(s, b)``
(AlphaZero's pseudocode, KataGo); ``"node"`` is the node's own visit count,
one more than the sum in a tree (mctx's convention). With ``"edge_sum"`` the
``N(s)**exponent`` factor uses ``max(N(s), 1)``, so the first visit of a node
follows the prior rather than the action index (KataGo adds 0.01 for the same
reason).

Value of unvisited actions (``unvisited_q``):

* ``"zero"``: 0.
* ``"parent"``: the node's own search value ``Q(s)``.
* ``"fpu"``: first-play urgency reduction ``Q(s) - r * sqrt(Σ_{visited b} P(s, b))``
  with ``r = fpu_reduction_root`` at the root and ``fpu_reduction`` elsewhere
  (Leela Zero, KataGo).
* ``"fixed"``: ``unvisited_value`` (for example -1, "assume a loss").
* ``"min"``: the minimum of ``Q(s)`` and the visited ``Q(s, b)`` (mctx's
  ``qtransform_by_parent_and_siblings``).

Q normalisation (``q_normalization``): ``"none"`` (values assumed in [-1, 1]) or
``"minmax"``: ``(Q - lo) / max(hi - lo, 1e-8)`` with ``lo``/``hi`` the min/max
of ``Q(s)`` and the visited ``Q(s, b)`` (mctx's default).

Min-max bounds (``minmax_bounds``): ``"node"`` takes ``lo``/``hi`` at each node as
above (mctx's ``muzero_policy``); ``"tree"`` widens them by the bounds of the
whole tree, one pair per search as the MuZero pseudocode's ``MinMaxStats``
(Schrittwieser et al. 2020, appendix B): the lowest and highest ``Q(s, a)`` any
backup of the search wrote (``Tree.minmax_low``/``minmax_high``, kept by
:class:`jaxpuct.extensions.TreeMinMax`). Widening by the node's own bounds keeps
the first visits, before any backup, as mctx's. With ``unvisited_q="min"`` an
unvisited action then sits at the bottom of the tree's range, the pseudocode's
``value_score = 0``.

Both are string presets of functions (``UNVISITED_Q``, ``Q_NORMALIZATIONS``), as
mctx's Q transforms are functions: a config may name a function of the same
signature instead (``unvisited_q=fn`` with ``fn(UnvisitedInputs) -> [B, 1] or
[B, A]``, ``q_normalization=fn`` with ``fn(q [B, A], lo [B, 1], hi [B, 1])``),
so a new rule needs no edit of the library. Give a module-level function: it is
part of the config's hash, a lambda made anew each call recompiles.

Variance-scaled exploration (``utility_stdev_scale > 0``; KataGo, "KataGo
methods", dynamic variance-scaled cPUCT): ``c(s)`` is multiplied by
``F = 1 + scale * (σ(s) / σ_prior - 1)`` where ``σ(s)`` is the standard
deviation of the returns backed up through ``s``, shrunk towards ``σ_prior``
with weight ``w`` (KataGo: scale 0.85, prior 0.40, weight 2)::

    σ(s)**2 = ((Q**2 + σ_prior**2) * w + E[X**2] * W) / (w + W - 1) - Q**2

with ``W = N(s)`` and ``E[X**2]`` the node's second moment
(``Tree.node_sq_values``, stored when such a rule is used). ``F = 1`` while
``W <= 1`` (nothing seen beyond the node's own evaluation).

``PUCTConfig.mctx_muzero()`` reproduces the selection of
``mctx.muzero_policy`` exactly: log schedule with ``c_init=1.25``,
``c_base=19652``, ``N(s)`` = the node's own count, unvisited Q = min, min-max
normalisation. mctx additionally adds ``1e-7 * uniform`` noise to break ties; jaxpuct
breaks ties by lowest index unless ``tie_noise > 0``.

Ties (``tie_break``): ``"first"`` takes the lowest index among the actions of the
highest score (mctx's ``argmax`` without its noise); ``"random"`` draws one of them
uniformly from each tree's key, exactly, where ``tie_noise`` adds noise to every
score. The two differ where ties are the rule: UCT's unvisited actions all score
:data:`UNVISITED_FIRST`, so ``"first"`` tries them lowest index first in every
search, while OpenSpiel's ``MCTSBot`` shuffles a node's actions when it expands it
(a uniformly random order of first visits, which ``"random"`` gives too: each
step draws among the untried ones), and ``tie_noise`` cannot break them (float32
has no room for it beside :data:`UNVISITED_FIRST`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal, NamedTuple, get_args

import jax
import jax.numpy as jnp

from jaxpuct import prng, validation
from jaxpuct.numerics import argmax_by_priority, gather_rows, key_uniform
from jaxpuct.tree import ILLEGAL, Tree, edge_qvalues

Form = Literal["puct", "uct_log", "ucb1"]
ParentVisits = Literal["edge_sum", "node"]
TieBreak = Literal["first", "random"]
UnvisitedQ = Literal["zero", "parent", "fpu", "fixed", "min"]
QNormalization = Literal["none", "minmax"]
MinMaxBounds = Literal["node", "tree"]
# The value UCT gives an unvisited action (UCB1's infinite bonus): above any visited
# action's score (a value in [-1, 1] plus c * sqrt(log N), under 100 for c < 20 and
# any N a float32 can count) and exact in float32.
UNVISITED_FIRST = 1.0e6
# mctx's epsilon in its min-max Q normalisation (qtransform_by_min_max).
_MINMAX_EPSILON = 1e-8


@dataclasses.dataclass(frozen=True)
class PUCTConfig:
    """Hyper-parameters of the selection rule (static; hashable).

    Defaults: AlphaZero's exploration schedule (``c_init=1.25``,
    ``c_base=19652``, Silver et al. 2018) with ``N(s) = Σ_b N(s, b)``, and
    KataGo/Leela first-play urgency (``fpu_reduction=0.2`` inside the tree, 0 at
    the root where Dirichlet noise does the exploring); values in [-1, 1], not
    normalised.
    """

    c_init: float = 1.25
    c_base: float | None = 19652.0
    exponent: float = 0.5
    form: Form = "puct"
    log_offset: float = 0.0
    parent_visits: ParentVisits = "edge_sum"
    unvisited_q: UnvisitedQ | Callable[[UnvisitedInputs], jax.Array] = "fpu"
    fpu_reduction: float = 0.2
    fpu_reduction_root: float = 0.0
    unvisited_value: float = -1.0
    q_normalization: QNormalization | Callable[..., jax.Array] = "none"
    minmax_bounds: MinMaxBounds = "node"
    tie_noise: float = 0.0
    tie_break: TieBreak = "first"
    utility_stdev_scale: float = 0.0
    utility_stdev_prior: float = 0.40
    utility_stdev_prior_weight: float = 2.0

    @property
    def needs_tree_bounds(self) -> bool:
        """Whether the rule reads ``Tree.minmax_low``/``minmax_high``."""
        return self.minmax_bounds == "tree"

    @property
    def needs_second_moment(self) -> bool:
        """Whether the rule reads ``Tree.node_sq_values``."""
        return self.utility_stdev_scale > 0

    def __post_init__(self):
        for name, kind in (("form", Form), ("parent_visits", ParentVisits),
                           ("minmax_bounds", MinMaxBounds), ("tie_break", TieBreak)):
            validation.check_choice(f"PUCTConfig.{name}", getattr(self, name), get_args(kind))
        for name, kind in (("unvisited_q", UnvisitedQ), ("q_normalization", QNormalization)):
            if not callable(getattr(self, name)):
                validation.check_choice(f"PUCTConfig.{name}", getattr(self, name),
                                        get_args(kind))
        if self.minmax_bounds == "tree" and self.q_normalization == "none":
            raise ValueError(
                "PUCTConfig.minmax_bounds='tree' needs a Q normalisation that reads the "
                "bounds: expected q_normalization='minmax' (or a function), got 'none'.")
        if not self.c_init >= 0:
            raise ValueError(f"PUCTConfig.c_init must be >= 0, got {self.c_init}.")
        if self.c_base is not None and not self.c_base > 0:
            raise ValueError(f"PUCTConfig.c_base must be > 0 or None, got {self.c_base}.")
        if not self.exponent > 0:
            raise ValueError(f"PUCTConfig.exponent must be > 0, got {self.exponent}.")
        if not self.log_offset >= 0:
            raise ValueError(f"PUCTConfig.log_offset must be >= 0, got {self.log_offset}.")
        for name in ("utility_stdev_scale", "utility_stdev_prior_weight"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"PUCTConfig.{name} must be >= 0, got {getattr(self, name)}.")
        if not self.utility_stdev_prior > 0:
            raise ValueError("PUCTConfig.utility_stdev_prior must be > 0, got "
                             f"{self.utility_stdev_prior}.")
        if not self.tie_noise >= 0:
            raise ValueError(f"PUCTConfig.tie_noise must be >= 0, got {self.tie_noise}.")
        if not (self.fpu_reduction >= 0 and self.fpu_reduction_root >= 0):
            raise ValueError(
                "PUCTConfig.fpu_reduction and fpu_reduction_root must be >= 0, got "
                f"{self.fpu_reduction} and {self.fpu_reduction_root}.")

    @classmethod
    def mctx_muzero(cls, c_init: float = 1.25, c_base: float = 19652.0,
                    minmax_bounds: MinMaxBounds = "node") -> PUCTConfig:
        """The selection rule of ``mctx.muzero_policy`` (its defaults); with
        ``minmax_bounds="tree"`` the pseudocode's one pair of bounds per search."""
        return cls(c_init=c_init, c_base=c_base, parent_visits="node",
                   unvisited_q="min", q_normalization="minmax", minmax_bounds=minmax_bounds)

    @classmethod
    def uct(cls, c: float = 2.0, tie_break: TieBreak = "first") -> PUCTConfig:
        """UCT (Kocsis and Szepesvari 2006) as OpenSpiel's ``MCTSBot`` selects:
        ``Q(s, a) + c * sqrt(log N(s) / N(s, a))`` with ``N(s)`` the node's own visit
        count, the prior ignored, every unvisited action tried first: the lowest
        index first with ``tie_break="first"``, in a uniformly random order with
        ``"random"`` (as OpenSpiel, which shuffles a node's actions). For a search
        without a network (uniform prior, random rollouts), where AlphaZero's rule,
        made to follow a prior, explores too little. Values are not normalised:
        ``c`` is in the values' unit, as OpenSpiel's."""
        return cls(c_init=c, c_base=None, form="ucb1", parent_visits="node",
                   unvisited_q="fixed", unvisited_value=UNVISITED_FIRST, tie_break=tie_break)

    @classmethod
    def alphago(cls, c_puct: float = 1.5) -> PUCTConfig:
        """AlphaGo's constant ``c_puct`` with unvisited Q = 0 (Silver et al. 2016)."""
        return cls(c_init=c_puct, c_base=None, unvisited_q="zero")


def exploration_weight(config: PUCTConfig, parent_count: jax.Array) -> jax.Array:
    """``c(s)`` for ``parent_count [B]`` -> ``[B]``."""
    if config.c_base is None:
        return jnp.full(parent_count.shape, config.c_init, jnp.float32)
    return config.c_init + jnp.log((parent_count + config.c_base + 1.0) / config.c_base)


def utility_stdev_factor(config: PUCTConfig, value: jax.Array, sq_value: jax.Array,
                         weight: jax.Array) -> jax.Array:
    """KataGo's exploration factor ``F`` (see the module docstring) ``[B]`` from a
    node's mean return ``value [B]``, mean squared return ``sq_value [B]`` and
    visit count ``weight [B]``."""
    weight = jnp.asarray(weight, jnp.float32)
    prior = config.utility_stdev_prior
    prior_weight = config.utility_stdev_prior_weight
    value_sq = value * value
    # Rounding can put E[X**2] a hair below Q**2; clamp as KataGo does.
    sq_value = jnp.maximum(sq_value, value_sq)
    denominator = jnp.maximum(prior_weight + weight - 1.0, 1e-8)
    variance = ((value_sq + prior * prior) * prior_weight + sq_value * weight) / denominator
    stdev = jnp.sqrt(jnp.maximum(variance - value_sq, 0.0))
    stdev = jnp.where(weight <= 1.0, prior, stdev)
    return 1.0 + config.utility_stdev_scale * (stdev / prior - 1.0)


def puct_scores(
    config: PUCTConfig,
    prior: jax.Array,
    edge_visits: jax.Array,
    edge_q: jax.Array,
    has_q: jax.Array,
    legal: jax.Array,
    parent_value: jax.Array,
    node_visits: jax.Array,
    is_root: jax.Array,
    uniform: jax.Array | None = None,
    explore_factor: jax.Array | None = None,
    bounds: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """Selection scores of every action at one node of each tree.

    Args:
      config: the rule.
      prior: ``[B, A]`` prior probabilities ``P(s, a)``.
      edge_visits: ``[B, A]`` ``N(s, a)``.
      edge_q: ``[B, A]`` ``Q(s, a)``; read only where ``has_q``.
      has_q: ``[B, A]`` bool, edges that were visited and have a child value.
      legal: ``[B, A]`` bool.
      parent_value: ``[B]`` the node's search value ``Q(s)``.
      node_visits: ``[B]`` the node's own visit count.
      is_root: scalar or ``[B]`` bool: use the root's FPU reduction.
      uniform: ``[B, A]`` uniform draws in [0, 1), scaled by ``tie_noise`` and
        added to the scores (needed only when ``tie_noise > 0``).
      explore_factor: optional ``[B]`` multiplier of ``c(s)`` (see
        :func:`utility_stdev_factor`).
      bounds: optional ``([B], [B])`` tree-wide lowest and highest Q that widen
        the node's own min-max bounds (``minmax_bounds="tree"``).

    Returns:
      ``[B, A]`` float32 scores, ``-inf`` at illegal actions.
    """
    edge_visits_f = edge_visits.astype(jnp.float32)
    if config.parent_visits == "edge_sum":
        parent_count = jnp.sum(edge_visits_f, axis=-1)
        count_for_u = jnp.maximum(parent_count, 1.0)
    else:
        parent_count = node_visits.astype(jnp.float32)
        count_for_u = parent_count
    c = exploration_weight(config, parent_count)
    if explore_factor is not None:
        c = c * explore_factor
    c = c[:, None]

    if config.form == "puct":
        if config.exponent == 0.5:
            growth = jnp.sqrt(count_for_u)
        else:
            growth = count_for_u ** config.exponent
        u = growth[:, None] * c * prior / (edge_visits_f + 1.0)
    elif config.form == "uct_log":
        log_term = jnp.log(1.0 + parent_count + config.log_offset)[:, None]
        u = c * prior * jnp.sqrt(log_term / (edge_visits_f + 1.0))
    else:  # ucb1
        log_term = jnp.log(jnp.maximum(parent_count, 1.0) + config.log_offset)[:, None]
        u = c * jnp.sqrt(log_term / jnp.maximum(edge_visits_f, 1.0))

    q = puct_qvalues(config, prior, edge_visits, edge_q, has_q, parent_value, is_root,
                     bounds)
    scores = q + u
    if config.tie_noise > 0:
        if uniform is None:
            raise ValueError("puct_scores: uniform draws are required when tie_noise > 0.")
        scores = scores + config.tie_noise * uniform
    return jnp.where(legal, scores, -jnp.inf)


class UnvisitedInputs(NamedTuple):
    """What an unvisited-Q rule reads at one node of each tree.

    Attributes:
      config: the ``PUCTConfig`` (for the rule's own constants).
      prior: ``[B, A]`` prior probabilities.
      edge_visits: ``[B, A]`` ``N(s, a)``.
      parent_value: ``[B, 1]`` the node's search value ``Q(s)``.
      low: ``[B, 1]`` the minimum of ``Q(s)`` and the visited ``Q(s, b)``.
      is_root: scalar or ``[B]`` bool.
    """

    config: PUCTConfig
    prior: jax.Array
    edge_visits: jax.Array
    parent_value: jax.Array
    low: jax.Array
    is_root: jax.Array


def unvisited_zero(x: UnvisitedInputs) -> jax.Array:
    """0 (AlphaGo)."""
    return jnp.zeros_like(x.parent_value)


def unvisited_parent(x: UnvisitedInputs) -> jax.Array:
    """The node's own search value ``Q(s)``."""
    return x.parent_value


def unvisited_fpu(x: UnvisitedInputs) -> jax.Array:
    """First-play urgency reduction ``Q(s) - r * sqrt(Σ_{visited b} P(s, b))``
    (Leela Zero, KataGo), ``r`` the config's root or interior reduction."""
    visited_mass = jnp.sum(jnp.where(x.edge_visits > 0, x.prior, 0.0), axis=-1, keepdims=True)
    reduction = jnp.where(jnp.reshape(x.is_root, (-1, 1)), x.config.fpu_reduction_root,
                          x.config.fpu_reduction)
    return x.parent_value - reduction * jnp.sqrt(visited_mass)


def unvisited_fixed(x: UnvisitedInputs) -> jax.Array:
    """The config's ``unvisited_value`` (for example -1, "assume a loss")."""
    return jnp.full_like(x.parent_value, x.config.unvisited_value)


def unvisited_min(x: UnvisitedInputs) -> jax.Array:
    """The minimum of ``Q(s)`` and the visited ``Q(s, b)`` (mctx's
    ``qtransform_by_parent_and_siblings``)."""
    return x.low


def normalize_none(q: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """Values used as they are (assumed in [-1, 1])."""
    del low, high
    return q


def normalize_minmax(q: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """``(Q - lo) / max(hi - lo, 1e-8)`` (mctx's ``qtransform_by_min_max``)."""
    return (q - low) / jnp.maximum(high - low, _MINMAX_EPSILON)


# The string presets of ``PUCTConfig.unvisited_q`` and ``q_normalization``; a
# function with the same signature may be given instead.
UNVISITED_Q: dict[str, Callable[[UnvisitedInputs], jax.Array]] = {
    "zero": unvisited_zero, "parent": unvisited_parent, "fpu": unvisited_fpu,
    "fixed": unvisited_fixed, "min": unvisited_min}
Q_NORMALIZATIONS: dict[str, Callable[[jax.Array, jax.Array, jax.Array], jax.Array]] = {
    "none": normalize_none, "minmax": normalize_minmax}


def puct_qvalues(
    config: PUCTConfig,
    prior: jax.Array,
    edge_visits: jax.Array,
    edge_q: jax.Array,
    has_q: jax.Array,
    parent_value: jax.Array,
    is_root: jax.Array,
    bounds: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """``[B, A]`` the Q part of the PUCT score: unvisited actions filled in by the
    config's ``unvisited_q`` rule and, if it says so, normalised. (Not Gumbel's
    completed Q, :func:`jaxpuct.gumbel.scaled_completed_qvalues`.) ``bounds``:
    optional ``([B], [B])`` tree-wide bounds that widen the node's."""
    parent_value = parent_value[:, None]
    known_q = jnp.where(has_q, edge_q, parent_value)
    lo = jnp.minimum(parent_value, jnp.min(known_q, axis=-1, keepdims=True))
    hi = jnp.maximum(parent_value, jnp.max(known_q, axis=-1, keepdims=True))
    if bounds is not None:
        lo = jnp.minimum(lo, bounds[0][:, None])
        hi = jnp.maximum(hi, bounds[1][:, None])
    rule = config.unvisited_q
    rule = UNVISITED_Q[rule] if isinstance(rule, str) else rule
    fill = rule(UnvisitedInputs(config, prior, edge_visits, parent_value, lo, is_root))
    q = jnp.where(has_q, edge_q, fill)
    norm = config.q_normalization
    norm = Q_NORMALIZATIONS[norm] if isinstance(norm, str) else norm
    return norm(q, lo, hi)


# A selection rule's signature: ``(tree, node [B], depth, keys [B]) -> action [B]``.
# ``depth`` is the walk's depth (a traced int32 scalar, 0 at the root) and
# ``keys`` one PRNG key per tree for that step (for tie-breaking noise).
ActionFn = Callable[[Tree, jax.Array, jax.Array, jax.Array], jax.Array]


@dataclasses.dataclass(frozen=True)
class SelectionRule:
    """How the walk picks an action: one function at the root, one below it.

    The walk calls ``root`` once per simulation at depth 0 and ``interior`` at
    every deeper step; each returns ``[B]`` legal actions. A PUCT rule uses the
    same score at both with different priors (noised at the root) and FPU
    reductions; Gumbel search (Danihelka et al. 2022) uses sequential halving at
    the root and a deterministic rule inside.
    """

    root: ActionFn
    interior: ActionFn


def node_scores(tree: Tree, config: PUCTConfig, node: jax.Array, is_root: bool,
                rng_keys: jax.Array) -> jax.Array:
    """``[B, A]`` PUCT scores at ``node [B]`` (``-inf`` at illegal actions).

    ``is_root`` (static) selects the root prior (with any noise) and the root's
    FPU reduction.
    """
    children = gather_rows(tree.children_index, node)
    visits = gather_rows(tree.edge_visits, node)
    prior = tree.root_prior if is_root else gather_rows(tree.children_prior, node)
    uniform = None
    if config.tie_noise > 0:
        # Each tree draws from its own key, so batch elements stay independent.
        uniform = prng.uniform(rng_keys, (tree.num_actions,))
    explore_factor = None
    if config.needs_second_moment:
        if tree.node_sq_values is None:
            raise ValueError("PUCTConfig.utility_stdev_scale > 0 needs the tree's second "
                             "moment: expected tree.node_sq_values, got None (build the tree "
                             "through jaxpuct.search / alphazero_policy).")
        explore_factor = utility_stdev_factor(
            config, gather_rows(tree.node_values, node), gather_rows(tree.node_sq_values, node),
            gather_rows(tree.node_visits, node))
    return puct_scores(
        config,
        prior=prior,
        edge_visits=visits,
        edge_q=edge_qvalues(tree, node, children),
        has_q=(children >= 0) & (visits > 0),
        legal=children != ILLEGAL,
        parent_value=gather_rows(tree.node_values, node),
        node_visits=gather_rows(tree.node_visits, node),
        is_root=jnp.asarray(is_root),
        uniform=uniform,
        explore_factor=explore_factor,
        bounds=tree_bounds(tree, config),
    )


def tree_bounds(tree: Tree, config: PUCTConfig) -> tuple[jax.Array, jax.Array] | None:
    """The tree-wide ``([B], [B])`` bounds that ``config`` reads (``None`` with
    ``minmax_bounds="node"``); a ``ValueError`` if the tree does not keep them."""
    if not config.needs_tree_bounds:
        return None
    if tree.minmax_low is None or tree.minmax_high is None:
        raise ValueError(
            "PUCTConfig.minmax_bounds='tree' needs the tree-wide bounds: expected "
            "tree.minmax_low and tree.minmax_high, got None (alphazero_policy, "
            "stochastic_policy, sampled_policy and jaxpuct.search keep them; this caller "
            "does not, so use minmax_bounds='node').")
    return tree.minmax_low, tree.minmax_high


def best_action(config: PUCTConfig, scores: jax.Array, rng_keys: jax.Array) -> jax.Array:
    """``[B]`` int32 the action of the highest score in ``scores [B, A]``, ties
    broken as ``config.tie_break`` says (``"random"``: uniformly from each tree's key
    of ``rng_keys [B]``). A row whose every score is ``-inf`` gives 0 in both
    modes."""
    if config.tie_break == "first":
        return jnp.argmax(scores, axis=-1).astype(jnp.int32)
    # A stream of its own, apart from tie_noise's draw from the same keys.
    return argmax_by_priority(scores, key_uniform(rng_keys, scores.shape[-1], 1))


def puct_rule(config: PUCTConfig) -> SelectionRule:
    """The PUCT ``SelectionRule`` of ``config``: the argmax of :func:`node_scores`
    (ties: ``config.tie_break``, after any ``tie_noise``)."""

    def choose(is_root: bool) -> ActionFn:
        def action(tree, node, depth, rng_keys):
            del depth
            scores = node_scores(tree, config, node, is_root, rng_keys)
            return best_action(config, scores, rng_keys)
        return action

    return SelectionRule(root=choose(True), interior=choose(False))

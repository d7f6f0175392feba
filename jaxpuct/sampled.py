"""Sampled search: PUCT over ``K`` sampled actions per node (Sampled MuZero).

Hubert, Schrittwieser, Antonoglou, Barekatain, Schmitt and Silver, "Learning and
Planning in Complex Action Spaces", ICML 2021. mctx has no such policy; LightZero
has one in C++ (its ``ctree_sampled_efficientzero``). Here it runs on the one
engine (:mod:`jaxpuct.engine`), with no loop of its own:

* **Layout.** The tree's edge arrays have width ``K`` (``num_samples``) instead of
  ``A``: slot ``k`` of node ``n`` stands for the action stored in the node's
  embedding (:class:`SampledEmbedding`): ``actions [B, N, K]`` int32 ids for a
  discrete space, ``[B, N, K, D]`` float32 vectors for a continuous one. "All
  ``A`` actions" is the special case ``K = A`` with ``actions[k] = k``. A node
  also stores the key its children's samples are drawn from (8 bytes): the
  samples of a node are a function of its path and the tree's own key, never of
  its batch row or the step it was expanded in, so a batch searched together
  equals its elements searched alone. The tree's static ``sampled`` field
  (:class:`jaxpuct.tree.SampledLayout`) says it is such a tree.
* **Expander** (:class:`SampledExpander`): maps the selected slot to its action,
  calls the user's ``recurrent_fn`` with that action, and draws the ``K``
  actions of the new node from the network's output.
* **Selection** is any rule of the library (PUCT by default) over the ``K``
  slots, with the sample-based prior below in ``children_prior``.

Sampling and the prior over the slots. The paper draws ``K`` actions from a
proposal ``β`` (here ``β = π``, the network's policy), takes ``β̂`` the empirical
distribution of the draws, and searches with the prior ``(β̂ / β) · π``
(normalised; with ``β = π`` that is ``β̂``), whose visit distribution then
estimates the improved policy restricted to the samples (section 4).

* **Discrete** (:class:`DiscreteActions`): the ``K`` actions are drawn *without
  replacement* by Gumbel-top-``K`` (Kool, van Hoof and Welling, "Stochastic
  Beams and Where to Find Them", ICML 2019): the ``K`` largest of
  ``log π(a) + g(a)``, ``g`` i.i.d. Gumbel(0, 1), over the legal actions (illegal
  and masked ones have ``log π = -inf`` and are never drawn; a node with
  ``L < K`` legal actions draws all ``L`` and its other ``K - L`` slots are
  ``ILLEGAL``). Distinct samples make ``β̂`` uniform, so the paper's formula read
  literally gives the uniform prior ``1 / K`` (what LightZero runs), which forgets
  ``π`` over the samples and does not become full-width search at ``K = A``.
  The default ``prior_correction="inclusion"`` keeps the paper's importance
  weight instead: for a sample drawn with replacement ``β̂(a) / β(a)`` is the
  count over its expectation; for a sample without replacement the analogue is
  the indicator ``1[a ∈ S]`` over its inclusion probability. Conditioned on the
  threshold ``κ``, the ``(K + 1)``-th largest perturbed value, that probability
  is ``q(a) = P(log π(a) + g > κ) = 1 - exp(-exp(log π(a) - κ))``, and
  ``E[1[a ∈ S] / q(a)] = 1`` (priority sampling; Duffield, Lund and Thorup 2007;
  Kool et al. 2019, "Estimating Gradients for Discrete Random Variables by
  Sampling without Replacement", ICLR 2020). The prior over slot ``k`` is::

      P(k) = (π(a_k) / q(a_k)) / Σ_j (π(a_j) / q(a_j))

  When every legal action is drawn (``K >= L``, ``κ = -inf``) every ``q = 1`` and
  ``P`` is exactly ``π``: with ``K = A`` the search *is* full-width search (the
  slots hold the actions in increasing id order, so slot ``k`` is action ``k``).
  ``prior_correction="uniform"`` gives ``P(k) = 1 / K`` (the literal ``β̂``).
* **Factored** (:class:`FactoredActions`): joint actions of ``F`` factors
  (``A = Π n_f``) under ``π = Π_f π_f``, the network giving ``Σ n_f`` logits.
  The same Gumbel-top-``K`` draw and prior, found by stochastic beam search
  (:mod:`jaxpuct.factored`) without the ``A`` joint logits.
* **Continuous** (:class:`GaussianActions`): the network's ``prior_logits`` are
  the parameters of a diagonal Gaussian, ``[mean (D), log_std (D)]``; the ``K``
  actions are i.i.d. draws, distinct almost surely, so ``β̂ = 1 / K`` per sample
  and ``(β̂ / β) · π`` with ``β = π`` is the uniform prior ``1 / K`` (both
  corrections). Actions are unbounded: squash or clip them in ``recurrent_fn``
  (LightZero applies ``tanh``).

The training target (:class:`SampledPolicyOutput`): the visit distribution over
the root's ``K`` slots (with temperature), together with the ``K`` actions it
refers to; the paper's policy loss is ``-Σ_k w_k log π(a_k)``
(:meth:`GaussianActions.log_prob` gives ``log π`` of the stored vectors).

What does not apply: graph search (a transposition of sampled-action nodes
would have to merge two different sample sets) and the MCTS-solver (a node is
proven lost only if *every* action loses, and the ``K`` samples are not every
action) are refused with a ``ValueError``. Tree reuse works through the slots:
``subtree(tree, output.action_slot)``; several leaves per step, root Dirichlet
noise (over the ``K`` slots), the LCB move and early stopping work as for
:func:`jaxpuct.alphazero_policy`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, NamedTuple

import chex
import jax
import jax.numpy as jnp

from jaxpuct import frame, prng, validation
from jaxpuct import gumbel as gumbel_lib
from jaxpuct._dataclass import Replaceable, pytree_dataclass
from jaxpuct.factored import stochastic_beam_top_k
from jaxpuct.final_move import choose_action, lcb_action, visit_policy
from jaxpuct.numerics import WEIGHT_FLOOR, finite_or_zero, prior_and_legal
from jaxpuct.policies import check_policy_numbers
from jaxpuct.roots import root_legal_mask
from jaxpuct.selection import PUCTConfig, SelectionRule
from jaxpuct.tree import NodeData, SampledLayout, Tree, present
from jaxpuct.types import RecurrentFn, RootFnOutput
from jaxpuct.virtual_loss import VirtualLoss

# The public names (reached as ``jaxpuct.sampled.*``; the two policies are also
# top-level); the API reference lists these.
__all__ = [
    "DiscreteActions",
    "GaussianActions",
    "SampledEmbedding",
    "SampledExpander",
    "SampledPolicyOutput",
    "gumbel_top_k",
    "sampled_gumbel_policy",
    "sampled_policy",
]

# K of Hubert et al. (2021) for control, and LightZero's default.
DEFAULT_NUM_SAMPLES = 20
PriorCorrection = Literal["inclusion", "uniform"]
PRIOR_CORRECTIONS = ("inclusion", "uniform")
# Folded into each tree's key to derive its sampling key, so the samples are
# independent of the frame's noise and move keys drawn from the same key.
_SAMPLE_SALT = 0x5A3D
# Below this, 1 - exp(-exp(z)) equals exp(z) to float32 precision (the error is
# exp(2z) / 2), and exp(z) itself would underflow further down.
_LOG_Q_SMALL = -20.0


class Samples(NamedTuple):
    """``K`` sampled actions per row.

    Attributes:
      actions: ``[M, K]`` int32 ids (discrete) or ``[M, K, D]`` float32 vectors.
      logits: ``[M, K]`` float32 log-weights of the prior over the slots (up to a
        per-row constant; ``-inf`` at invalid slots).
      valid: ``[M, K]`` bool, the slots that hold a drawn action.
      gumbel: ``[M, K]`` the Gumbel draws of the drawn actions (discrete; 0 at
        invalid slots), or ``None``: a Gumbel root reuses them.
      log_prior: ``[M, K]`` ``log π`` of the drawn actions (discrete; ``-inf``
        at invalid slots), or ``None``.
    """

    actions: jax.Array
    logits: jax.Array
    valid: jax.Array
    gumbel: jax.Array | None = None
    log_prior: jax.Array | None = None


@pytree_dataclass
class SampledEmbedding(Replaceable):
    """What a tree of sampled actions stores per node, in ``Tree.embeddings``.

    Attributes:
      state: the user's embedding pytree ``[B, ...]``.
      actions: the node's ``K`` sampled actions, ``[B, K]`` int32 or ``[B, K, D]``
        float32.
      key: ``[B, 2]`` uint32 (raw key data) the node's ``actions`` were drawn
        with; the child under slot ``k`` has key ``fold_in(key, k)``.
    """

    state: Any
    actions: jax.Array
    key: jax.Array


def _raw_keys(keys: jax.Array) -> jax.Array:
    """Keys as raw ``uint32`` data (typed key arrays cannot be stored with zeros)."""
    if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(keys)
    return keys


# --------------------------------------------------------------- discrete actions


def gumbel_top_k(log_prior: jax.Array, gumbel: jax.Array, num_samples: int
                 ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``K`` actions without replacement: the ``K`` largest ``log π + g``.

    Args:
      log_prior: ``[M, A]`` ``log π`` (``-inf`` at actions never to draw).
      gumbel: ``[M, A]`` standard Gumbel draws.
      num_samples: ``K`` in ``[1, A]``.

    Returns:
      ``(actions [M, K] int32, valid [M, K] bool, log_inclusion [M, K])``:
      the drawn ids in increasing order, valid slots first (an invalid slot,
      in a row with fewer than ``K`` drawable actions, holds id 0);
      ``log q(a_k) = log(1 - exp(-exp(log π(a_k) - κ)))`` with ``κ`` the
      ``(K + 1)``-th largest perturbed value (``-inf`` when ``K = A``), 0 at
      invalid slots (module docstring).
    """
    num_actions = log_prior.shape[-1]
    perturbed = log_prior + gumbel
    top, index = jax.lax.top_k(perturbed, num_samples)
    # κ: the largest perturbed value left out (-inf when K = A). Read as a max
    # over the rest rather than as entry K of a top-(K + 1): slicing top_k's
    # output sends XLA's CPU backend to a path 20x slower (measured at A = 1000).
    rows = jnp.arange(perturbed.shape[0])[:, None]
    kappa = jnp.max(perturbed.at[rows, index].set(-jnp.inf), axis=-1)
    valid = top > -jnp.inf
    # Increasing ids with the valid slots first: with K = A (all legal) slot k is
    # action k, which makes the search equal full-width search bit for bit.
    order = jnp.argsort(jnp.where(valid, index, num_actions + index), axis=-1)
    index = jnp.take_along_axis(index, order, axis=-1)
    valid = jnp.take_along_axis(valid, order, axis=-1)
    actions = jnp.where(valid, index, 0).astype(jnp.int32)
    log_q = log_inclusion(jnp.take_along_axis(log_prior, actions, axis=-1), kappa)
    return actions, valid, jnp.where(valid, log_q, 0.0)


def log_inclusion(log_prior: jax.Array, kappa: jax.Array) -> jax.Array:
    """``log q = log(1 - exp(-exp(log π - κ)))`` of ``log_prior [M, K]`` given the
    threshold ``kappa [M]`` (module docstring)."""
    z = log_prior - kappa[:, None]
    # log(1 - exp(-e^z)) through expm1 (exact near q = 1), and z itself where
    # e^z is tiny (q = e^z to float32 precision); z = +inf gives log 1 = 0.
    small = z < _LOG_Q_SMALL
    return jnp.where(small, z, jnp.log(-jnp.expm1(-jnp.exp(jnp.where(small, 0.0, z)))))


@dataclasses.dataclass(frozen=True)
class DiscreteActions:
    """``A`` discrete actions; the network's ``prior_logits`` are ``[B, A]`` logits
    (with an optional ``legal_action_mask [B, A]``). Samples are drawn without
    replacement by :func:`gumbel_top_k` (module docstring).

    Attributes:
      num_actions: ``A >= 1``.
    """

    num_actions: int

    def __post_init__(self):
        validation.check_int("DiscreteActions.num_actions", self.num_actions, 1)

    @property
    def params_width(self) -> int:
        """Width of ``prior_logits``: ``A``."""
        return self.num_actions

    @property
    def continuous(self) -> bool:
        return False

    def sample(self, keys: jax.Array, logits: jax.Array, legal: jax.Array,
               num_samples: int, correction: str) -> Samples:
        """``K`` distinct legal actions per row from ``logits [M, A]`` and ``legal
        [M, A]``, one row per key of ``keys [M]``."""
        prior, legal = prior_and_legal(logits, legal)
        log_prior = jnp.where(prior > 0, jnp.log(jnp.where(prior > 0, prior, 1.0)), -jnp.inf)
        gumbel = prng.gumbel(keys, (self.num_actions,))
        actions, valid, log_q = gumbel_top_k(log_prior, gumbel, num_samples)
        if correction == "uniform":
            slot_logits = jnp.zeros(actions.shape, jnp.float32)
        else:
            # The raw logits (not log π): they differ by a per-row constant, and
            # with every q = 1 the prior is then computed exactly as a full-width
            # node's (jaxpuct.numerics.prior_and_legal of the same numbers).
            raw = jnp.take_along_axis(logits.astype(jnp.float32), actions, axis=-1)
            slot_logits = raw - log_q
        return Samples(actions=actions, logits=jnp.where(valid, slot_logits, -jnp.inf),
                       valid=valid,
                       gumbel=jnp.where(valid, jnp.take_along_axis(gumbel, actions, -1), 0.0),
                       log_prior=jnp.where(valid, jnp.take_along_axis(log_prior, actions, -1),
                                           -jnp.inf))


@dataclasses.dataclass(frozen=True)
class FactoredActions:
    """``A = n_1 · … · n_F`` discrete joint actions under a factored policy
    ``π(a) = Π_f π_f(a_f)`` (e.g. one head per agent of a multi-agent move).

    The network's ``prior_logits`` are ``[B, Σ_f n_f]``: factor 0's ``n_0``
    logits, then factor 1's, and so on; a ``legal_action_mask`` (and the root's
    ``invalid_actions``) of the same width masks factor values. The ``K`` joint
    actions are drawn without replacement by stochastic beam search
    (:func:`jaxpuct.factored.stochastic_beam_top_k`): exactly the distribution of
    Gumbel-top-``K`` over the ``A`` joint logits, with its threshold ``κ`` for
    the same inclusion-probability prior, at ``O(K · Σ_f n_f)`` per node instead
    of ``O(A)``. A joint action is its mixed-radix id (factor 0 most
    significant), ``[B]`` int32 in ``recurrent_fn``; :meth:`decode` gives the
    factor values. A mask over joint actions that is not a product of factor
    masks cannot be expressed: make such a joint action terminal or penalised in
    ``recurrent_fn``.

    Attributes:
      factor_sizes: ``(n_1, …, n_F)``, each ``>= 1``, with ``Π n_f < 2^31``.
    """

    factor_sizes: tuple[int, ...]

    def __post_init__(self):
        if not isinstance(self.factor_sizes, tuple) or not self.factor_sizes:
            raise ValueError("FactoredActions.factor_sizes must be a non-empty tuple of ints, "
                             f"got {self.factor_sizes!r}.")
        for i, n in enumerate(self.factor_sizes):
            validation.check_int(f"FactoredActions.factor_sizes[{i}]", n, 1)
        if self.num_actions >= 2**31:
            raise ValueError("FactoredActions: the number of joint actions must be < 2^31 "
                             f"(int32 ids), got {self.num_actions} from {self.factor_sizes}.")

    @property
    def num_actions(self) -> int:
        """``A = Π n_f``, the joint actions."""
        out = 1
        for n in self.factor_sizes:
            out *= n
        return out

    @property
    def params_width(self) -> int:
        """Width of ``prior_logits``: ``Σ n_f``."""
        return sum(self.factor_sizes)

    @property
    def continuous(self) -> bool:
        return False

    def decode(self, ids: jax.Array) -> jax.Array:
        """Joint ids ``[...]`` -> factor values ``[..., F]`` int32."""
        values, rest = [], jnp.asarray(ids, jnp.int32)
        for n in reversed(self.factor_sizes):
            values.append(rest % n)
            rest = rest // n
        return jnp.stack(values[::-1], axis=-1)

    def encode(self, values: jax.Array) -> jax.Array:
        """Factor values ``[..., F]`` -> joint ids ``[...]`` int32."""
        ids = jnp.zeros(values.shape[:-1], jnp.int32)
        for f, n in enumerate(self.factor_sizes):
            ids = ids * n + values[..., f].astype(jnp.int32)
        return ids

    def joint_mask(self, mask: jax.Array, ids: jax.Array) -> jax.Array:
        """``[M, K]`` whether any factor value of the joint ``ids [M, K]`` is set in
        the factor-value mask ``mask [M, Σ n_f]``."""
        offsets = jnp.cumsum(jnp.array((0,) + self.factor_sizes[:-1]))
        columns = self.decode(ids) + offsets.astype(jnp.int32)
        hit = jnp.take_along_axis(mask, columns.reshape(ids.shape[0], -1), axis=-1)
        return jnp.any(hit.reshape(columns.shape), axis=-1)

    def sample(self, keys: jax.Array, logits: jax.Array, legal: jax.Array,
               num_samples: int, correction: str) -> Samples:
        """``K`` distinct joint actions per row from the factor logits ``[M, Σ n_f]``
        and their mask, one row per key of ``keys [M]``."""
        log_probs, start = [], 0
        for n in self.factor_sizes:
            prior, _ = prior_and_legal(logits[:, start:start + n], legal[:, start:start + n])
            log_probs.append(jnp.where(prior > 0, jnp.log(jnp.where(prior > 0, prior, 1.0)),
                                       -jnp.inf))
            start += n
        ids, log_prior, perturbed = stochastic_beam_top_k(keys, log_probs, num_samples + 1)
        kappa = (perturbed[:, num_samples] if perturbed.shape[1] > num_samples
                 else jnp.full(perturbed.shape[:1], -jnp.inf))
        ids, log_prior, perturbed = (x[:, :num_samples] for x in (ids, log_prior, perturbed))
        valid = perturbed > -jnp.inf
        # Increasing ids with the valid slots first, as DiscreteActions stores them.
        order = jnp.argsort(jnp.where(valid, ids, self.num_actions + ids), axis=-1)
        ids, log_prior, perturbed, valid = (jnp.take_along_axis(x, order, axis=-1)
                                            for x in (ids, log_prior, perturbed, valid))
        if correction == "uniform":
            slot_logits = jnp.zeros(ids.shape, jnp.float32)
        else:
            slot_logits = log_prior - log_inclusion(log_prior, kappa)
        return Samples(actions=jnp.where(valid, ids, 0).astype(jnp.int32),
                       logits=jnp.where(valid, slot_logits, -jnp.inf), valid=valid,
                       gumbel=jnp.where(valid, perturbed - log_prior, 0.0),
                       log_prior=jnp.where(valid, log_prior, -jnp.inf))


# ------------------------------------------------------------- continuous actions


@dataclasses.dataclass(frozen=True)
class GaussianActions:
    """``D``-dimensional continuous actions from a diagonal Gaussian policy.

    The network's ``prior_logits`` are ``[B, 2D]``: the mean ``[D]`` then
    ``log σ`` ``[D]``, clipped to ``[min_log_std, max_log_std]`` (DI-engine's
    ``ReparameterizationHead`` range, as LightZero uses). Samples are i.i.d.
    ``mean + σ · N(0, 1)``; the prior over them is uniform (module docstring).

    Attributes:
      action_dim: ``D >= 1``.
      min_log_std: lower clip of ``log σ`` (-20).
      max_log_std: upper clip of ``log σ`` (2).
    """

    action_dim: int
    min_log_std: float = -20.0
    max_log_std: float = 2.0

    def __post_init__(self):
        validation.check_int("GaussianActions.action_dim", self.action_dim, 1)
        if not self.min_log_std <= self.max_log_std:
            raise ValueError("GaussianActions.min_log_std must be <= max_log_std, got "
                             f"{self.min_log_std} > {self.max_log_std}.")

    @property
    def params_width(self) -> int:
        """Width of ``prior_logits``: ``2D``."""
        return 2 * self.action_dim

    @property
    def continuous(self) -> bool:
        return True

    def mean_and_log_std(self, params: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``[..., 2D]`` -> ``(mean [..., D], log σ [..., D])``, non-finite entries
        read as 0 and ``log σ`` clipped."""
        params = finite_or_zero(params)
        mean, log_std = params[..., :self.action_dim], params[..., self.action_dim:]
        return mean, jnp.clip(log_std, self.min_log_std, self.max_log_std)

    def log_prob(self, params: jax.Array, actions: jax.Array) -> jax.Array:
        """``log π(a)`` of ``actions [M, K, D]`` under ``params [M, 2D]`` -> ``[M, K]``."""
        mean, log_std = self.mean_and_log_std(params)
        z = (actions - mean[:, None]) * jnp.exp(-log_std)[:, None]
        return jnp.sum(-0.5 * z * z - log_std[:, None] - 0.5 * jnp.log(2 * jnp.pi), axis=-1)

    def sample(self, keys: jax.Array, params: jax.Array, legal: jax.Array | None,
               num_samples: int, correction: str) -> Samples:
        """``K`` i.i.d. vectors per row from ``params [M, 2D]`` (``legal`` is not
        read: every sample is an action)."""
        del legal, correction  # i.i.d. samples: β̂ = 1 / K either way
        mean, log_std = self.mean_and_log_std(params)
        noise = jax.vmap(lambda k: jax.random.normal(k, (num_samples, self.action_dim)))(keys)
        actions = mean[:, None] + jnp.exp(log_std)[:, None] * noise
        rows = params.shape[0]
        return Samples(actions=actions.astype(jnp.float32),
                       logits=jnp.zeros((rows, num_samples), jnp.float32),
                       valid=jnp.ones((rows, num_samples), jnp.bool_))


ActionSpace = DiscreteActions | FactoredActions | GaussianActions


def _refuse_joint_mask(space: ActionSpace, name: str, mask: Any) -> None:
    """A ``ValueError`` for a mask over the ``A`` joint actions of
    :class:`FactoredActions` (``name`` of ``mask``, ``[B, A]``): its masks are
    over factor values, ``[B, Σ n_f]``.

    A joint mask that is not a product of factor masks (two agents on one cell)
    is refused rather than supported: stochastic beam search draws the
    Gumbel-top-``K`` of the product policy factor by factor, and a joint
    constraint is known only for complete joint actions. Rejection is possible
    in principle: draw the top ``W > K`` of the product, keep the first ``K``
    that pass, with threshold ``κ`` the larger of the ``(K + 1)``-th passing
    value and the ``(W + 1)``-th overall (an action is then in the sample
    exactly when it passes and beats a threshold set by the others, so
    ``E[1[a ∈ S] / q(a)] = 1`` still holds). But a node where more than
    ``W - K`` rejected joint actions rank above the ``K``-th passing one gets
    fewer than ``K`` samples, nothing bounds that number (four agents crowding
    one corridor reject most joint moves), and the constraint would need the
    new node's state inside the sampler. Not built.
    """
    if (isinstance(space, FactoredActions) and mask is not None
            and space.num_actions != space.params_width
            and mask.shape[-1:] == (space.num_actions,)):
        raise ValueError(
            f"{name} has {space.num_actions} columns, one per joint action, got shape "
            f"{list(mask.shape)}; FactoredActions({space.factor_sizes}) masks factor "
            f"values: [B, {space.params_width}]. A joint-action mask that is not a product "
            "of factor masks cannot be drawn from factor by factor: search the "
            f"[B, {space.num_actions}] joint logits with DiscreteActions("
            f"{space.num_actions}), or make such joint actions void, terminal or "
            "penalised in recurrent_fn.")


# ---------------------------------------------------------------------- expander


def _draw(space: ActionSpace, keys: jax.Array, logits: jax.Array, legal: jax.Array | None,
          layout: SampledLayout) -> Samples:
    if isinstance(space, GaussianActions):
        return space.sample(keys, logits, legal, layout.num_samples, layout.prior_correction)
    # Discrete draws always get a mask (the root's, or the new node's).
    legal = present(legal, "the legal mask of discrete actions")
    return space.sample(keys, logits, legal, layout.num_samples, layout.prior_correction)


@dataclasses.dataclass(frozen=True)
class SampledExpander:
    """The user's ``recurrent_fn`` as an expander over sampled actions
    (:mod:`jaxpuct.expanders`): the selected slot is mapped to its stored action,
    ``recurrent_fn`` is called once on all ``M`` rows, and the new node draws its
    ``K`` actions from the output (row ``m`` with ``fold_in(parent key, slot)``).
    Output sanitising is :class:`jaxpuct.expanders.RecurrentExpander`'s: non-finite
    rewards, discounts and values read 0, and a node with no legal slot is terminal.

    Attributes:
      recurrent_fn: ``(params, key, action [M] or [M, D], state) ->
        (RecurrentFnOutput, state)`` with ``prior_logits [M, P]``.
      layout: the tree's :class:`jaxpuct.tree.SampledLayout`.
    """

    recurrent_fn: RecurrentFn
    layout: SampledLayout

    def __call__(self, params: Any, rng_key: jax.Array, embedding: SampledEmbedding,
                 action: jax.Array, needed: jax.Array) -> tuple[NodeData, Any]:
        del needed  # one call on every row: the network sees a fixed batch
        space = self.layout.space
        rows = action.shape[0]
        taken = embedding.actions[jnp.arange(rows), action]
        output, state = validation.unpack_recurrent_result(
            self.recurrent_fn(params, rng_key, taken, embedding.state))
        width = space.params_width
        legal = getattr(output, "legal_action_mask", None)
        _refuse_joint_mask(space, "recurrent_fn output .legal_action_mask", legal)
        validation.check_recurrent_output(output, state, rows, width, embedding.state)
        legal = (jnp.ones((rows, width), jnp.bool_) if legal is None
                 else legal.astype(jnp.bool_))
        terminal = getattr(output, "terminal", None)
        terminal = (jnp.zeros((rows,), jnp.bool_) if terminal is None
                    else terminal.astype(jnp.bool_))
        keys = prng.fold_in(embedding.key, action)
        samples = _draw(space, keys, output.prior_logits, legal, self.layout)
        prior, slot_legal = prior_and_legal(samples.logits, samples.valid)
        node = NodeData(
            reward=finite_or_zero(output.reward),
            discount=finite_or_zero(output.discount),
            value=finite_or_zero(output.value),
            prior=prior,
            legal=slot_legal,
            terminal=terminal | ~jnp.any(slot_legal, axis=-1),
            embedding=SampledEmbedding(state=state, actions=samples.actions, key=keys),
        )
        return node, None

    def initial_counts(self) -> Any:
        return None


# ------------------------------------------------------------------------ policy


@pytree_dataclass
class SampledPolicyOutput(Replaceable):
    """What :func:`sampled_policy` returns.

    Attributes:
      action: the action to play: ``[B]`` int32 id (``-1`` for a root with no
        legal action) or ``[B, D]`` float32 vector.
      action_slot: ``[B]`` int32 root slot of ``action`` (``-1`` where none):
        pass it to :func:`jaxpuct.subtree` to reuse the tree.
      action_weights: ``[B, K]`` the search policy over the root's slots (the
        training target; zero at invalid slots).
      sampled_actions: ``[B, K]`` int32 or ``[B, K, D]`` the actions the weights
        refer to (a slot that holds no sample, where fewer than ``K`` actions are
        legal, has weight 0 and a placeholder id: read the ids with the weights).
      search_tree: the ``Tree`` (edge width ``K``; ``tree.sampled`` set).
    """

    action: jax.Array
    action_slot: jax.Array
    action_weights: jax.Array
    sampled_actions: jax.Array
    search_tree: Tree


def _space_for(root: Any, tree: Tree | None, action_space: Any) -> ActionSpace:
    if action_space is not None:
        if not isinstance(action_space, (DiscreteActions, FactoredActions, GaussianActions)):
            raise ValueError("action_space must be a DiscreteActions, FactoredActions or "
                             "GaussianActions, "
                             f"got {action_space!r} of type {type(action_space).__name__}.")
        return action_space
    if tree is not None:
        validation.check_tree_object("tree", tree)
        if tree.sampled is not None:
            return tree.sampled.space
        return DiscreteActions(tree.num_actions)  # refused by the frame: not sampled
    return DiscreteActions(validation.check_root(root)[1])


def _check_num_samples(num_samples: int, space: ActionSpace) -> None:
    validation.check_int("num_samples", num_samples, 1)
    # FactoredActions too: its beam search returns at most A joint actions.
    if (isinstance(space, (DiscreteActions, FactoredActions))
            and num_samples > space.num_actions):
        raise ValueError(
            f"num_samples must be <= the number of actions A={space.num_actions} (samples "
            f"are drawn without replacement), got num_samples={num_samples}; "
            f"num_samples={space.num_actions} is full-width search.")


def _sampled_root(root: Any, rng_key: jax.Array, invalid_actions: jax.Array | None,
                  space: ActionSpace, layout: SampledLayout
                  ) -> tuple[RootFnOutput, Samples]:
    """The root as a width-``K`` ``RootFnOutput`` (its slot logits and valid slots,
    and a :class:`SampledEmbedding` holding the draws), and the draws."""
    batch_size, width = validation.check_root(root)
    if width != space.params_width:
        what = (f"[B, 2D] Gaussian parameters (mean, log_std) with D={space.action_dim}"
                if isinstance(space, GaussianActions) else
                f"the factor logits of {space.factor_sizes}, concatenated"
                if isinstance(space, FactoredActions) else "[B, A] logits")
        raise ValueError(f"root.prior_logits must have shape [B={batch_size}, "
                         f"{space.params_width}] ({what}), got {list(root.prior_logits.shape)}.")
    if invalid_actions is not None:
        if space.continuous:
            raise ValueError("invalid_actions is for discrete actions, got an array with "
                             f"{type(space).__name__}: continuous samples are all actions.")
        validation.check_mask("invalid_actions", invalid_actions, (batch_size, width))
    legal = root_legal_mask(root, invalid_actions) if not space.continuous else None
    element_keys = validation.split_keys(rng_key, batch_size)[1]
    keys = _raw_keys(prng.fold_in(element_keys, _SAMPLE_SALT))
    samples = _draw(space, keys, root.prior_logits, legal, layout)
    return RootFnOutput(
        prior_logits=samples.logits, value=root.value,
        embedding=SampledEmbedding(state=root.embedding, actions=samples.actions, key=keys),
        legal_action_mask=samples.valid), samples


def _refuse(graph: Any, solver: Any) -> None:
    if graph is not None:
        raise ValueError(
            f"graph={graph!r} is not supported with sampled actions: a transposition would "
            "merge nodes that drew different samples (their slots mean different actions). "
            "Use tree search (graph=None).")
    if solver not in (False, None):
        raise ValueError(
            f"solver={solver!r} is not supported with sampled actions: the MCTS-solver "
            "proves a node lost when every action loses, and the K samples are not every "
            "action. Use solver=False.")


def sampled_policy(
    params: Any,
    rng_key: jax.Array,
    root: Any,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    invalid_actions: jax.Array | None = None,
    max_depth: int | None = None,
    *,
    num_samples: int | None = None,
    action_space: ActionSpace | None = None,
    prior_correction: PriorCorrection = "inclusion",
    max_nodes: int | None = None,
    selection: PUCTConfig | SelectionRule = PUCTConfig(),
    dirichlet_fraction: chex.Numeric = 0.25,
    dirichlet_alpha: chex.Numeric = 0.3,
    temperature: chex.Numeric = 1.0,
    tree: Tree | None = None,
    graph: Any = None,
    leaves_per_step: int = 1,
    virtual_loss: VirtualLoss | None = None,
    final_move: str = "visits",
    solver: Any = False,
    early_stop: bool | jax.Array = False,
) -> SampledPolicyOutput:
    """Sampled MuZero search (Hubert et al. 2021): PUCT over ``K`` sampled actions
    per node (module docstring), and the move and target over the root's samples.

    Args:
      params: passed to ``recurrent_fn``.
      rng_key: one key, or ``[B]`` keys (one per tree: element ``b``'s samples,
        noise and move then use only ``rng_key[b]``).
      root: ``RootFnOutput``: ``prior_logits [B, P]`` (``P = A`` logits, or
        ``2D`` Gaussian parameters), ``value [B]``, ``embedding [B, ...]``,
        optional ``legal_action_mask [B, A]`` (discrete); may be ``None`` with
        ``tree``.
      recurrent_fn: ``(params, key, action, embedding) -> (RecurrentFnOutput,
        embedding)``; ``action`` is ``[B]`` int32 ids or ``[B, D]`` float32
        vectors, ``prior_logits`` of the output ``[B, P]`` as at the root.
      num_simulations: simulations per tree (>= 1).
      invalid_actions: optional ``[B, A]`` bool, root actions never to draw
        (discrete only; ``[B, Σ n_f]`` factor values with
        :class:`FactoredActions`).
      max_depth: optional longest path (>= 1).
      num_samples: ``K >= 1`` actions per node (at most ``A`` for discrete
        actions); default: the continued tree's ``K``, else
        ``min(20, A)`` (the paper and LightZero use 20).
      action_space: :class:`DiscreteActions` (default, ``A`` from the root),
        :class:`FactoredActions` or :class:`GaussianActions`.
      prior_correction: ``"inclusion"`` (default) or ``"uniform"``: the prior over
        discrete samples drawn without replacement (module docstring).
      max_nodes: node capacity (default ``num_simulations + 1``).
      selection: the rule over the ``K`` slots (``PUCTConfig`` or
        ``SelectionRule``).
      dirichlet_fraction: root noise weight over the ``K`` slots (0 disables).
      dirichlet_alpha: root noise concentration.
      temperature: τ of the move and target ``N^(1/τ)``; 0 is argmax.
      tree: a tree of sampled actions to continue (from :func:`jaxpuct.subtree`
        with ``action_slot``); it keeps its samples and its layout.
      graph: must be ``None`` (refused, module docstring).
      leaves_per_step: ``K_leaves`` walks per tree per step, under virtual loss.
      virtual_loss: how those walks keep apart.
      final_move: ``"visits"`` or ``"lcb"``.
      solver: must be ``False`` (refused, module docstring).
      early_stop: as :func:`jaxpuct.alphazero_policy` (over the slots).

    Returns:
      :class:`SampledPolicyOutput`.
    """
    _refuse(graph, solver)
    validation.check_choice("prior_correction", prior_correction, PRIOR_CORRECTIONS)
    validation.check_choice("final_move", final_move, ("visits", "lcb"))
    space = _space_for(root, tree, action_space)
    _refuse_joint_mask(space, "root.legal_action_mask", getattr(root, "legal_action_mask", None))
    _refuse_joint_mask(space, "invalid_actions", invalid_actions)
    if num_samples is None:
        num_samples = (tree.sampled.num_samples if tree is not None and tree.sampled
                       else min(DEFAULT_NUM_SAMPLES, space.num_actions)
                       if isinstance(space, (DiscreteActions, FactoredActions))
                       else DEFAULT_NUM_SAMPLES)
    _check_num_samples(num_samples, space)
    layout = SampledLayout(num_samples=num_samples, space=space,
                           prior_correction=prior_correction)
    batch_size = frame.batch_size(root, tree)
    check_policy_numbers(batch_size, dirichlet_fraction, dirichlet_alpha, temperature)
    frame.check_early_stop_move(early_stop, final_move)
    capacity = frame.capacity(tree, max_nodes, num_simulations)
    options = frame.engine_options(
        num_simulations, max_depth, capacity, leaves_per_step=leaves_per_step,
        virtual_loss=virtual_loss, second_moment=final_move == "lcb"
        or frame.needs_second_moment(selection),
        tree_bounds=frame.needs_tree_bounds(selection), early_stop=early_stop)
    if tree is None:
        wide, _ = _sampled_root(root, rng_key, invalid_actions, space, layout)
        slot_invalid = None
    else:
        validation.check_tree_object("tree", tree)
        wide, slot_invalid = None, None
        if tree.sampled is not None and invalid_actions is not None:
            if not isinstance(space, DiscreteActions):
                raise ValueError("invalid_actions is for discrete actions, got an array "
                                 "with GaussianActions.")
            validation.check_mask("invalid_actions", invalid_actions,
                                  (batch_size, space.params_width))
            # A root slot is invalid where the action it holds is (with factored
            # actions: where one of its factor values is).
            held = tree.embeddings.actions[:, Tree.ROOT_INDEX]
            invalid_actions = invalid_actions.astype(jnp.bool_)
            slot_invalid = (space.joint_mask(invalid_actions, held)
                            if isinstance(space, FactoredActions)
                            else jnp.take_along_axis(invalid_actions, held, axis=-1))
    prepared = frame.prepare(wide, rng_key, num_simulations, slot_invalid, options,
                             tree=tree, max_nodes=max_nodes,
                             noise=(dirichlet_fraction, dirichlet_alpha, None),
                             sampled=layout)
    rule = frame.selection_rule(selection, options)
    expander = SampledExpander(recurrent_fn, layout)
    search_tree, _ = frame.search(params, prepared, expander, rule, options)
    counts = search_tree.edge_visits[:, Tree.ROOT_INDEX]
    weights = visit_policy(counts, jnp.maximum(temperature, 0.0), prepared.legal)
    if final_move == "lcb":
        slot = jnp.where(jnp.any(prepared.legal, axis=-1), lcb_action(search_tree), -1)
    else:
        slot = choose_action(prepared.sample_keys, weights, temperature)
    return _output(search_tree, space, slot, weights)


def _output(search_tree: Tree, space: ActionSpace, slot: jax.Array,
            weights: jax.Array) -> SampledPolicyOutput:
    """The move ``slot [B]`` (``-1``: none) as an action, with the target."""
    root_actions = search_tree.embeddings.actions[:, Tree.ROOT_INDEX]
    picked = jnp.take_along_axis(root_actions, jnp.maximum(slot, 0).reshape(
        (-1,) + (1,) * (root_actions.ndim - 1)), axis=1)[:, 0]
    if space.continuous:
        action = picked
    else:
        action = jnp.where(slot >= 0, picked, -1).astype(jnp.int32)
    return SampledPolicyOutput(action=action, action_slot=slot.astype(jnp.int32),
                               action_weights=weights, sampled_actions=root_actions,
                               search_tree=search_tree)


def sampled_gumbel_policy(
    params: Any,
    rng_key: jax.Array,
    root: Any,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    invalid_actions: jax.Array | None = None,
    max_depth: int | None = None,
    *,
    num_samples: int | None = None,
    max_num_considered_actions: int = 16,
    gumbel_scale: chex.Numeric = 1.0,
    qtransform: gumbel_lib.CompletedQConfig = gumbel_lib.CompletedQConfig(),
    prior_correction: PriorCorrection = "inclusion",
    max_nodes: int | None = None,
    action_space: ActionSpace | None = None,
    tree: Tree | None = None,
    graph: Any = None,
    leaves_per_step: int = 1,
    virtual_loss: VirtualLoss | None = None,
    solver: Any = False,
    final_move: str = "gumbel",
    early_stop: bool = False,
) -> SampledPolicyOutput:
    """Gumbel MuZero's root (Danihelka et al. 2022) over ``K`` sampled actions:
    the sampled variant the paper describes for large action spaces.

    The root's ``K`` actions are the Gumbel-top-``K`` of ``log π + g``; the same
    draws ``g`` then rank them for sequential halving (``g + log π + σ(q̂)``, the
    top ``m = min(max_num_considered_actions, K)`` of them considered), so the
    considered actions are exactly those a full-width Gumbel root would consider.
    The root selects and completes Q with ``π`` renormalised over the samples (a
    constant shift of the logits); deeper nodes use Gumbel's deterministic
    interior rule over their own ``K`` samples with the sample-based prior (module
    docstring). The target ``action_weights [B, K]`` is the improved policy
    ``softmax(log π + σ(q̂))`` over the root's samples.

    Discrete actions only, :class:`DiscreteActions` or :class:`FactoredActions`
    (whose stochastic beam search returns the same perturbed values
    ``log π + g`` of its samples); a Gaussian's i.i.d. samples come with no
    Gumbel ranking (refused). ``gumbel_scale`` scales the halving's ``g``, not the
    sampling. A continued ``tree`` is refused: sequential halving plans a fresh
    draw, and a reused root keeps the samples of an earlier one. Other arguments
    as :func:`sampled_policy` and :func:`jaxpuct.gumbel_policy` (``leaves_per_step``
    and ``early_stop`` are refused as there).

    Returns:
      :class:`SampledPolicyOutput` (``action_weights`` the improved policy).
    """
    _refuse(graph, solver)
    gumbel_lib.check_gumbel_args(max_num_considered_actions, qtransform, final_move,
                                 leaves_per_step, virtual_loss)
    gumbel_lib.refuse_early_stop(early_stop)
    if tree is not None:
        raise ValueError(
            "sampled_gumbel_policy does not continue a tree, got tree=: sequential halving "
            "ranks the root's samples by the Gumbel draw that chose them, and a reused "
            "root's samples came from an earlier draw. Search the new root (tree=None), or "
            "continue with sampled_policy.")
    validation.check_choice("prior_correction", prior_correction, PRIOR_CORRECTIONS)
    space = _space_for(root, None, action_space)
    _refuse_joint_mask(space, "root.legal_action_mask", getattr(root, "legal_action_mask", None))
    _refuse_joint_mask(space, "invalid_actions", invalid_actions)
    if not isinstance(space, (DiscreteActions, FactoredActions)):
        raise ValueError(
            f"sampled_gumbel_policy needs discrete actions, got action_space={space!r}: "
            "the Gumbel root ranks samples drawn by Gumbel-top-K, and i.i.d. Gaussian "
            "samples have no such ranking. Use sampled_policy.")
    if num_samples is None:
        num_samples = min(DEFAULT_NUM_SAMPLES, space.num_actions)
    _check_num_samples(num_samples, space)
    layout = SampledLayout(num_samples=num_samples, space=space,
                           prior_correction=prior_correction)
    batch_size = frame.batch_size(root, None)
    gumbel_lib.check_gumbel_scale(gumbel_scale, batch_size)
    capacity = frame.capacity(None, max_nodes, num_simulations)
    options = frame.engine_options(num_simulations, max_depth, capacity,
                                   second_moment=final_move == "lcb")
    wide, samples = _sampled_root(root, rng_key, invalid_actions, space, layout)
    pi = jnp.where(samples.valid, jnp.exp(present(samples.log_prior, "samples.log_prior")), 0.0)
    prepared = frame.prepare(wide, rng_key, num_simulations, None, options,
                             max_nodes=max_nodes, sampled=layout,
                             root_prior=pi / jnp.maximum(jnp.sum(pi, -1, keepdims=True),
                                                         WEIGHT_FLOOR))
    root_search = gumbel_lib.GumbelRoot.begin(
        prepared, qtransform, min(max_num_considered_actions, num_samples), num_simulations,
        samples.gumbel, gumbel_scale)
    rule = frame.selection_rule(SelectionRule(
        root=root_search.rule(), interior=gumbel_lib.gumbel_interior_rule(qtransform)),
        options)
    search_tree, _ = frame.search(params, prepared, SampledExpander(recurrent_fn, layout),
                                  rule, options)
    slot, weights = root_search.move(search_tree, final_move, False)
    return _output(search_tree, space, slot, weights)

"""A two-level game with many root actions and a known optimum, and the exact
probability that ``K`` actions sampled without replacement contain it.

The oracle of sampled search (:mod:`jaxpuct.sampled`) at large ``A``. The root
has ``A`` actions (10,000 in ``benchmarks/sampled_oracle.py``) in three classes:

* the **optimum** ``a*`` (prior ``optimum_prior``): it leads to a second level
  whose best reply scores 1, the game's optimum; the network's value there
  reads 0.6 (a fair but low estimate);
* ``num_decoys`` **decoys** (prior ``decoy_prior`` each, above the optimum's):
  a second level whose best reply scores 0.5 and whose value reads 0.3;
* the **rest** (the remaining prior mass, spread evenly): terminal at once, with
  a reward in ``[-1, 0.2]``.

A second level has ``num_replies`` legal actions (ids ``0 .. num_replies - 1``
of the same ``A``-wide action space), each terminal with its reward; the
network's policy there prefers (logit 2, the others 0) reply 1, the best one.
One player, discount 1: an action's exact value is its reward or its best
reply, and ``a*`` is the unique best root action (value 1; the next best 0.5).

A search can return ``a*`` only if ``a*`` is among its root's ``K`` samples.
For Gumbel-top-``K`` (the ``K`` largest ``log π(a) + g(a)``, Kool, van Hoof and
Welling 2019) that happens exactly when fewer than ``K`` other actions beat
``a*``'s perturbed value. With ``s = exp(-g(a*))``, standard exponential, another
action ``j`` beats it with probability ``1 - exp(-s π(j) / π(a*))``,
independently of the others given ``s``, so::

    P(a* in S) = E_s[ P(Σ_j Bernoulli(1 - exp(-s π_j / π*)) < K) ]

:func:`inclusion_probability` computes this with the actions grouped by prior
class (a binomial per class, convolved and truncated at ``K``) and the
expectation over ``s`` by a midpoint rule in ``u = 1 - e^{-s}`` (uniform on
``(0, 1)``); :func:`numpy_inclusion_estimate` draws the same event by Monte
Carlo, and ``tests/test_sampled.py`` checks both against enumeration.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.types import RecurrentFnOutput, RootFnOutput

__all__ = ["TwoLevelGame", "GameTables", "inclusion_probability", "numpy_inclusion_estimate"]


class GameTables(NamedTuple):
    """The game's arrays, passed to ``recurrent_fn`` as ``params``.

    Attributes:
      reward: ``[A]`` the reward of root action ``a`` (0 where a second level follows).
      second: ``[A]`` bool, root action ``a`` leads to a second level.
      value: ``[A]`` the network's value of that second level (0 where terminal).
      replies: ``[A, R]`` the reward of reply ``b`` there (0 where terminal).
    """

    reward: jax.Array
    second: jax.Array
    value: jax.Array
    replies: jax.Array


@dataclasses.dataclass(frozen=True)
class TwoLevelGame:
    """The game of the module docstring.

    Attributes:
      num_actions: ``A``.
      optimum_prior: ``π(a*)``.
      num_decoys: how many decoys.
      decoy_prior: ``π`` of each decoy.
      num_replies: legal actions of a second level (``<= A``).
      seed: which ids are the optimum and the decoys, and the rest's rewards.
    """

    num_actions: int = 10_000
    optimum_prior: float = 0.02
    num_decoys: int = 10
    decoy_prior: float = 0.04
    num_replies: int = 4
    seed: int = 0

    def __post_init__(self):
        rest = 1.0 - self.optimum_prior - self.num_decoys * self.decoy_prior
        if self.num_actions < self.num_decoys + 2 or rest <= 0 or self.num_replies < 2 \
                or self.num_replies > self.num_actions:
            raise ValueError(f"TwoLevelGame needs A >= num_decoys + 2, 2 <= num_replies <= A "
                             f"and prior mass left for the rest, got {self!r}.")

    @property
    def ids(self) -> tuple[int, np.ndarray]:
        """``(a*, decoys [num_decoys])``: distinct ids drawn from ``seed``."""
        picked = np.random.default_rng(self.seed).choice(self.num_actions,
                                                        self.num_decoys + 1, replace=False)
        return int(picked[0]), np.sort(picked[1:])

    def prior(self) -> np.ndarray:
        """``[A]`` float64 root prior ``π``."""
        optimum, decoys = self.ids
        rest = 1.0 - self.optimum_prior - self.num_decoys * self.decoy_prior
        pi = np.full(self.num_actions, rest / (self.num_actions - self.num_decoys - 1))
        pi[decoys] = self.decoy_prior
        pi[optimum] = self.optimum_prior
        return pi

    def classes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(π of each class [2], counts [2])`` of the actions other than ``a*``
        (decoys, rest), for :func:`inclusion_probability`."""
        rest_count = self.num_actions - self.num_decoys - 1
        rest = (1.0 - self.optimum_prior - self.num_decoys * self.decoy_prior) / rest_count
        return np.array([self.decoy_prior, rest]), np.array([self.num_decoys, rest_count])

    def tables(self) -> GameTables:
        optimum, decoys = self.ids
        rng = np.random.default_rng(self.seed + 1)
        reward = rng.uniform(-1.0, 0.2, self.num_actions).astype(np.float32)
        second = np.zeros(self.num_actions, bool)
        value = np.zeros(self.num_actions, np.float32)
        replies = np.zeros((self.num_actions, self.num_replies), np.float32)
        # Reply 1 is the best (the network's policy prefers it), reply 0 the worst.
        decoy_replies = np.linspace(-0.3, 0.2, self.num_replies, dtype=np.float32)
        best_replies = np.linspace(-0.6, 0.4, self.num_replies, dtype=np.float32)
        decoy_replies[1], best_replies[1] = 0.5, 1.0
        # First evaluations: the decoys read 0.3, the optimum 0.6 (both below their
        # best reply).
        for ids, row, read in ((decoys, decoy_replies, 0.3), ([optimum], best_replies, 0.6)):
            second[ids], reward[ids], value[ids], replies[ids] = True, 0.0, read, row
        return GameTables(reward=jnp.asarray(reward), second=jnp.asarray(second),
                          value=jnp.asarray(value), replies=jnp.asarray(replies))

    def exact_values(self) -> np.ndarray:
        """``[A]`` each root action's exact value (backward induction)."""
        t = self.tables()
        return np.where(np.asarray(t.second), np.asarray(t.replies).max(-1),
                        np.asarray(t.reward))

    def root(self, batch_size: int) -> RootFnOutput:
        """``B`` copies of the root; the embedding is ``(level [B], first [B])`` int32."""
        logits = np.log(self.prior()).astype(np.float32)
        zeros = jnp.zeros((batch_size,), jnp.int32)
        return RootFnOutput(prior_logits=jnp.broadcast_to(jnp.asarray(logits),
                                                          (batch_size, self.num_actions)),
                            value=jnp.zeros((batch_size,)), embedding=(zeros, zeros))

    def recurrent_fn(self, params: GameTables, rng_key: chex.PRNGKey, action: jax.Array,
                     embedding: tuple[jax.Array, jax.Array]
                     ) -> tuple[RecurrentFnOutput, tuple[jax.Array, jax.Array]]:
        """``params`` is :meth:`tables`; ``action [B]`` int32 ids."""
        del rng_key
        level, first = embedding
        at_root = level == 0
        first = jnp.where(at_root, action, first)
        reply = jnp.clip(action, 0, self.num_replies - 1)
        reward = jnp.where(at_root, params.reward[first], params.replies[first, reply])
        terminal = ~at_root | ~params.second[first]
        legal = (jnp.arange(self.num_actions) < self.num_replies) & ~terminal[:, None]
        batch = action.shape[0]
        logits = jnp.where(jnp.arange(self.num_actions) == 1, 2.0, 0.0)
        out = RecurrentFnOutput(
            reward=reward, discount=jnp.ones((batch,)),
            prior_logits=jnp.broadcast_to(logits, (batch, self.num_actions)),
            value=jnp.where(terminal, 0.0, params.value[first]),
            legal_action_mask=legal, terminal=terminal)
        return out, (level + 1, first)


def _log_binomial_pmf(n: int, log_p: np.ndarray, log_1mp: np.ndarray, k: int) -> np.ndarray:
    """``[P, k]`` log P(Binomial(n, p) = j), j < k, from ``log p``, ``log(1 - p)`` ``[P]``."""
    j = np.arange(k)
    log_choose = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                           if i <= n else -np.inf for i in j])
    with np.errstate(invalid="ignore"):
        out = log_choose + j * log_p[:, None] + np.maximum(n - j, 0) * log_1mp[:, None]
    return np.where(j <= n, out, -np.inf)


def inclusion_probability(target_prior: float, class_priors: np.ndarray,
                          class_counts: np.ndarray, k: int, points: int = 4096) -> float:
    """``P(a* in S)``: ``S`` the Gumbel-top-``k`` of ``log π + g`` (module docstring).

    Args:
      target_prior: ``π(a*)`` (any positive scale: only ratios matter).
      class_priors: ``[C]`` ``π`` of each class of the other actions.
      class_counts: ``[C]`` how many actions each class holds.
      k: samples drawn.
      points: midpoints of the quadrature over ``u = 1 - exp(-s)``.

    Returns:
      The probability, float64 (quadrature error ``O(points^-2)``).
    """
    u = (np.arange(points) + 0.5) / points
    s = -np.log1p(-u)
    dist = np.zeros((points, k))
    dist[:, 0] = 1.0  # P(0 actions beat a*) before any class is counted
    for prior, count in zip(class_priors, class_counts, strict=True):
        rate = s * (prior / target_prior)
        log_p = np.log(-np.expm1(-rate))       # log P(this action beats a*)
        pmf = np.exp(_log_binomial_pmf(int(count), log_p, -rate, k))
        # Convolve and keep counts < k (a* is out once k others beat it).
        dist = np.stack([np.sum(dist[:, :j + 1] * pmf[:, j::-1], axis=1) for j in range(k)], 1)
    return float(np.mean(dist.sum(axis=1)))


def numpy_inclusion_estimate(prior: np.ndarray, target: int, k: int, runs: int,
                             seed: int = 0, chunk: int = 500) -> tuple[float, float]:
    """``(mean, standard error)`` of ``1[target in top-k of log π + g]`` over
    ``runs`` NumPy Gumbel draws of ``prior [A]``."""
    rng = np.random.default_rng(seed)
    log_prior = np.log(prior)
    hits = 0
    for start in range(0, runs, chunk):
        n = min(chunk, runs - start)
        perturbed = log_prior + rng.gumbel(size=(n, prior.shape[0]))
        beaten = np.sum(perturbed > perturbed[:, target:target + 1], axis=1)
        hits += int(np.sum(beaten < k))
    mean = hits / runs
    return mean, math.sqrt(mean * (1 - mean) / runs)

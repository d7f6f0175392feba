"""Stochastic MuZero's unrolled loss, a sampler of observation windows, the train step.

Antonoglou et al. 2022, section 4 ("Training"). From the observation at a sampled
start ``t`` the model is unrolled ``K`` steps along the stored actions, each step
through an afterstate and the code of the observed transition::

    s_0 = h(o_t)                                  (p_0, v_0) = f(s_0)
    as_k = phi(s_k, a_{t+k})                      (sigma_k, Q_k) = psi(as_k)
    c_{k+1} = e(o_{t+k}, o_{t+k+1})               (straight-through one-hot)
    (r_{k+1}, s_{k+1}) = g(as_k, c_{k+1})         (p_{k+1}, v_{k+1}) = f(s_{k+1})

and trained on the targets of :mod:`.targets`, unchanged::

    l = sum_{k=0..K} w_k (l_p + c_v l_v(z_{t+k}, v_k))
      + sum_{k=1..K} w_k (c_r l_r(u_{t+k}, r_k) + c_q l_v(z_{t+k-1}, Q_{k-1})
                          + c_c CE(c_k, sigma_{k-1}) + beta ||c_k - softmax(e)||^2)

* the policy, value and reward terms are those of :mod:`.training` (its
  :func:`.training.head_loss`, step weights ``w_0 = 1``, ``w_k = 1 / K`` and
  the gradient halved at each step's latent, here the input of ``phi``);
* the afterstate value ``Q_k`` is trained to ``z_{t+k}``, the n-step value target
  of the step the action was taken at: that return starts with the action's own
  reward, so it is a sample of ``Q(s_{t+k}, a_{t+k})`` (the paper's target);
* the code prior ``sigma_k`` is trained by cross-entropy to the encoder's code of
  the real transition, with the code's gradient stopped: the prior follows the
  encoder, and the encoder learns from the reward, value and policy terms through
  the straight-through code and from the commitment term;
* the commitment term ``beta ||c - softmax(e)||^2`` (code constant) pulls the
  encoder's probabilities to its one-hot output.

With known chance outcomes (``StochasticLossConfig.chance_outcome``, a function
of ``(o_t, a_t, o_{t+1})``) the code ``c_{k+1}`` is the one-hot of the true
outcome instead of the encoder's, the prior is trained to it, and there is no
commitment term (the encoder is not used): LightZero's 2048 recipe
(``use_ture_chance_label_in_chance_encoder``) trains so.

Transitions whose next observation is not in the buffer window's episode (the
episode's last step, whose final observation is not stored, and the absorbing
steps past the end) have no code: the dynamics gets code 0 there and neither the
prior nor the commitment term is trained (masked by ``policy_mask[:, k + 1]``).

:func:`sample` is :func:`.replay.sample` plus the ``K + 1`` observations of each
window (the buffer already holds them as the next rows).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from jaxpuct.muzero import replay
from jaxpuct.muzero.networks import head_scalar
from jaxpuct.muzero.stochastic_networks import StochasticMuZeroNetwork, commitment_loss
from jaxpuct.muzero.targets import UnrollTargets
from jaxpuct.muzero.training import LossConfig, head_loss, make_optimizer, scale_gradient

__all__ = ["StochasticBatch", "StochasticLossConfig", "StochasticPredictions",
           "code_perplexity", "make_stochastic_optimizer", "sample", "stochastic_train_step",
           "stochastic_unroll", "stochastic_unroll_loss"]


@dataclasses.dataclass(frozen=True)
class StochasticLossConfig:
    """The loss and the optimiser (static; hashable).

    Attributes:
      base: MuZero's :class:`.training.LossConfig` (policy, value and reward
        weights, the dynamics gradient scale, learning rate, weight decay).
      afterstate_value_weight: ``c_q`` (0.25, as MuZero's value weight).
      code_weight: ``c_c``, the code prior's cross-entropy (1).
      commitment_weight: ``beta`` (0.01). Larger values collapse the codes: on a
        two-outcome MDP ``beta = 0.1`` put both outcomes on one code from all six
        initialisations tried, ``0.01`` separated them from five of six within 600
        steps (``benchmarks/code_collapse.py``). The term saturates the encoder's
        softmax, whose Jacobian, the only path of the straight-through gradient,
        then vanishes before the reward loss has told the outcomes apart.
      chance_outcome: ``None`` (codes learned by the encoder) or
        ``(obs [N, ...], action [N], next_obs [N, ...]) -> [N]`` int, the true
        chance outcome of each transition (< ``num_codes``), used as the code
        (e.g. :func:`jaxpuct.muzero.game_2048.spawn_outcome`). A module-level
        function: the config is a static argument, hashed with it.
    """

    base: LossConfig = LossConfig()
    afterstate_value_weight: float = 0.25
    code_weight: float = 1.0
    commitment_weight: float = 0.01
    chance_outcome: Callable[[jax.Array, jax.Array, jax.Array], jax.Array] | None = None

    def __post_init__(self):
        for name in ("afterstate_value_weight", "code_weight", "commitment_weight"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"StochasticLossConfig.{name} must be >= 0, got {value!r}.")


class StochasticBatch(NamedTuple):
    """A minibatch of ``B`` unrolls of ``K`` steps with their observations.

    Attributes:
      observations: ``[B, K + 1, ...]`` ``o_{t+k}`` (rows past the episode's end
        hold other data and are not used: ``targets.policy_mask`` says which).
      actions: ``[B, K]`` int32.
      targets: :class:`.targets.UnrollTargets`.
      weights: ``[B]`` importance weights.
      index: ``[B]`` start rows.
    """

    observations: jax.Array
    actions: jax.Array
    targets: UnrollTargets
    weights: jax.Array
    # Shadows tuple.index on purpose, as replay.Batch does.
    index: jax.Array  # pyright: ignore[reportIncompatibleMethodOverride]


class StochasticPredictions(NamedTuple):
    """The model's outputs along an unroll of ``K`` steps.

    Attributes:
      policy_logits: ``[B, K + 1, A]``.
      value: ``[B, K + 1, V]`` logits or ``[B, K + 1]`` scalars.
      reward: ``[B, K, R]`` logits or ``[B, K]``; ``[:, k]`` is step ``k + 1``'s.
      afterstate_value: ``[B, K, V]`` or ``[B, K]``, ``Q_k`` of ``as_k``.
      code_logits: ``[B, K, C]`` prior ``sigma_k`` at ``as_k``.
      code: ``[B, K, C]`` the one-hot code ``c_{k+1}`` fed to the dynamics
        (code 0 where the transition has no next observation).
      encoder_logits: ``[B, K, C]`` the encoder's logits of transition ``k``.
      code_mask: ``[B, K]`` bool, transitions with a next observation.
    """

    policy_logits: jax.Array
    value: jax.Array
    reward: jax.Array
    afterstate_value: jax.Array
    code_logits: jax.Array
    code: jax.Array
    encoder_logits: jax.Array
    code_mask: jax.Array


def _batch_major(x: jax.Array) -> jax.Array:
    return jnp.swapaxes(x, 0, 1)


def stochastic_unroll(net: StochasticMuZeroNetwork, observations: jax.Array,
                      actions: jax.Array, code_mask: jax.Array,
                      dynamics_gradient_scale: float = 0.5,
                      outcomes: jax.Array | None = None) -> StochasticPredictions:
    """Predictions of ``K = actions.shape[1]`` steps (module docstring), a
    ``lax.scan`` unrolled at compile time.

    Args:
      observations: ``[B, K + 1, ...]``.
      actions: ``[B, K]`` int.
      code_mask: ``[B, K]`` bool, transitions whose next observation is real.
      outcomes: ``None`` (the encoder's codes) or ``[B, K]`` int, the true
        chance outcomes, whose one-hots are the codes (``encoder_logits`` are
        then zeros: the encoder is not called).
    """
    batch, k = actions.shape
    if observations.shape[:2] != (batch, k + 1):
        raise ValueError(f"observations must be [B, K + 1, ...] = [{batch}, {k + 1}, ...] for "
                         f"actions [{batch}, {k}], got shape {tuple(observations.shape)}.")
    if outcomes is not None:
        if outcomes.shape != (batch, k):
            raise ValueError(f"outcomes must be [B, K] = [{batch}, {k}], got shape "
                             f"{tuple(outcomes.shape)}.")
        code = jax.nn.one_hot(outcomes, net.num_codes, dtype=jnp.float32)
        encoder_logits = jnp.zeros_like(code)
    else:
        # Every transition's code at once (one batched encoder call), not inside the scan.
        rest = observations.shape[2:]
        code, encoder_logits = net.encode(observations[:, :-1].reshape(batch * k, *rest),
                                          observations[:, 1:].reshape(batch * k, *rest))
        code = code.reshape(batch, k, -1)
        encoder_logits = encoder_logits.reshape(batch, k, -1)
    fallback = jax.nn.one_hot(0, net.num_codes, dtype=code.dtype)
    code = jnp.where(code_mask[..., None], code, fallback)
    latent = net.represent(observations[:, 0])
    logits0, value0 = net.predict(latent)
    graphdef, state = nnx.split(net)

    def step(carry, inputs):
        action, step_code = inputs
        model = nnx.merge(graphdef, state)
        afterstate = model.afterstate_dynamics(
            scale_gradient(carry, dynamics_gradient_scale), action)
        code_logits, q = model.afterstate_predict(afterstate)
        reward, nxt = model.dynamics(afterstate, step_code)
        logits, value = model.predict(nxt)
        return nxt, (logits, value, reward, q, code_logits)

    # Unrolled at compile time, as training.unroll's scan (K is small): 2048's
    # recipe (256 rows, K = 5), 200 optimiser steps took 17.3 CPU-s against 19.1
    # looped.
    _, (logits, value, reward, q, code_logits) = jax.lax.scan(
        step, latent, (_batch_major(actions), _batch_major(code)), unroll=True)

    def stack(first, later):  # [B, ...] and [K, B, ...] -> [B, K + 1, ...]
        return jnp.concatenate([first[:, None], _batch_major(later)], axis=1)

    return StochasticPredictions(
        policy_logits=stack(logits0, logits), value=stack(value0, value),
        reward=_batch_major(reward), afterstate_value=_batch_major(q),
        code_logits=_batch_major(code_logits), code=code, encoder_logits=encoder_logits,
        code_mask=code_mask)


def stochastic_unroll_loss(net: StochasticMuZeroNetwork, batch: StochasticBatch,
                           config: StochasticLossConfig
                           ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """``(loss, metrics)`` of a minibatch (module docstring).

    Returns:
      ``loss []`` (importance-weighted batch mean) and metrics: the unweighted
      batch means of each term (summed over the steps with the ``w_k``),
      ``"code_perplexity"`` (:func:`code_perplexity`) and ``"priority"``,
      ``|v_0 - z_0| [B]``.
    """
    base, targets = config.base, batch.targets
    k = batch.actions.shape[1]
    code_mask = targets.policy_mask[:, 1:]
    outcomes = None
    if config.chance_outcome is not None:
        obs = batch.observations
        rest = obs.shape[2:]
        outcomes = config.chance_outcome(
            obs[:, :-1].reshape(-1, *rest), batch.actions.reshape(-1),
            obs[:, 1:].reshape(-1, *rest)).reshape(batch.actions.shape)
    preds = stochastic_unroll(net, batch.observations, batch.actions, code_mask,
                              base.dynamics_gradient_scale, outcomes)
    weight = jnp.full((k,), 1.0 / k)  # w_k, k >= 1
    log_p = jax.nn.log_softmax(preds.policy_logits, axis=-1)
    policy = -jnp.sum(targets.policy * log_p, axis=-1) * targets.policy_mask  # [B, K + 1]
    value = head_loss(preds.value, targets.value, net.config.value)  # [B, K + 1]
    policy = policy[:, 0] + policy[:, 1:] @ weight
    value = value[:, 0] + value[:, 1:] @ weight
    reward = head_loss(preds.reward, targets.reward[:, 1:], net.config.reward) @ weight
    q = head_loss(preds.afterstate_value, targets.value[:, :-1], net.config.value) @ weight
    log_sigma = jax.nn.log_softmax(preds.code_logits, axis=-1)
    code = -jnp.sum(jax.lax.stop_gradient(preds.code) * log_sigma, axis=-1)  # [B, K]
    code = (code * code_mask) @ weight
    if outcomes is None:
        commit = (commitment_loss(preds.code, preds.encoder_logits) * code_mask) @ weight
    else:  # no encoder to commit
        commit = jnp.zeros_like(code)
    per_row = (base.policy_weight * policy + base.value_weight * value
               + base.reward_weight * reward + config.afterstate_value_weight * q
               + config.code_weight * code + config.commitment_weight * commit)
    loss = jnp.mean(batch.weights * per_row)
    v0 = head_scalar(preds.value[:, 0], net.config.value)
    metrics = {"loss": loss, "policy_loss": jnp.mean(policy), "value_loss": jnp.mean(value),
               "reward_loss": jnp.mean(reward), "afterstate_value_loss": jnp.mean(q),
               "code_loss": jnp.mean(code), "commitment_loss": jnp.mean(commit),
               "code_perplexity": code_perplexity(preds.code, code_mask),
               "priority": jax.lax.stop_gradient(jnp.abs(v0 - targets.value[:, 0]))}
    return loss, metrics


def code_perplexity(code: jax.Array, mask: jax.Array) -> jax.Array:
    """``exp`` of the entropy of how often each code occurs among the transitions of
    ``code [B, K, C]`` (one-hot) where ``mask [B, K]``: ``[]``, 1 when they all got
    one code (collapsed), ``C`` when the codes are used equally; a check of
    collapse (the docstring of :class:`StochasticLossConfig`)."""
    weight = mask.astype(code.dtype)[..., None]
    counts = jnp.sum(jax.lax.stop_gradient(code) * weight, axis=(0, 1))  # [C]
    share = counts / jnp.maximum(jnp.sum(counts), 1.0)
    return jnp.exp(jnp.sum(jax.scipy.special.entr(share)))  # entr(0) = 0


def make_stochastic_optimizer(config: StochasticLossConfig) -> optax.GradientTransformation:
    """MuZero's optimiser (:func:`.training.make_optimizer`) for ``config.base``."""
    return make_optimizer(config.base)


def stochastic_train_step(graphdef: nnx.GraphDef, optimizer: optax.GradientTransformation,
                          config: StochasticLossConfig, params: Any, opt_state: Any,
                          batch: StochasticBatch) -> tuple[Any, Any, dict[str, jax.Array]]:
    """One optimiser step; ``(params, opt_state, metrics)``, the metrics those of the
    incoming ``params``. Jit it with ``graphdef``, ``optimizer``, ``config`` static."""

    def loss(p):
        return stochastic_unroll_loss(nnx.merge(graphdef, p), batch, config)

    (_, metrics), grads = jax.value_and_grad(loss, has_aux=True)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, metrics


def sample(buffer: replay.TrajectoryBuffer, rng: jax.Array, batch_size: int,
           unroll_steps: int, td_steps: int, discount: float, alpha: float = 0.0,
           beta: float = 1.0) -> StochasticBatch:
    """:func:`.replay.sample` (same arguments) with the observations ``[B, K + 1,
    ...]`` of each window's first ``K + 1`` rows."""
    batch = replay.sample(buffer, rng, batch_size, unroll_steps, td_steps, discount,
                          alpha, beta, next_observations=True)
    assert batch.next_obs is not None  # asked for above
    observations = jnp.concatenate([batch.obs[:, None], batch.next_obs], axis=1)
    return StochasticBatch(observations=observations, actions=batch.actions,
                           targets=batch.targets, weights=batch.weights, index=batch.index)

"""The unrolled MuZero loss, its gradient scaling, and the optax train step.

Schrittwieser et al. 2020, appendix G ("Training"): from the observation at a
sampled start ``t`` the model is unrolled ``K`` steps along the stored actions,
``s0 = h(o_t)``, ``(r_k, s_k) = g(s_{k-1}, a_{t+k-1})``, ``(p_k, v_k) = f(s_k)``,
and each step's predictions are trained on :mod:`.targets`::

    l = sum_k w_k (l_p(pi_{t+k}, p_k) + c_v l_v(z_{t+k}, v_k) + c_r l_r(u_{t+k}, r_k))

* ``l_p``: cross-entropy with the search policy (only where ``policy_mask``);
  for a sampled search's target, Hubert et al.'s (2021) ``-sum_j w_j log p(a_j)``
  over its sampled actions ``a_j`` (:func:`jaxpuct.sampled_policy_loss`), which is
  the cross-entropy with a target that is zero off the samples;
* ``l_v``, ``l_r``: cross-entropy between the head's logits and the two-hot
  target over its support (:mod:`.value_transform`), or the squared error for a
  scalar (``tanh``) head; no reward loss at ``k = 0``; neither past a truncated
  episode end (``UnrollTargets.value_mask``);
* ``w_0 = 1`` and ``w_k = 1 / K`` for ``k >= 1`` (the pseudocode scales each
  recurrent step's *gradient* by ``1 / K``; weighting the loss gives the same
  gradient, and the reported loss is the one that is differentiated);
* at every dynamics input the gradient is halved, ``scale_gradient(s, 1/2)``
  (the pseudocode), so the total gradient into the dynamics stays constant
  whatever ``K``;
* ``c_v = value_weight``: 0.25 in the paper's Reanalyse runs, muzero-general and
  LightZero (the paper's board games use 1);
* each sample's loss is multiplied by its importance weight (prioritised replay);
* optionally (``consistency_weight = c_s > 0``) EfficientZero's temporal
  consistency (Ye et al. 2021, "Mastering Atari Games with Limited Data"): each
  unrolled latent ``s_k``, through the projector and the predictor, is pulled
  towards the projection of the representation of the real observation,
  ``h(o_{t+k})``, with that target's gradient stopped (SimSiam, Chen and He
  2021), by the negative cosine similarity ``l_s``; the term ``c_s w_k l_s`` for
  ``k >= 1`` where ``o_{t+k}`` is in the episode (:func:`consistency_loss`).

The L2 term ``1e-4 ||theta||^2`` is applied by the optimiser as coupled weight
decay on the kernels, with :func:`jaxpuct.alphazero.training.decay_mask` (the
same optimiser chain as AlphaZero's).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from jaxpuct.alphazero.training import decay_mask, schedule_learning_rate
from jaxpuct.muzero.networks import MuZeroNetwork, head_scalar
from jaxpuct.muzero.replay import Batch
from jaxpuct.muzero.value_transform import Support, scalar_to_two_hot
from jaxpuct.sampled import DiscreteActions, GaussianActions
from jaxpuct.sampled_loss import sampled_policy_loss

__all__ = ["LR_SCHEDULES", "LossConfig", "Predictions", "consistency_loss", "head_loss",
           "make_optimizer", "policy_loss", "polyak_average", "scale_gradient", "train_step",
           "unroll", "unroll_loss", "update_target"]

# Step-size schedules of the optimiser (LossConfig.lr_schedule).
LR_SCHEDULES = ("constant", "cosine")


@dataclasses.dataclass(frozen=True)
class LossConfig:
    """The loss and the optimiser (static; hashable).

    Attributes:
      policy_weight: weight of the policy cross-entropy (1).
      value_weight: ``c_v`` (0.25; module docstring).
      reward_weight: ``c_r`` (1).
      dynamics_gradient_scale: factor of the gradient at each dynamics input (1/2).
      learning_rate: Adam's step size (its start, under a schedule).
      weight_decay: coupled L2 weight on kernels (1e-4, the paper's).
      lr_schedule: "constant" (the default; the optimiser state is the one of
        plain Adam) or "cosine": a decay of the step size from
        ``learning_rate`` to ``lr_final_fraction * learning_rate`` over
        ``lr_decay_steps`` optimiser steps, constant after
        (:func:`jaxpuct.alphazero.training.schedule_learning_rate`).
      lr_decay_steps: the cosine decay's horizon in optimiser steps (>= 1 for
        "cosine"; unused by "constant").
      lr_final_fraction: the step size at the end of the decay, as a fraction of
        ``learning_rate``, in [0, 1].
      consistency_weight: ``c_s`` of the temporal-consistency term (module
        docstring; EfficientZero's is 2); 0: none (the default). Needs a network
        with consistency heads (``NetworkConfig.projection > 0``) and batches
        with ``next_obs``.
    """

    policy_weight: float = 1.0
    value_weight: float = 0.25
    reward_weight: float = 1.0
    dynamics_gradient_scale: float = 0.5
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    lr_schedule: str = "constant"
    lr_decay_steps: int = 0
    lr_final_fraction: float = 0.0
    consistency_weight: float = 0.0

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name != "lr_schedule" and not value >= 0:
                raise ValueError(f"LossConfig.{field.name} must be >= 0, got {value!r}.")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"LossConfig.lr_schedule must be one of {LR_SCHEDULES}, got "
                             f"{self.lr_schedule!r}.")
        if self.lr_schedule != "constant" and self.lr_decay_steps < 1:
            raise ValueError(f"LossConfig.lr_decay_steps must be >= 1 with lr_schedule "
                             f"{self.lr_schedule!r}, got {self.lr_decay_steps!r}.")
        if not self.lr_final_fraction <= 1.0:
            raise ValueError(f"LossConfig.lr_final_fraction must be in [0, 1], got "
                             f"{self.lr_final_fraction!r}.")


class Predictions(NamedTuple):
    """The model's outputs along an unroll of ``K`` steps.

    Attributes:
      policy_logits: ``[B, K + 1, A]``.
      value: ``[B, K + 1, V]`` logits (``V = 2n + 1``) or ``[B, K + 1]`` scalars.
      reward: ``[B, K, R]`` logits or ``[B, K]`` scalars; ``reward[:, k - 1]`` is
        the reward of unroll step ``k``.
      latents: ``[B, K, ...]`` the dynamics' latents ``s_1 .. s_K``.
    """

    policy_logits: jax.Array
    value: jax.Array
    reward: jax.Array
    latents: jax.Array


def scale_gradient(x: jax.Array, scale: float) -> jax.Array:
    """``x`` in the forward pass, ``scale`` times its gradient in the backward pass
    (the pseudocode's ``scale_gradient``)."""
    return scale * x + (1.0 - scale) * jax.lax.stop_gradient(x)


def unroll(net: MuZeroNetwork, obs: jax.Array, actions: jax.Array,
           dynamics_gradient_scale: float = 0.5) -> Predictions:
    """Predictions of ``K = actions.shape[1]`` unroll steps from ``obs [B, ...]``.

    A ``lax.scan`` over the steps, unrolled at compile time: inside a loop
    XLA:CPU runs the backward pass of a convolution about 20x slower (the ResNet
    of connect four's recipe, ``K = 5``, a gradient of 256 rows: 9.0 CPU-s looped,
    0.42 unrolled; the MLP of 2048's recipe: 23 and 20 ms), and ``K`` is small.
    """
    latent = net.represent(obs)
    logits0, value0 = net.predict(latent)
    graphdef, state = nnx.split(net)

    def step(carry, action):
        model = nnx.merge(graphdef, state)
        reward, nxt = model.dynamics(scale_gradient(carry, dynamics_gradient_scale), action)
        logits, value = model.predict(nxt)
        return nxt, (logits, value, reward, nxt)

    _, (logits, value, reward, latents) = jax.lax.scan(
        step, latent, jnp.swapaxes(actions, 0, 1), unroll=True)

    def stack(first, rest):  # [B, ...] and [K, B, ...] -> [B, K + 1, ...]
        return jnp.concatenate([first[:, None], jnp.swapaxes(rest, 0, 1)], axis=1)

    return Predictions(policy_logits=stack(logits0, logits), value=stack(value0, value),
                       reward=jnp.swapaxes(reward, 0, 1), latents=jnp.swapaxes(latents, 0, 1))


def consistency_loss(net: MuZeroNetwork, latents: jax.Array, next_obs: jax.Array
                     ) -> jax.Array:
    """``[B, K]`` negative cosine similarity between the predictor's output on the
    unrolled latents ``latents [B, K, ...]`` and the projection of ``h`` of the
    real observations ``next_obs [B, K, ...]``, the latter's gradient stopped
    (EfficientZero's consistency, module docstring); in ``[-1, 1]``, -1 where the
    two point the same way. Unmasked: the caller masks the steps past the end."""
    size, steps = latents.shape[:2]
    online = net.project(latents.reshape(size * steps, *latents.shape[2:]), predictor=True)
    observed = next_obs.reshape(size * steps, *next_obs.shape[2:])
    target = jax.lax.stop_gradient(net.project(net.represent(observed)))

    def unit(x):  # a zero vector stays zero: its similarity with anything is 0
        return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-8)

    return -jnp.sum(unit(online) * unit(target), axis=-1).reshape(size, steps)


def head_loss(out: jax.Array, target: jax.Array, support: Support | None) -> jax.Array:
    """Per-element loss of a value or reward head: cross-entropy of ``out [..., 2n +
    1]`` logits with the two-hot of ``target [...]``, or ``(out - target)**2`` for a
    scalar head; ``[...]``."""
    if support is None:
        return (out - target) ** 2
    return -jnp.sum(scalar_to_two_hot(target, support) * jax.nn.log_softmax(out, axis=-1),
                    axis=-1)


def policy_loss(logits: jax.Array, policy: jax.Array,
                policy_actions: jax.Array | None = None,
                action_space: DiscreteActions | GaussianActions | None = None) -> jax.Array:
    """Cross-entropy of ``logits [..., A]`` with the target ``policy [..., P]``:
    over all actions (``P = A``, ``policy_actions`` ``None``), or a sampled search's
    weights over ``policy_actions``: ids ``[..., P]``, or vectors ``[..., P, D]``
    of a continuous ``action_space`` whose parameters ``logits [..., 2D]`` are;
    ``[...]``."""
    if policy_actions is None:
        return -jnp.sum(policy * jax.nn.log_softmax(logits, axis=-1), axis=-1)
    lead, params_width = logits.shape[:-1], logits.shape[-1]
    width = policy.shape[-1]
    space = DiscreteActions(params_width) if action_space is None else action_space
    loss = sampled_policy_loss(space, logits.reshape(-1, params_width),
                               policy_actions.reshape(-1, width, *policy_actions.shape[
                                   policy.ndim:]), policy.reshape(-1, width))
    return loss.reshape(lead)


def unroll_loss(net: MuZeroNetwork, batch: Batch, config: LossConfig
                ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """``(loss, metrics)`` of a minibatch (module docstring).

    Returns:
      ``loss []`` (importance-weighted mean over the batch) and ``[]`` metrics:
      the unweighted batch means of each term summed over the unroll steps with
      the ``w_k``, and the per-row priorities ``|v_0 - z_0| [B]`` under
      ``"priority"``.
    """
    targets = batch.targets
    k = batch.actions.shape[1]
    preds = unroll(net, batch.obs, batch.actions, config.dynamics_gradient_scale)
    step_weight = jnp.concatenate([jnp.ones((1,)), jnp.full((k,), 1.0 / k)])  # [K + 1]
    policy = policy_loss(preds.policy_logits, targets.policy, targets.policy_actions,
                         net.action_space) * targets.policy_mask  # [B, K + 1]
    value = head_loss(preds.value, targets.value, net.config.value)  # [B, K + 1]
    reward = head_loss(preds.reward, targets.reward[:, 1:], net.config.reward)  # [B, K]
    if targets.value_mask is not None:  # past a truncation nothing is known
        value = value * targets.value_mask
        reward = reward * targets.value_mask[:, :-1]
    policy, value = policy @ step_weight, value @ step_weight
    reward = reward @ step_weight[1:]
    per_row = (config.policy_weight * policy + config.value_weight * value
               + config.reward_weight * reward)
    consistency = None
    if config.consistency_weight > 0:
        if batch.next_obs is None:
            raise ValueError("LossConfig.consistency_weight > 0 needs batch.next_obs [B, K, "
                             "...] (replay.sample(..., next_observations=True)), got None.")
        # o_{t+k} is an observation of the episode where position k is in it.
        inside = targets.policy_mask[:, 1:].astype(jnp.float32)  # [B, K]
        consistency = (consistency_loss(net, preds.latents, batch.next_obs) * inside
                       ) @ step_weight[1:]
        per_row = per_row + config.consistency_weight * consistency
    loss = jnp.mean(batch.weights * per_row)
    v0 = head_scalar(preds.value[:, 0], net.config.value)
    metrics = {"loss": loss, "policy_loss": jnp.mean(policy), "value_loss": jnp.mean(value),
               "reward_loss": jnp.mean(reward),
               "priority": jax.lax.stop_gradient(jnp.abs(v0 - targets.value[:, 0]))}
    if consistency is not None:
        metrics["consistency_loss"] = jnp.mean(consistency)
    return loss, metrics


def make_optimizer(config: LossConfig) -> optax.GradientTransformation:
    """Coupled weight decay on the kernels, then Adam with ``config``'s step size:
    a constant (the state of plain Adam) or a schedule of the optimiser step
    (Adam's state then also counts the steps, so a checkpoint resumes it where it
    stopped)."""
    lr = schedule_learning_rate(config.lr_schedule, config.learning_rate,
                                config.lr_decay_steps, config.lr_final_fraction)
    return optax.chain(optax.add_decayed_weights(config.weight_decay, mask=decay_mask),
                       optax.adam(lr))


def train_step(graphdef: nnx.GraphDef, optimizer: optax.GradientTransformation,
               config: LossConfig, params: Any, opt_state: Any, batch: Batch
               ) -> tuple[Any, Any, dict[str, jax.Array]]:
    """One optimiser step; ``(params, opt_state, metrics)``. Jit it with
    ``graphdef``, ``optimizer`` and ``config`` static (or closed over)."""

    def loss(p):
        return unroll_loss(nnx.merge(graphdef, p), batch, config)

    (_, metrics), grads = jax.value_and_grad(loss, has_aux=True)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, metrics


def update_target(params: Any, target: Any, step: jax.Array, every: int) -> Any:
    """The target network after optimiser step ``step`` (counted from 1): a copy
    of ``params`` when ``step % every == 0``, else ``target`` unchanged (the
    periodic copy of DQN, Mnih et al. 2015, which MuZero Reanalyse uses for its
    value bootstraps). A select inside the jitted step, no host round trip;
    ``every = 0`` keeps no target (returns ``params``)."""
    if every == 0:
        return params
    copy = jnp.asarray(step) % every == 0
    return jax.tree.map(lambda p, t: jnp.where(copy, p, t), params, target)


def polyak_average(average: Any, params: Any, decay: float) -> Any:
    """The exponential moving average of the parameters after one more iterate:
    ``decay * average + (1 - decay) * params``, leaf by leaf (Polyak and Juditsky
    1992 average the iterates of stochastic approximation; the exponential form
    weights the recent ones). ``decay = 0`` returns ``params``."""
    return jax.tree.map(lambda a, p: decay * a + (1.0 - decay) * p, average, params)

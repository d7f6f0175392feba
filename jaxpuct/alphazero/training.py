"""The loss and the optax train step.

Loss: policy cross-entropy against the search policy plus ``value_weight`` times
the value MSE against the game outcome (AlphaZero's loss, Silver et al. 2018,
without the L2 term). Weight decay is applied by the optimiser instead:
``optax.add_decayed_weights`` masked to weight matrices and convolution kernels,
chained before adam / sgd, which is the gradient of an L2 penalty (coupled decay,
as in the paper) without computing the penalty in the loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from jaxpuct.alphazero.buffer import ReplayBuffer, sample
from jaxpuct.alphazero.config import SelfPlayConfig

__all__ = ["decay_mask", "learning_rate_schedule", "loss_fn", "make_optimizer",
           "train_step", "weight_norm"]

# The name Flax gives the weight matrix of nnx.Linear and the filter of nnx.Conv.
_KERNEL = "kernel"


def _is_kernel(path: tuple) -> bool:
    return any(getattr(key, "key", None) == _KERNEL for key in path)


def decay_mask(params: Any) -> Any:
    """``params``-shaped bools: ``True`` on kernels (weight matrices and
    convolution filters), ``False`` on biases, norm scales and statistics."""
    return jax.tree_util.tree_map_with_path(lambda path, _: _is_kernel(path), params)


def weight_norm(params: Any) -> jax.Array:
    """``[]`` sum of squares of the decayed weights (a metric)."""
    leaves = jax.tree.leaves(jax.tree.map(lambda w, m: jnp.sum(w ** 2) if m else 0.0,
                                          params, decay_mask(params)))
    return sum(leaves, jnp.zeros((), jnp.float32))


def learning_rate_schedule(config: SelfPlayConfig) -> optax.Schedule | float:
    """The learning rate per optimiser step: constant, or a cosine decay to
    ``lr_final_fraction`` of it over ``lr_decay_steps`` steps and constant after
    (Loshchilov and Hutter 2017, "SGDR", without restarts). The schedule depends
    on the step only, so a run can be extended past its first horizon."""
    if config.lr_schedule == "constant":
        return config.learning_rate
    return optax.cosine_decay_schedule(config.learning_rate, config.lr_decay_steps,
                                       alpha=config.lr_final_fraction)


def make_optimizer(config: SelfPlayConfig) -> optax.GradientTransformation:
    """Masked coupled weight decay, then adam or sgd with momentum."""
    lr = learning_rate_schedule(config)
    if config.optimizer == "adam":
        base = optax.adam(lr)
    else:
        base = optax.sgd(lr, momentum=config.momentum)
    return optax.chain(optax.add_decayed_weights(config.weight_decay, mask=decay_mask), base)


def loss_fn(apply_fn: Callable, value_weight: float, params: Any, obs: jax.Array,
            target_policy: jax.Array, target_value: jax.Array
            ) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """``(loss, (policy_loss, value_loss))`` on a minibatch.

    Args:
      apply_fn: ``(params, obs [M, ...]) -> (logits [M, A], value [M])``.
      value_weight: weight of the value MSE.
      target_policy: ``[M, A]`` search policies; target_value: ``[M]`` outcomes.
    """
    logits, value = apply_fn(params, obs)
    policy_loss = -jnp.mean(jnp.sum(target_policy * jax.nn.log_softmax(logits), axis=-1))
    value_loss = jnp.mean((value - target_value) ** 2)
    return policy_loss + value_weight * value_loss, (policy_loss, value_loss)


def train_step(apply_fn: Callable, optimizer: optax.GradientTransformation,
               config: SelfPlayConfig, params: Any, opt_state: Any, buffer: ReplayBuffer,
               rng: jax.Array) -> tuple[Any, Any, dict[str, jax.Array]]:
    """One optimiser step on a uniform minibatch of the filled rows; returns
    ``(params, opt_state, metrics)`` (metrics are ``[]`` floats)."""
    obs, policy, outcome = sample(buffer, rng, config.train_batch_size)
    (loss, (pl, vl)), grads = jax.value_and_grad(
        lambda p: loss_fn(apply_fn, config.value_weight, p, obs, policy, outcome),
        has_aux=True)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, {"loss": loss, "policy_loss": pl, "value_loss": vl,
                               "l2": weight_norm(params)}

"""The loss and the optax train step.

Loss: policy cross-entropy against the search policy plus ``value_weight`` times
the value MSE against the game outcome (AlphaZero's loss, Silver et al. 2018,
without the L2 term). With ``value_target_mix = w > 0`` the value target is
``(1 - w) z + w q``, ``z`` the outcome and ``q`` the root's search value at that
position: ``z`` is unbiased but noisy (one result per game, exploration moves
included), ``q`` less noisy but biased towards the network that searched; their
average was the better target for connect four in A. Prasad, "Lessons from
AlphaZero (part 4): Improving the Training Target" (Oracle developers blog, 2018).
With ``symmetry_augment`` each row is replaced by a random symmetry of the board
(:mod:`jaxpuct.alphazero.symmetry`). Weight decay is applied by the optimiser instead:
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

from jaxpuct.alphazero.buffer import ReplayBuffer, sample_rows
from jaxpuct.alphazero.config import SelfPlayConfig

__all__ = ["decay_mask", "learning_rate_schedule", "loss_fn", "make_optimizer",
           "schedule_learning_rate", "train_step", "value_target", "weight_norm"]

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


def schedule_learning_rate(kind: str, learning_rate: float, decay_steps: int,
                           final_fraction: float) -> optax.Schedule | float:
    """The learning rate per optimiser step (shared by AlphaZero's and MuZero's
    optimisers): ``kind`` "constant" gives the float itself (so the optimiser
    state has no step count, as before schedules existed); "cosine" a decay from
    ``learning_rate`` to ``final_fraction * learning_rate`` over ``decay_steps``
    steps, ``lr(t) = lr * (f + (1 - f) (1 + cos(pi min(t, T) / T)) / 2)``, and
    constant after (Loshchilov and Hutter 2017, "SGDR: Stochastic Gradient
    Descent with Warm Restarts", without restarts). It depends on the step only,
    so a run can be extended past its first horizon."""
    if kind == "constant":
        return learning_rate
    if kind != "cosine":
        raise ValueError(f"lr_schedule must be 'constant' or 'cosine', got {kind!r}.")
    if not decay_steps >= 1:
        raise ValueError(f"lr_decay_steps must be >= 1 for a cosine schedule, got "
                         f"{decay_steps!r}.")
    if not 0.0 <= final_fraction <= 1.0:
        raise ValueError(f"lr_final_fraction must be in [0, 1], got {final_fraction!r}.")
    return optax.cosine_decay_schedule(learning_rate, decay_steps, alpha=final_fraction)


def learning_rate_schedule(config: SelfPlayConfig) -> optax.Schedule | float:
    """The learning rate per optimiser step of ``config``
    (:func:`schedule_learning_rate` of its ``lr_*`` fields)."""
    return schedule_learning_rate(config.lr_schedule, config.learning_rate,
                                  config.lr_decay_steps, config.lr_final_fraction)


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


def value_target(outcome: jax.Array, root_value: jax.Array | None, mix: float
                 ) -> jax.Array:
    """``[M]`` value targets: ``(1 - mix) * outcome + mix * root_value``."""
    if mix == 0.0 or root_value is None:
        return outcome
    return (1.0 - mix) * outcome + mix * root_value


def train_step(apply_fn: Callable, optimizer: optax.GradientTransformation,
               config: SelfPlayConfig, params: Any, opt_state: Any, buffer: ReplayBuffer,
               rng: jax.Array, *, batch_sharding: jax.sharding.Sharding | None = None
               ) -> tuple[Any, Any, dict[str, jax.Array]]:
    """One optimiser step on a uniform minibatch of the filled rows; returns
    ``(params, opt_state, metrics)`` (metrics are ``[]`` floats).

    ``batch_sharding``: where the minibatch's rows go (``NamedSharding(mesh,
    P("batch"))``; ``None``: wherever ``jit`` puts them). Drawn from a replicated
    buffer, the rows are replicated, and ``jit`` then runs the whole minibatch on
    every device; split over the devices, each computes its rows' gradient and
    the mean over the minibatch becomes an all-reduce (data parallelism).
    """
    # The minibatch draws from rng itself, as before augmentation existed, so
    # that runs without it are unchanged.
    obs, policy, outcome, root_value = sample_rows(buffer, rng, config.train_batch_size)
    if batch_sharding is not None:
        obs, policy, outcome, root_value = jax.lax.with_sharding_constraint(
            (obs, policy, outcome, root_value), batch_sharding)
    target = value_target(outcome, root_value, config.value_target_mix)
    if config.symmetry_augment:
        from jaxpuct.alphazero.symmetry import symmetry_augment_fn
        obs, policy = symmetry_augment_fn(config.game)(jax.random.fold_in(rng, 1), obs,
                                                       policy)
    (loss, (pl, vl)), grads = jax.value_and_grad(
        lambda p: loss_fn(apply_fn, config.value_weight, p, obs, policy, target),
        has_aux=True)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, {"loss": loss, "policy_loss": pl, "value_loss": vl,
                               "l2": weight_norm(params)}

"""Pendulum swing-up by sampled search with the true dynamics and a learned value.

The continuous-action path of Hubert et al. (2021, "Learning and Planning in
Complex Action Spaces") in its AlphaZero form: the search knows the rules
(:mod:`jaxpuct.testing.pendulum`, Gymnasium's ``Pendulum-v1``) and a small
network gives it a Gaussian proposal over the torque and a value.

    python -m examples.pendulum --iterations 30
    python -m examples.pendulum --model learned --hidden 128 --latent-size 64 \\
        --iterations 60   # Sampled MuZero

Each iteration plays ``--batch-size`` episodes of 200 steps in lockstep, one
``jax.jit``: at every step :func:`jaxpuct.sampled_policy` draws ``K`` torques at
each node from the network's Gaussian (``GaussianActions(1)``), searches them
with PUCT (``PUCTConfig.mctx_muzero()``: min-max normalised Q, the rewards are
costs of any scale) through the true dynamics, and plays a torque drawn in
proportion to the root's visits. The targets are the search's weights over its
``K`` root samples (the policy loss ``-Σ_k w_k log π(a_k)``,
:func:`jaxpuct.sampled_policy_loss`) and the ``n``-step return bootstrapped with
the search's root values, discounted by ``--discount``; a replay of the last
``--replay-iterations`` iterations feeds ``--train-steps`` Adam steps. Every
``--eval-every`` iterations the greedy search (most visited torque, no noise) and
the network's mean torque alone play 100 fixed episodes; the mean undiscounted
return is printed with its 95% interval, with the CPU seconds so far.

``--model learned`` is Sampled MuZero (Hubert et al. 2021) on the same task, built
from :mod:`jaxpuct.muzero`: a ``MuZeroNetwork`` over ``GaussianActions(1)``
(representation ``h(obs)``, dynamics ``g(latent, torque) -> (reward, latent)``,
prediction ``f(latent) -> (Gaussian proposal, value)``, categorical value and
reward heads over ``h``-transformed supports), searched through ``MuZeroModel``
and trained by ``muzero.training.train_step``: unrolled ``--unroll-steps`` along
the stored torques, the gradient halved at each dynamics input and each unrolled
step weighted ``1 / K``. The environment is used only to play the chosen torque.

Both models store their episodes in the package's trajectory buffer
(``muzero.replay``) and draw their targets from it: an episode is *truncated* at
200 steps, not ended, so its last ``n``-step targets bootstrap with the value
after step 200 and nothing past it is trained (``muzero.targets``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import jaxpuct
from jaxpuct.alphazero import config as config_lib
from jaxpuct.muzero import replay as replay_lib
from jaxpuct.muzero import training as training_lib
from jaxpuct.muzero.model import MuZeroModel
from jaxpuct.muzero.networks import MuZeroNetwork, NetworkConfig
from jaxpuct.sampled import GaussianActions
from jaxpuct.testing import pendulum as pend

EVAL_EPISODES = 100
EVAL_SEED = 12345


@dataclasses.dataclass(frozen=True)
class Config:
    """A run (hashable: the jitted functions take it as a static argument).

    Attributes:
      seed: PRNG seed.
      batch_size: episodes played in lockstep per iteration.
      num_simulations: simulations per step.
      num_samples: K, torques sampled at each node.
      hidden: width of the network's two hidden layers.
      discount: gamma of the search and of the value targets.
      td_steps: n of the n-step value target.
      min_log_std: floor of the proposal's log sigma (keeps the samples spread;
        a fit to the search's own draws shrinks sigma every step otherwise).
      value_scale: the value head predicts value / value_scale.
      train_steps: Adam steps per iteration.
      train_batch_size: samples per Adam step.
      replay_iterations: iterations of data kept for training.
      learning_rate: Adam's step size.
      dirichlet_fraction: root noise over the K root samples in self-play.
      model: true (the search steps the real dynamics) or learned (MuZero: the
        search steps a learned model).
      latent_size: features of the learned model's latent state.
      unroll_steps: steps the learned model is unrolled in training.
      value_support: n of the learned value head's 2n + 1 atoms over h(value).
      reward_support: n of the learned reward head's atoms over h(reward).
      value_weight: weight of the learned model's value loss.
      layers: hidden layers (of width hidden) in each of the learned model's
        three functions.
    """

    seed: int = 0
    batch_size: int = 64
    num_simulations: int = 32
    num_samples: int = 8
    hidden: int = 64
    discount: float = 0.97
    td_steps: int = 10
    min_log_std: float = math.log(0.1)
    value_scale: float = 100.0
    train_steps: int = 100
    train_batch_size: int = 256
    replay_iterations: int = 4
    learning_rate: float = 1e-3
    dirichlet_fraction: float = 0.25
    model: str = dataclasses.field(default="true", metadata={"choices": ("true", "learned")})
    latent_size: int = 32
    unroll_steps: int = 5
    value_support: int = 25
    reward_support: int = 5
    value_weight: float = 0.25
    layers: int = 1

    def __post_init__(self):
        if self.model not in ("true", "learned"):
            raise ValueError(f"Config.model must be 'true' or 'learned', got {self.model!r}.")

    @property
    def space(self) -> GaussianActions:
        return GaussianActions(1, min_log_std=self.min_log_std)

    @property
    def network(self) -> NetworkConfig:
        """The learned model's shape: ``layers`` hidden layers per function;
        values reach about -540 (h = 22.6) and a step's reward -16.3 (h = 3.2)."""
        return NetworkConfig(kind="mlp", hidden=(self.hidden,) * self.layers,
                             latent_size=self.latent_size,
                             value_support=self.value_support,
                             reward_support=self.reward_support,
                             action_scale=pend.MAX_TORQUE)

    @property
    def loss(self) -> training_lib.LossConfig:
        return training_lib.LossConfig(value_weight=self.value_weight,
                                       learning_rate=self.learning_rate)

    @property
    def buffer_rows(self) -> int:
        return self.replay_iterations * self.batch_size * pend.EPISODE_STEPS


class Network(nnx.Module):
    """``obs [B, 3] -> (prior params [B, 2]: mean torque, log sigma; value [B])``."""

    def __init__(self, hidden: int, value_scale: float, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(pend.OBS_SIZE, hidden, rngs=rngs)
        self.l2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.head = nnx.Linear(hidden, 3, rngs=rngs)
        self.value_scale = value_scale

    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        return heads(self.head(jax.nn.relu(self.l2(jax.nn.relu(self.l1(obs))))),
                     self.value_scale)


def heads(out: jax.Array, value_scale: float) -> tuple[jax.Array, jax.Array]:
    """``out [B, 3]`` -> (prior params ``[B, 2]``: mean torque ``2 tanh``, log sigma;
    value ``[B]``, scaled by ``value_scale``)."""
    mean = pend.MAX_TORQUE * jnp.tanh(out[:, :1])
    return jnp.concatenate([mean, out[:, 1:2]], axis=-1), value_scale * out[:, 2]


def new_network(config: Config, key: jax.Array) -> nnx.Module:
    if config.model == "learned":
        return MuZeroNetwork(config.network, config.space, pend.OBS_SIZE, rngs=nnx.Rngs(key))
    return Network(config.hidden, config.value_scale, nnx.Rngs(key))


def predict(config: Config, graphdef: nnx.GraphDef, params: Any, obs: jax.Array
            ) -> tuple[jax.Array, jax.Array]:
    """``obs [B, 3]`` -> (prior params ``[B, 2]``, value ``[B]``) of either model."""
    net = nnx.merge(graphdef, params)
    if config.model != "learned":
        return net(obs)
    root = MuZeroModel(graphdef, config.discount).root(params, obs)
    return root.prior_logits, root.value


def make_search(config: Config, graphdef: nnx.GraphDef):
    """``(params, keys [B], state, greedy) -> SampledPolicyOutput``: the search
    from the real ``state``, through the true dynamics or the learned model."""

    def true_recurrent_fn(params, key, action, state):
        del key
        state, reward = pend.step(state, action[:, 0])
        prior, value = nnx.merge(graphdef, params)(pend.observe(state))
        return jaxpuct.RecurrentFnOutput(
            reward=reward, discount=jnp.full_like(reward, config.discount),
            prior_logits=prior, value=value), state

    def search(params, keys, state, greedy: bool):
        obs = pend.observe(state)
        if config.model == "learned":
            model = MuZeroModel(graphdef, config.discount)
            root, recurrent_fn = model.root(params, obs), model.recurrent_fn
        else:
            prior, value = nnx.merge(graphdef, params)(obs)
            root = jaxpuct.RootFnOutput(prior_logits=prior, value=value, embedding=state)
            recurrent_fn = true_recurrent_fn
        return jaxpuct.sampled_policy(
            params, keys, root, recurrent_fn, config.num_simulations,
            num_samples=config.num_samples, action_space=config.space,
            selection=jaxpuct.PUCTConfig.mctx_muzero(),
            dirichlet_fraction=0.0 if greedy else config.dirichlet_fraction,
            temperature=0.0 if greedy else 1.0)

    return search


class Steps(NamedTuple):
    """``[B, T, ...]`` per step: ``obs [3]``, ``sampled [K, 1]``, ``weights [K]``,
    ``reward``, ``root_value``; ``last_value [B]`` (the network's value after the
    last step, the bootstrap past the end); ``action [B, T, 1]``, the torque
    played."""

    obs: jax.Array
    sampled: jax.Array
    weights: jax.Array
    reward: jax.Array
    root_value: jax.Array
    last_value: jax.Array
    action: jax.Array


@functools.partial(jax.jit, static_argnums=(0, 1, 4))
def play(config: Config, graphdef: nnx.GraphDef, params: Any, key: jax.Array,
         greedy: bool = False) -> Steps:
    """``B`` episodes of 200 steps (``B`` = the batch size, or 100 fixed
    evaluation starts when ``greedy``)."""
    search = make_search(config, graphdef)
    batch = EVAL_EPISODES if greedy else config.batch_size
    start_key, key = jax.random.split(key)
    state = pend.reset(jax.random.key(EVAL_SEED) if greedy else start_key, batch)

    def one(state, key):
        out = search(params, jax.random.split(key, batch), state, greedy)
        next_state, reward = pend.step(state, out.action[:, 0])
        record = (pend.observe(state), out.sampled_actions, out.action_weights, reward,
                  out.search_tree.summary().value, out.action)
        return next_state, record

    state, records = jax.lax.scan(one, state, jax.random.split(key, pend.EPISODE_STEPS))
    _, last_value = predict(config, graphdef, params, pend.observe(state))
    obs, sampled, weights, reward, root_value, action = (jnp.swapaxes(x, 0, 1)
                                                        for x in records)
    return Steps(obs, sampled, weights, reward, root_value, last_value, action)


@functools.partial(jax.jit, static_argnums=(0, 1))
def prior_return(config: Config, graphdef: nnx.GraphDef, params: Any) -> jax.Array:
    """``[100]`` returns of the network's mean torque alone, no search."""

    def one(state, _):
        prior, _ = predict(config, graphdef, params, pend.observe(state))
        return pend.step(state, prior[:, 0])

    _, rewards = jax.lax.scan(one, pend.reset(jax.random.key(EVAL_SEED), EVAL_EPISODES),
                              None, pend.EPISODE_STEPS)
    return jnp.sum(rewards, axis=0)


def empty_replay(config: Config) -> replay_lib.TrajectoryBuffer:
    """The last ``replay_iterations`` iterations' episodes (a ring of whole ones)."""
    return replay_lib.empty_buffer(config.buffer_rows, (pend.OBS_SIZE,), jnp.float32, 0,
                                   num_samples=config.num_samples, action_dim=1)


@functools.partial(jax.jit, static_argnums=0, donate_argnums=1)
def store(config: Config, replay: replay_lib.TrajectoryBuffer, steps: Steps
          ) -> replay_lib.TrajectoryBuffer:
    """Appends ``steps``' episodes over the oldest ones, each truncated after its
    200th step with the network's value there as the bootstrap."""
    batch = steps.reward.shape[0]
    shape = steps.reward.shape
    return replay_lib.write_episodes(
        replay, obs=steps.obs, action=steps.action, reward=steps.reward,
        policy=steps.weights, root_value=steps.root_value,
        episode_end=jnp.zeros(shape, jnp.bool_), written=jnp.ones(shape, jnp.bool_),
        policy_actions=steps.sampled, truncated=jnp.ones((batch,), jnp.bool_),
        truncation_value=steps.last_value)


def sample(config: Config, replay: replay_lib.TrajectoryBuffer, key: jax.Array
           ) -> replay_lib.Batch:
    """Uniform windows; the true model reads only their first position."""
    unroll = config.unroll_steps if config.model == "learned" else 1
    return replay_lib.sample(replay, key, config.train_batch_size, unroll, config.td_steps,
                             config.discount)


def loss_fn(config: Config, graphdef: nnx.GraphDef, params: Any, batch: replay_lib.Batch
            ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The learned model's unrolled MuZero loss, or the true model's loss at the
    first position: ``-Σ_k w_k log π(a_k)`` and the squared value error."""
    if config.model == "learned":
        loss, metrics = training_lib.unroll_loss(nnx.merge(graphdef, params), batch,
                                                 config.loss)
        return loss, {k: metrics[k] for k in ("policy_loss", "value_loss", "reward_loss")}
    targets = batch.targets
    prior, value = nnx.merge(graphdef, params)(batch.obs)
    policy = jnp.mean(jaxpuct.sampled_policy_loss(config.space, prior,
                                                  targets.policy_actions[:, 0],
                                                  targets.policy[:, 0]))
    value_loss = jnp.mean(((value - targets.value[:, 0]) / config.value_scale) ** 2)
    return policy + value_loss, {"policy_loss": policy, "value_loss": value_loss,
                                 "reward_loss": jnp.zeros(())}


def make_optimizer(config: Config) -> optax.GradientTransformation:
    if config.model == "learned":
        return training_lib.make_optimizer(config.loss)
    return optax.adam(config.learning_rate)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def train(config: Config, graphdef: nnx.GraphDef, optimizer: optax.GradientTransformation,
          params: Any, opt_state: Any, replay: replay_lib.TrajectoryBuffer, key: jax.Array):
    """``train_steps`` optimiser steps on uniform minibatches of the replay."""

    def body(i, carry):
        params, opt_state, sums = carry
        batch = sample(config, replay, jax.random.fold_in(key, i))
        (_, metrics), grads = jax.value_and_grad(
            lambda p: loss_fn(config, graphdef, p, batch), has_aux=True)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        sums = {k: sums[k] + metrics[k] for k in sums}
        return optax.apply_updates(params, updates), opt_state, sums

    zeros = {k: jnp.zeros(()) for k in ("policy_loss", "value_loss", "reward_loss")}
    params, opt_state, sums = jax.lax.fori_loop(0, config.train_steps, body,
                                                (params, opt_state, zeros))
    return params, opt_state, {k: v / max(config.train_steps, 1) for k, v in sums.items()}


def interval(returns: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its normal 95% interval."""
    return float(returns.mean()), float(1.96 * returns.std(ddof=1) / math.sqrt(len(returns)))


def evaluate(config: Config, graphdef: nnx.GraphDef, params: Any) -> dict[str, float]:
    steps = play(config, graphdef, params, jax.random.key(EVAL_SEED), True)
    search_mean, search_ci = interval(np.asarray(jnp.sum(steps.reward, axis=1)))
    prior_mean, prior_ci = interval(np.asarray(prior_return(config, graphdef, params)))
    return {"search_return": round(search_mean, 1), "search_ci95": round(search_ci, 1),
            "prior_return": round(prior_mean, 1), "prior_ci95": round(prior_ci, 1)}


def run(config: Config, iterations: int, eval_every: int, log=print) -> dict:
    """Trains for ``iterations``; returns the last evaluation."""
    init_key, key = jax.random.split(jax.random.key(config.seed))
    graphdef, params = nnx.split(new_network(config, init_key))
    optimizer = make_optimizer(config)
    opt_state = optimizer.init(params)
    replay = empty_replay(config)
    last: dict = {}
    begin = time.process_time()
    for iteration in range(1, iterations + 1):
        play_key, train_key, key = jax.random.split(key, 3)
        steps = play(config, graphdef, params, play_key)
        replay = store(config, replay, steps)
        params, opt_state, metrics = train(config, graphdef, optimizer, params, opt_state,
                                           replay, train_key)
        row = {"iteration": iteration, "env_steps": iteration * config.batch_size * 200,
               "selfplay_return": round(float(jnp.mean(jnp.sum(steps.reward, axis=1))), 1),
               **{k: round(float(v), 4) for k, v in metrics.items()}}
        if (eval_every and iteration % eval_every == 0) or iteration == iterations:
            row.update(evaluate(config, graphdef, params))
            last = row
        row["cpu_seconds"] = round(time.process_time() - begin, 1)
        log(json.dumps(row))
    return last


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m examples.pendulum",
                                description=__doc__.splitlines()[0])
    # The flags are the fields of Config, with its Attributes text as help.
    config_lib.add_arguments(p, Config)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--eval-every", type=int, default=5)
    args = p.parse_args(argv)
    return run(config_lib.from_namespace(Config, args), args.iterations, args.eval_every)


if __name__ == "__main__":
    main()

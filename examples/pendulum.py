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

``--model learned`` is Sampled MuZero (Hubert et al. 2021) on the same task: the
search runs inside a learned model, representation ``h(obs)``, dynamics
``g(latent, torque) -> (reward, latent)`` and prediction ``f(latent) -> (Gaussian
proposal, value)`` (latents min-max scaled per sample, as MuZero's appendix G),
trained by unrolling it ``--unroll-steps`` along the stored torques on the same
targets plus the observed rewards, the gradient halved at each dynamics input and
each unrolled step weighted ``1 / K`` (:func:`jaxpuct.muzero.training.scale_gradient`).
The environment is used only to play the chosen torque.
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
from jaxpuct.muzero.networks import scale_latent
from jaxpuct.muzero.training import scale_gradient
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
      reward_scale: the learned reward head predicts reward / reward_scale.
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
    model: str = "true"
    latent_size: int = 32
    unroll_steps: int = 5
    reward_scale: float = 10.0

    def __post_init__(self):
        if self.model not in ("true", "learned"):
            raise ValueError(f"Config.model must be 'true' or 'learned', got {self.model!r}.")

    @property
    def space(self) -> GaussianActions:
        return GaussianActions(1, min_log_std=self.min_log_std)


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


class LearnedModel(nnx.Module):
    """MuZero's three functions for the pendulum (``--model learned``):
    ``represent(obs [B, 3]) -> latent [B, L]``, ``dynamics(latent, torque [B, 1]) ->
    (reward [B], latent)`` and ``predict(latent) -> (prior params [B, 2], value
    [B])``; latents min-max scaled to ``[0, 1]`` per sample."""

    def __init__(self, config: Config, rngs: nnx.Rngs):
        h, latent = config.hidden, config.latent_size
        self.r1 = nnx.Linear(pend.OBS_SIZE, h, rngs=rngs)
        self.r2 = nnx.Linear(h, latent, rngs=rngs)
        self.d1 = nnx.Linear(latent + 1, h, rngs=rngs)
        self.d2 = nnx.Linear(h, h, rngs=rngs)
        self.d3 = nnx.Linear(h, latent + 1, rngs=rngs)
        self.p1 = nnx.Linear(latent, h, rngs=rngs)
        self.p2 = nnx.Linear(h, 3, rngs=rngs)
        self.value_scale, self.reward_scale = config.value_scale, config.reward_scale

    def represent(self, obs: jax.Array) -> jax.Array:
        return scale_latent(self.r2(jax.nn.relu(self.r1(obs))), 1e-5)

    def dynamics(self, latent: jax.Array, torque: jax.Array) -> tuple[jax.Array, jax.Array]:
        # The environment clips the torque: the model sees what is applied.
        u = jnp.clip(torque, -pend.MAX_TORQUE, pend.MAX_TORQUE) / pend.MAX_TORQUE
        x = jax.nn.relu(self.d1(jnp.concatenate([latent, u], axis=-1)))
        out = self.d3(jax.nn.relu(self.d2(x)))
        return self.reward_scale * out[:, 0], scale_latent(out[:, 1:], 1e-5)

    def predict(self, latent: jax.Array) -> tuple[jax.Array, jax.Array]:
        return heads(self.p2(jax.nn.relu(self.p1(latent))), self.value_scale)

    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        return self.predict(self.represent(obs))


def new_network(config: Config, key: jax.Array) -> nnx.Module:
    if config.model == "learned":
        return LearnedModel(config, nnx.Rngs(key))
    return Network(config.hidden, config.value_scale, nnx.Rngs(key))


def make_search(config: Config, graphdef: nnx.GraphDef):
    """``(params, keys [B], state, greedy) -> SampledPolicyOutput``: the search from
    the real ``state``, through the true dynamics or the learned model."""

    learned = config.model == "learned"

    def recurrent_fn(params, key, action, embedding):
        del key
        net = nnx.merge(graphdef, params)
        if learned:  # the embedding is a latent state
            reward, embedding = net.dynamics(embedding, action)
            prior, value = net.predict(embedding)
        else:  # the embedding is the pendulum's state
            embedding, reward = pend.step(embedding, action[:, 0])
            prior, value = net(pend.observe(embedding))
        return jaxpuct.RecurrentFnOutput(
            reward=reward, discount=jnp.full_like(reward, config.discount),
            prior_logits=prior, value=value), embedding

    def search(params, keys, state, greedy: bool):
        net = nnx.merge(graphdef, params)
        obs = pend.observe(state)
        embedding = net.represent(obs) if learned else state
        prior, value = net.predict(embedding) if learned else net(obs)
        root = jaxpuct.RootFnOutput(prior_logits=prior, value=value, embedding=embedding)
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
    action: Any = None


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
    _, last_value = nnx.merge(graphdef, params)(pend.observe(state))
    obs, sampled, weights, reward, root_value, action = (jnp.swapaxes(x, 0, 1)
                                                        for x in records)
    return Steps(obs, sampled, weights, reward, root_value, last_value, action)


@functools.partial(jax.jit, static_argnums=(0, 1))
def prior_return(config: Config, graphdef: nnx.GraphDef, params: Any) -> jax.Array:
    """``[100]`` returns of the network's mean torque alone, no search."""
    net = nnx.merge(graphdef, params)

    def one(state, _):
        prior, _ = net(pend.observe(state))
        return pend.step(state, prior[:, 0])

    _, rewards = jax.lax.scan(one, pend.reset(jax.random.key(EVAL_SEED), EVAL_EPISODES),
                              None, pend.EPISODE_STEPS)
    return jnp.sum(rewards, axis=0)


def value_targets(steps: Steps, discount: float, td_steps: int) -> jax.Array:
    """``[B, T]``: ``z_t = Σ_{i<m} γ^i r_{t+i} + γ^m v_{t+m}``, ``m = min(n, T - t)``,
    ``v`` the root search values and ``v_T`` the network's value after the last
    step (an episode is cut at 200 steps, not ended)."""
    batch, length = steps.reward.shape
    values = jnp.concatenate([steps.root_value, steps.last_value[:, None]], axis=1)
    rewards = jnp.concatenate([steps.reward, jnp.zeros((batch, td_steps))], axis=1)
    t = jnp.arange(length)
    m = jnp.minimum(td_steps, length - t)  # [T]
    total = jnp.zeros((batch, length))
    for i in range(td_steps):
        total = total + jnp.where(i < m, discount ** i * rewards[:, i:i + length], 0.0)
    bootstrap = jnp.take_along_axis(values, jnp.broadcast_to(t + m, (batch, length)), axis=1)
    return total + (discount ** m) * bootstrap


class Replay(NamedTuple):
    """The last ``replay_iterations`` iterations' steps, flat ``[M, ...]``: row
    ``(slot B + b) T + t`` is step ``t`` of episode ``b`` of a slot, so an
    episode's steps are consecutive rows (the learned model's unrolls read them)."""

    obs: jax.Array
    sampled: jax.Array
    weights: jax.Array
    value: jax.Array
    action: jax.Array
    reward: jax.Array
    filled: jax.Array


def empty_replay(config: Config) -> Replay:
    rows = config.replay_iterations * config.batch_size * pend.EPISODE_STEPS
    k = config.num_samples
    return Replay(obs=jnp.zeros((rows, pend.OBS_SIZE)), sampled=jnp.zeros((rows, k, 1)),
                  weights=jnp.zeros((rows, k)), value=jnp.zeros((rows,)),
                  action=jnp.zeros((rows, 1)), reward=jnp.zeros((rows,)),
                  filled=jnp.zeros((), jnp.int32))


@functools.partial(jax.jit, static_argnums=0, donate_argnums=1)
def store(config: Config, replay: Replay, steps: Steps, iteration: jax.Array) -> Replay:
    """Writes iteration ``iteration``'s steps (counted from 0, written in order)
    into slot ``iteration % replay_iterations``, over the oldest data."""
    z = value_targets(steps, config.discount, config.td_steps)
    new = (steps.obs, steps.sampled, steps.weights, z, steps.action, steps.reward)
    size = config.batch_size * pend.EPISODE_STEPS
    offset = (iteration % config.replay_iterations) * size
    fields = [jax.lax.dynamic_update_slice_in_dim(old, x.reshape(size, *x.shape[2:]).astype(
        old.dtype), offset, axis=0) for old, x in zip(replay[:6], new, strict=True)]
    return Replay(*fields, filled=jnp.minimum(replay.filled + size, replay.obs.shape[0]))


def loss_fn(config: Config, graphdef: nnx.GraphDef, params: Any, replay: Replay,
            rows: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The loss at replay rows ``rows [N]`` (start rows of unrolls when learned)."""
    if config.model == "learned":
        return unrolled_loss(config, graphdef, params, replay, rows)
    prior, value = nnx.merge(graphdef, params)(replay.obs[rows])
    policy = jnp.mean(jaxpuct.sampled_policy_loss(config.space, prior, replay.sampled[rows],
                                                  replay.weights[rows]))
    value_loss = jnp.mean(((value - replay.value[rows]) / config.value_scale) ** 2)
    return policy + value_loss, {"policy_loss": policy, "value_loss": value_loss,
                                 "reward_loss": jnp.zeros(())}


def unrolled_loss(config: Config, graphdef: nnx.GraphDef, params: Any, replay: Replay,
                  rows: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """MuZero's loss along ``U`` unroll steps from start rows ``rows [N]`` (each at
    least ``U`` steps before its episode's end): the policy and value targets at
    each of the ``U + 1`` positions, the observed rewards of the ``U`` torques
    played; step weights 1 and ``1 / U``, the gradient halved at each dynamics
    input (Schrittwieser et al. 2020, appendix G)."""
    model = nnx.merge(graphdef, params)
    steps = config.unroll_steps
    latent = model.represent(replay.obs[rows])
    policy = value_loss = reward_loss = jnp.zeros(())
    for k in range(steps + 1):
        weight = 1.0 if k == 0 else 1.0 / steps
        at = rows + k
        prior, value = model.predict(latent)
        policy += weight * jnp.mean(jaxpuct.sampled_policy_loss(
            config.space, prior, replay.sampled[at], replay.weights[at]))
        value_loss += weight * jnp.mean(((value - replay.value[at]) / config.value_scale) ** 2)
        if k < steps:
            reward, latent = model.dynamics(scale_gradient(latent, 0.5), replay.action[at])
            reward_loss += jnp.mean(((reward - replay.reward[at]) / config.reward_scale) ** 2
                                    ) / steps
    return policy + value_loss + reward_loss, {"policy_loss": policy, "value_loss": value_loss,
                                               "reward_loss": reward_loss}


def sample_rows(config: Config, replay: Replay, key: jax.Array) -> jax.Array:
    """``[N]`` uniform rows of the filled replay; for the learned model, rows at
    least ``unroll_steps`` before the end of their episode."""
    n = config.train_batch_size
    if config.model != "learned":
        return jax.random.randint(key, (n,), 0, replay.filled)
    episode_key, step_key = jax.random.split(key)
    episode = jax.random.randint(episode_key, (n,), 0, replay.filled // pend.EPISODE_STEPS)
    t = jax.random.randint(step_key, (n,), 0, pend.EPISODE_STEPS - config.unroll_steps)
    return episode * pend.EPISODE_STEPS + t


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def train(config: Config, graphdef: nnx.GraphDef, optimizer: optax.GradientTransformation,
          params: Any, opt_state: Any, replay: Replay, key: jax.Array):
    """``train_steps`` Adam steps on uniform minibatches of the replay."""

    def body(i, carry):
        params, opt_state, sums = carry
        rows = sample_rows(config, replay, jax.random.fold_in(key, i))
        (_, metrics), grads = jax.value_and_grad(
            lambda p: loss_fn(config, graphdef, p, replay, rows), has_aux=True)(params)
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
    optimizer = optax.adam(config.learning_rate)
    opt_state = optimizer.init(params)
    replay = empty_replay(config)
    last: dict = {}
    begin = time.process_time()
    for iteration in range(1, iterations + 1):
        play_key, train_key, key = jax.random.split(key, 3)
        steps = play(config, graphdef, params, play_key)
        replay = store(config, replay, steps, jnp.int32(iteration - 1))
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
    for field in dataclasses.fields(Config):
        p.add_argument("--" + field.name.replace("_", "-"), type=type(field.default),
                       default=field.default,
                       choices=("true", "learned") if field.name == "model" else None)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--eval-every", type=int, default=5)
    args = vars(p.parse_args(argv))
    iterations, eval_every = args.pop("iterations"), args.pop("eval_every")
    return run(Config(**args), iterations, eval_every)


if __name__ == "__main__":
    main()

"""Backgammon by AlphaZero self-play with the true dice: chance-node search over
pgx's rules and a policy-value network.

    python -m examples.known_chance_backgammon --max-minutes 50 --run-dir /tmp/bg

The search is :func:`jaxpuct.stochastic_policy` over :mod:`jaxpuct.envs.pgx_backgammon`
(:func:`~jaxpuct.envs.pgx_backgammon.make_network_search_fns`): pgx's move at every
decision edge under the standard dice rule, the 21 rolls with their exact
probabilities at every chance node (the expectation backup), the network's prior
and value at every new node. A move is one pgx micro-move (one checker, one die).

Self-play is AlphaZero's (Silver et al. 2018): ``batch_size`` games in lockstep,
Dirichlet noise at the root, visit-count temperature 1 for the first
``temperature_moves`` micro-moves of a game, the visit distribution as the policy
target and the game's points (1, 2 or 3 for a single game, a gammon, a
backgammon) over ``value_scale`` as the value target; the buffer and the loss are
:mod:`jaxpuct.alphazero`'s (``buffer``, ``selfplay.record_ply``,
``training.loss_fn``). The network is a small MLP over Tesauro's TD-Gammon
encoding of the board (:func:`jaxpuct.envs.pgx_backgammon.features`).

Every ``--eval-every`` iterations the greedy network search plays ``eval_games``
games against the pure search with one random rollout per node (the jaxpuct agent
that scores about 0.5 against OpenSpiel's MCTSBot at equal simulations), at
``eval_simulations`` each, inside pgx; one JSON line per iteration. With
``--run-dir`` the parameters are saved there after every iteration
(:func:`save_params`, written atomically with a SHA-256), for
``python -m examples.arena_backgammon --checkpoint DIR`` (against OpenSpiel).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import itertools
import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import jaxpuct
from jaxpuct.alphazero import buffer as buffer_lib
from jaxpuct.alphazero import config as config_lib
from jaxpuct.alphazero import selfplay
from jaxpuct.alphazero.networks import MLPPolicyValue
from jaxpuct.alphazero.training import decay_mask, loss_fn
from jaxpuct.envs import pgx_backgammon as bg


@dataclasses.dataclass(frozen=True)
class Config:
    """A run (hashable: the jitted functions take it as a static argument).

    Attributes:
      seed: PRNG seed.
      batch_size: games played in lockstep.
      num_simulations: simulations per micro-move in self-play.
      selfplay_steps: micro-moves of every game per iteration.
      trajectory_length: micro-moves kept per game (a longer game is cut off there
        and scored 0).
      hidden: width of the network's hidden layers.
      layers: its hidden layers.
      value_scale: points the network's value 1 stands for.
      buffer_size: rows of the replay buffer.
      train_batch_size: positions per optimiser step.
      train_steps: optimiser steps per iteration.
      learning_rate: Adam's step size.
      weight_decay: coupled L2 weight on kernels.
      value_weight: weight of the value loss.
      dirichlet_fraction: root noise in self-play.
      dirichlet_alpha: its concentration.
      temperature_moves: micro-moves of a game played at temperature 1.
      rules: legal micro-moves in the tree: pgx's (the default: 13x cheaper per
        search than the standard rule's mask, which changes under 1% of positions)
        or standard (OpenSpiel's).
      eval_games: games of each evaluation.
      eval_simulations: simulations per micro-move of both sides in evaluation.
      eval_opponent: rollouts (the pure search with one random rollout per node) or
        random (uniform over the legal micro-moves).
    """

    seed: int = 0
    batch_size: int = 128
    num_simulations: int = 16
    selfplay_steps: int = 32
    trajectory_length: int = 400
    hidden: int = 128
    layers: int = 2
    value_scale: float = 3.0
    buffer_size: int = 200000
    train_batch_size: int = 256
    train_steps: int = 32
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    value_weight: float = 1.0
    dirichlet_fraction: float = 0.25
    dirichlet_alpha: float = 0.3
    temperature_moves: int = 10
    rules: str = "pgx"
    eval_games: int = 64
    eval_simulations: int = 16
    eval_opponent: str = "rollouts"

    def __post_init__(self):
        if self.eval_opponent not in ("rollouts", "random"):
            raise ValueError(f"eval_opponent must be 'rollouts' or 'random', got "
                             f"{self.eval_opponent!r}")
        if self.rules not in bg.RULES:
            raise ValueError(f"rules must be one of {bg.RULES}, got {self.rules!r}")


def make_network(config: Config, rngs: nnx.Rngs) -> MLPPolicyValue:
    return MLPPolicyValue(bg.NUM_ACTIONS, bg.NUM_FEATURES, hidden=(config.hidden,) * config.layers,
                          rngs=rngs)


def make_apply(graphdef: nnx.GraphDef):
    """``(params, obs [B, 34]) -> (logits [B, 156], value [B])`` on pgx observations."""
    def apply(params, obs):
        return nnx.merge(graphdef, params)(bg.features(obs))
    return apply


def greedy_search_action(config: Config, graphdef: nnx.GraphDef, params: Any, key: jax.Array,
                         state: Any, num_simulations: int) -> jax.Array:
    """``[B]`` most visited micro-move of the network's search, no noise."""
    root_fn, decision_fn, chance_fn = bg.make_network_search_fns(
        make_apply(graphdef), config.rules, config.value_scale)
    root_key, search_key = jax.random.split(key)
    out = jaxpuct.stochastic_policy(params, search_key, root_fn(params, root_key, state),
                                    decision_fn, chance_fn, num_simulations,
                                    dirichlet_fraction=0.0, temperature=0.0,
                                    chance_backup="expectation")
    return out.action


def init_games(config: Config, key: jax.Array) -> selfplay.Games:
    b, t = config.batch_size, config.trajectory_length
    return selfplay.Games(state=bg.init(key, b),
                          obs=jnp.zeros((b, t, 34), jnp.int8),
                          policy=jnp.zeros((b, t, bg.NUM_ACTIONS), jnp.float32),
                          player=jnp.zeros((b, t), jnp.int32),
                          length=jnp.zeros((b,), jnp.int32))


@functools.partial(jax.jit, static_argnums=(0, 1), donate_argnums=(3, 4))
def play(config: Config, graphdef: nnx.GraphDef, params: Any, games: selfplay.Games,
         buffer: buffer_lib.ReplayBuffer, key: jax.Array):
    """``selfplay_steps`` micro-moves of every game; finished games go to the
    buffer and restart. Returns ``(games, buffer, metrics)``."""
    root_fn, decision_fn, chance_fn = bg.make_network_search_fns(
        make_apply(graphdef), config.rules, config.value_scale)
    b, t = config.batch_size, config.trajectory_length

    def step(i, carry):
        games, buffer, totals = carry
        k = jax.random.split(jax.random.fold_in(key, i), 4)
        temperature = jnp.where(games.length < config.temperature_moves, 1.0, 0.0)
        out = jaxpuct.stochastic_policy(
            params, jax.random.split(k[0], b), root_fn(params, k[1], games.state),
            decision_fn, chance_fn, config.num_simulations,
            dirichlet_fraction=config.dirichlet_fraction,
            dirichlet_alpha=config.dirichlet_alpha, temperature=temperature,
            chance_backup="expectation")
        games = selfplay.record_ply(games, games.state.observation, out.action_weights,
                                    games.state.current_player)
        new_state = bg.roll_dice(bg.decision(games.state, out.action), k[2])
        terminal = new_state.terminated
        finished = terminal | (games.length >= t)
        outcome = selfplay.position_outcomes(new_state.rewards, games.player,
                                             terminal) / config.value_scale
        written = finished[:, None] & (jnp.arange(t)[None, :] < games.length[:, None])
        buffer = buffer_lib.write_trajectories(buffer, games.obs, games.policy, outcome,
                                               written)
        points = jnp.abs(jnp.take_along_axis(new_state.rewards, games.player[:, :1], 1)[:, 0])
        totals = {"games_finished": totals["games_finished"] + jnp.sum(finished),
                  "games_cut_off": totals["games_cut_off"] + jnp.sum(finished & ~terminal),
                  "gammons": totals["gammons"] + jnp.sum(terminal & (points >= 2)),
                  "micro_moves_finished": totals["micro_moves_finished"]
                  + jnp.sum(jnp.where(finished, games.length, 0))}
        games = games.replace(
            state=selfplay.restart_finished(bg.init(k[3], b), new_state, finished),
            length=jnp.where(finished, 0, games.length))
        return games, buffer, totals

    zero = jnp.zeros((), jnp.int32)
    totals = {"games_finished": zero, "games_cut_off": zero, "gammons": zero,
              "micro_moves_finished": zero}
    return jax.lax.fori_loop(0, config.selfplay_steps, step, (games, buffer, totals))


def make_optimizer(config: Config) -> optax.GradientTransformation:
    return optax.chain(optax.add_decayed_weights(config.weight_decay, mask=decay_mask),
                       optax.adam(config.learning_rate))


@functools.partial(jax.jit, static_argnums=(0, 1, 2), donate_argnums=(4,))
def train(config: Config, graphdef: nnx.GraphDef, optimizer: optax.GradientTransformation,
          params: Any, opt_state: Any, buffer: buffer_lib.ReplayBuffer, key: jax.Array):
    """``train_steps`` optimiser steps on uniform minibatches; the mean losses."""
    apply = make_apply(graphdef)

    def body(i, carry):
        params, opt_state, totals = carry
        obs, policy, outcome = buffer_lib.sample(buffer, jax.random.fold_in(key, i),
                                                 config.train_batch_size)
        (_, (pl, vl)), grads = jax.value_and_grad(
            lambda p: loss_fn(apply, config.value_weight, p, obs, policy, outcome),
            has_aux=True)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, totals + jnp.stack([pl, vl])

    params, opt_state, totals = jax.lax.fori_loop(
        0, config.train_steps, body, (params, opt_state, jnp.zeros((2,))))
    return params, opt_state, totals / max(config.train_steps, 1)


@functools.partial(jax.jit, static_argnums=(0, 1, 3))
def evaluate(config: Config, graphdef: nnx.GraphDef, params: Any, num_games: int,
             key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``num_games`` games, greedy network search against ``eval_opponent`` (the
    pure search with random rollouts, ``eval_simulations`` each, or uniform random
    micro-moves), the network's side the first player id in even games. Returns
    ``(points [G] to the network's side, ended [G] bool)`` (a game not over after
    2,000 micro-moves counts 0)."""
    opponent_fns = bg.make_search_fns("rollouts")
    agent_id = jnp.arange(num_games) % 2
    init_key, key = jax.random.split(key)

    def cond(c):
        state, t, _ = c
        return (t < 2000) & ~jnp.all(state.terminated)

    def body(c):
        state, t, points = c
        k = jax.random.split(jax.random.fold_in(key, t), 4)
        mine = greedy_search_action(config, graphdef, params, k[0], state,
                                    config.eval_simulations)
        if config.eval_opponent == "random":
            theirs = bg._sample(state.legal_action_mask.astype(jnp.float32),
                                jax.random.uniform(k[1], (num_games,)))
        else:
            root_fn, decision_fn, chance_fn = opponent_fns
            theirs = jaxpuct.stochastic_policy(
                None, k[1], root_fn(state, k[2]), decision_fn, chance_fn,
                config.eval_simulations, dirichlet_fraction=0.0, temperature=0.0,
                chance_backup="expectation").action
        action = jnp.where(state.current_player == agent_id, mine, theirs)
        new = bg.roll_dice(bg.decision(state, action), k[3])
        points = points + jnp.take_along_axis(new.rewards, agent_id[:, None], 1)[:, 0]
        return new, t + 1, points

    state, _, points = jax.lax.while_loop(
        cond, body, (bg.init(init_key, num_games), jnp.int32(0),
                     jnp.zeros((num_games,), jnp.float32)))
    return points, state.terminated


def save_params(run_dir: str, config: Config, params: Any, iteration: int) -> None:
    """Writes ``params.npz`` (the leaves in pytree order), ``config.json`` and
    ``params.json`` (iteration, SHA-256 of the npz) to ``run_dir``, each through a
    temporary file and ``os.replace``, so a kill leaves the previous save whole."""
    os.makedirs(run_dir, exist_ok=True)
    leaves = [np.asarray(x) for x in jax.tree.leaves(jax.device_get(params))]
    tmp = os.path.join(run_dir, "params.tmp.npz")
    np.savez(tmp, *leaves)
    with open(tmp, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    os.replace(tmp, os.path.join(run_dir, "params.npz"))
    for name, text in (("config.json", json.dumps(dataclasses.asdict(config), indent=1)),
                       ("params.json", json.dumps({"iteration": iteration,
                                                   "sha256": digest}))):
        with open(os.path.join(run_dir, name + ".tmp"), "w") as f:
            f.write(text)
        os.replace(os.path.join(run_dir, name + ".tmp"), os.path.join(run_dir, name))


def load_params(run_dir: str) -> tuple[Config, nnx.GraphDef, Any]:
    """``(config, graphdef, params)`` saved by :func:`save_params`; refuses a file
    whose digest or leaf shapes differ from what was saved."""
    with open(os.path.join(run_dir, "config.json")) as f:
        config = Config(**json.load(f))
    with open(os.path.join(run_dir, "params.json")) as f:
        meta = json.load(f)
    path = os.path.join(run_dir, "params.npz")
    with open(path, "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != meta["sha256"]:
            raise ValueError(f"{path}: SHA-256 differs from params.json's; the file is damaged")
    graphdef, template = nnx.split(make_network(config, nnx.Rngs(0)))
    leaves, treedef = jax.tree.flatten(template)
    with np.load(path) as saved:
        loaded = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    shapes = [x.shape for x in leaves]
    if [x.shape for x in loaded] != shapes:
        raise ValueError(f"{path}: leaf shapes {[x.shape for x in loaded]} do not match "
                         f"the network of config.json ({shapes})")
    return config, graphdef, jax.tree.unflatten(treedef, [jnp.asarray(x) for x in loaded])


def run(config: Config, iterations: int | None, eval_every: int,
        max_minutes: float | None = None, run_dir: str | None = None, log=print) -> dict:
    """Trains until ``iterations`` (``None``: no cap, for a run bounded by
    ``max_minutes`` alone) or the iteration that passes ``max_minutes`` of wall
    clock, whichever comes first; returns the last evaluated row."""
    if iterations is None and max_minutes is None:
        raise ValueError("give iterations or max_minutes (or both): the run needs an end")
    init_key, games_key, key = jax.random.split(jax.random.key(config.seed), 3)
    graphdef, params = nnx.split(make_network(config, nnx.Rngs(init_key)))
    optimizer = make_optimizer(config)
    opt_state = optimizer.init(params)
    buffer = buffer_lib.empty_buffer(config.buffer_size, (34,), jnp.int8, bg.NUM_ACTIONS)
    games = init_games(config, games_key)
    start, cpu_start, last, env_steps = time.time(), time.process_time(), {}, 0
    for iteration in itertools.count(1):
        play_key, train_key, eval_key, key = jax.random.split(key, 4)
        games, buffer, totals = play(config, graphdef, params, games, buffer, play_key)
        env_steps += config.batch_size * config.selfplay_steps
        # No step on an empty buffer: its minibatches would be copies of a zero row.
        losses = None
        if int(buffer_lib.filled_rows(buffer)) >= config.train_batch_size:
            params, opt_state, losses = train(config, graphdef, optimizer, params, opt_state,
                                              buffer, train_key)
        totals, losses = jax.device_get((totals, losses))
        finished = max(int(totals["games_finished"]), 1)
        minutes = (time.time() - start) / 60
        row = {"iteration": iteration, "seconds": round(time.time() - start, 1),
               "cpu_seconds": round(time.process_time() - cpu_start, 1),
               "micro_moves": env_steps, "games_finished": int(totals["games_finished"]),
               "games_cut_off": int(totals["games_cut_off"]),
               "gammon_rate": round(int(totals["gammons"]) / finished, 3),
               "mean_game_micro_moves": round(int(totals["micro_moves_finished"]) / finished, 1),
               "buffer_rows": int(buffer_lib.filled_rows(buffer)),
               # null, not a bare NaN (strict JSON), where no step was taken.
               "policy_loss": None if losses is None else round(float(losses[0]), 4),
               "value_loss": None if losses is None else round(float(losses[1]), 4)}
        done = iteration == iterations or (max_minutes is not None and minutes >= max_minutes)
        if run_dir is not None:
            save_params(run_dir, config, params, iteration)
        if (eval_every and iteration % eval_every == 0) or done:
            points, ended = jax.device_get(evaluate(config, graphdef, params,
                                                    config.eval_games, eval_key))
            wins = int(np.sum(points > 0))
            row.update({"eval_wins": wins, "eval_losses": int(np.sum(points < 0)),
                        "eval_unfinished": int(np.sum(~ended)),
                        "eval_score": round(wins / len(points), 3),
                        "eval_points_per_game": round(float(np.mean(points)), 3)})
            last = row
        log(json.dumps(row), flush=True)
        if done:
            break
    return last


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m examples.known_chance_backgammon",
                                description=(__doc__ or "").splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    # The flags are the fields of Config, with its Attributes text as help.
    config_lib.add_arguments(p, Config)
    p.add_argument("--iterations", type=int, default=None,
                   help="stop after this iteration (default: 1000 without --max-minutes, "
                        "no cap with it)")
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--max-minutes", type=float, default=None,
                   help="stop after the iteration that passes this wall-clock budget")
    p.add_argument("--run-dir", default=None, help="save the parameters here every iteration")
    args = p.parse_args(argv)
    if args.iterations is None and args.max_minutes is None:
        args.iterations = 1000
    return run(config_lib.from_namespace(Config, args), args.iterations, args.eval_every,
               args.max_minutes, args.run_dir)


if __name__ == "__main__":
    main()

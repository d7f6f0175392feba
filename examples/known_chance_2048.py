"""2048 by chance-node search with the true rules and a learned value: the
known-model baseline beside MuZero (``examples/muzero.py --game 2048``).

    python -m examples.known_chance_2048 --iterations 40

The search is :func:`jaxpuct.stochastic_policy` over :mod:`jaxpuct.envs.pgx_2048`:
the real move at every decision edge, the exact spawn probabilities at every
chance node (the expectation backup), uniform priors, and at the leaves a value
network's estimate. The value network is trained on the self-play's ``n``-step
returns bootstrapped with the search's root values, from the MuZero example's
own machinery: the boards kept across iterations and played in segments
(:func:`jaxpuct.muzero.game_2048.run_segment`, a running game truncated at the
segment's end and bootstrapped with the network's value), the trajectory buffer
and its targets (:mod:`jaxpuct.muzero.replay`), the categorical value head over
``h``-transformed atoms (:mod:`jaxpuct.muzero.value_transform`). So the two runs
differ in what the search knows, not in their data or their budgets. Every
``--eval-every`` iterations the greedy search (most visited move) plays 64 games
(``--eval-games``) from fresh boards to their ends; one JSON line per iteration. With
``--run-dir R`` the value network is saved there after every evaluation (with its
config, verified by SHA-256: :mod:`jaxpuct.alphazero.checkpoints`; the network only,
so the run cannot be resumed), and ``--evaluate R`` plays the greedy games with the
newest saved network (at its run's ``--num-simulations`` and at each
``--extra-eval-simulations``), so that a finished run can be searched deeper.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

import jaxpuct
from jaxpuct.alphazero import checkpoints
from jaxpuct.alphazero import config as config_lib
from jaxpuct.alphazero.training import decay_mask
from jaxpuct.envs import pgx_2048
from jaxpuct.muzero import game_2048
from jaxpuct.muzero import replay as replay_lib
from jaxpuct.muzero.networks import Trunk
from jaxpuct.muzero.selfplay import evaluate_at_counts
from jaxpuct.muzero.training import head_loss
from jaxpuct.muzero.value_transform import Support, logits_to_scalar


@dataclasses.dataclass(frozen=True)
class Config:
    """A run (hashable: the jitted functions take it as a static argument).

    Attributes:
      seed: PRNG seed.
      batch_size: boards played in lockstep.
      segment_length: moves of every board per iteration.
      num_simulations: simulations per move.
      hidden: width of the value network's hidden layers.
      layers: its hidden layers.
      value_support: n of its 2n + 1 atoms over h(value).
      discount: gamma per move, of the search and of the targets.
      td_steps: n of the n-step value target.
      buffer_size: rows of the trajectory buffer.
      train_batch_size: samples per optimiser step.
      train_steps: optimiser steps per iteration.
      learning_rate: Adam's step size.
      weight_decay: coupled L2 weight on kernels.
      dirichlet_fraction: root noise in self-play (PUCT root only).
      policy: alphazero (stochastic_policy: PUCT, Dirichlet noise, visits) or
        gumbel (stochastic_gumbel_policy: Gumbel root and sequential halving, the
        root rule of the MuZero example's 2048 runs).
      chance_ties: which of the equally likely spawns a chance node takes first:
        the lowest-index cells (first), one at random at every visit (random), or
        the first in a random order of the cells drawn once per search (shared);
        ``jaxpuct.stochastic_policy``'s ``chance_ties``.
    """

    seed: int = 0
    batch_size: int = 256
    segment_length: int = 200
    num_simulations: int = 32
    hidden: int = 256
    layers: int = 2
    value_support: int = 150
    discount: float = 0.997
    td_steps: int = 10
    buffer_size: int = 400000
    train_batch_size: int = 256
    train_steps: int = 1500
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    dirichlet_fraction: float = 0.25
    policy: str = dataclasses.field(default="alphazero",
                                    metadata={"choices": ("alphazero", "gumbel")})
    chance_ties: str = dataclasses.field(default="first",
                                         metadata={"choices": ("first", "random",
                                                               "shared")})

    @property
    def support(self) -> Support:
        return Support(self.value_support)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Config:
        return cls(**data)


class Saved(NamedTuple):
    """What ``--run-dir`` keeps (:func:`jaxpuct.alphazero.checkpoints.save_checkpoint`
    reads ``iteration`` and ``params``)."""

    params: Any
    iteration: jax.Array


class ValueNetwork(nnx.Module):
    """``obs [B, 288] -> value logits [B, 2n + 1]``: the MuZero networks' trunk
    (dense, LayerNorm, ReLU), then a dense head."""

    def __init__(self, config: Config, rngs: nnx.Rngs):
        self.trunk = Trunk(game_2048.OBS_SHAPE[0], (config.hidden,) * config.layers,
                           rngs=rngs)
        self.out = nnx.Linear(config.hidden, config.support.num_atoms, rngs=rngs)

    def __call__(self, obs: jax.Array) -> jax.Array:
        return self.out(self.trunk(obs.astype(jnp.float32)))


def board_value(config: Config, graphdef: nnx.GraphDef, params: Any):
    """``board [B, 16] -> [B]``: the network's value (the expectation over its atoms)."""
    net = nnx.merge(graphdef, params)
    return lambda board: logits_to_scalar(net(game_2048.observe(board)), config.support)


def make_search(config: Config, graphdef: nnx.GraphDef, params: Any
                ) -> game_2048.BoardSearch:
    """The chance-node search with the network's values at the leaves."""
    root_fn, decision_fn, chance_fn = pgx_2048.make_search_fns(
        board_value(config, graphdef, params), config.discount)

    def search(key, board, legal, greedy):
        del legal  # root_fn computes the same mask from the board
        if config.policy == "gumbel":
            # Greedy: no Gumbel noise, so sequential halving picks by prior and Q.
            return jaxpuct.stochastic_gumbel_policy(
                params, key, root_fn(board), decision_fn, chance_fn,
                config.num_simulations, gumbel_scale=0.0 if greedy else 1.0,
                chance_backup="expectation", chance_ties=config.chance_ties)
        return jaxpuct.stochastic_policy(
            params, key, root_fn(board), decision_fn, chance_fn, config.num_simulations,
            selection=jaxpuct.PUCTConfig.mctx_muzero(),
            dirichlet_fraction=0.0 if greedy else config.dirichlet_fraction,
            temperature=0.0 if greedy else 1.0, chance_backup="expectation",
            chance_ties=config.chance_ties)

    return search


@functools.partial(jax.jit, static_argnums=(0, 1))
def play(config: Config, graphdef: nnx.GraphDef, params: Any, boards: game_2048.Boards,
         key: jax.Array):
    return game_2048.run_segment(make_search(config, graphdef, params),
                                 board_value(config, graphdef, params),
                                 config.segment_length, boards, key)


@functools.partial(jax.jit, static_argnums=(0, 1, 3))
def evaluation(config: Config, graphdef: nnx.GraphDef, params: Any, num_games: int,
               key: jax.Array):
    return game_2048.evaluation_games(make_search(config, graphdef, params), num_games,
                                      20000, key)


def make_optimizer(config: Config) -> optax.GradientTransformation:
    return optax.chain(optax.add_decayed_weights(config.weight_decay, mask=decay_mask),
                       optax.adam(config.learning_rate))


@functools.partial(jax.jit, static_argnums=(0, 1, 2), donate_argnums=(4,))
def train(config: Config, graphdef: nnx.GraphDef, optimizer: optax.GradientTransformation,
          params: Any, opt_state: Any, buffer: replay_lib.TrajectoryBuffer, key: jax.Array):
    """``train_steps`` steps on the value target at uniformly drawn rows; the mean
    cross-entropy with the target's two-hot."""

    def body(i, carry):
        params, opt_state, total = carry
        batch = replay_lib.sample(buffer, jax.random.fold_in(key, i), config.train_batch_size,
                                  1, config.td_steps, config.discount)

        def loss(p):
            logits = nnx.merge(graphdef, p)(batch.obs)
            return jnp.mean(head_loss(logits, batch.targets.value[:, 0], config.support))

        value, grads = jax.value_and_grad(loss)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, total + value

    params, opt_state, total = jax.lax.fori_loop(0, config.train_steps, body,
                                                 (params, opt_state, jnp.zeros(())))
    return params, opt_state, total / max(config.train_steps, 1)


# Games of one evaluation, unless --eval-games says otherwise.
EVAL_GAMES = 64


def evaluate_at(config: Config, graphdef: nnx.GraphDef, params: Any, key: jax.Array,
                extra_simulations: tuple[int, ...] = (), games: int = EVAL_GAMES) -> dict:
    """``games`` greedy games at the run's own ``num_simulations``
    (:func:`game_2048.summarise`'s keys), and as many more with the same network and
    the same key (the same fresh boards) at each of ``extra_simulations``, under
    ``eval_at_{S}``: so that a deeper search at evaluation and a better-trained value
    can be told apart."""
    return evaluate_at_counts(config, extra_simulations, lambda c: game_2048.summarise(
        *evaluation(c, graphdef, params, games, key)))


def init(config: Config) -> tuple[nnx.GraphDef, Any]:
    """``(graphdef, params)`` of the run's initial value network."""
    init_key = jax.random.split(jax.random.key(config.seed), 3)[0]
    return nnx.split(ValueNetwork(config, nnx.Rngs(init_key)))


def restore(run_dir: str) -> tuple[Config, nnx.GraphDef, Any, int]:
    """``(config, graphdef, params, iteration)`` of the newest intact network
    saved in ``run_dir`` (``CheckpointError`` if there is none)."""
    config = checkpoints.load_config(run_dir, Config)
    graphdef, params = init(config)
    saved = checkpoints.restore_checkpoint(
        run_dir, Saved(params, jnp.zeros((), jnp.int32)), config)
    return config, graphdef, saved.params, int(saved.iteration)


def run(config: Config, iterations: int, eval_every: int, log=print,
        eval_simulations: tuple[int, ...] = (), run_dir: str | None = None,
        eval_games: int = EVAL_GAMES) -> dict:
    boards_key, key = jax.random.split(jax.random.key(config.seed), 3)[1:]
    graphdef, params = init(config)
    optimizer = make_optimizer(config)
    opt_state = optimizer.init(params)
    buffer = replay_lib.empty_buffer(config.buffer_size, game_2048.OBS_SHAPE, jnp.bool_,
                                     game_2048.NUM_ACTIONS)
    write = jax.jit(replay_lib.write_episodes, donate_argnums=0)
    boards = game_2048.fresh_boards(boards_key, config.batch_size)
    start, last, busy = time.time(), {}, 0.0
    for iteration in range(1, iterations + 1):
        play_key, train_key, key = jax.random.split(key, 3)
        tic = time.process_time()
        boards, segment = play(config, graphdef, params, boards, play_key)
        buffer = write(buffer, **segment.write_kwargs())
        params, opt_state, value_loss = train(config, graphdef, optimizer, params, opt_state,
                                              buffer, train_key)
        jax.block_until_ready(params)
        # Self-play and training only, as the MuZero example counts them.
        busy += time.process_time() - tic
        finished = jax.device_get(segment.final_score)
        finished = finished[finished == finished]  # drop the NaNs: games still running
        row = {"iteration": iteration, "seconds": round(time.time() - start, 1),
               "cpu_seconds": round(time.process_time(), 1),
               "train_cpu_seconds": round(busy, 1),
               "env_steps": iteration * config.batch_size * config.segment_length,
               "games_ended": int(finished.size),
               "selfplay_score": round(float(finished.mean()), 1) if finished.size else None,
               "value_loss": round(float(value_loss), 4)}
        if (eval_every and iteration % eval_every == 0) or iteration == iterations:
            row.update(evaluate_at(config, graphdef, params, jax.random.fold_in(play_key, 1),
                                   eval_simulations, eval_games))
            last = row
            if run_dir is not None:
                checkpoints.save_checkpoint(run_dir, Saved(params, jnp.int32(iteration)),
                                            config)
        log(json.dumps(row), flush=True)
    return last


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m examples.known_chance_2048",
                                description=(__doc__ or "").splitlines()[0])
    # The flags are the fields of Config, with its Attributes text as help.
    config_lib.add_arguments(p, Config)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--extra-eval-simulations", type=config_lib.positive_ints, default=(),
                   help="comma-separated simulation counts: each evaluation also plays "
                        "its games at each of them with the same network "
                        "(eval_at_S in the line)")
    p.add_argument("--eval-games", type=int, default=EVAL_GAMES,
                   help="greedy games each evaluation plays from fresh boards")
    p.add_argument("--run-dir", default=None,
                   help="save the value network here after every evaluation")
    p.add_argument("--evaluate", default=None, metavar="RUN_DIR",
                   help="train nothing: play the evaluation games with the newest network "
                        "saved in RUN_DIR (with --seed's key) and print one JSON line")
    args = p.parse_args(argv)
    if args.eval_games < 1:
        p.error(f"--eval-games must be >= 1, got {args.eval_games}")
    if args.evaluate:
        config, graphdef, params, iteration = restore(args.evaluate)
        row = {"run_dir": args.evaluate, "iteration": iteration,
               "num_simulations": config.num_simulations,
               **evaluate_at(config, graphdef, params, jax.random.key(args.seed),
                             args.extra_eval_simulations, args.eval_games)}
        print(json.dumps(row), flush=True)
        return row
    return run(config_lib.from_namespace(Config, args), args.iterations, args.eval_every,
               eval_simulations=args.extra_eval_simulations, run_dir=args.run_dir,
               eval_games=args.eval_games)


if __name__ == "__main__":
    main()

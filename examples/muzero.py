"""MuZero self-play and training on tic-tac-toe or 2048 with jaxpuct (a learned model).

    python -m examples.muzero --game tic_tac_toe
    python -m examples.muzero --iterations 100 --policy alphazero --run-dir runs/muzero_ttt
    python -m examples.muzero --iterations 100 --policy sampled --num-samples 4
    python -m examples.muzero --game 2048 --iterations 40

Each iteration plays ``--batch-size`` games to their ends in lockstep (the
model's root from the real board and legal mask, the search inside the learned
model, the real rules; one ``jax.jit``), writes them to the device replay buffer,
then takes ``--train-steps`` optimiser steps on ``K``-step unrolls
(:mod:`jaxpuct.muzero.training`); with ``--reanalyse-fraction F`` the first
``F`` of each training batch gets fresh targets from a search with the current
parameters, inside the same jitted step (:mod:`jaxpuct.muzero.reanalyse`).
Every ``--eval-every`` iterations the greedy search and the raw prior are
scored on all 4520 non-terminal positions against the minimax-optimal moves,
and the greedy search plays 256 games against a minimax player and 256 against
a random one, half as X and half as O
(:mod:`jaxpuct.muzero.selfplay`).

``--game 2048`` (:mod:`jaxpuct.muzero.game_2048`; its defaults are
``GAME_DEFAULTS["2048"]``) keeps ``--batch-size`` boards alive across iterations
and plays ``--segment-length`` moves of each per iteration, a game cut by the
segment's end written truncated; every ``--eval-every`` iterations the greedy
search plays 64 games from fresh boards to their ends (mean score ± standard
error). ``--run-dir`` takes the directory's lock
(:mod:`jaxpuct.alphazero.rundir`), writes ``metrics.jsonl`` and, every
``--checkpoint-every`` iterations and at the end, the whole state (network,
optimiser, replay buffer, iteration, key) with
:mod:`jaxpuct.alphazero.checkpoints` (orbax, verified by SHA-256);
``--resume`` continues from the newest intact checkpoint with the same config.

Every flag is a field of :class:`jaxpuct.muzero.config.MuZeroConfig`, generated
by the AlphaZero example's :func:`jaxpuct.alphazero.config.add_arguments`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.alphazero import checkpoints, rundir
from jaxpuct.alphazero import config as config_lib
from jaxpuct.muzero import game_2048, reanalyse, replay, selfplay, training
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.model import MuZeroModel
from jaxpuct.muzero.networks import init_network

# A game's own defaults, under the flags given on the command line. 2048: scores
# of any size (categorical heads over h-transformed supports: values to about
# 17,000, rewards to 8,000), one player with a discount below 1 and n-step
# values, boards kept across iterations in segments (module docstring).
GAME_DEFAULTS: dict[str, dict[str, Any]] = {
    "2048": {"discount": 0.997, "td_steps": 10, "value_support": 150,
             "reward_support": 100, "hidden": (256, 256), "latent_size": 128,
             "batch_size": 256, "segment_length": 200, "buffer_size": 200000,
             "train_batch_size": 256, "train_steps": 200, "learning_rate": 1e-3,
             "num_simulations": 16},
}


def game_defaults(argv: list[str] | None) -> dict[str, Any]:
    """The defaults of the game named on the command line (``--game G``)."""
    probe = argparse.ArgumentParser(add_help=False)
    probe.add_argument("--game", default=MuZeroConfig.game)
    known, _ = probe.parse_known_args(argv)
    return GAME_DEFAULTS.get(known.game, {})


def build_parser(defaults: dict[str, Any] | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m examples.muzero",
                                description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    config_lib.add_arguments(p, MuZeroConfig, defaults)
    p.add_argument("--run-dir", default=None, help="directory for config.json, "
                   "metrics.jsonl and checkpoints (locked while the run lives); none by "
                   "default")
    p.add_argument("--iterations", type=int, default=60,
                   help="last iteration (self-play + training) of the run")
    p.add_argument("--eval-every", type=int, default=10,
                   help="iterations between evaluations (0: at the end only)")
    p.add_argument("--checkpoint-every", type=int, default=100,
                   help="iterations between checkpoints (with --run-dir; 0: at the end only)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --run-dir from its newest intact checkpoint")
    return p


@chex.dataclass
class TrainState:
    """What a run needs to continue exactly (the checkpointed pytree)."""

    params: Any
    opt_state: Any
    buffer: replay.TrajectoryBuffer
    iteration: chex.Array
    target_params: Any  # None unless --target-update-every > 0
    rng: chex.Array  # uint32 key data (orbax stores plain arrays)
    boards: Any = None  # 2048: the games in progress (game_2048.Boards)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def train(config: MuZeroConfig, graphdef, optimizer, params, opt_state, buffer, key,
          target=None, first_step=0):
    """``config.train_steps`` optimiser steps (``first_step`` done before); the
    metrics are their means. ``target``: the target network's parameters
    (``--target-update-every N > 0``), which reanalyse searches with; copied from
    ``params`` after every ``N``-th step inside the loop."""
    model = MuZeroModel(graphdef, discount=config.discount, zero_sum=config.zero_sum)
    every = config.target_update_every
    # With n at least a game's length the value target is the game's return: no
    # search can change it. 2048's games are longer than any n.
    bootstrap = not config.zero_sum or config.td_steps < selfplay.MAX_PLIES

    def body(i, carry):
        params, opt_state, buffer, sums, target = carry
        batch = replay.sample(buffer, jax.random.fold_in(key, i), config.train_batch_size,
                              config.unroll_steps, config.td_steps, config.signed_discount,
                              config.priority_alpha)
        if config.reanalyse_fraction > 0:
            # Visit targets at temperature 1 without root noise: with the acting
            # search's Dirichlet noise reanalyse was worse (docs/muzero.md).
            search = functools.partial(selfplay.search_roots, config, model, greedy=False,
                                       root_noise=False)
            batch = reanalyse.reanalyse_batch(
                buffer, batch, target if every else params,
                jax.random.fold_in(key, config.train_steps + i),
                search, fraction=config.reanalyse_fraction, unroll_steps=config.unroll_steps,
                td_steps=config.td_steps, discount=config.signed_discount,
                bootstrap=bootstrap)
        params, opt_state, metrics = training.train_step(graphdef, optimizer, config.loss,
                                                         params, opt_state, batch)
        if config.priority_alpha > 0:
            buffer = replay.update_priorities(buffer, batch.index, metrics["priority"])
        sums = {k: sums[k] + metrics[k] for k in sums}
        if every:
            target = training.update_target(params, target, first_step + i + 1, every)
        return params, opt_state, buffer, sums, target

    names = ("loss", "policy_loss", "value_loss", "reward_loss")
    zeros = {k: jnp.zeros(()) for k in names}
    params, opt_state, buffer, sums, target = jax.lax.fori_loop(
        0, config.train_steps, body, (params, opt_state, buffer, zeros, target))
    steps = max(config.train_steps, 1)
    return params, opt_state, buffer, {k: v / steps for k, v in sums.items()}, target


def run(config: MuZeroConfig, iterations: int, run_dir: str | None = None, log=print,
        eval_every: int = 10, checkpoint_every: int = 0, resume: bool = False) -> dict:
    """Runs ``config`` up to iteration ``iterations``; returns the last evaluation's
    metrics."""
    lock = None
    if run_dir is not None:
        os.makedirs(run_dir, exist_ok=True)
        lock = rundir.acquire(run_dir)
    init_key, key = jax.random.split(jax.random.key(config.seed))
    is_2048 = config.game == "2048"
    obs_shape = game_2048.OBS_SHAPE if is_2048 else selfplay.OBS_SHAPE
    graphdef, params = init_network(config.network, config.num_actions, obs_shape, init_key)
    model = MuZeroModel(graphdef, discount=config.discount, zero_sum=config.zero_sum)
    optimizer = training.make_optimizer(config.loss)
    boards_key, key = jax.random.split(key)
    ts = TrainState(params=params, opt_state=optimizer.init(params),
                    buffer=replay.empty_buffer(
                        config.buffer_size, obs_shape,
                        # 2048's one-hot planes are stored as bits.
                        jnp.bool_ if is_2048 else jnp.float32, config.num_actions,
                        num_samples=config.num_samples if config.policy == "sampled" else None),
                    iteration=jnp.zeros((), jnp.int32), rng=jax.random.key_data(key),
                    target_params=params if config.target_update_every else None,
                    boards=(game_2048.fresh_boards(boards_key, config.batch_size)
                            if is_2048 else None))
    if resume:
        if run_dir is None:
            raise SystemExit("error: --resume needs --run-dir")
        ts = checkpoints.restore_checkpoint(run_dir, ts, config)
        log(f"resumed from iteration {int(ts.iteration)}")
    write = jax.jit(replay.write_episodes)
    start, last = time.time(), {}
    params, opt_state, buffer, target = ts.params, ts.opt_state, ts.buffer, ts.target_params
    boards = ts.boards
    key = jax.random.wrap_key_data(ts.rng)
    first = int(ts.iteration) + 1
    try:
        for iteration in range(first, iterations + 1):
            play_key, train_key, key = jax.random.split(key, 3)
            if is_2048:
                boards, segment = game_2048.play_segment(config, model, params, boards,
                                                         play_key)
                games = segment.write_kwargs()
                finished = np.asarray(segment.final_score)
                finished = finished[np.isfinite(finished)]
                stats = {"env_steps": iteration * config.batch_size * config.segment_length,
                         "games_ended": int(finished.size),
                         "selfplay_score": (round(float(finished.mean()), 1)
                                            if finished.size else None)}
            else:
                games = selfplay.play_games(config, model, params, play_key)._asdict()
                decisive = np.asarray(jnp.any(games["reward"] != 0, axis=1))
                stats = {"draw_rate": float(1.0 - decisive.mean())}
            priority = None
            if config.priority_alpha > 0:
                priority = replay.trajectory_priorities(
                    games["reward"], games["root_value"], games["episode_end"],
                    games["written"], config.signed_discount, config.td_steps,
                    games.get("truncated"), games.get("truncation_value"))
            buffer = write(buffer, **games, priority=priority)
            params, opt_state, buffer, metrics, target = train(
                config, graphdef, optimizer, params, opt_state, buffer, train_key, target,
                jnp.int32((iteration - 1) * config.train_steps))
            row = {"iteration": iteration, "seconds": round(time.time() - start, 1),
                   "cpu_seconds": round(time.process_time(), 1), **stats,
                   **{k: round(float(v), 4) for k, v in metrics.items()}}
            evaluate = (eval_every and iteration % eval_every == 0) or (
                iteration == iterations)
            if evaluate and is_2048:
                row.update(game_2048.evaluate(config, model, params,
                                              jax.random.fold_in(play_key, 1)))
                last = row
            elif evaluate:
                row.update(selfplay.evaluate_optimal_moves(config, model, params))
                row.update(selfplay.evaluate_games(config, model, params,
                                                   jax.random.fold_in(play_key, 1)))
                last = row
            log(json.dumps(row))
            if run_dir is None:
                continue
            with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
            if (checkpoint_every and iteration % checkpoint_every == 0) or (
                    iteration == iterations):
                checkpoints.save_checkpoint(run_dir, TrainState(
                    params=params, opt_state=opt_state, buffer=buffer,
                    iteration=jnp.asarray(iteration, jnp.int32),
                    rng=jax.random.key_data(key), target_params=target, boards=boards),
                    config)
    finally:
        if lock is not None:
            lock.release()
    return last


def main(argv: list[str] | None = None) -> int:
    args = build_parser(game_defaults(argv)).parse_args(argv)
    config = config_lib.from_namespace(MuZeroConfig, args)
    run(config, args.iterations, args.run_dir, eval_every=args.eval_every,
        checkpoint_every=args.checkpoint_every, resume=args.resume)
    return 0


if __name__ == "__main__":
    sys.exit(main())

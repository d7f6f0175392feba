"""MuZero self-play and training on tic-tac-toe with jaxpuct (a learned model).

    python -m examples.muzero --game tic_tac_toe
    python -m examples.muzero --iterations 100 --policy alphazero --run-dir runs/muzero_ttt

Each iteration plays ``--batch-size`` games to their ends in lockstep (the
model's root from the real board and legal mask, the search inside the learned
model, the real rules; one ``jax.jit``), writes them to the device replay buffer,
then takes ``--train-steps`` optimiser steps on ``K``-step unrolls
(:mod:`jaxpuct.muzero.training`). Every ``--eval-every`` iterations the greedy
search and the raw prior are scored on all 4520 non-terminal positions against
the minimax-optimal moves, and the greedy search plays 256 games against a
minimax player and 256 against a random one, half as X and half as O
(:mod:`jaxpuct.muzero.selfplay`). ``--run-dir`` takes the directory's lock
(:mod:`jaxpuct.alphazero.rundir`) and writes ``config.json`` and
``metrics.jsonl``; there are no checkpoints or resume yet.

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

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.alphazero import config as config_lib
from jaxpuct.alphazero import rundir
from jaxpuct.muzero import replay, selfplay, training
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.model import MuZeroModel
from jaxpuct.muzero.networks import init_network


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m examples.muzero",
                                description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    config_lib.add_arguments(p, MuZeroConfig)
    p.add_argument("--run-dir", default=None, help="directory for config.json and "
                   "metrics.jsonl (locked while the run lives); none by default")
    return p


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def train(config: MuZeroConfig, graphdef, optimizer, params, opt_state, buffer, key):
    """``config.train_steps`` optimiser steps; the metrics are their means."""
    def body(i, carry):
        params, opt_state, buffer, sums = carry
        batch = replay.sample(buffer, jax.random.fold_in(key, i), config.train_batch_size,
                              config.unroll_steps, config.td_steps, -config.discount,
                              config.priority_alpha)
        params, opt_state, metrics = training.train_step(graphdef, optimizer, config.loss,
                                                         params, opt_state, batch)
        if config.priority_alpha > 0:
            buffer = replay.update_priorities(buffer, batch.index, metrics["priority"])
        sums = {k: sums[k] + metrics[k] for k in sums}
        return params, opt_state, buffer, sums

    names = ("loss", "policy_loss", "value_loss", "reward_loss")
    zeros = {k: jnp.zeros(()) for k in names}
    params, opt_state, buffer, sums = jax.lax.fori_loop(
        0, config.train_steps, body, (params, opt_state, buffer, zeros))
    steps = max(config.train_steps, 1)
    return params, opt_state, buffer, {k: v / steps for k, v in sums.items()}


def run(config: MuZeroConfig, run_dir: str | None = None, log=print) -> dict:
    """Runs ``config``; returns the last evaluation's metrics."""
    lock = None
    if run_dir is not None:
        os.makedirs(run_dir, exist_ok=True)
        lock = rundir.acquire(run_dir)
        with open(os.path.join(run_dir, "config.json"), "w") as f:
            json.dump(config.to_json(), f, indent=1)
    key = jax.random.key(config.seed)
    init_key, key = jax.random.split(key)
    graphdef, params = init_network(config.network, 9, selfplay.OBS_SHAPE, init_key)
    model = MuZeroModel(graphdef, discount=config.discount, zero_sum=True)
    optimizer = training.make_optimizer(config.loss)
    opt_state = optimizer.init(params)
    buffer = replay.empty_buffer(config.buffer_size, selfplay.OBS_SHAPE, jnp.float32, 9)
    write = jax.jit(replay.write_episodes)
    start, last = time.time(), {}
    try:
        for iteration in range(1, config.iterations + 1):
            play_key, train_key, key = jax.random.split(key, 3)
            games = selfplay.play_games(config, model, params, play_key)
            priority = None
            if config.priority_alpha > 0:
                priority = replay.trajectory_priorities(
                    games.reward, games.root_value, games.episode_end, games.written,
                    -config.discount, config.td_steps)
            buffer = write(buffer, *games, priority)
            params, opt_state, buffer, metrics = train(config, graphdef, optimizer, params,
                                                       opt_state, buffer, train_key)
            decisive = np.asarray(jnp.any(games.reward != 0, axis=1))
            row = {"iteration": iteration, "seconds": round(time.time() - start, 1),
                   "draw_rate": float(1.0 - decisive.mean()),
                   **{k: round(float(v), 4) for k, v in metrics.items()}}
            evaluate = (config.eval_every and iteration % config.eval_every == 0) or (
                iteration == config.iterations)
            if evaluate:
                row.update(selfplay.evaluate_optimal_moves(config, model, params))
                row.update(selfplay.evaluate_games(config, model, params,
                                                   jax.random.fold_in(play_key, 1)))
                last = row
            log(json.dumps(row))
            if run_dir is not None:
                with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
                    f.write(json.dumps(row) + "\n")
    finally:
        if lock is not None:
            lock.release()
    return last


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run_dir = args.run_dir
    del args.run_dir
    config = config_lib.from_namespace(MuZeroConfig, args)
    run(config, run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())

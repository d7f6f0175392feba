"""How good is a learned tic-tac-toe model, and what does reanalyse change?

    taskset -c 0 python -m benchmarks.muzero_model_quality --cpu-seconds 150 --seeds 0,1

For each seed and each ``--fractions`` value (the ``reanalyse_fraction`` of
:class:`jaxpuct.muzero.config.MuZeroConfig`), trains ``examples/muzero.py``'s
loop (self-play, replay, train; the same jitted functions) until the process has
spent ``--cpu-seconds`` of CPU time, compiles included, so the runs are compared
at equal CPU time. Then, for the trained model:

* **optimal-move share**: the greedy search's move and the prior's argmax
  against the minimax-optimal moves at all 4520 non-terminal positions
  (:func:`jaxpuct.muzero.selfplay.evaluate_optimal_moves`), and the loss rate of
  256 games against a minimax player;
* **model quality**, on held-out self-play games (a key never used in
  training; ``--held-out`` games of the trained agent with its acting noise):
  from the real observation ``o_t`` the model is unrolled ``k = 1..K`` steps along
  the actions that were played, and its predictions are compared with the truth:
  the reward ``r_k`` with the real reward of the ``k``-th action, and the value
  ``v_k`` with the exact minimax value of the real position ``s_{t+k}``
  (:func:`jaxpuct.testing.tictactoe.value_table`) and with the game's real return
  from there (what the value head is trained on with ``n = 9``). Beside it the
  value read from the real observation, ``f(h(o_{t+k}))``: the gap between the two
  is what the dynamics lose over ``k`` steps. Only steps inside the game count
  (a reward while ``t + k - 1`` is a played step, a value while ``t + k`` is).

Intervals: 95% percentile bootstrap over games (1000 resamples), since the steps
of one game are not independent. Prints one JSON line per run and a Markdown table.
"""

from __future__ import annotations

import argparse
import functools
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from examples import muzero as example
from jaxpuct.muzero import replay, selfplay, training
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.model import MuZeroModel
from jaxpuct.muzero.networks import head_scalar, init_network
from jaxpuct.testing import tictactoe as ttt

HELD_OUT_SALT = 1_000_003


def train_for(config: MuZeroConfig, cpu_seconds: float, max_iterations: int | None = None):
    """The example's loop until ``cpu_seconds`` of process CPU time (or, if given,
    for ``max_iterations`` iterations); returns ``(model, params, iterations, cpu
    seconds)``."""
    begin = time.process_time()
    init_key, key = jax.random.split(jax.random.key(config.seed))
    graphdef, params = init_network(config.network, 9, selfplay.OBS_SHAPE, init_key)
    model = MuZeroModel(graphdef, discount=config.discount, zero_sum=True)
    optimizer = training.make_optimizer(config.loss)
    opt_state = optimizer.init(params)
    buffer = replay.empty_buffer(config.buffer_size, selfplay.OBS_SHAPE, jnp.float32, 9)
    write = jax.jit(replay.write_episodes)
    iterations = 0
    def more():
        if max_iterations is not None:
            return iterations < max_iterations
        return iterations == 0 or time.process_time() - begin < cpu_seconds

    while more():
        play_key, train_key, key = jax.random.split(key, 3)
        games = selfplay.play_games(config, model, params, play_key)
        buffer = write(buffer, **games._asdict())
        params, opt_state, buffer, _, _ = example.train(config, graphdef, optimizer, params,
                                                        opt_state, buffer, train_key)
        jax.block_until_ready(params)
        iterations += 1
    return model, params, iterations, time.process_time() - begin


@functools.partial(jax.jit, static_argnums=0)
def _predict(model: MuZeroModel, params, obs, actions):
    """Unrolled rewards ``[M, K]`` and values ``[M, K + 1]`` from ``obs [M, 18]``
    along ``actions [M, K]``, and the values of the real observations
    ``[M * ...]`` (the same obs, for ``f(h(o))``)."""
    net = model.network(params)
    preds = training.unroll(net, obs, actions)
    return (head_scalar(preds.reward, net.config.reward),
            head_scalar(preds.value, net.config.value))


def absolute_codes(obs: np.ndarray) -> np.ndarray:
    """:func:`ttt.code` of observations ``[..., 18]`` (mover's stones, then the
    opponent's): X moves first, so the mover is X when the counts are equal."""
    mover, other = obs[..., :9], obs[..., 9:]
    mover_is_x = mover.sum(-1) == other.sum(-1)
    absolute = np.where(mover_is_x[..., None], mover - other, other - mover).astype(int)
    digits = np.where(absolute == -1, 2, absolute)
    return digits @ (3 ** np.arange(9))


def model_quality(config: MuZeroConfig, model: MuZeroModel, params, key: jax.Array,
                  num_games: int, rng: np.random.Generator) -> dict:
    """Per-``k`` mean absolute errors with bootstrap intervals (module docstring)."""
    k_max = config.unroll_steps
    parts = [selfplay.play_games(config, model, params, jax.random.fold_in(key, i))
             for i in range(-(-num_games // config.batch_size))]
    games = jax.tree.map(lambda *x: np.concatenate([np.asarray(a) for a in x])[:num_games],
                         *parts)
    g, steps = games.written.shape
    length = games.written.sum(-1)  # [G]
    pad = np.zeros((g, k_max), int)
    actions = np.concatenate([games.action, pad], -1)  # [G, 9 + K]
    rewards = np.concatenate([games.reward, pad], -1)
    window = np.stack([actions[:, t:t + k_max] for t in range(steps)], 1)  # [G, 9, K]
    pred_reward, pred_value = (np.asarray(x) for x in _predict(
        model, params, jnp.asarray(games.obs.reshape(g * steps, -1)),
        jnp.asarray(window.reshape(g * steps, k_max), jnp.int32)))
    pred_reward = pred_reward.reshape(g, steps, k_max)
    pred_value = pred_value.reshape(g, steps, k_max + 1)
    # The real observation's own value f(h(o_t)): column 0 of the unroll.
    direct = pred_value[:, :, 0]  # [G, 9]
    minimax = ttt.value_table()[absolute_codes(games.obs)]  # [G, 9]
    # The real return from the player to move at t (discount -1 between plies).
    ret = np.zeros((g, steps + 1))
    for t in reversed(range(steps)):
        ret[:, t] = np.where(games.written[:, t], rewards[:, t] - ret[:, t + 1], 0.0)
    t_index = np.arange(steps)[None, :]
    rows = {}
    for k in range(k_max + 1):
        at = t_index + k  # the real step the k-th prediction is about
        inside = at < length[:, None]  # [G, 9]
        clipped = np.minimum(at, steps - 1)
        take = functools.partial(np.take_along_axis, axis=1)
        errors = {"value_vs_minimax": np.abs(pred_value[:, :, k] - take(minimax, clipped)),
                  "value_vs_return": np.abs(pred_value[:, :, k] - take(ret[:, :steps],
                                                                        clipped)),
                  "direct_value_vs_minimax": np.abs(take(direct, clipped)
                                                    - take(minimax, clipped))}
        mask = {name: inside for name in errors}
        if k:
            acted = (t_index + k - 1) < length[:, None]
            errors["reward"] = np.abs(pred_reward[:, :, k - 1]
                                      - take(rewards[:, :steps], np.minimum(at - 1, steps - 1)))
            mask["reward"] = acted
        rows[k] = {name: bootstrap_mean(err, mask[name], rng) for name, err in errors.items()}
    return rows


def bootstrap_mean(err: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
                   resamples: int = 1000) -> tuple[float, float, float, int]:
    """``(mean, low, high, count)``: the masked mean of ``err [G, T]`` and its 95%
    percentile interval over games resampled with replacement."""
    sums = np.where(mask, err, 0.0).sum(-1)
    counts = mask.sum(-1)
    pick = rng.integers(0, len(sums), (resamples, len(sums)))
    means = sums[pick].sum(-1) / np.maximum(counts[pick].sum(-1), 1)
    return (float(sums.sum() / max(counts.sum(), 1)), float(np.percentile(means, 2.5)),
            float(np.percentile(means, 97.5)), int(counts.sum()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu-seconds", type=float, default=150.0,
                   help="process CPU seconds of training per run (compiles included)")
    p.add_argument("--iterations", type=int, default=None,
                   help="train this many iterations instead of --cpu-seconds (to compare "
                   "at equal iterations)")
    p.add_argument("--seeds", default="0,1", help="comma-separated training seeds")
    p.add_argument("--fractions", default="0,0.5", help="reanalyse fractions to compare")
    p.add_argument("--held-out", type=int, default=256, help="held-out games per model")
    p.add_argument("--policy", default="alphazero", choices=("alphazero", "gumbel"))
    args = p.parse_args(argv)
    results = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for fraction in (float(f) for f in args.fractions.split(",")):
            config = MuZeroConfig(seed=seed, policy=args.policy, reanalyse_fraction=fraction)
            model, params, iterations, spent = train_for(config, args.cpu_seconds,
                                                         args.iterations)
            key = jax.random.fold_in(jax.random.key(seed), HELD_OUT_SALT)
            row = {"seed": seed, "reanalyse_fraction": fraction, "iterations": iterations,
                   "train_cpu_seconds": round(spent, 1),
                   **selfplay.evaluate_optimal_moves(config, model, params),
                   "loss_vs_minimax": selfplay.evaluate_games(
                       config, model, params, jax.random.fold_in(key, 1))["loss_vs_minimax"],
                   "quality": model_quality(config, model, params, key, args.held_out,
                                            np.random.default_rng(seed))}
            results.append(row)
            print(json.dumps(row), flush=True)
    print("\n| seed | reanalyse | iterations | train CPU s | search optimal | prior optimal "
          "| lost to minimax |\n|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['seed']} | {r['reanalyse_fraction']} | {r['iterations']} | "
              f"{r['train_cpu_seconds']} | {r['search_optimal']:.3f} | "
              f"{r['prior_optimal']:.3f} | {r['loss_vs_minimax']:.3f} |")
    print("\n| seed | reanalyse | k | reward MAE | value MAE vs minimax | value MAE vs return "
          "| f(h(o_{t+k})) MAE vs minimax |\n|---|---|---|---|---|---|---|")

    def cell(x):
        return f"{x[0]:.3f} [{x[1]:.3f}, {x[2]:.3f}]"

    for r in results:
        for k, q in r["quality"].items():
            reward = cell(q["reward"]) if "reward" in q else "-"
            print(f"| {r['seed']} | {r['reanalyse_fraction']} | {k} | {reward} | "
                  f"{cell(q['value_vs_minimax'])} | {cell(q['value_vs_return'])} | "
                  f"{cell(q['direct_value_vs_minimax'])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Several leaves per search step (``leaves_per_step = K``): speed and quality.

1. Throughput on connect_four (pgx) with a small residual policy-value network
   (``jaxpuct.alphazero.networks.ResNetPolicyValue``, 2 blocks of 32 channels,
   random weights): for B = 1, 8, 64 and K = 1, 4, 16 (64 with ``--k64``), S = 64
   simulations per search, the simulations per second (B * S / median time) and
   the network calls per search (S / K).
2. The network alone: positions per second at batch 1, 16 and 64 (why K helps:
   a batch of K leaves costs far less than K calls of one).
3. Quality at equal evaluations: tic-tac-toe, uniform prior and zero value, every
   reachable non-terminal position (``--quick``: the 3430 with 5-8 stones), how
   often the move played at temperature 0 is minimax-optimal, for K = 1, 4, 16.

    python -m benchmarks.multileaf [--quick] [--k64] [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct
from jaxpuct.testing import tictactoe


def _median_time(fn, *args, reps: int) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def connect_four(reps: int, ks: list[int], sims: int = 64) -> None:
    from flax import nnx

    from jaxpuct.alphazero import networks
    from jaxpuct.envs import adapter, pgx_games

    game = pgx_games.make_pgx_game("connect_four")
    model = networks.ResNetPolicyValue(game.num_actions, game.observation_shape, num_blocks=2,
                                       channels=32, value_hidden=32, rngs=nnx.Rngs(0))
    graphdef, params = networks.split(model)

    def apply_fn(p, obs):
        return networks.apply(graphdef, p, obs)

    root_fn = adapter.make_root_fn(apply_fn, game.environment)
    recurrent_fn = adapter.make_recurrent_fn(apply_fn, game.environment)

    print("network alone (positions/s):")
    for batch in (1, 16, 64):
        obs = jnp.zeros((batch,) + game.observation_shape, jnp.float32)
        net = jax.jit(apply_fn)
        t = _median_time(net, params, obs, reps=max(reps, 20))
        print(f"  batch {batch:3d}: {batch / t:10.0f} positions/s ({t * 1e3:.3f} ms/call)")

    print(f"connect_four search, S = {sims}:")
    print("   B    K  calls/search   sims/s   vs K=1")
    for batch in (1, 8, 64):
        state = game.init(jax.random.PRNGKey(1), batch)
        base = None
        for k in ks:
            def run(p, s, key, k=k):
                root = root_fn(p, key, s)
                return jaxpuct.alphazero_policy(p, key, root, recurrent_fn, sims,
                                                dirichlet_fraction=0.0, temperature=0.0,
                                                leaves_per_step=k).action
            fn = jax.jit(run)
            t = _median_time(fn, params, state, jax.random.PRNGKey(0), reps=reps)
            rate = batch * sims / t
            base = rate if base is None else base
            print(f"{batch:4d} {k:4d} {sims // k:13d} {rate:8.0f} {rate / base:7.2f}x",
                  flush=True)


def ttt_quality(quick: bool, budgets: list[int], ks: list[int]) -> None:
    positions = tictactoe.all_positions()
    if quick:
        positions = [p for p in positions if 5 <= 9 - p.count(0) <= 8]
    state = tictactoe.batch(positions)
    optimal = [tictactoe.optimal_moves(p) for p in positions]
    print(f"tic-tac-toe, {len(positions)} positions: minimax-optimal move share")
    for sims in budgets:
        for k in ks:
            fn = jax.jit(lambda s, k=k, sims=sims: jaxpuct.alphazero_policy(
                None, jax.random.key(0), tictactoe.root(s), tictactoe.recurrent_fn, sims,
                dirichlet_fraction=0.0, temperature=0.0, leaves_per_step=k).action)
            action = np.asarray(fn(state))
            share = np.mean([int(a) in o for a, o in zip(action, optimal, strict=True)])
            print(f"  S = {sims:4d} K = {k:2d} ({sims // k:4d} network calls): {share:.4f}",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--k64", action="store_true")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    args = parser.parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}")
    ks = [1, 4, 16] + ([64] if args.k64 else [])
    if not args.skip_speed:
        connect_four(args.reps, ks)
    if not args.skip_quality:
        ttt_quality(args.quick, [64, 256] if args.quick else [256, 800], [1, 4, 16])


if __name__ == "__main__":
    main()

"""Several leaves per search step (``leaves_per_step = K``): speed and quality.

1. Throughput on connect_four (pgx) with a small residual policy-value network
   (``jaxpuct.alphazero.networks.ResNetPolicyValue``, 2 blocks of 32 channels,
   random weights): for B = 1, 8, 64 and K = 1, 4, 16, 64, S = 64 simulations per
   search, the simulations per second (B * S / median time), relative to K = 1,
   the network calls per search (S / K), and the same search with a free
   stand-in for the network and the environment (constant outputs: the tree
   work alone). The K of one B are timed interleaved, round by round.
2. The network alone: positions per second at batch 1, 4, 16 and 64, both per
   jitted call (includes the dispatch of each call) and inside one jitted loop
   of 64 calls (what the search pays: no dispatch).
3. Quality at equal evaluations: tic-tac-toe, uniform prior and zero value, every
   reachable non-terminal position (``--quick``: the 3430 with 5-8 stones), how
   often the move played at temperature 0 is minimax-optimal, for K = 1, 4, 16.

    python -m benchmarks.multileaf [--quick] [--reps 7] [--ks 1,4,16,64] [--batches 1,8,64]
        [--net-batches 1,4,16,64] [--skip-speed] [--skip-quality]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct
from jaxpuct.testing import tictactoe
from jaxpuct.types import RecurrentFnOutput


def _interleaved_medians(fns: dict, args: tuple, reps: int) -> dict:
    """Median seconds per call of each function, timed round by round (so that
    load changes hit every function alike)."""
    for fn in fns.values():
        jax.block_until_ready(fn(*args))
    times = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def connect_four(reps: int, ks: list[int], batches: list[int], sims: int = 64,
                 net_batches: tuple[int, ...] = (1, 4, 16, 64)) -> None:
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

    def free_recurrent_fn(p, key, action, state):
        # The tree work alone: constant outputs, the parent state as the child's.
        n = action.shape[0]
        return RecurrentFnOutput(reward=jnp.zeros(n), discount=-jnp.ones(n),
                                 prior_logits=jnp.zeros((n, game.num_actions)),
                                 value=jnp.zeros(n)), state

    print(f"network alone (positions/s), load average {os.getloadavg()[0]:.1f}:")
    print("  batch   per call (dispatched)   in a jitted loop of 64 calls")
    calls = 64
    for batch in net_batches:
        obs = jnp.zeros((batch,) + game.observation_shape, jnp.float32)
        net = jax.jit(apply_fn)

        @jax.jit
        def loop(p, o):
            def body(i, acc):
                logits, value = apply_fn(p, o + i.astype(o.dtype))
                return acc + value.sum() + logits.sum()
            return jax.lax.fori_loop(0, calls, body, 0.0)

        t = _interleaved_medians({"call": net, "loop": loop}, (params, obs), max(reps, 9))
        per_loop = t["loop"] / calls
        print(f"  {batch:5d} {batch / t['call']:10.0f} ({t['call'] * 1e3:.3f} ms)"
              f" {batch / per_loop:12.0f} ({per_loop * 1e3:.3f} ms)", flush=True)

    print(f"connect_four search, S = {sims} (sims/s = B * S / median time):")
    print("   B    K  calls/search   sims/s   vs K=1   tree only: sims/s   vs K=1")
    for batch in batches:
        state = game.init(jax.random.PRNGKey(1), batch)
        fns = {}
        for k in ks:
            for name, rf in (("net", recurrent_fn), ("free", free_recurrent_fn)):
                def run(p, s, key, k=k, rf=rf):
                    root = root_fn(p, key, s)
                    return jaxpuct.alphazero_policy(p, key, root, rf, sims,
                                                    dirichlet_fraction=0.0, temperature=0.0,
                                                    leaves_per_step=k).action
                fns[(name, k)] = jax.jit(run)
        t = _interleaved_medians(fns, (params, state, jax.random.PRNGKey(0)), reps)
        rate = {key: batch * sims / value for key, value in t.items()}
        for k in ks:
            print(f"{batch:4d} {k:4d} {sims // k:13d} {rate[('net', k)]:8.0f}"
                  f" {rate[('net', k)] / rate[('net', ks[0])]:7.2f}x"
                  f" {rate[('free', k)]:19.0f} {rate[('free', k)] / rate[('free', ks[0])]:7.2f}x",
                  flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ks", default="1,4,16,64")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--net-batches", default="1,4,16,64",
                        help="batches of the network-alone timing")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}")
    ks = [int(k) for k in args.ks.split(",")]
    if not args.skip_speed:
        connect_four(args.reps, ks, [int(b) for b in args.batches.split(",")],
                     net_batches=tuple(int(b) for b in args.net_batches.split(",") if b))
    if not args.skip_quality:
        ttt_quality(args.quick, [64, 256] if args.quick else [256, 800], [1, 4, 16])


if __name__ == "__main__":
    main()

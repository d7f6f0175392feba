"""Full-width against sampled search on multi-agent path finding (625 joint actions).

Run ``taskset -c 1 python -m benchmarks.pathfinding`` (default: 50 seeded 5x5
grids with 4 obstacles, 4 agents, step limit 16, S = 64) or ``--quick``.

The problem is :mod:`jaxpuct.testing.pathfinding`: 4 agents with moves stay/N/S/E/W
(``5^4 = 625`` joint actions), a collision voids the joint move, each step costs
the number of agents not yet at their goal; the exact optimum of every instance
comes from its A* planner. Every search plans move by move (model-predictive:
search from the current state, play the move, search again from the new state
with a fresh tree) with the same model: the true dynamics, the value minus the
sum of the agents' remaining shortest-path distances, and a prior that prefers
each agent's moves towards its goal (``exp(+1)`` against ``exp(0)`` to stay and
``exp(-1)`` away). Searches: ``alphazero_policy`` over the 625 joint logits
(full width), ``sampled_policy`` with ``K`` samples over the same joint logits
(``DiscreteActions(625)``) and over the per-agent logits
(``FactoredActions((5, 5, 5, 5))``, stochastic beam search); PUCT with min-max
normalised Q, τ = 0, no noise, ``max_depth`` = the step limit.

Two budgets: the same ``S`` for all, and equal time: each sampled search gets
the ``S`` (a multiple of 16) whose measured seconds per move come nearest to
full width's at its ``S``, from a calibration of a few moves. Reported per
search: the success rate (all agents at their goals within the step limit), the
mean cost over the optimum on the instances it solved, the number solved at the
optimal cost, and the median seconds per move (one batched call over all
instances, compiled beforehand).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct
from jaxpuct.sampled import DiscreteActions, FactoredActions
from jaxpuct.testing import pathfinding as pf

SELECTION = jaxpuct.PUCTConfig(q_normalization="minmax")


def planner(name: str, num_samples: int, num_simulations: int, step_limit: int
            ) -> Callable:
    """A jitted ``(params, key, state) -> action [B]`` for one search."""
    factored = name == "factored"
    root_fn, recurrent_fn = pf.model(joint=not factored)

    def plan(params, key, state):
        root = root_fn(params, state)
        keys = jax.random.split(key, state.cells.shape[0])
        common = dict(max_depth=step_limit, temperature=0.0, dirichlet_fraction=0.0,
                      selection=SELECTION)
        if name == "full":
            out = jaxpuct.alphazero_policy(params, keys, root, recurrent_fn,
                                           num_simulations, **common)
        else:
            space = (FactoredActions((pf.NUM_MOVES,) * state.cells.shape[1]) if factored
                     else DiscreteActions(root.prior_logits.shape[1]))
            out = jaxpuct.sampled_policy(params, keys, root, recurrent_fn, num_simulations,
                                         num_samples=num_samples, action_space=space,
                                         **common)
        return out.action

    return jax.jit(plan)


_step = jax.jit(pf.step)


def episode(plan: Callable, params: pf.Instances, step_limit: int, seed: int,
            max_moves: int | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """All instances played move by move: ``(solved [I], cost [I], median
    seconds per move)``; ``max_moves`` stops early (calibration)."""
    count = params.start.shape[0]
    state = pf.State(cells=jnp.asarray(params.start), instance=jnp.arange(count,
                                                                          dtype=jnp.int32))
    cost = np.zeros(count)
    done = np.all(params.start == params.goal, axis=-1)
    key = jax.random.PRNGKey(seed)
    jax.block_until_ready(plan(params, key, state))  # compile
    times = []
    for t in range(step_limit if max_moves is None else max_moves):
        begin = time.perf_counter()
        action = jax.block_until_ready(plan(params, jax.random.fold_in(key, t), state))
        times.append(time.perf_counter() - begin)
        new, step_cost, now_done = _step(params, state, action)
        # Instances already solved stay where they are and pay nothing.
        keep = jnp.asarray(done)
        state = pf.State(cells=jnp.where(keep[:, None], state.cells, new.cells),
                         instance=state.instance)
        cost += np.where(done, 0.0, np.asarray(step_cost))
        done = done | np.asarray(now_done)
        if done.all():
            break
    return done, cost, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--size", type=int, default=5)
    parser.add_argument("--obstacles", type=int, default=4)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--step-limit", type=int, default=16)
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--samples", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-equal-time", action="store_true")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.instances, args.simulations, args.samples, args.step_limit = 4, 16, [8], 8
    params = pf.make_instances(args.instances, args.size, args.agents, args.obstacles,
                               args.seed)
    begin = time.process_time()
    optimum = np.array([pf.optimal_cost(params, i)[0] for i in range(args.instances)])
    lower = np.array([params.distance[i][np.arange(args.agents), params.start[i]].sum()
                      for i in range(args.instances)])
    print(f"{args.instances} instances {args.size}x{args.size}, {args.obstacles} obstacles, "
          f"{args.agents} agents ({pf.NUM_MOVES ** args.agents} joint actions), step limit "
          f"{args.step_limit}; A* in {time.process_time() - begin:.1f} CPU-s; optimum "
          f"mean {optimum.mean():.2f}, above the sum of distances on "
          f"{int(np.sum(optimum > lower))}; on {jax.devices()[0].platform}")
    print(f"{'search':>14} {'S':>5} {'solved':>7} {'cost/opt':>9} {'optimal':>8} "
          f"{'s/move':>8}")

    def report(name: str, k: int, sims: int) -> float:
        plan = planner(name, k, sims, args.step_limit)
        solved, cost, seconds = episode(plan, params, args.step_limit, args.seed)
        ratio = cost[solved] / np.maximum(optimum[solved], 1.0)
        label = "full width" if name == "full" else f"{name} K={k}"
        print(f"{label:>14} {sims:>5} {solved.mean():>7.2f} "
              f"{ratio.mean() if solved.any() else float('nan'):>9.3f} "
              f"{int(np.sum(solved & (cost == optimum))):>8} {seconds:>8.3f}", flush=True)
        return seconds

    full_seconds = report("full", 0, args.simulations)
    for name in ("joint", "factored"):
        for k in args.samples:
            report(name, k, args.simulations)
    if args.no_equal_time:
        return
    print(f"equal time: S per sampled search from {full_seconds:.3f} s per move")
    for name in ("joint", "factored"):
        for k in args.samples:
            # Calibrate from a few moves at S and 4S: time is affine in S.
            probe = []
            for sims in (args.simulations, 4 * args.simulations):
                probe.append(episode(planner(name, k, sims, args.step_limit), params,
                                     args.step_limit, args.seed, max_moves=3)[2])
            slope = max((probe[1] - probe[0]) / (3 * args.simulations), 1e-9)
            sims = args.simulations + (full_seconds - probe[0]) / slope
            sims = int(max(16, round(sims / 16) * 16))
            report(name, k, sims)


if __name__ == "__main__":
    main()

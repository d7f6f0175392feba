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

Two budgets: the same ``S`` for all, and equal time: each sampled search again
at each ``S`` of ``--sweep`` (32, 128, 256), the row whose seconds per move come
nearest to full width's at its ``S`` marked ``*``. Reported per search: the
success rate (all agents at their goals within the step limit), the mean cost
over the optimum on the instances it solved, the number solved at the optimal
cost, and the seconds per move: the median of ``--reps`` calls at the start
states (one batched call over all instances, compiled beforehand), all searches
timed in turn round by round so that the machine's load drifts over them alike.
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


def planner(name: str, num_samples: int, num_simulations: int, step_limit: int,
            gumbel_scale: float = 1.0) -> Callable:
    """A jitted ``(params, key, state) -> action [B]`` for one search: ``"full"``,
    ``"joint"`` / ``"factored"`` (``sampled_policy``) or ``"gumbel-joint"`` /
    ``"gumbel-factored"`` (``sampled_gumbel_policy``)."""
    gumbel = name.startswith("gumbel-")
    factored = name.endswith("factored")
    root_fn, recurrent_fn = pf.model(joint=not factored)

    def plan(params, key, state):
        root = root_fn(params, state)
        keys = jax.random.split(key, state.cells.shape[0])
        common = dict(max_depth=step_limit, temperature=0.0, dirichlet_fraction=0.0,
                      selection=SELECTION)
        if name == "full":
            out = jaxpuct.alphazero_policy(params, keys, root, recurrent_fn,
                                           num_simulations, **common)
        elif gumbel:
            space = (FactoredActions((pf.NUM_MOVES,) * state.cells.shape[1]) if factored
                     else DiscreteActions(root.prior_logits.shape[1]))
            out = jaxpuct.sampled_gumbel_policy(
                params, keys, root, recurrent_fn, num_simulations, max_depth=step_limit,
                num_samples=num_samples, action_space=space, gumbel_scale=gumbel_scale)
        else:
            space = (FactoredActions((pf.NUM_MOVES,) * state.cells.shape[1]) if factored
                     else DiscreteActions(root.prior_logits.shape[1]))
            out = jaxpuct.sampled_policy(params, keys, root, recurrent_fn, num_simulations,
                                         num_samples=num_samples, action_space=space,
                                         **common)
        return out.action

    return jax.jit(plan)


_step = jax.jit(pf.step)


def episode(plan: Callable, params: pf.Instances, step_limit: int, seed: int
            ) -> tuple[np.ndarray, np.ndarray, float]:
    """All instances played move by move: ``(solved [I], cost [I], median
    seconds per move)``."""
    count = params.start.shape[0]
    state = pf.State(cells=jnp.asarray(params.start), instance=jnp.arange(count,
                                                                          dtype=jnp.int32))
    cost = np.zeros(count)
    done = np.all(params.start == params.goal, axis=-1)
    key = jax.random.PRNGKey(seed)
    jax.block_until_ready(plan(params, key, state))  # compile
    times = []
    for t in range(step_limit):
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--size", type=int, default=5)
    parser.add_argument("--obstacles", type=int, default=4)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--step-limit", type=int, default=16)
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--samples", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reps", type=int, default=5, help="timed calls per search")
    parser.add_argument("--sweep", type=int, nargs="*", default=[32, 128, 256],
                        help="simulation counts for the equal-time sweep (none: skip)")
    parser.add_argument("--gumbel", action="store_true",
                        help="also sampled_gumbel_policy over the same samples (at S only)")
    parser.add_argument("--gumbel-scale", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    args = parser.parse_args(argv)
    if args.quick:
        args.instances, args.simulations, args.samples, args.step_limit = 4, 16, [8], 8
        args.sweep, args.reps = [8, 32], 2
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
    configs = [("full", 0, args.simulations)]
    configs += [(name, k, args.simulations) for name in ("joint", "factored")
                for k in args.samples]
    configs += [(name, k, sims) for name in ("joint", "factored") for k in args.samples
                for sims in args.sweep if sims != args.simulations]
    if args.gumbel:
        configs += [(name, k, args.simulations) for name in ("gumbel-joint", "gumbel-factored")
                    for k in args.samples]
    plans, results = {}, {}
    for config in configs:
        plans[config] = planner(config[0], config[1], config[2], args.step_limit,
                                args.gumbel_scale)
        solved, cost, _ = episode(plans[config], params, args.step_limit, args.seed)
        results[config] = (solved, cost)
    # Seconds per move: every search timed at the start states, interleaved round
    # by round so that the machine's load drifts over all of them alike.
    state = pf.State(cells=jnp.asarray(params.start),
                     instance=jnp.arange(args.instances, dtype=jnp.int32))
    key = jax.random.PRNGKey(args.seed)
    times: dict[tuple[str, int, int], list[float]] = {c: [] for c in configs}
    for _ in range(args.reps):
        for config in configs:
            begin = time.perf_counter()
            jax.block_until_ready(plans[config](params, key, state))
            times[config].append(time.perf_counter() - begin)
    seconds = {c: statistics.median(t) for c, t in times.items()}
    full = seconds[configs[0]]
    nearest = {}
    for config in configs[1:]:
        if config[0].startswith("gumbel-"):
            continue  # no equal-time sweep of the Gumbel root
        group = (config[0], config[1])
        if group not in nearest or abs(seconds[config] - full) < abs(
                seconds[nearest[group]] - full):
            nearest[group] = config
    hard = optimum > lower  # the agents must give way to each other
    print(f"{'search':>14} {'S':>5} {'solved':>7} {'cost/opt':>9} {'optimal':>8} "
          f"{'hard solved':>12} {'hard c/opt':>11} {'s/move':>8} {'/ full':>7}"
          "  (* the S nearest full width's time)")
    for config in sorted(configs, key=lambda c: (c[0] != "full", c[0], c[1], c[2])):
        solved, cost = results[config]
        ratio = cost[solved] / np.maximum(optimum[solved], 1.0)
        name, k, sims = config
        label = "full width" if name == "full" else f"{name} K={k}"
        mark = " *" if nearest.get((name, k)) == config else ""
        hard_ratio = cost[solved & hard] / optimum[solved & hard]
        print(f"{label:>14} {sims:>5} {solved.mean():>7.2f} "
              f"{ratio.mean() if solved.any() else float('nan'):>9.3f} "
              f"{int(np.sum(solved & (cost == optimum))):>8} "
              f"{int(np.sum(solved & hard)):>9}/{int(hard.sum()):<2} "
              f"{hard_ratio.mean() if hard_ratio.size else float('nan'):>11.3f} "
              f"{seconds[config]:>8.3f} {seconds[config] / full:>7.2f}{mark}", flush=True)

if __name__ == "__main__":
    main()

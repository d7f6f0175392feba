"""Sampled search on a 10,000-action two-level game with a known optimum.

Run ``taskset -c 0 python -m benchmarks.sampled_oracle`` (default: A = 10,000,
K = 16, 32, 64 with S = 2K simulations, 256 searches per K in one batched call,
``sampled_policy`` (PUCT) and ``sampled_gumbel_policy``), or ``--quick``.

The game is :class:`jaxpuct.testing.two_level.TwoLevelGame`: the optimum ``a*``
(prior 0.02) is the one root action worth 1, behind a second level; ten decoys
with twice its prior are worth 0.5; the other 9,989 actions are terminal and
worth at most 0.2. A search can return ``a*`` only if it is among its root's
``K`` samples, so the ceiling is ``P(a* in S)``, computed exactly
(:func:`jaxpuct.testing.two_level.inclusion_probability`) and estimated from
10,000 NumPy Gumbel-top-``K`` draws. Reported per ``K``: both, the searches'
rate of ``a*`` among their samples and of returning it (with a binomial
standard error), and the rate of returning the best sampled action.
"""

from __future__ import annotations

import argparse
import math
import time

import jax
import numpy as np

import jaxpuct
from jaxpuct.testing import two_level


def _se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 0.0) / n)


def run(game: two_level.TwoLevelGame, policy: str, num_samples: int, num_simulations: int,
        runs: int, seed: int) -> dict[str, float]:
    """One batched call of ``runs`` searches; the rates of the module docstring."""
    tables, root = game.tables(), game.root(runs)

    def search(keys, tables, root):
        if policy == "puct":
            return jaxpuct.sampled_policy(tables, keys, root, game.recurrent_fn,
                                          num_simulations, num_samples=num_samples,
                                          max_depth=2, temperature=0.0,
                                          dirichlet_fraction=0.0)
        return jaxpuct.sampled_gumbel_policy(tables, keys, root, game.recurrent_fn,
                                             num_simulations, num_samples=num_samples,
                                             max_depth=2)

    keys = jax.random.split(jax.random.PRNGKey(seed), runs)
    start = time.perf_counter()
    out = jax.device_get(jax.jit(search)(keys, tables, root))
    seconds = time.perf_counter() - start
    optimum, _ = game.ids
    values = game.exact_values()
    held = out.sampled_actions
    valid = np.asarray(out.search_tree.children_index[:, 0]) != jaxpuct.ILLEGAL
    sampled = np.any((held == optimum) & valid, axis=1)
    found = out.action == optimum
    best = held[np.arange(runs), np.argmax(np.where(valid, values[held], -np.inf), axis=1)]
    return {"in_sample": sampled.mean(), "found": found.mean(),
            "found_if_sampled": found[sampled].mean() if sampled.any() else float("nan"),
            "found_if_not": found[~sampled].mean() if (~sampled).any() else float("nan"),
            "best_sampled": (out.action == best).mean(), "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=10_000)
    parser.add_argument("--samples", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--runs", type=int, default=256)
    parser.add_argument("--numpy-runs", type=int, default=10_000)
    parser.add_argument("--policies", nargs="+", default=["puct", "gumbel"],
                        choices=["puct", "gumbel"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.actions, args.samples, args.runs, args.numpy_runs = 200, [4], 16, 500
    game = two_level.TwoLevelGame(num_actions=args.actions)
    optimum, _ = game.ids
    priors, counts = game.classes()
    print(f"A={args.actions} a*={optimum} pi(a*)={game.optimum_prior} runs={args.runs} "
          f"(S = 2K) on {jax.devices()[0].platform}")
    print(f"{'K':>3} {'exact P(a* in S)':>17} {'NumPy':>15} | {'policy':>6} {'in S':>13} "
          f"{'returns a*':>13} {'a*|in S':>8} {'a*|not':>7} {'best in S':>9} {'s':>6}")
    for k in args.samples:
        exact = two_level.inclusion_probability(game.optimum_prior, priors, counts, k)
        mc, mc_se = two_level.numpy_inclusion_estimate(game.prior(), optimum, k,
                                                       args.numpy_runs, seed=args.seed)
        for policy in args.policies:
            r = run(game, policy, k, 2 * k, args.runs, args.seed + k)
            print(f"{k:>3} {exact:>17.4f} {mc:>8.4f}±{mc_se:.4f} | {policy:>6} "
                  f"{r['in_sample']:>6.3f}±{_se(r['in_sample'], args.runs):.3f} "
                  f"{r['found']:>6.3f}±{_se(r['found'], args.runs):.3f} "
                  f"{r['found_if_sampled']:>8.3f} {r['found_if_not']:>7.3f} "
                  f"{r['best_sampled']:>9.3f} {r['seconds']:>6.1f}", flush=True)


if __name__ == "__main__":
    main()

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

``--continuous``: a 3-step 2-D planning problem with a narrow peak instead.
``x' = x + a`` from ``x = 0``, reward ``exp(-|x' - c|^2 / (2 w^2))`` at each of
the 3 steps (``c = (1, -0.5)``, ``w = 0.2``), discount 1, the policy a fixed
``N(0, I)`` (a network that knows nothing). The analytic optimum is to reach
``c`` at once and stay (return 3), so the best first action is ``c``. Reported
per ``(K, S)``: the mean distance of the move to ``c`` over 64 searches, the
mean distance of the root sample nearest ``c`` (the best the search could
pick), and the fraction of moves within ``w`` of ``c``.
"""

from __future__ import annotations

import argparse
import math
import time

import jax
import jax.numpy as jnp
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


_PEAK = np.array([1.0, -0.5], np.float32)
_WIDTH = 0.2
_STEPS = 3


def _peak_fn(params, rng_key, action, state):
    """``state = (x [B, 2], t [B])``; terminal after ``_STEPS`` moves."""
    del params, rng_key
    x, t = state
    new = x + action
    reward = jnp.exp(-jnp.sum((new - _PEAK) ** 2, -1) / (2 * _WIDTH**2))
    zeros = jnp.zeros(x.shape[:1])
    out = jaxpuct.RecurrentFnOutput(reward=reward, discount=zeros + 1.0, value=zeros,
                                    prior_logits=jnp.zeros((x.shape[0], 4)),
                                    terminal=t + 1 >= _STEPS)
    return out, (new, t + 1)


def run_continuous(num_samples: int, num_simulations: int, runs: int, seed: int
                   ) -> dict[str, float]:
    root = jaxpuct.RootFnOutput(prior_logits=jnp.zeros((runs, 4)), value=jnp.zeros(runs),
                                embedding=(jnp.zeros((runs, 2)), jnp.zeros(runs, jnp.int32)))
    search = jax.jit(lambda keys, root: jaxpuct.sampled_policy(
        None, keys, root, _peak_fn, num_simulations, num_samples=num_samples,
        action_space=jaxpuct.sampled.GaussianActions(2), temperature=0.0,
        dirichlet_fraction=0.0, selection=jaxpuct.PUCTConfig(q_normalization="minmax")))
    keys = jax.random.split(jax.random.PRNGKey(seed), runs)
    out = jax.device_get(search(keys, root))
    dist = np.linalg.norm(out.action - _PEAK, axis=-1)
    best = np.linalg.norm(out.sampled_actions - _PEAK, axis=-1).min(-1)
    return {"distance": dist.mean(), "se": dist.std() / math.sqrt(runs),
            "best_sample": best.mean(), "within": (dist < _WIDTH).mean()}


def main_continuous(samples: list[int], simulations: list[int], runs: int, seed: int) -> None:
    print(f"3-step 2-D peak c={_PEAK.tolist()} w={_WIDTH}: prior mean's distance "
          f"{np.linalg.norm(_PEAK):.3f}; {runs} searches per row")
    print(f"{'K':>4} {'S':>5} {'|a - c|':>15} {'best sample':>12} {'within w':>9}")
    for k in samples:
        for sims in simulations:
            r = run_continuous(k, sims, runs, seed)
            print(f"{k:>4} {sims:>5} {r['distance']:>8.3f}±{r['se']:.3f} "
                  f"{r['best_sample']:>12.3f} {r['within']:>9.3f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=10_000)
    parser.add_argument("--samples", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--runs", type=int, default=256)
    parser.add_argument("--numpy-runs", type=int, default=10_000)
    parser.add_argument("--policies", nargs="+", default=["puct", "gumbel"],
                        choices=["puct", "gumbel"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--continuous", action="store_true",
                        help="the continuous peak problem instead (K in --samples, "
                             "S in --simulations, 64 searches)")
    parser.add_argument("--simulations", type=int, nargs="+", default=[32, 128, 512])
    args = parser.parse_args(argv)
    if args.continuous:
        if args.quick:
            args.samples, args.simulations = [4], [8]
        main_continuous(args.samples, args.simulations, 64, args.seed)
        return
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

"""Sampled search against full-width search as the action count ``A`` grows.

Run ``taskset -c 1 python -m benchmarks.sampled`` (default: B=32 trees, S=64,
K=16, A in 100, 1000, 10000) or ``--quick`` (tiny sizes). The workload is the
synthetic game of :mod:`jaxpuct.testing.synthetic` (no network: its logits are a
sin over the ``A`` actions), searched by ``alphazero_policy`` (full width, edge
arrays ``[B, N, A]``) and by ``sampled_policy`` with ``num_samples=K`` (edge
arrays ``[B, N, K]``, the samples in the embedding), no noise, τ = 0.

Reported per ``A``: the tree's bytes per node slot (``Tree.bytes_per_node``,
summed: node arrays, edge arrays, embedding) and the time per simulation
(median of ``--reps`` jitted calls, compiled beforehand, ``block_until_ready``
after each, divided by ``S``).

What stays O(A) in sampled search: the model's output (``A`` logits per new
node, here the synthetic game's sin) and the Gumbel-top-``K`` draw over them
(one ``top_k`` over ``A`` per new node). Everything the tree stores and every
selection step is O(K).

``--factored`` (a second section): joint actions of ``F`` factors of 10
(``A = 10^F``, up to 10^6) under a factored policy
(:func:`jaxpuct.testing.synthetic.factored_synthetic_game`). Side by side per
``A``: full-width search and ``DiscreteActions`` sampling on the ``[B, A]``
joint logits (a joint policy head; up to ``--max-full`` and
``--max-discrete`` actions, beyond which they are too slow or too large), and
``FactoredActions`` sampling on the ``[B, 10 F]`` factor logits (stochastic
beam search, nothing of size ``A``). The same policy in all three.
"""

from __future__ import annotations

import argparse

import jax

import jaxpuct
from benchmarks.timing import median_seconds
from jaxpuct.sampled import FactoredActions, sampled_policy
from jaxpuct.testing.synthetic import factored_synthetic_game, synthetic_game


def measure(batch: int, num_simulations: int, num_samples: int, num_actions: int,
            reps: int) -> dict[str, tuple[int, float]]:
    """``{name: (bytes per node, seconds per simulation)}`` for one ``A``."""
    root, recurrent_fn = synthetic_game(batch, num_actions)
    key = jax.random.PRNGKey(0)
    policies = {
        "full": jax.jit(lambda k: jaxpuct.alphazero_policy(
            None, k, root, recurrent_fn, num_simulations, dirichlet_fraction=0.0,
            temperature=0.0)),
        f"sampled K={num_samples}": jax.jit(lambda k: sampled_policy(
            None, k, root, recurrent_fn, num_simulations, num_samples=num_samples,
            dirichlet_fraction=0.0, temperature=0.0)),
    }
    out = {}
    for name, fn in policies.items():
        tree = jax.block_until_ready(fn(key)).search_tree
        per_node = sum(tree.bytes_per_node().values())
        out[name] = (per_node, median_seconds(fn, key, reps=reps) / num_simulations)
        del tree
    return out


def measure_factored(batch: int, num_simulations: int, num_samples: int, num_factors: int,
                     reps: int, max_full: int, max_discrete: int
                     ) -> dict[str, tuple[int, float]]:
    """As :func:`measure` for ``A = 10^num_factors`` joint actions of a factored
    policy: full width and ``DiscreteActions`` on the joint logits (while ``A``
    is at most ``max_full`` / ``max_discrete``), ``FactoredActions`` on the
    factor logits."""
    sizes = (10,) * num_factors
    num_actions = 10 ** num_factors
    key = jax.random.PRNGKey(0)
    policies = {}
    if num_actions <= max_full:
        root, fn = factored_synthetic_game(batch, sizes, joint=True)
        policies["full"] = jax.jit(lambda k, root=root, fn=fn: jaxpuct.alphazero_policy(
            None, k, root, fn, num_simulations, dirichlet_fraction=0.0, temperature=0.0))
    if num_actions <= max_discrete:
        root, fn = factored_synthetic_game(batch, sizes, joint=True)
        policies[f"joint K={num_samples}"] = jax.jit(
            lambda k, root=root, fn=fn: sampled_policy(
                None, k, root, fn, num_simulations, num_samples=num_samples,
                dirichlet_fraction=0.0, temperature=0.0))
    root, fn = factored_synthetic_game(batch, sizes)
    policies[f"factored K={num_samples}"] = jax.jit(
        lambda k, root=root, fn=fn: sampled_policy(
            None, k, root, fn, num_simulations, num_samples=num_samples,
            action_space=FactoredActions(sizes), dirichlet_fraction=0.0, temperature=0.0))
    out = {}
    for name, fn in policies.items():
        tree = jax.block_until_ready(fn(key)).search_tree
        out[name] = (sum(tree.bytes_per_node().values()),
                     median_seconds(fn, key, reps=reps) / num_simulations)
        del tree
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--actions", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--factored", type=int, nargs="*", default=None,
                        help="the factored section instead, for these numbers of factors "
                             "of 10 (default 2 3 4 5 6: A = 10^2 .. 10^6)")
    parser.add_argument("--max-full", type=int, default=10_000)
    parser.add_argument("--max-discrete", type=int, default=100_000)
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.simulations, args.actions, args.reps = 4, 8, [20, 40], 1
    print(f"B={args.batch} S={args.simulations} K={args.samples} on "
          f"{jax.devices()[0].platform}")
    if args.factored is not None:
        factors = args.factored or ([1, 2] if args.quick else [2, 3, 4, 5, 6])
        print(f"{'A':>8} {'search':>14} {'bytes/node':>11} {'us/simulation':>14}")
        for num_factors in factors:
            results = measure_factored(args.batch, args.simulations, args.samples,
                                       num_factors, args.reps, args.max_full,
                                       args.max_discrete)
            for name, (per_node, seconds) in results.items():
                print(f"{10 ** num_factors:>8} {name:>14} {per_node:>11} "
                      f"{seconds * 1e6:>14.1f}", flush=True)
        return
    print(f"{'A':>7} {'search':>14} {'bytes/node':>11} {'us/simulation':>14}")
    for num_actions in args.actions:
        results = measure(args.batch, args.simulations, args.samples, num_actions, args.reps)
        for name, (per_node, seconds) in results.items():
            print(f"{num_actions:>7} {name:>14} {per_node:>11} {seconds * 1e6:>14.1f}")


if __name__ == "__main__":
    main()

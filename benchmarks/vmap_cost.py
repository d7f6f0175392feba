"""What ``jax.vmap`` over a policy costs against one flat batch of the same trees.

Run ``python -m benchmarks.vmap_cost`` (default: V=8 groups of B=32 trees, S=64,
A=16) or ``--quick`` (tiny sizes). The workload is the synthetic game of
:mod:`jaxpuct.testing.synthetic` (no network, so the time is the search's own).

Measured, each a ``jit`` ted call compiled beforehand, median of ``--reps`` calls
made in turn, ``block_until_ready`` after each:

* ``flat``: ``alphazero_policy`` on one batch of ``V * B`` roots;
* ``vmap``: ``jax.vmap(alphazero_policy)`` over ``V`` batches of ``B`` roots.

Both search the same ``V * B`` trees with the same rule (no noise, τ = 0), so the
statistics are equal (checked). ``vmap`` turns the search's ``while_loop`` s over
depth into loops whose trip count is the maximum over the vmapped groups, and its
gathers and scatters into batched ones over an extra axis; the flat batch is what
the search is written for.
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

import jaxpuct
from benchmarks.timing import median_seconds
from jaxpuct.testing.synthetic import synthetic_game


def _policy(num_simulations: int, recurrent_fn):
    def policy(root, key):
        return jaxpuct.alphazero_policy(
            None, key, root, recurrent_fn, num_simulations, dirichlet_fraction=0.0,
            temperature=0.0)
    return policy


def measure(groups: int, batch: int, num_simulations: int, num_actions: int,
            reps: int) -> dict[str, float]:
    """Median seconds of the flat and the vmapped call, and their ratio."""
    root, recurrent_fn = synthetic_game(groups * batch, num_actions)
    policy = _policy(num_simulations, recurrent_fn)
    keys = jax.random.split(jax.random.PRNGKey(0), groups * batch)
    flat = jax.jit(policy)
    grouped = jax.jit(jax.vmap(policy))
    split = jax.tree.map(lambda x: x.reshape((groups, batch) + x.shape[1:]), (root, keys))
    # Same trees both ways (per-element keys; no noise; greedy moves).
    a = flat(root, keys).search_tree.summary().visit_counts
    b = grouped(*split).search_tree.summary().visit_counts
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b).reshape(a.shape))
    flat_s = median_seconds(flat, root, keys, reps=reps)
    vmap_s = median_seconds(grouped, *split, reps=reps)
    return {"flat_s": flat_s, "vmap_s": vmap_s, "ratio": vmap_s / flat_s}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--actions", type=int, default=16)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 3 reps")
    args = parser.parse_args(argv)
    if args.quick:
        args.groups, args.batch, args.simulations, args.actions, args.reps = 2, 4, 8, 4, 3
    result = measure(args.groups, args.batch, args.simulations, args.actions, args.reps)
    print(f"V={args.groups} groups x B={args.batch} trees, S={args.simulations}, "
          f"A={args.actions}, {jax.devices()[0].platform}: flat {result['flat_s'] * 1e3:.1f} "
          f"ms, vmap {result['vmap_s'] * 1e3:.1f} ms, vmap / flat = {result['ratio']:.2f}")


if __name__ == "__main__":
    main()

"""What tree reuse costs, as a fraction of one search.

Run ``python -m benchmarks.reuse_cost`` (default: B=256, S=128, A=82,
max_nodes=2S) or ``python -m benchmarks.reuse_cost --quick`` (tiny sizes).

The workload is a synthetic game with ``A`` actions and no terminal state: a
state is an integer, a move hashes it, the prior logits and the value are read
from fixed random tables. Its "network" costs almost nothing, so the search time
is nearly all tree work and the reported fraction is an upper bound of what a
real network leaves (a ResNet's evaluation makes the search longer and the reuse
no slower).

Measured, each a ``jit`` ted call compiled beforehand (compile time reported;
0 for ``search``, compiled before to build the tree), median of ``--reps``
calls made in turn, round after round, ``block_until_ready`` after each; the
``/ search`` column is the median over rounds of the call's time over that
round's ``search`` time:

* ``search``: ``jaxpuct.search`` with ``S`` simulations from a fresh root;
* ``search (continued)``: ``S`` more simulations on the reused tree;
* ``subtree``: ``jaxpuct.reuse.subtree`` at the most visited root move, with
  tree-mode reachability (pointer jumping) and with the graph-mode one
  (frontier expansion);
* ``subtree_or_init``: the same plus a fresh root where nothing is reused;
* ``copy``: one pass over every tree array (``x + 0``), for scale;
* with ``--graph``: ``search(..., graph=GraphConfig())`` and ``subtree`` on
  its graph (frontier reachability, per-edge rewards, transposition table
  rebuilt by ``jaxpuct.graph.rebuild_hash_table``), still as a fraction of
  the tree search.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct
from jaxpuct import reuse
from jaxpuct.testing import synthetic

TABLE_SIZE = 4096


def make_game(num_actions: int, seed: int = 0):
    """``(root_fn(batch), recurrent_fn)`` of the synthetic game."""
    rng = np.random.default_rng(seed)
    logits = jnp.asarray(rng.standard_normal((TABLE_SIZE, num_actions)), jnp.float32)
    values = jnp.asarray(rng.uniform(-1, 1, TABLE_SIZE), jnp.float32)

    def evaluate(state):
        row = (state % TABLE_SIZE).astype(jnp.int32)
        return logits[row], values[row]

    def state_hash(state):  # the state is itself a hash (no transpositions)
        return jnp.stack([state, jnp.zeros_like(state)], axis=-1)

    def root_fn(batch: int) -> jaxpuct.RootFnOutput:
        state = synthetic.mix32(jnp.arange(batch, dtype=jnp.uint32))
        prior, value = evaluate(state)
        return jaxpuct.RootFnOutput(prior_logits=prior, value=value, embedding=state,
                                    state_hash=state_hash(state))

    def recurrent_fn(params, rng_key, action, state):
        del params, rng_key
        new_state = synthetic.mix32(state * jnp.uint32(num_actions) + action.astype(jnp.uint32) + 1)
        prior, value = evaluate(new_state)
        out = jaxpuct.RecurrentFnOutput(
            reward=jnp.zeros_like(value), discount=-jnp.ones_like(value),
            prior_logits=prior, value=value, state_hash=state_hash(new_state))
        return out, new_state

    return root_fn, recurrent_fn


def compile_call(fn, *args) -> tuple[Callable[[], Any], float]:
    """``(call, compile seconds)``: ``call()`` runs the compiled ``jit(fn)(*args)``
    to completion."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(*args))  # warm-up

    def call():
        return jax.block_until_ready(compiled(*args))

    return call, compile_s


def interleaved_samples(calls: dict[str, Callable[[], Any]], reps: int
                        ) -> dict[str, list[float]]:
    """Seconds per call, ``reps`` each, the calls made in turn round after round,
    so that a slow phase of a shared machine hits all of them alike."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - start)
    return samples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--simulations", type=int, default=128)
    parser.add_argument("--actions", type=int, default=82)
    parser.add_argument("--max-nodes", type=int, default=None, help="default: 2 * simulations")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="B=8, S=16, A=9")
    parser.add_argument("--graph", action="store_true",
                        help="also time graph-mode reuse (frontier + table rebuild)")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.simulations, args.actions, args.reps = 8, 16, 9, 2
    batch, sims, num_actions = args.batch, args.simulations, args.actions
    max_nodes = args.max_nodes or 2 * sims

    root_fn, recurrent_fn = make_game(num_actions)
    root = root_fn(batch)
    key = jax.random.key(0)
    search = functools.partial(jaxpuct.search, None, key, recurrent_fn=recurrent_fn,
                               num_simulations=sims)

    def fresh(root):
        return search(root, max_nodes=max_nodes)

    def more(tree):
        return search(None, tree=tree)

    tree = jax.jit(fresh)(root)  # the tree every reuse case starts from
    action = jnp.argmax(tree.edge_visits[:, 0], axis=-1).astype(jnp.int32)
    reused, ok = jax.jit(reuse.subtree)(tree, action)

    cases = {
        "search": (fresh, root),
        "search (continued)": (more, reused),
        "subtree (pointer jumping)": (
            functools.partial(reuse.subtree, reachability="pointer_jumping"), tree, action),
        "subtree (frontier)": (
            functools.partial(reuse.subtree, reachability="frontier"), tree, action),
        "subtree_or_init": (lambda t, a, r: reuse.subtree_or_init(t, a, r), tree, action, root),
        "copy": (lambda t: jax.tree.map(lambda x: x + 0, t), tree),
    }
    if args.graph:
        config = jaxpuct.GraphConfig()

        def graph_fresh(root):
            return search(root, max_nodes=max_nodes, graph=config)

        graph_tree = jax.jit(graph_fresh)(root)
        cases["graph search"] = (graph_fresh, root)
        cases["subtree (graph mode)"] = (
            functools.partial(reuse.subtree, graph=config), graph_tree, action)
    calls, compile_s = {}, {}
    for name, (fn, *fn_args) in cases.items():
        calls[name], compile_s[name] = compile_call(fn, *fn_args)
    samples = interleaved_samples(calls, args.reps)
    search_times = samples["search"]

    def ratio(name):  # median over rounds of (this call / the search call)
        return statistics.median(t / s for t, s in zip(samples[name], search_times, strict=True))

    rows = [(name, compile_s[name], statistics.median(samples[name]), ratio(name))
            for name in cases]

    print(f"jaxpuct reuse cost on {jax.devices()[0].platform}: B={batch}, S={sims}, "
          f"A={num_actions}, max_nodes={max_nodes}, {args.reps} rounds")
    print(f"nodes: {float(jnp.mean(tree.num_nodes)):.1f} after one search, "
          f"{float(jnp.mean(reused.num_nodes)):.1f} kept by subtree "
          f"(root visits {float(jnp.mean(reused.node_visits[:, 0])):.1f}; "
          f"reused {int(jnp.sum(ok))}/{batch})")
    print(f"{'':28s} {'compile s':>10s} {'median ms':>10s} {'/ search':>9s}")
    for name, compile_seconds, seconds, fraction in rows:
        print(f"{name:28s} {compile_seconds:10.2f} {seconds * 1e3:10.2f} {fraction:9.3f}")
    print(f"reuse cost: {ratio('subtree (pointer jumping)'):.1%} of one search of "
          f"{sims} simulations (median over rounds)")


if __name__ == "__main__":
    main()

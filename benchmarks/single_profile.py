"""Where one B = 1 simulation's time goes: kernels per phase and time per phase.

Method (CPU; no per-kernel trace is read):

* **Kernels** are counted in the compiled HLO of the whole search
  (``jax.jit(f).lower(...).compile().as_text()``): the instructions of each
  computation that run as a kernel (fusions, copies, loops; not parameters,
  constants, tuples, bitcasts), for the simulation loop's body outside its inner
  loops, the walk's depth loop body and the backup's depth loop body. Every
  kernel is one launch of the runtime, whatever its size at B = 1.
* **Time per phase** is measured on phase-isolated jitted functions run on the
  tree a full search built: each phase repeated ``R`` times inside one
  ``fori_loop`` whose carry feeds the next repetition (so XLA cannot hoist it),
  the median of several calls divided by ``R``:

  - ``walk``: :func:`jaxpuct.walk.select` from the root to a leaf edge;
  - ``expand``: :func:`jaxpuct.expanders.evaluate_walks` on a walk's leaf edge
    (the parent's stored pgx state gathered, one pgx step, the adapter's
    outputs), zero value;
  - ``rollout``: :func:`jaxpuct.envs.rollouts.rollout_return` from a leaf's state
    (one uniform random game to the end), alone;
  - ``store + backup``: :func:`jaxpuct.engine.store_and_backup_tree` of one leaf
    (the new node written, then the path backed up);
  - ``whole simulation``: the full search's median time over ``S``.

  The phases are measured apart, so their sum need not equal the whole (the loop
  glue and the fold of keys are in neither; XLA schedules a phase alone
  differently). The shape of each loop is the real search's at ``S`` simulations.

    taskset -c 1 python -m benchmarks.single_profile [--sims 1000] [--reps 5]
        [--games connect_four,tic_tac_toe]
"""

from __future__ import annotations

import argparse
import collections
import os
import re

import jax
import jax.numpy as jnp

import jaxpuct
from benchmarks.timing import median_seconds
from jaxpuct import engine
from jaxpuct.expanders import RecurrentExpander, evaluate_walks
from jaxpuct.selection import PUCTConfig, puct_rule
from jaxpuct.walk import Walk, select

# Instructions that launch nothing: the runtime resolves them to buffers.
_FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all"}


def _computations(hlo: str) -> tuple[dict[str, list[str]], str]:
    comps, entry, current = {}, "", None
    for line in hlo.splitlines():
        match = re.match(r"^(ENTRY )?%?([\w.\-]+) .*\{$", line)
        if match:
            current = match.group(2)
            comps[current] = []
            if match.group(1):
                entry = current
        elif line.strip() == "}":
            current = None
        elif current and " = " in line:
            comps[current].append(line.strip())
    return comps, entry


def _opcode(line: str) -> str:
    i = line.index(" = ") + 3
    if line[i] == "(":  # a tuple shape: skip to its closing parenthesis
        depth = 0
        for j in range(i, len(line)):
            depth += (line[j] == "(") - (line[j] == ")")
            if depth == 0:
                break
        i = j + 2
    else:
        i = line.index(" ", i) + 1
    return line[i:line.index("(", i)]


def kernels(comps: dict[str, list[str]], name: str) -> list[tuple[str, str]]:
    """``(opcode, line)`` of the instructions of computation ``name`` that launch."""
    return [(op, ln) for ln in comps[name] if (op := _opcode(ln)) not in _FREE]


def loop_kernels(hlo: str) -> list[tuple[int, str, collections.Counter]]:
    """The while loops of a compiled module, nested: ``(nesting, body, kernel
    counts by opcode)``; nesting 0 is the module's entry."""
    comps, entry = _computations(hlo)
    out = []

    def visit(name, level):
        ks = kernels(comps, name)
        out.append((level, name, collections.Counter(op for op, _ in ks)))
        for op, line in ks:
            if op == "while":
                visit(re.search(r"body=%?([\w.\-]+)", line).group(1), level + 1)
            elif op == "call":
                callee = re.search(r"to_apply=%?([\w.\-]+)", line)
                if callee:
                    visit(callee.group(1), level + 1)

    visit(entry, 0)
    return out


def profile_game(game: str, sims: int, reps: int, repeats: int) -> None:
    from jaxpuct.alphazero.config import MAX_MOVES
    from jaxpuct.envs import adapter, rollouts
    from jaxpuct.envs.pgx_games import make_pgx_game
    from jaxpuct.testing.pure_search import zero_apply

    pgx_game = make_pgx_game(game)
    env, num_actions = pgx_game.environment, pgx_game.num_actions
    apply_fn = zero_apply(num_actions)
    root_fn = adapter.make_root_fn(apply_fn, env)
    recurrent_fn = adapter.make_recurrent_fn(apply_fn, env)
    config = PUCTConfig()
    rule = puct_rule(config)
    state0 = pgx_game.init(jax.random.PRNGKey(0), 1)
    capacity = sims + repeats + 1

    def search(key, value):
        fn = recurrent_fn if value == "zero" else rollouts.make_recurrent_fn(
            apply_fn, env, mix=1.0, max_steps=MAX_MOVES[game])
        root = root_fn(None, key, state0)
        return jaxpuct.alphazero_policy(None, key, root, fn, sims, dirichlet_fraction=0.0,
                                        temperature=0.0, selection=config,
                                        max_nodes=capacity).search_tree

    key = jax.random.PRNGKey(1)
    search_zero = jax.jit(lambda k: search(k, "zero"))
    search_roll = jax.jit(lambda k: search(k, "rollout"))
    counts = {}
    for value, fn in (("zero", search_zero), ("rollout", search_roll)):
        counts[value] = loop_kernels(fn.lower(key).compile().as_text())
    whole = {"zero": median_seconds(search_zero, key, reps=reps, warm=True) / sims,
             "rollout": median_seconds(search_roll, key, reps=reps, warm=True) / sims}
    tree = search_zero(key)
    depth_limit = capacity

    def empty_walk():
        return Walk(path_nodes=jnp.zeros((1, depth_limit + 1), jnp.int32),
                    path_actions=jnp.zeros((1, depth_limit), jnp.int32),
                    num_edges=jnp.zeros((1,), jnp.int32), expand=jnp.zeros((1,), jnp.bool_))

    tie_keys = jax.random.split(key, 1)

    @jax.jit
    def walk_loop(tree):
        def body(i, carry):
            walk, total = carry
            walk, _ = select(tree, rule, depth_limit, tie_keys, None, i, walk.path_nodes,
                             walk.path_actions)
            return walk, total + walk.num_edges
        walk, total = jax.lax.fori_loop(0, repeats, body, (empty_walk(), jnp.zeros(1, jnp.int32)))
        return total

    walk0, _ = jax.jit(lambda t: select(t, rule, depth_limit, tie_keys, None, 0,
                                        empty_walk().path_nodes,
                                        empty_walk().path_actions))(tree)
    expander = RecurrentExpander(recurrent_fn, num_actions)

    @jax.jit
    def expand_loop(tree, walk):
        def body(i, total):
            # The action depends on the carry (never in practice), so the
            # evaluation is not loop-invariant.
            actions = jnp.where(total > 1e9, 0, walk.path_actions)
            w = walk.replace(path_actions=actions)
            leaves, _ = evaluate_walks(None, jax.random.fold_in(key, i), tree,
                                       jax.tree.map(lambda x: x[None], w), expander)
            return total + leaves.reward[0] + leaves.prior[0, 0, 0]
        return jax.lax.fori_loop(0, repeats, body, jnp.zeros(1))

    @jax.jit
    def rollout_loop(state):
        def body(i, total):
            z = rollouts.rollout_return(apply_fn, env, None, state, jax.random.fold_in(key, i),
                                        max_steps=MAX_MOVES[game])
            return total + z
        return jax.lax.fori_loop(0, repeats, body, jnp.zeros(1))

    leaves, _ = jax.jit(lambda t, w: evaluate_walks(None, key, t, jax.tree.map(
        lambda x: x[None], w), expander))(tree, walk0)

    @jax.jit
    def backup_loop(tree, walk, leaves):
        walks = jax.tree.map(lambda x: x[None], walk)

        def body(i, tree):
            return engine.store_and_backup_tree(tree, walks, leaves, None)
        return jax.lax.fori_loop(0, repeats, body, tree).node_visits

    phases = {}
    phases["walk"] = median_seconds(walk_loop, tree, reps=reps, warm=True) / repeats
    depth = float(walk_loop(tree)[0]) / repeats
    phases["expand"] = median_seconds(expand_loop, tree, walk0, reps=reps, warm=True) / repeats
    leaf_state = jax.tree.map(lambda x: x[0], leaves.embedding)
    phases["rollout"] = median_seconds(rollout_loop, leaf_state, reps=reps, warm=True) / repeats
    phases["store + backup"] = median_seconds(backup_loop, tree, walk0, leaves, reps=reps,
                                              warm=True) / repeats
    print(f"\n### {game}, B = 1, S = {sims} (load average {os.getloadavg()[0]:.1f})\n")
    print("Kernels in the compiled search (per loop body; nesting 0 = the whole module):\n")
    for value, rows in counts.items():
        for level, name, c in rows:
            if level == 0 or sum(c.values()) <= 2:
                continue
            ops = ", ".join(f"{op} {n}" for op, n in c.most_common())
            print(f"* {value}: depth {level}, {sum(c.values())} kernels ({ops}) `{name[:40]}`")
    print(f"\nmean walk length on the final tree: {depth:.2f} edges\n")
    print("| phase | µs per call |")
    print("|---|---|")
    for name, sec in phases.items():
        print(f"| {name} | {sec * 1e6:,.1f} |")
    for value, sec in whole.items():
        print(f"| whole simulation, {value} | {sec * 1e6:,.1f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=1000, help="R: calls per timed loop")
    parser.add_argument("--games", default="connect_four,tic_tac_toe")
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}, jaxpuct {jaxpuct.__version__}, cores "
          f"{sorted(os.sched_getaffinity(0))}")
    for game in args.games.split(","):
        profile_game(game, args.sims, args.reps, args.repeats)


if __name__ == "__main__":
    main()

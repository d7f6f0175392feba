"""Graph search against tree search: cost per simulation, and decisions per evaluation.

1. Cost: the synthetic deep-tree game of ``compare_mctx``
   (``jaxpuct.testing.synthetic``; A = 82, no network; every state hashed) at
   B = 256, S = 256, tree and graph mode compiled in one process and called in
   turn; medians. Target (issue "Monte-Carlo Graph Search"): graph-mode time per
   simulation at most 1.5x tree mode's.
2. Decision quality per network evaluation: tic-tac-toe, every one of the 4520
   reachable non-terminal positions, uniform prior and zero value (all knowledge
   from exact terminals), temperature 0: how often the move played is
   minimax-optimal, and how many distinct states the search evaluated and kept
   (tree mode stores duplicates of transposed states; graph mode one node each).
   Every simulation costs one network call in both modes (a lockstep search cannot
   skip the call for a transposition it only discovers from the call's hash).

    python -m benchmarks.graph_vs_tree [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np

import jaxpuct
from jaxpuct.testing import synthetic, tictactoe


def cost(batch: int, sims: int, reps: int) -> dict[str, float]:
    root, recurrent_fn = synthetic.synthetic_game(batch, 82, 3.0, 1.0, with_hash=True)
    compiled = {}
    for name, graph in (("tree", None), ("graph", jaxpuct.GraphConfig())):
        fn = jax.jit(lambda key, graph=graph: jaxpuct.alphazero_policy(
            None, key, root, recurrent_fn, sims, dirichlet_fraction=0.0,
            graph=graph).action_weights)
        compiled[name] = fn.lower(jax.random.PRNGKey(0)).compile()
        jax.block_until_ready(compiled[name](jax.random.PRNGKey(0)))
    times = {name: [] for name in compiled}
    for rep in range(reps):
        for name in (list(compiled) if rep % 2 == 0 else list(compiled)[::-1]):
            start = time.perf_counter()
            jax.block_until_ready(compiled[name](jax.random.PRNGKey(rep)))
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def decision_quality(sims_list: list[int]) -> list[dict]:
    """Optimal-move rate and tree sizes over every non-terminal tic-tac-toe position.

    The search functions are :mod:`jaxpuct.testing.tictactoe`'s: uniform prior,
    zero value, exact rewards, and an exact state hash (the position code and the
    player to move) for graph search.
    """
    positions = tictactoe.all_positions()
    assert len(positions) == 4520, len(positions)
    states = tictactoe.batch(positions)
    optimal = tictactoe.optimal_move_table()
    codes = np.array([tictactoe.code(p) for p in positions])
    recurrent_fn = tictactoe.make_recurrent_fn(with_hash=True)
    rows = []
    for sims in sims_list:
        for name, graph in (("tree", None), ("graph", jaxpuct.GraphConfig())):
            out = jax.jit(lambda s, graph=graph, sims=sims: jaxpuct.alphazero_policy(
                None, jax.random.PRNGKey(0), tictactoe.root(s, with_hash=True), recurrent_fn,
                sims, dirichlet_fraction=0.0, temperature=0.0, graph=graph))(states)
            action = np.asarray(out.action)
            rate = float(np.mean(optimal[codes, action]))
            tree = out.search_tree
            nodes = np.asarray(tree.num_nodes)
            # The relative board and the player to move identify a state.
            node_boards = np.asarray(tree.embeddings.board)
            node_player = np.asarray(tree.embeddings.player)
            distinct = [len({(node_boards[b, n].tobytes(), int(node_player[b, n]))
                             for n in range(nodes[b])}) for b in range(len(positions))]
            rows.append(dict(sims=sims, mode=name, optimal_rate=rate,
                             nodes=float(nodes.mean()), distinct=float(np.mean(distinct))))
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, smoke run")
    args = parser.parse_args(argv)
    batch, sims, reps = (32, 32, 2) if args.quick else (256, 256, 5)
    device = jax.devices()[0]
    print(f"device: {device.platform} ({device.device_kind}); jax {jax.__version__}")
    times = cost(batch, sims, reps)
    ratio = times["graph"] / times["tree"]
    print(f"\n1. cost, synthetic game B={batch} S={sims} A=82 (median of {reps})")
    for name, t in times.items():
        print(f"   {name:5s} {t:.3f} s   {t / sims * 1e6:8.0f} us per simulation (whole batch)")
    print(f"   graph / tree = {ratio:.2f}  (target <= 1.5: {'pass' if ratio <= 1.5 else 'FAIL'})")
    sims_list = [8, 16] if args.quick else [8, 16, 32, 64, 128]
    print("\n2. tic-tac-toe, all 4520 positions, uniform prior, zero value")
    print("   sims  mode   optimal-move rate  nodes stored  distinct states")
    for row in decision_quality(sims_list):
        print(f"   {row['sims']:4d}  {row['mode']:5s}  {row['optimal_rate']:.4f}"
              f"            {row['nodes']:7.1f}       {row['distinct']:7.1f}")


if __name__ == "__main__":
    main()

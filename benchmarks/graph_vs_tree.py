"""Graph search against tree search: cost per simulation, and decisions per evaluation.

1. Cost: the synthetic deep-tree game of ``compare_mctx`` (A = 82, no network;
   every state hashed) at B = 256, S = 256, tree and graph mode compiled in one
   process and called in turn; medians. Target (issue "Monte-Carlo Graph
   Search"): graph-mode time per simulation at most 1.5x tree mode's.
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
import jax.numpy as jnp
import numpy as np

import jaxpuct
from benchmarks.compare_mctx import _mix32, synthetic_game
from examples import ttt_minimax


def _hashed(recurrent_fn):
    """Adds a 64-bit state hash (two uint32 words of the state id) to the outputs."""

    def fn(params, key, action, ids):
        out, new = recurrent_fn(params, key, action, ids)
        out = jaxpuct.RecurrentFnOutput(
            reward=out.reward, discount=out.discount, prior_logits=out.prior_logits,
            value=out.value, state_hash=jnp.stack([new, _mix32(new ^ jnp.uint32(0x5BD1E995))],
                                                  axis=-1))
        return out, new

    return fn


def cost(batch: int, sims: int, reps: int) -> dict[str, float]:
    root, recurrent_fn = synthetic_game(batch, 82, 3.0, 1.0)
    root = root.replace(state_hash=jnp.stack(
        [root.embedding, _mix32(root.embedding ^ jnp.uint32(0x5BD1E995))], axis=-1))
    recurrent_fn = _hashed(recurrent_fn)
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


def _ttt_fns():
    """Root and recurrent functions of tic-tac-toe with a uniform prior and zero
    value. The state is ``(board [B, 9], colour to move [B])`` in pgx's encoding
    (-1 empty, 0 X, 1 O), as in ``examples.ttt_minimax``."""
    lines = jnp.asarray(ttt_minimax.LINES)

    def features(board, player):
        legal = board < 0
        code = jnp.sum((board + 1) * jnp.asarray(ttt_minimax.POWERS), axis=-1)
        state_hash = jnp.stack([code.astype(jnp.uint32), player.astype(jnp.uint32)], -1)
        return legal, state_hash

    def root_fn(board, player):
        legal, state_hash = features(board, player)
        batch = board.shape[0]
        return jaxpuct.RootFnOutput(prior_logits=jnp.zeros((batch, 9)), value=jnp.zeros(batch),
                                    embedding=(board, player), legal_action_mask=legal,
                                    state_hash=state_hash)

    def recurrent_fn(params, key, action, embedding):
        board, mover = embedding
        board = board.at[jnp.arange(board.shape[0]), action].set(mover)
        won = jnp.any(jnp.all(board[:, lines] == mover[:, None, None], axis=-1), axis=-1)
        player = 1 - mover
        legal, state_hash = features(board, player)
        terminal = won | ~jnp.any(legal, axis=-1)
        batch = board.shape[0]
        out = jaxpuct.RecurrentFnOutput(
            reward=jnp.where(won, 1.0, 0.0), discount=-jnp.ones(batch),
            prior_logits=jnp.zeros((batch, 9)), value=jnp.zeros(batch),
            legal_action_mask=legal & ~terminal[:, None], terminal=terminal,
            state_hash=state_hash)
        return out, (board, player)

    return root_fn, recurrent_fn


def decision_quality(sims_list: list[int]) -> list[dict]:
    positions = ttt_minimax_positions()
    optimal = ttt_minimax.optimal_table()
    boards = jnp.asarray(np.asarray(positions, np.int32))
    player = jnp.asarray([ttt_minimax.to_move(p) for p in positions], jnp.int32)
    assert len(positions) == 4520, len(positions)
    codes = ttt_minimax.codes(np.asarray(positions))
    root_fn, recurrent_fn = _ttt_fns()
    rows = []
    for sims in sims_list:
        for name, graph in (("tree", None), ("graph", jaxpuct.GraphConfig())):
            out = jax.jit(lambda b, p, graph=graph, sims=sims: jaxpuct.alphazero_policy(
                None, jax.random.PRNGKey(0), root_fn(b, p), recurrent_fn, sims,
                dirichlet_fraction=0.0, temperature=0.0, graph=graph))(boards, player)
            action = np.asarray(out.action)
            rate = float(np.mean(optimal[codes, action]))
            tree = out.search_tree
            nodes = np.asarray(tree.num_nodes)
            node_boards = np.asarray(tree.embeddings[0])
            node_player = np.asarray(tree.embeddings[1])
            distinct = [len({(node_boards[b, n].tobytes(), int(node_player[b, n]))
                             for n in range(nodes[b])}) for b in range(len(positions))]
            rows.append(dict(sims=sims, mode=name, optimal_rate=rate,
                             nodes=float(nodes.mean()), distinct=float(np.mean(distinct))))
    return rows


def ttt_minimax_positions() -> list[tuple[int, ...]]:
    """Every reachable non-terminal position, in a fixed order."""
    seen, frontier = set(), [(-1,) * 9]
    while frontier:
        board = frontier.pop()
        if board in seen or ttt_minimax.winner(board) >= 0 or -1 not in board:
            continue
        seen.add(board)
        frontier.extend(ttt_minimax.play(board, cell) for cell in range(9) if board[cell] < 0)
    return sorted(seen, key=lambda b: (sum(x >= 0 for x in b), b))


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

"""Search a few real game positions with jaxpuct and print what it found.

Tic-tac-toe and connect four from pgx; the "network" is a uniform prior and a
zero value, so everything the search knows comes from exact terminal values.
Tree search and graph search (transpositions shared) side by side.

    python -m examples.search_demo
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import jaxpuct
from jaxpuct.envs.pgx_games import PgxGame, make_pgx_game
from jaxpuct.testing.pure_search import make_pure_search_fns


def make_search_fns(game: PgxGame):
    """``(root_fn(state), recurrent_fn)`` of a pure search on ``game``: uniform
    prior and zero value (:func:`jaxpuct.testing.pure_search.make_pure_search_fns`),
    values from the view of the player to move, discount -1, and the game's
    Zobrist state hash (:func:`jaxpuct.envs.hashing.zobrist_hash` of the board and
    the colour to move) for graph search."""
    root_fn, recurrent_fn = make_pure_search_fns(game.environment, game.num_actions)
    return (lambda state: root_fn(None, None, state)), recurrent_fn


def play_moves(game: PgxGame, moves) -> object:
    """The pgx state after ``moves`` from the initial position, batch of 1."""
    state = game.init(jax.random.PRNGKey(0), 1)
    for move in moves:
        state = game.environment.step(state, np.full((1,), move, np.int32))
    return state


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=800)
    args = parser.parse_args(argv)

    cases = [
        ("tic_tac_toe", [0, 4, 8], "X took two corners, O the centre: O must take an edge"),
        ("tic_tac_toe", [4, 0, 1], "O must block column 7"),
        ("connect_four", [3, 3, 4, 4],
         "first player: column 2 or 5 makes an open three, a win two moves later"),
    ]
    print(f"jaxpuct {jaxpuct.__version__} on {jax.devices()[0].platform}, "
          f"{args.simulations} simulations, uniform prior, zero value\n")
    for name, moves, story in cases:
        game = make_pgx_game(name)  # needs pgx, an example-only dependency
        root_fn, recurrent_fn = make_search_fns(game)
        state = play_moves(game, moves)
        print(f"{name} after moves {moves}: {story}")
        for label, graph in (("tree ", None), ("graph", jaxpuct.GraphConfig())):
            policy = jax.jit(lambda s, graph=graph, root_fn=root_fn, recurrent_fn=recurrent_fn:
                             jaxpuct.alphazero_policy(
                                 None, jax.random.PRNGKey(0), root_fn(s), recurrent_fn,
                                 args.simulations, dirichlet_fraction=0.0, temperature=0.0,
                                 graph=graph))
            start = time.perf_counter()
            out = jax.block_until_ready(policy(state))
            seconds = time.perf_counter() - start
            summary = out.search_tree.summary()
            visits = np.asarray(summary.visit_counts[0])
            print(f"  {label} move {int(out.action[0])}  value {float(summary.value[0]):+.3f}"
                  f"  nodes {int(out.search_tree.num_nodes[0]):4d}"
                  f"  visits {visits.tolist()}  ({seconds:.1f}s incl. compile)")
        print()


if __name__ == "__main__":
    main()

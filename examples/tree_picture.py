"""Draw a real search tree: a tic-tac-toe position searched by jaxpuct.

    python -m examples.tree_picture                       # docs/tree_picture.png
    python -m examples.tree_picture --graph --out tree.svg --top-k 2 --max-depth 4

The position is X in a corner, O in the centre, X to move. The "network" is a
uniform prior and the exact minimax value (``jaxpuct.testing.tictactoe``), so the
values in the picture are the game's true values. The picture shows the most
visited edges (``--top-k``) down to ``--max-depth``; node boxes give the visit
count ``N`` and value ``Q`` for the player to move there, edges the move (row,
column), ``N(n, a)``, the prior ``P`` and ``Q(n, a)`` for the mover. Graphviz's
``dot`` draws it when installed, matplotlib otherwise; ``--dot-out`` keeps the
DOT text.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

import jax

import jaxpuct
from jaxpuct import visualize
from jaxpuct.testing import tictactoe

POSITION = "X.. .O. ..."
LABELS = [f"r{cell // 3}c{cell % 3}" for cell in range(9)]


@functools.cache  # one compile per setting (the tests search twice)
def _policy(num_simulations: int, graph: bool):
    state = tictactoe.batch([tictactoe.parse(POSITION)])
    root = tictactoe.root(state, exact_value=True, with_hash=graph)
    recurrent_fn = tictactoe.make_recurrent_fn(exact_value=True, with_hash=graph)
    return jax.jit(lambda key: jaxpuct.alphazero_policy(
        None, key, root, recurrent_fn, num_simulations=num_simulations,
        dirichlet_fraction=0.0, temperature=0.0,
        graph=jaxpuct.GraphConfig() if graph else None))


def search(num_simulations: int, graph: bool) -> jaxpuct.Tree:
    """The tree of one search from :data:`POSITION` (batch of 1)."""
    return _policy(num_simulations, graph)(jax.random.PRNGKey(0)).search_tree


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m examples.tree_picture",
                                description=__doc__.splitlines()[0])
    p.add_argument("--simulations", type=int, default=64)
    p.add_argument("--graph", action="store_true", help="graph search (transpositions)")
    p.add_argument("--top-k", type=int, default=3)
    p.add_argument("--max-depth", type=int, default=3)
    p.add_argument("--min-visits", type=int, default=2)
    p.add_argument("--out", default="docs/tree_picture.png")
    p.add_argument("--dot-out", default=None, help="also write the DOT text here")
    args = p.parse_args(argv)

    tree = search(args.simulations, args.graph)
    dot = visualize.to_dot(tree, action_labels=LABELS, max_depth=args.max_depth,
                           top_k=args.top_k, min_visits=args.min_visits)
    if args.dot_out:
        Path(args.dot_out).write_text(dot)
    engine = visualize.render(dot, args.out)
    print(f"{args.out}: {dot.count(' -> ')} edges drawn with {engine}")


if __name__ == "__main__":
    main()

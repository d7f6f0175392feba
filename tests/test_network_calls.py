"""benchmarks/network_calls.py counts network evaluations from the tree: check the
count against the positions the tree holds, recomputed with the NumPy rules."""

from __future__ import annotations

import functools

import jax
import numpy as np

from benchmarks import network_calls
from jaxpuct.testing import tictactoe as ttt

# Two positions where 32 simulations of the heuristic search reach terminal
# positions and transpositions (tree search stores 2 and 4 duplicates there).
_POSITIONS = [ttt.parse(".X./XO./..."), ttt.parse("XO./X../...")]
_SIMS = 32


def test_evaluations_are_the_distinct_nonterminal_positions_of_a_graph():
    search = jax.jit(functools.partial(network_calls.search, feature="graph",
                                       evaluator="heuristic", sims=_SIMS))
    tree = search(ttt.batch(_POSITIONS)).search_tree
    counted = np.asarray(network_calls.evaluated_nodes(tree))
    nodes = np.asarray(tree.num_nodes)
    boards = np.asarray(tree.embeddings.board, np.int64)
    players = np.asarray(tree.embeddings.player, np.int64)
    for b in range(len(_POSITIONS)):
        stored = [tuple(int(c) for c in boards[b, n] * players[b, n]) for n in range(nodes[b])]
        # Each position once (transpositions share a node); the network evaluates
        # those that are not over (the rules give a terminal's value).
        assert len(set(stored)) == len(stored)
        assert counted[b] == sum(not ttt.is_terminal(p) for p in stored)
    # So the count is neither S + 1 nor the nodes stored.
    assert np.all(nodes < _SIMS + 1) and np.all(counted < nodes)

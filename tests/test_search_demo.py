"""The state hash of ``examples/search_demo.py`` (graph search merges equal hashes)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pgx")

from examples import search_demo  # noqa: E402
from jaxpuct.envs.pgx_games import make_pgx_game  # noqa: E402


def _root_hash(game, moves):
    root_fn, _ = search_demo.make_search_fns(game)
    return np.asarray(root_fn(search_demo.play_moves(game, moves)).state_hash)[0]


def test_distinct_positions_get_distinct_hashes():
    # X on {1, 2, 6} and O on {0, 4, 5}, against the colours swapped: the hash this
    # demo used before Zobrist hashing gave both the same value.
    game = make_pgx_game("tic_tac_toe")
    first = _root_hash(game, [1, 0, 2, 4, 6, 5])
    second = _root_hash(game, [0, 1, 4, 2, 5, 6])
    assert not np.array_equal(first, second)


def test_transposed_move_orders_get_equal_hashes():
    game = make_pgx_game("tic_tac_toe")
    np.testing.assert_array_equal(_root_hash(game, [0, 1, 2]), _root_hash(game, [2, 1, 0]))

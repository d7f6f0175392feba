"""``examples/ttt_minimax.py``'s ``evaluate_tree``, the demo's check of an agent
against every minimax line, against a plain recursive walk of the same game tree.

The agent stands in for a trainer (the four members ``evaluate_tree`` reads:
``config``, ``act``, ``env_init``, ``env_step``, the last two pgx's rules) and plays
a fixed rule on the host, so the expected counts of wins, draws and losses by colour
come from ``jaxpuct.testing.tictactoe``'s exact minimax alone.
"""

from __future__ import annotations

import collections
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpuct.testing import tictactoe as ttt

pgx = pytest.importorskip("pgx")

from examples import ttt_minimax  # noqa: E402

_ENV = pgx.make("tic_tac_toe")
_INIT = jax.jit(lambda key, n: jax.vmap(_ENV.init)(jax.random.split(key, n)),
                static_argnums=1)
_STEP = jax.jit(jax.vmap(_ENV.step))


def _perfect(pos):
    return min(ttt.optimal_moves(pos))


def _first_empty(pos):
    return ttt.legal_moves(pos)[0]


class _RuleAgent:
    """A trainer's face over ``choose(position) -> action``."""

    def __init__(self, choose):
        self.config = types.SimpleNamespace(game="tic_tac_toe", batch_size=32)
        self.env_init, self.env_step, self._choose = _INIT, _STEP, choose

    def act(self, params, keys, states):
        del params, keys
        # pgx's board: -1 empty, 0 the first player's (X), 1 the second's (O).
        boards = np.asarray(states._x.board)
        positions = [tuple({-1: 0, 0: 1, 1: -1}[int(c)] for c in b) for b in boards]
        return jnp.asarray([self._choose(p) if not ttt.is_terminal(p) else 0
                            for p in positions], jnp.int32)


def _walk(choose, agent_first: bool, replies: str) -> dict[str, int]:
    counts = collections.Counter(win=0, draw=0, loss=0)
    mine = 1 if agent_first else -1

    def visit(pos):
        if ttt.is_terminal(pos):
            w = ttt.winner(pos)
            counts["draw" if w == 0 else "win" if w == mine else "loss"] += 1
        elif ttt.to_move(pos) == mine:
            visit(ttt.play(pos, choose(pos)))
        else:
            moves = ttt.optimal_moves(pos) if replies == "optimal" else ttt.legal_moves(pos)
            for a in sorted(moves):
                visit(ttt.play(pos, a))

    visit((0,) * 9)
    return dict(counts)


@pytest.mark.parametrize("replies", ["optimal", "all"])
def test_evaluate_tree_counts_every_line_as_a_recursive_walk_does(replies):
    for choose in (_perfect, _first_empty):
        got = ttt_minimax.evaluate_tree(_RuleAgent(choose), None, replies)
        want = {"first": _walk(choose, True, replies), "second": _walk(choose, False, replies)}
        assert got == want, (choose.__name__, got, want)
        if choose is _perfect:  # a perfect player never loses a line
            assert got["first"]["loss"] == got["second"]["loss"] == 0
        else:  # not vacuous: the first empty cell loses lines
            assert got["first"]["loss"] + got["second"]["loss"] > 0


def test_evaluate_tree_refuses_other_replies_and_games():
    with pytest.raises(ValueError, match="replies must be 'optimal' or 'all'"):
        ttt_minimax.evaluate_tree(_RuleAgent(_perfect), None, "some")
    other = _RuleAgent(_perfect)
    other.config = types.SimpleNamespace(game="connect_four", batch_size=32)
    with pytest.raises(ValueError, match="tic_tac_toe only"):
        ttt_minimax.evaluate_tree(other, None)

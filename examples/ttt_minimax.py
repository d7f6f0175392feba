"""Exhaustive evaluation of a tic-tac-toe agent against exact minimax.

The rules and the minimax values are :mod:`jaxpuct.testing.tictactoe`'s. Boards
here use pgx's encoding (``state._x.board``, 9 cells, row-major): ``-1`` empty,
``0`` X (the first player), ``1`` O. The position code is
``sum((board[i] + 1) * 3**i)`` (that of ``jaxpuct.testing.tictactoe.code``), so a
``[3**9, 9]`` table answers "which moves are optimal here" by one lookup.

:func:`evaluate_tree` plays the agent (deterministic: greedy search with the
network) against **every** reply of the opponent, as X and as O: at each
opponent turn the game branches over all minimax-optimal moves
(``replies="optimal"``) or over all legal moves (``replies="all"``, i.e. against
every possible opponent). Each leaf of that tree is one game; the counts are
over leaves, so "0 losses" means no line of play loses.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.testing import tictactoe

NUM_CODES = tictactoe.NUM_CODES
POWERS = 3 ** np.arange(9)


def codes(boards: np.ndarray) -> np.ndarray:
    """``[N, 9]`` pgx boards -> ``[N]`` position codes.

    Equal to :func:`jaxpuct.testing.tictactoe.code` of the same position (digit
    0 empty, 1 X, 2 O).
    """
    return ((np.asarray(boards).reshape(-1, 9) + 1) * POWERS).sum(-1)


def optimal_table() -> np.ndarray:
    """``[3**9, 9]`` bool: the minimax-optimal moves of every reachable
    non-terminal position, indexed by :func:`codes` (all ``False`` elsewhere).

    :func:`jaxpuct.testing.tictactoe.optimal_move_table` (exact negamax over the
    4520 positions), read-only.
    """
    return tictactoe.optimal_move_table()


def _take(tree, index):
    """Host-side (numpy) row selection: no recompilation per frontier size."""
    return jax.tree.map(lambda x: np.asarray(x)[index], tree)


def _chunked(fn, states, chunk: int, *extra):
    """Applies ``fn(states_chunk, *extra_chunk)`` over fixed-size chunks (padded)
    so that one compiled function serves every frontier size."""
    n = jax.tree.leaves(states)[0].shape[0]
    padded = -(-n // chunk) * chunk
    index = np.concatenate([np.arange(n), np.zeros(padded - n, np.int64)])
    outs = []
    for start in range(0, padded, chunk):
        sl = index[start:start + chunk]
        outs.append(jax.device_get(fn(_take(states, sl),
                                      *(jnp.asarray(np.asarray(e)[sl]) for e in extra))))
    return jax.tree.map(lambda *xs: np.concatenate(xs)[:n], *outs)


def evaluate_tree(trainer, params, replies: str = "optimal") -> dict[str, dict[str, int]]:
    """Every game of the greedy agent against minimax (or any opponent).

    Args:
      trainer: a :class:`jaxpuct.alphazero.Trainer` for ``tic_tac_toe``.
      params: the network parameters.
      replies: ``"optimal"`` (the opponent branches over all minimax-optimal
        moves) or ``"all"`` (over all legal moves).

    Returns:
      ``{"first": {"win", "draw", "loss"}, "second": {...}}``: leaf counts by the
      agent's colour (``first`` = agent plays X).
    """
    if replies not in ("optimal", "all"):
        raise ValueError(f"replies must be 'optimal' or 'all', got {replies!r}")
    if trainer.config.game != "tic_tac_toe":
        raise ValueError("evaluate_tree is for tic_tac_toe only")
    table = optimal_table()
    b = trainer.config.batch_size
    key = jax.random.PRNGKey(0)

    def agent(states):
        return trainer.act(params, jax.random.split(key, b), states)

    result = {}
    for colour, agent_first in (("first", True), ("second", False)):
        frontier = jax.device_get(trainer.env_init(jax.random.PRNGKey(0), 1))
        first_id = int(frontier.current_player[0])
        agent_id = first_id if agent_first else 1 - first_id
        counts = {"win": 0, "draw": 0, "loss": 0}
        while jax.tree.leaves(frontier)[0].shape[0] > 0:
            mover = int(frontier.current_player[0])  # the same for the whole frontier
            if mover == agent_id:
                actions = _chunked(agent, frontier, b)
            else:
                boards = np.asarray(frontier._x.board)
                legal = np.asarray(frontier.legal_action_mask, bool)
                moves = table[codes(boards)] if replies == "optimal" else legal
                assert np.all(moves.any(-1)) and not np.any(moves & ~legal)
                rows, actions = np.nonzero(moves)
                frontier = _take(frontier, rows)
            frontier = _chunked(trainer.env_step, frontier, b,
                                np.asarray(actions, np.int32))
            reward = np.asarray(frontier.rewards)[:, agent_id]
            done = np.asarray(frontier.terminated)
            counts["win"] += int(np.sum(done & (reward > 0)))
            counts["draw"] += int(np.sum(done & (reward == 0)))
            counts["loss"] += int(np.sum(done & (reward < 0)))
            frontier = _take(frontier, np.nonzero(~done)[0])
        result[colour] = counts
    return result

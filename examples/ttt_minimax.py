"""Exact tic-tac-toe minimax, and exhaustive evaluation of an agent against it.

Boards use pgx's encoding (``state._x.board``, 9 cells, row-major): ``-1``
empty, ``0`` X (the first player), ``1`` O. The position code is
``sum((board[i] + 1) * 3**i)``, so a ``[3**9, 9]`` table answers "which moves are
optimal here" by one lookup.

:func:`evaluate_tree` plays the agent (deterministic: greedy search with the
network) against **every** reply of the opponent, as X and as O: at each
opponent turn the game branches over all minimax-optimal moves
(``replies="optimal"``) or over all legal moves (``replies="all"``, i.e. against
every possible opponent). Each leaf of that tree is one game; the counts are
over leaves, so "0 losses" means no line of play loses.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
NUM_CODES = 3 ** 9
POWERS = 3 ** np.arange(9)


def winner(board: tuple[int, ...]) -> int:
    """``0`` or ``1`` for the colour with three in a row, ``-1`` for none."""
    for a, b, c in LINES:
        if board[a] >= 0 and board[a] == board[b] == board[c]:
            return board[a]
    return -1


@functools.cache
def value(board: tuple[int, ...]) -> int:
    """Minimax value for the colour to move: 1 win, 0 draw, -1 loss."""
    if winner(board) >= 0:
        return -1  # the previous mover just won
    empty = [i for i in range(9) if board[i] < 0]
    if not empty:
        return 0
    return max(-value(play(board, i)) for i in empty)


def to_move(board: tuple[int, ...]) -> int:
    return sum(1 for x in board if x >= 0) % 2


def play(board: tuple[int, ...], cell: int) -> tuple[int, ...]:
    out = list(board)
    out[cell] = to_move(board)
    return tuple(out)


def codes(boards: np.ndarray) -> np.ndarray:
    """``[N, 9]`` boards -> ``[N]`` position codes."""
    return ((np.asarray(boards).reshape(-1, 9) + 1) * POWERS).sum(-1)


@functools.lru_cache(maxsize=1)
def optimal_table() -> np.ndarray:
    """``[3**9, 9]`` bool: the minimax-optimal moves of every reachable
    non-terminal position (all ``False`` elsewhere)."""
    table = np.zeros((NUM_CODES, 9), bool)
    seen = set()
    stack = [(-1,) * 9]
    while stack:
        board = stack.pop()
        if board in seen:
            continue
        seen.add(board)
        empty = [i for i in range(9) if board[i] < 0]
        if winner(board) >= 0 or not empty:
            continue
        q = {i: -value(play(board, i)) for i in empty}
        best = max(q.values())
        code = int(codes(np.array(board))[0])
        for i in empty:
            table[code, i] = q[i] == best
            stack.append(play(board, i))
    return table


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

"""Stochastic games for chance-node search, with exact solutions where they are small.

* :func:`hashed_game`: a cheap game of hashed integer ids with random-looking
  priors, chance probabilities, values and rewards, every action legal, never
  terminal (for comparisons with mctx, invariants and benchmarks);
* 2048 on an ``n x n`` board (Cirulli 2014; the rules of pgx's ``2048``: action
  0 left, 1 up, 2 right, 3 down; a move is legal when it changes the board; a
  merge scores the new tile's value; after each move a 2 (probability 0.9) or a
  4 (0.1) appears on a uniformly chosen empty cell). Boards hold exponents
  (0 empty, 1 for a 2, 2 for a 4, ...). The chance outcome ``c`` in
  ``[0, 2 n^2)`` puts exponent ``1 + c % 2`` on cell ``c // 2``.
  :func:`game2048_fns` gives the search functions with a horizon (moves left),
  :func:`expectimax_2048` solves a position exactly in NumPy.

Both follow the contract of :mod:`jaxpuct.stochastic` (values from the view of
the player to move; the chance function carries the transition's reward).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.stochastic import ChanceRecurrentFnOutput, DecisionRecurrentFnOutput
from jaxpuct.testing.synthetic import mix32
from jaxpuct.types import RootFnOutput

__all__ = [
    "NUM_MOVES", "SPAWN_PROBS", "expectimax_2048", "game2048_fns", "hashed_game",
    "move_2048", "move_2048_np", "reachable_2048", "spawn_2048", "spawn_probs_2048",
]

NUM_MOVES = 4
SPAWN_PROBS = (0.9, 0.1)  # a 2, a 4


# ------------------------------------------------------------------ hashed game


def _angles(ids: jax.Array) -> tuple[jax.Array, jax.Array]:
    u1 = (ids & jnp.uint32(0xFFFF)).astype(jnp.float32) * (2 * math.pi / 65536)
    u2 = (ids >> 16).astype(jnp.float32) * (2 * math.pi / 65536)
    return u1, u2


def _logits(ids: jax.Array, width: int, scale: float) -> jax.Array:
    u1, u2 = _angles(ids)
    k = jnp.arange(width, dtype=jnp.float32)
    return scale * jnp.sin(u1[:, None] + k * u2[:, None])


def hashed_game(batch_size: int, num_actions: int, num_outcomes: int, *,
                discount: float = -1.0, logit_scale: float = 2.0, with_hash: bool = False
                ) -> tuple[RootFnOutput, Callable, Callable]:
    """A stochastic game of hashed ``uint32`` ids (no network, no terminal).

    Args:
      batch_size: ``B``.
      num_actions: ``A``.
      num_outcomes: ``C``.
      discount: of the chance edge (-1: two players alternate).
      logit_scale: scale of the action and chance logits (``sin`` of the id).
      with_hash: also give the ids as ``[B, 2]`` uint32 hashes (``state_hash`` of
        the root and of each state, ``afterstate_hash`` of each afterstate), for
        graph search. Ids never repeat, so a graph search equals a tree search.

    Returns:
      ``(root, decision_recurrent_fn, chance_recurrent_fn)``; embeddings are
      ``[B]`` uint32 ids; the functions ignore ``params`` and the key.
    """
    ids = mix32(jnp.arange(batch_size, dtype=jnp.uint32) + jnp.uint32(777))
    u1, u2 = _angles(ids)
    def as_hash(x):
        return jnp.stack([x, mix32(x + jnp.uint32(1))], axis=-1) if with_hash else None

    root = RootFnOutput(prior_logits=_logits(ids, num_actions, logit_scale),
                        value=0.5 * jnp.cos(3.0 * u1 + u2), embedding=ids,
                        state_hash=as_hash(ids))

    def decision_fn(params, rng_key, action, state):
        del params, rng_key
        after = mix32(state * jnp.uint32(0x9E3779B1) + action.astype(jnp.uint32) + 1)
        a1, a2 = _angles(after)
        out = DecisionRecurrentFnOutput(chance_logits=_logits(after, num_outcomes, logit_scale),
                                        afterstate_value=0.5 * jnp.cos(a1 - 2.0 * a2),
                                        afterstate_hash=as_hash(after))
        return out, after

    def chance_fn(params, rng_key, outcome, after):
        del params, rng_key
        new = mix32(after * jnp.uint32(0x85EBCA77) + outcome.astype(jnp.uint32) + 7)
        s1, s2 = _angles(new)
        value = 0.5 * jnp.cos(3.0 * s1 + s2)
        out = ChanceRecurrentFnOutput(
            action_logits=_logits(new, num_actions, logit_scale), value=value,
            reward=0.25 * jnp.sin(s1 + 5.0 * s2), discount=jnp.full_like(value, discount),
            state_hash=as_hash(new))
        return out, new

    return root, decision_fn, chance_fn


# ------------------------------------------------------------------ 2048 rules (JAX)


def _rotations(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``[4, n*n]`` gather indices that rotate a flat board by ``k * 90`` degrees
    counter-clockwise (``np.rot90``, as pgx does) and back."""
    cells = np.arange(n * n).reshape(n, n)
    forward = np.stack([np.rot90(cells, k).ravel() for k in range(NUM_MOVES)])
    backward = np.stack([np.argsort(f) for f in forward])
    return forward, backward


def _slide_rows_left(rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Slides and merges ``[..., n]`` rows of exponents to the left; returns the
    rows and the score (sum of the merged tiles' values) ``[...]``."""
    n = rows.shape[-1]

    def compact(r):
        order = jnp.argsort(r == 0, axis=-1, stable=True)
        return jnp.take_along_axis(r, order, axis=-1)

    r = compact(rows)
    score = jnp.zeros(r.shape[:-1], jnp.float32)
    for i in range(n - 1):  # left to right, each tile merges at most once
        merge = (r[..., i] != 0) & (r[..., i] == r[..., i + 1])
        grown = r[..., i] + 1
        score = score + jnp.where(merge, jnp.exp2(grown.astype(jnp.float32)), 0.0)
        r = r.at[..., i].set(jnp.where(merge, grown, r[..., i]))
        r = r.at[..., i + 1].set(jnp.where(merge, 0, r[..., i + 1]))
    return compact(r), score


def move_2048(board: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``board [B, n*n]`` int32 exponents, ``action [B]`` -> ``(afterstate [B, n*n],
    score [B] float32, legal [B] bool)`` (legal: the move changes the board)."""
    n = math.isqrt(board.shape[-1])
    forward, backward = (jnp.asarray(x) for x in _rotations(n))
    rotated = jnp.take_along_axis(board, forward[action], axis=-1)
    slid, score = _slide_rows_left(rotated.reshape(board.shape[:-1] + (n, n)))
    after = jnp.take_along_axis(slid.reshape(board.shape), backward[action], axis=-1)
    return after, jnp.sum(score, axis=-1), jnp.any(after != board, axis=-1)


def legal_moves_2048(board: jax.Array) -> jax.Array:
    """``[B, 4]`` bool: the moves that change ``board [B, n*n]``."""
    moves = jnp.arange(NUM_MOVES, dtype=jnp.int32)
    return jax.vmap(lambda a: move_2048(board, jnp.full(board.shape[:1], a))[2],
                    out_axes=1)(moves)


def spawn_probs_2048(afterstate: jax.Array) -> jax.Array:
    """``[B, 2 n^2]`` exact probabilities of the outcomes on ``afterstate [B, n*n]``
    (all zero on a full board)."""
    empty = (afterstate == 0).astype(jnp.float32)
    count = jnp.maximum(jnp.sum(empty, axis=-1, keepdims=True), 1.0)
    per_cell = empty / count
    return (per_cell[..., None] * jnp.asarray(SPAWN_PROBS)).reshape(afterstate.shape[:-1] + (-1,))


def spawn_2048(afterstate: jax.Array, outcome: jax.Array) -> jax.Array:
    """Puts exponent ``1 + outcome % 2`` on cell ``outcome // 2`` of each board."""
    rows = jnp.arange(afterstate.shape[0])
    return afterstate.at[rows, outcome // 2].set(1 + outcome % 2)


def hash_2048(board: jax.Array, moves_left: jax.Array, salt: int = 0) -> jax.Array:
    """``[B, 2]`` uint32 hash of ``(board [B, n*n], moves_left [B])``: two chains of
    :func:`mix32` over the cells, seeded apart (``salt`` keeps kinds apart)."""
    words = []
    for seed in (salt + 17, salt + 101):
        h = jnp.full(board.shape[:1], seed, jnp.uint32)
        for cell in range(board.shape[1]):
            h = mix32(h * jnp.uint32(31) + board[:, cell].astype(jnp.uint32))
        words.append(mix32(h + moves_left.astype(jnp.uint32)))
    return jnp.stack(words, axis=-1)


def game2048_fns(num_actions: int = NUM_MOVES, with_hash: bool = False
                 ) -> tuple[Callable, Callable, Callable]:
    """Search functions of 2048 with a horizon, discount 1 and no learned value:
    a state's value is 0 and an afterstate's is the score of the move that made
    it (paid by the chance edge that follows, so it is part of the afterstate's
    return).

    State embedding ``(board [B, n*n] int32, moves_left [B] int32)``; afterstate
    ``(board, score [B] float32, moves_left)``. A state is terminal when no move
    is legal or no move is left. The chance logits are ``log p`` (exact).

    ``with_hash``: the outputs carry state and afterstate hashes
    (:func:`hash_2048`; an afterstate's includes its score, which its return
    depends on), so that graph search merges positions reached by different move
    orders.

    Returns:
      ``(root_fn, decision_recurrent_fn, chance_recurrent_fn)`` with
      ``root_fn(boards [B, n*n], moves_left [B]) -> RootFnOutput``.
    """
    del num_actions

    def state_hash(board, moves_left):
        return hash_2048(board, moves_left) if with_hash else None

    def afterstate_hash(board, score, moves_left):
        if not with_hash:
            return None
        return hash_2048(jnp.concatenate([board, score.astype(jnp.int32)[:, None]], 1),
                         moves_left, salt=7)

    def state_info(board, moves_left):
        legal = legal_moves_2048(board) & (moves_left > 0)[:, None]
        return jnp.zeros(legal.shape, jnp.float32), legal, ~jnp.any(legal, axis=-1)

    def root_fn(boards, moves_left):
        boards = jnp.asarray(boards, jnp.int32)
        moves_left = jnp.asarray(moves_left, jnp.int32)
        logits, legal, _ = state_info(boards, moves_left)
        return RootFnOutput(prior_logits=logits, value=jnp.zeros(boards.shape[0]),
                            embedding=(boards, moves_left), legal_action_mask=legal,
                            state_hash=state_hash(boards, moves_left))

    def decision_fn(params, rng_key, action, state):
        del params, rng_key
        board, moves_left = state
        after, score, _ = move_2048(board, action)
        out = DecisionRecurrentFnOutput(chance_logits=jnp.log(spawn_probs_2048(after)),
                                        afterstate_value=score,
                                        afterstate_hash=afterstate_hash(after, score,
                                                                        moves_left))
        return out, (after, score, moves_left)

    def chance_fn(params, rng_key, outcome, afterstate):
        del params, rng_key
        after, score, moves_left = afterstate
        board = spawn_2048(after, outcome)
        moves_left = moves_left - 1
        logits, legal, terminal = state_info(board, moves_left)
        out = ChanceRecurrentFnOutput(action_logits=logits, value=jnp.zeros_like(score),
                                      reward=score, discount=jnp.ones_like(score),
                                      legal_action_mask=legal, terminal=terminal,
                                      state_hash=state_hash(board, moves_left))
        return out, (board, moves_left)

    return root_fn, decision_fn, chance_fn


# ------------------------------------------------------------------ 2048 in NumPy


def move_2048_np(board: tuple[int, ...], action: int) -> tuple[tuple[int, ...], float]:
    """NumPy reference of one move: ``(afterstate, score)`` of a flat board."""
    n = math.isqrt(len(board))
    grid = np.rot90(np.asarray(board).reshape(n, n), action)
    out, score = [], 0.0
    for row in grid:
        tiles = [t for t in row if t]
        merged, i = [], 0
        while i < len(tiles):
            if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
                merged.append(tiles[i] + 1)
                score += 2.0 ** (tiles[i] + 1)
                i += 2
            else:
                merged.append(tiles[i])
                i += 1
        out.append(merged + [0] * (n - len(merged)))
    after = np.rot90(np.asarray(out), -action).ravel()
    return tuple(int(x) for x in after), score


def _spawns(after: tuple[int, ...]) -> list[tuple[float, tuple[int, ...]]]:
    empty = [i for i, t in enumerate(after) if t == 0]
    out = []
    for cell in empty:
        for value, p in enumerate(SPAWN_PROBS, start=1):
            board = list(after)
            board[cell] = value
            out.append((p / len(empty), tuple(board)))
    return out


@functools.cache
def expectimax_2048(board: tuple[int, ...], moves_left: int) -> tuple[float, tuple[float, ...]]:
    """Exact ``(V, Q [4])`` of a position with ``moves_left`` moves to play;
    ``Q = -inf`` for illegal moves, ``V = 0`` at a terminal position."""
    q = [-math.inf] * NUM_MOVES
    if moves_left > 0:
        for action in range(NUM_MOVES):
            after, score = move_2048_np(board, action)
            if after != board:
                q[action] = score + sum(p * expectimax_2048(b, moves_left - 1)[0]
                                        for p, b in _spawns(after))
    best = max(q)
    return (0.0 if best == -math.inf else best), tuple(q)


def reachable_2048(n: int, horizon: int) -> list[tuple[tuple[int, ...], int]]:
    """Every non-terminal ``(board, moves_left)`` reachable from a start position
    (two tiles, as pgx deals them) with ``horizon`` moves to play, sorted."""
    starts = set()
    for _, first in _spawns((0,) * (n * n)):
        starts.update(board for _, board in _spawns(first))
    seen, frontier = set(), {(b, horizon) for b in starts}
    while frontier:
        board, left = frontier.pop()
        if (board, left) in seen or left == 0:
            continue
        _, q = expectimax_2048(board, left)
        if max(q) == -math.inf:
            continue
        seen.add((board, left))
        for action in range(NUM_MOVES):
            after, _ = move_2048_np(board, action)
            if after != board:
                frontier.update((b, left - 1) for _, b in _spawns(after))
    return sorted(seen)

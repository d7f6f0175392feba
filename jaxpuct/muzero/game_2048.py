"""Lockstep self-play of 2048 segments with a MuZero model (or a Stochastic MuZero
one, searched with chance nodes by :func:`.selfplay.search_roots`), and its
evaluation.

The rules are pgx's 2048 (Koyamada et al. 2023) through the split of its step
in :mod:`jaxpuct.envs.pgx_2048`: the move (slide and merge; the reward is the sum
of the merged tiles) then the spawn (a 2 with probability 0.9, else a 4, on a
uniformly chosen empty cell). One player; a game's score is the sum of its
rewards, and it ends when no move changes the board. The search sees only the
root's observation and legal moves; below it the learned model plays (the
known-chance search of ``examples/play_2048.py`` is the other way).

Self-play keeps ``B`` boards alive across iterations, as LightZero's collectors
keep game segments: every iteration plays ``T = segment_length`` moves of every
board in one ``jax.jit``, and a board whose game ends is replaced by a fresh one
at the next move. A row of the resulting ``[B, T]`` trajectories may hold the
end of one game and the start of the next (:func:`.replay.write_episodes` writes
them as consecutive episodes, the end marked); the game still running after the
last move is written ``truncated``, bootstrapped with the model's value of the
board it stopped at (:mod:`.targets`), so games of any length train with
segments of a fixed size.

Observation: ``[B, 16 * 18]`` float32, each cell's exponent one-hot (0 for an
empty cell, up to 17 for 131072, the largest tile a 4x4 board can hold).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.envs import pgx_2048
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.selfplay import (
    LearnedModel,
    Trajectories,
    batch_major,
    search_roots,
    step_record,
)

__all__ = ["BoardSearch", "BoardValue", "Boards", "Segment", "evaluate", "evaluation_games",
           "fresh_boards", "move_boards", "muzero_search", "observe", "play_segment",
           "run_segment", "spawn_outcome", "summarise", "unobserve"]

NUM_EXPONENTS = 18
OBS_SHAPE = (pgx_2048.NUM_CELLS * NUM_EXPONENTS,)
# The same one-hot read as a board of planes, one per exponent (a ResNet's input).
BOARD_SHAPE = (4, 4, NUM_EXPONENTS)
NUM_ACTIONS = pgx_2048.NUM_ACTIONS


class Boards(NamedTuple):
    """The games in progress: ``board [B, 16]`` int32 exponents, ``score [B]``
    float32 the game's score so far, ``moves [B]`` int32 its moves so far."""

    board: jax.Array
    score: jax.Array
    moves: jax.Array


class Segment(NamedTuple):
    """``T`` moves of ``B`` boards.

    Attributes:
      trajectories: the moves as :class:`.selfplay.Trajectories` (``obs [B, T,
        288]``, ``legal [B, T, 4]``, ...).
      truncated: ``[B]`` bool, the game running after the last move (cut, not
        ended).
      truncation_value: ``[B]`` its bootstrap, the value of the board it stopped at.
      final_score: ``[B, T]`` a game's score at the move that ended it (NaN at the
        other moves).
      final_moves: ``[B, T]`` that game's length (0 at the other moves).
    """

    trajectories: Trajectories
    truncated: jax.Array
    truncation_value: jax.Array
    final_score: jax.Array
    final_moves: jax.Array

    def write_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`.replay.write_episodes`."""
        return {**self.trajectories._asdict(), "truncated": self.truncated,
                "truncation_value": self.truncation_value}


def observe(board: jax.Array) -> jax.Array:
    """``board [B, 16]`` exponents -> ``[B, 288]`` one-hot float32 (module docstring)."""
    return jax.nn.one_hot(board, NUM_EXPONENTS, dtype=jnp.float32).reshape(board.shape[0], -1)


def unobserve(obs: jax.Array) -> jax.Array:
    """``[N, 288]`` :func:`observe` output (floats or stored bits) -> ``[N, 16]``
    int32 exponents: its inverse."""
    return jnp.argmax(obs.reshape(obs.shape[0], -1, NUM_EXPONENTS), axis=-1).astype(jnp.int32)


def spawn_outcome(obs: jax.Array, action: jax.Array, next_obs: jax.Array) -> jax.Array:
    """``[N]`` int32: the chance outcome of each recorded transition, in
    :mod:`jaxpuct.envs.pgx_2048`'s order (``2 x cell + tile``, tile 0 for a 2 and
    1 for a 4; ``NUM_OUTCOMES = 32``).

    The move is deterministic, so the afterstate is ``move(board, action)``; the
    next board differs from it in the one cell the tile spawned on. Stochastic
    MuZero trained with these as its codes (``MuZeroConfig.chance_codes = 'true'``)
    learns the dynamics and the code prior, not the codes: LightZero's 2048
    recipe (``use_ture_chance_label_in_chance_encoder``) trains so.

    Args:
      obs: ``[N, 288]`` :func:`observe` of the board a move was made on.
      action: ``[N]`` the move.
      next_obs: ``[N, 288]`` the board after the move and its spawn. A pair that
        is not such a transition (a row past an episode's end) gives an outcome
        that the caller masks.
    """
    nxt = unobserve(next_obs)
    after, _ = pgx_2048.move(unobserve(obs), action.astype(jnp.int32))
    spawned = (after == 0) & (nxt != 0)
    cell = jnp.argmax(spawned, axis=-1)
    tile = jnp.take_along_axis(nxt, cell[:, None], axis=-1)[:, 0] - 1
    return (2 * cell + jnp.clip(tile, 0, 1)).astype(jnp.int32)


def _spawn(key: jax.Array, after: jax.Array) -> jax.Array:
    """A random tile on each board of ``after [B, 16]`` (one key for the batch;
    a full board gets none, which a legal move never leaves)."""
    logits = jnp.log(pgx_2048.spawn_probs(after))
    outcome = jax.random.categorical(key, logits, axis=-1)
    full = ~jnp.any(after == 0, axis=-1)
    return jnp.where(full[:, None], after, pgx_2048.spawn(after, outcome))


def fresh_boards(key: jax.Array, batch: int) -> Boards:
    """``batch`` new games: two random tiles on an empty board (pgx's start)."""
    first, second = jax.random.split(key)
    board = _spawn(second, _spawn(first, jnp.zeros((batch, pgx_2048.NUM_CELLS), jnp.int32)))
    return Boards(board, jnp.zeros((batch,), jnp.float32), jnp.zeros((batch,), jnp.int32))


BoardSearch = Callable[[jax.Array, jax.Array, jax.Array, bool], Any]
"""``(key, board [B, 16], legal [B, 4], greedy) -> PolicyOutput``: the search that
picks the moves (``action [B]``, ``action_weights [B, P]``, ``search_tree``)."""

BoardValue = Callable[[jax.Array], jax.Array]
"""``board [B, 16] -> [B]``: the value a truncated game bootstraps with."""


def muzero_search(config: MuZeroConfig, model: LearnedModel, params: Any) -> BoardSearch:
    """The configured MuZero search (:func:`.selfplay.search_roots`) from the boards."""

    def search(key, board, legal, greedy):
        return search_roots(config, model, params, key, observe(board), legal, greedy)

    return search


def move_boards(search: BoardSearch, key: jax.Array, boards: Boards, greedy: bool):
    """One move of every board: ``(boards after it, the move's record)``; a game
    that ends is replaced by a fresh board."""
    search_key, spawn_key, reset_key = jax.random.split(key, 3)
    legal = pgx_2048.legal_actions(boards.board)
    out = search(search_key, boards.board, legal, greedy)
    after, reward = pgx_2048.move(boards.board, out.action)
    board = _spawn(spawn_key, after)
    ended = ~jnp.any(pgx_2048.legal_actions(board), axis=-1)
    score, moves = boards.score + reward, boards.moves + 1
    fresh = fresh_boards(reset_key, board.shape[0])
    keep = (~ended)[:, None]
    nxt = Boards(jnp.where(keep, board, fresh.board), jnp.where(ended, 0.0, score),
                 jnp.where(ended, 0, moves))
    record = (out, legal, reward, ended, jnp.where(ended, score, jnp.nan),
              jnp.where(ended, moves, 0))
    return nxt, record


def run_segment(search: BoardSearch, value: BoardValue, length: int, boards: Boards,
                key: jax.Array) -> tuple[Boards, Segment]:
    """``length`` moves of every board by ``search`` (module docstring), the game
    running at the end bootstrapped with ``value``: ``(the boards after them, the
    segment)``. Call it inside ``jit``."""

    def step(boards, key):
        nxt, (out, legal, reward, ended, final_score, final_moves) = move_boards(
            search, key, boards, greedy=False)
        return nxt, (step_record(observe(boards.board), legal, out, reward, ended),
                     (final_score, final_moves))

    boards, records = jax.lax.scan(step, boards, jax.random.split(key, length))
    steps, (final_score, final_moves) = batch_major(records)
    # The game running after the last move is cut there, not ended.
    return boards, Segment(steps, truncated=~steps.episode_end[:, -1],
                           truncation_value=value(boards.board), final_score=final_score,
                           final_moves=final_moves)


@functools.partial(jax.jit, static_argnums=(0, 1))
def play_segment(config: MuZeroConfig, model: LearnedModel, params: Any, boards: Boards,
                 key: jax.Array) -> tuple[Boards, Segment]:
    """``config.segment_length`` moves of every board by the MuZero search, a
    running game bootstrapped with the model's value of its board."""

    def value(board):
        return model.root(params, observe(board), pgx_2048.legal_actions(board)).value

    return run_segment(muzero_search(config, model, params), value, config.segment_length,
                       boards, key)


def evaluation_games(search: BoardSearch, num_games: int, max_moves: int, key: jax.Array
                     ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``num_games`` games of ``search`` (greedy) from fresh boards to their ends
    (or ``max_moves``): ``(score [G], moves [G], finished [G])``. Inside ``jit``."""
    start_key, key = jax.random.split(key)
    boards = fresh_boards(start_key, num_games)

    def cond(carry):
        _, _, done, _, _, moves = carry
        return jnp.any(~done) & (moves < max_moves)

    def body(carry):
        key, boards, done, score, length, moves = carry
        key, move_key = jax.random.split(key)
        nxt, (_, _, reward, ended, _, _) = move_boards(search, move_key, boards, greedy=True)
        score = score + jnp.where(done, 0.0, reward)
        length = length + (~done).astype(jnp.int32)
        return key, nxt, done | ended, score, length, moves + 1

    init = (key, boards, jnp.zeros((num_games,), jnp.bool_), jnp.zeros((num_games,)),
            jnp.zeros((num_games,), jnp.int32), jnp.int32(0))
    _, _, done, score, length, _ = jax.lax.while_loop(cond, body, init)
    return score, length, done


@functools.partial(jax.jit, static_argnums=(0, 1, 3, 4))
def _evaluation_games(config: MuZeroConfig, model: LearnedModel, params: Any,
                      num_games: int, max_moves: int, key: jax.Array):
    return evaluation_games(muzero_search(config, model, params), num_games, max_moves, key)


def summarise(score: Any, length: Any, done: Any) -> dict[str, float]:
    """The evaluation's figures: mean score with its standard error, median, mean
    length, unfinished games."""
    score, length, done = np.asarray(score), np.asarray(length), np.asarray(done)
    return {"eval_score": round(float(score.mean()), 1),
            "eval_score_se": round(float(score.std(ddof=1) / np.sqrt(len(score))), 1),
            "eval_median": float(np.median(score)),
            "eval_moves": round(float(length.mean()), 1),
            "eval_unfinished": int((~done).sum())}


def evaluate(config: MuZeroConfig, model: LearnedModel, params: Any, key: jax.Array,
             num_games: int = 64, max_moves: int = 20000) -> dict[str, float]:
    """The greedy MuZero search's games (the most visited move, no noise; a game cut
    at ``max_moves`` counts its score so far), summarised by :func:`summarise`."""
    return summarise(*_evaluation_games(config, model, params, num_games, max_moves, key))

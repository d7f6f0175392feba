"""Lockstep self-play of a pgx two-player board game (connect four) in segments,
with a MuZero model; and the model as an arena player.

The rules are pgx's (Koyamada et al. 2023) through :mod:`jaxpuct.envs.pgx_games`:
the observation ``[B, H, W, C]`` is from the view of the player to move (connect
four: ``[B, 6, 7, 2]``, the mover's stones then the opponent's), the legal mask is
pgx's, and a step pays each player its reward (+1 for the winner's move, -1 to
the loser). The search sees the root's observation and legal mask only; below it
the learned model plays (:mod:`.model`).

Self-play keeps ``B`` games alive across iterations, as :mod:`.game_2048` keeps
its boards: every iteration plays ``T = segment_length`` plies of every game in
one ``jax.jit``, and a game that ends is replaced by a fresh one (pgx draws who
moves first) at the next ply. A row of the ``[B, T]`` trajectories may hold the
end of one game and the start of the next (written as consecutive episodes, the
end marked); the game still running after the last ply is written ``truncated``,
bootstrapped with the model's value of the position it stopped at, from the view
of the player to move there (:func:`.replay.write_episodes`). Rewards are the
mover's, values the player to move's, and the targets' discount is ``-gamma``
(:attr:`.config.MuZeroConfig.signed_discount`). Each game's ply count goes to the
search, which samples the move for the first ``temperature_moves`` plies of a
game and plays the greedy one after (:func:`.selfplay.explore_mask`). Against
whole games in lockstep (:mod:`.selfplay`'s tic-tac-toe), no search runs on a
finished game: connect four's self-play games last about 20-30 of the 42 plies a
whole-game loop would have to scan.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxpuct.envs.pgx_games import PgxGame, PgxState, make_pgx_game
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.model import MuZeroModel
from jaxpuct.muzero.selfplay import (
    Trajectories,
    batch_major,
    explore_mask,
    search_roots,
    step_record,
)

__all__ = ["GameSegment", "Games", "arena_agent", "fresh_games", "game", "play_segment",
           "run_segment"]


@functools.cache
def game(name: str) -> PgxGame:
    """The pgx game ``name`` (built once per process)."""
    return make_pgx_game(name)


class Games(NamedTuple):
    """The games in progress: ``state`` pgx states (leaves ``[B, ...]``),
    ``plies [B]`` int32 plies played in each so far."""

    state: PgxState
    plies: jax.Array


class GameSegment(NamedTuple):
    """``T`` plies of ``B`` games.

    Attributes:
      trajectories: the plies as :class:`.selfplay.Trajectories` (``obs [B, T, H,
        W, C]`` bool, ``legal [B, T, A]``, ``reward [B, T]`` the mover's, ...).
      truncated: ``[B]`` bool, the game running after the last ply (cut, not ended).
      truncation_value: ``[B]`` its bootstrap: the model's value of the position
        it stopped at, from the view of the player to move there.
      final_plies: ``[B, T]`` a game's length at the ply that ended it (0 at the
        other plies).
      final_reward: ``[B, T]`` the last mover's reward at the ply that ended a
        game (+1: a win, 0: a draw; 0 at the other plies too).
    """

    trajectories: Trajectories
    truncated: jax.Array
    truncation_value: jax.Array
    final_plies: jax.Array
    final_reward: jax.Array

    def write_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`.replay.write_episodes`."""
        return {**self.trajectories._asdict(), "truncated": self.truncated,
                "truncation_value": self.truncation_value}


def fresh_games(name: str, key: jax.Array, batch: int) -> Games:
    """``batch`` new games of ``name`` (pgx's ``init``: who moves first is drawn)."""
    return Games(game(name).init(key, batch), jnp.zeros((batch,), jnp.int32))


Search = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], Any]
"""``(key, obs [B, H, W, C], legal [B, A], plies [B]) -> PolicyOutput``: a self-play
search, told how many plies each game has played (its move may turn greedy after
some)."""

Value = Callable[[jax.Array, jax.Array], jax.Array]
"""``(obs [B, H, W, C], legal [B, A]) -> [B]``: the bootstrap of a cut game, from
the view of the player to move."""


def _ply(name: str, search: Search, games: Games, key: jax.Array):
    """One ply of every game: ``(games after it, the ply's record)``; a game that
    ends is replaced by a fresh one."""
    pgx_game = game(name)
    env = pgx_game.environment
    search_key, reset_key = jax.random.split(key)
    state = games.state
    obs, legal = env.observe(state), env.legal_mask(state)
    out = search(search_key, obs, legal, games.plies)
    after = env.step(state, out.action)
    reward = env.reward(state, after)
    ended = env.terminal(after)
    plies = games.plies + 1
    fresh = pgx_game.init(reset_key, plies.shape[0])
    nxt = Games(jax.tree.map(lambda f, a: jnp.where(
        ended.reshape(ended.shape + (1,) * (a.ndim - 1)), f, a), fresh, after),
        jnp.where(ended, 0, plies))
    return nxt, (step_record(obs, legal, out, reward, ended),
                 (jnp.where(ended, plies, 0), jnp.where(ended, reward, 0.0)))


def run_segment(name: str, search: Search, value: Value, length: int, games: Games,
                key: jax.Array) -> tuple[Games, GameSegment]:
    """``length`` plies of every game of ``name`` by ``search`` (module docstring),
    the game running at the end bootstrapped with ``value``: ``(the games after
    them, the segment)``. Call it inside ``jit``."""
    env = game(name).environment
    games, records = jax.lax.scan(functools.partial(_ply, name, search), games,
                                  jax.random.split(key, length))
    steps, (final_plies, final_reward) = batch_major(records)
    bootstrap = value(env.observe(games.state), env.legal_mask(games.state))
    return games, GameSegment(steps, truncated=~steps.episode_end[:, -1],
                              truncation_value=bootstrap,
                              final_plies=final_plies, final_reward=final_reward)


@functools.partial(jax.jit, static_argnums=(0, 1))
def play_segment(config: MuZeroConfig, model: MuZeroModel, params: Any, games: Games,
                 key: jax.Array) -> tuple[Games, GameSegment]:
    """``config.segment_length`` plies of every game of ``config.game`` by the
    MuZero search (:func:`.selfplay.search_roots`), a running game bootstrapped
    with the model's value of its position."""

    def search(key, obs, legal, plies):
        return search_roots(config, model, params, key, obs, legal, greedy=False,
                            explore=explore_mask(config, plies))

    def value(obs, legal):
        return model.root(params, obs, legal).value

    return run_segment(config.game, search, value, config.segment_length, games, key)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _greedy_action(config: MuZeroConfig, model: MuZeroModel, params: Any, keys: jax.Array,
                   state: PgxState) -> jax.Array:
    env = game(config.game).environment
    out = search_roots(config, model, params, keys, env.observe(state), env.legal_mask(state),
                       greedy=True)
    return out.action


def arena_agent(config: MuZeroConfig, model: MuZeroModel, params: Any
                ) -> Callable[[jax.Array, PgxState], jax.Array]:
    """The greedy MuZero search of ``config`` (no noise, the most visited move;
    Gumbel: no Gumbel noise) as a :func:`jaxpuct.alphazero.arena.play_match`
    agent: ``(keys [B], pgx states [B]) -> actions [B]``, jitted (one compilation
    per ``config`` and ``model``, whatever the parameters)."""
    return functools.partial(_greedy_action, config, model, params)

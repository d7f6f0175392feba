"""Evaluation games of the greedy agent against fixed opponents.

An opponent is a function ``(rng, state [B], moves_played [B]) -> actions [B]``:

* :func:`uniform_random_opponent`: uniform over the legal moves;
* :func:`pure_search_opponent`: a search with a uniform prior and zero value
  and the agent's number of simulations; it samples its first move in proportion
  to the visits and plays greedily after, so that the games differ.

:func:`play_vs` plays ``B`` games, half with the agent moving first, and counts
the results by the agent's colour.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.envs.adapter import Environment

__all__ = ["Counts", "Opponent", "make_opponent", "play_vs", "pure_search_opponent",
           "uniform_random_opponent"]

# {"first": {"win", "draw", "loss"}, "second": {...}}: by the agent's colour
# ("first": the agent moved first), from the agent's view.
Counts = dict[str, dict[str, int]]
Opponent = Callable[[jax.Array, Any, np.ndarray], np.ndarray]


def uniform_random_opponent(env: Environment) -> Opponent:
    """Plays uniformly among the legal moves (Gumbel-argmax over the legal mask)."""
    def act(rng, state, moves_played):
        del moves_played
        legal = np.asarray(env.legal_mask(state), bool)
        gumbel = np.asarray(jax.random.gumbel(rng, legal.shape))
        return np.argmax(np.where(legal, gumbel, -np.inf), axis=-1)
    return act


def pure_search_opponent(act_pure: Callable) -> Opponent:
    """``act_pure(keys [B], state, temperature [B]) -> actions``, sampled on the
    opponent's first move (temperature 1) and greedy after."""
    def act(rng, state, moves_played):
        b = moves_played.shape[0]
        temperature = jnp.asarray((moves_played == 0).astype(np.float32))
        return np.asarray(act_pure(jax.random.split(rng, b), state, temperature))
    return act


def make_opponent(name: str, env: Environment, act_pure: Callable) -> Opponent:
    """``"random"`` or ``"pure_search"`` (with ``act_pure``, see above)."""
    if name == "random":
        return uniform_random_opponent(env)
    if name == "pure_search":
        return pure_search_opponent(act_pure)
    raise ValueError(f"unknown opponent {name!r}; accepted: random, pure_search")


def play_vs(agent: Callable, opponent: Opponent, env: Environment, init_fn: Callable,
            step_fn: Callable, batch_size: int, max_plies: int, rng: jax.Array) -> Counts:
    """Plays ``batch_size`` games of ``agent`` against ``opponent``.

    Args:
      agent: ``(keys [B], state [B]) -> actions [B]`` (the greedy search).
      opponent: see the module docstring.
      env: the game's environment (``terminal``, player to move).
      init_fn: ``(key, B) -> states``; step_fn: ``(states, actions) -> states``.
      batch_size: ``B``; the first ``B // 2`` games have the agent moving first.
      max_plies: longest game.
      rng: key of the games.

    Returns:
      :data:`Counts` of the agent's wins, draws and losses by colour.
    """
    b = batch_size
    rng, init_key = jax.random.split(rng)
    state = init_fn(init_key, b)
    agent_first = np.arange(b) < b // 2
    first_player = np.asarray(state.current_player)
    agent_id = np.where(agent_first, first_player, 1 - first_player)
    opp_moves = np.zeros(b, np.int32)
    # pgx pays the reward on the final step only (a terminal state steps to
    # itself with zero reward), so sum the rewards as they come.
    rewards = np.zeros(b, np.float32)
    for _ in range(max_plies):
        if bool(np.all(np.asarray(env.terminal(state)))):
            break
        rng, agent_key, opp_key = jax.random.split(rng, 3)
        is_agent = np.asarray(state.current_player) == agent_id
        a_agent = np.asarray(agent(jax.random.split(agent_key, b), state))
        a_opp = opponent(opp_key, state, opp_moves)
        opp_moves += (~is_agent).astype(np.int32)
        action = np.maximum(np.where(is_agent, a_agent, a_opp), 0).astype(np.int32)
        state = step_fn(state, jnp.asarray(action))
        rewards += np.asarray(state.rewards)[np.arange(b), agent_id]
    counts: Counts = {}
    for name, mask in (("first", agent_first), ("second", ~agent_first)):
        counts[name] = {"win": int(np.sum(mask & (rewards > 0))),
                        "draw": int(np.sum(mask & (rewards == 0))),
                        "loss": int(np.sum(mask & (rewards < 0)))}
    return counts

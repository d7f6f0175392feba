"""Lockstep self-play of whole games with a MuZero model, and evaluation by minimax.

Tic-tac-toe with the batched JAX rules of :mod:`jaxpuct.testing.tictactoe`: every
iteration starts ``B`` games and plays them to their end (at most 9 plies) in
one ``jax.jit``: the model's root from the real observation with the real legal
mask, the search (``gumbel_policy``, ``alphazero_policy`` or ``sampled_policy``),
the real rules.
The steps go to :mod:`.replay` as ``[B, 9]`` trajectories (a step is written
while its game is running). Rewards are the mover's (+1 for a win), values the
player to move's, and the targets' discount is ``-gamma`` (two players).

Evaluation, against the exact minimax tables of :mod:`jaxpuct.testing.tictactoe`:

* :func:`evaluate_optimal_moves`: the search's greedy move (and the prior's
  argmax) at every one of the 4520 reachable non-terminal positions, against the
  minimax-optimal moves; a strict measure (most of these positions never occur
  in good play; a uniform random legal move scores 0.580);
* :func:`evaluate_games`: games of the greedy search against a minimax player
  (a uniform draw among the optimal moves) and against a uniform random player,
  half of them as X and half as O; an optimal agent never loses to minimax.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.model import MuZeroModel, muzero_puct_config
from jaxpuct.muzero.stochastic_model import StochasticMuZeroModel
from jaxpuct.sampled import SampledPolicyOutput
from jaxpuct.selection import MinMaxBounds
from jaxpuct.testing import tictactoe as ttt

__all__ = ["LearnedModel", "Trajectories", "batch_major", "evaluate_at_counts",
           "evaluate_board", "evaluate_games", "evaluate_optimal_moves", "explore_mask",
           "observe", "play_games", "search", "search_roots", "step_record"]

OBS_SHAPE = (18,)
MAX_PLIES = 9

LearnedModel = MuZeroModel | StochasticMuZeroModel
"""A model the searches of :func:`search_roots` run in: MuZero's, or Stochastic
MuZero's (afterstates and chance codes)."""


class Trajectories(NamedTuple):
    """``B`` trajectories of ``T`` steps (tic-tac-toe: whole games, ``T = 9``;
    2048: segments, :mod:`.game_2048`), the fields of
    :func:`.replay.write_episodes`: ``obs [B, T, ...]``, ``action [B, T]``,
    ``reward [B, T]``, ``policy [B, T, P]``, ``root_value [B, T]``,
    ``episode_end [B, T]``, ``written [B, T]``, ``legal [B, T, A]`` and
    ``policy_actions [B, T, K]`` (the sampled policy's ids, ``P = K``; else
    ``None`` and ``P = A``). Pass them by keyword:
    ``write_episodes(buffer, **trajectories._asdict())``."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    policy: jax.Array
    root_value: jax.Array
    episode_end: jax.Array
    written: jax.Array
    legal: jax.Array
    policy_actions: jax.Array | None = None


def step_record(obs: jax.Array, legal: jax.Array, out: Any, reward: jax.Array,
                ended: jax.Array) -> Trajectories:
    """One searched step of ``B`` games kept alive across it (the segments of
    :mod:`.game_2048` and :mod:`.board_game`) as a :class:`Trajectories` row of
    ``[B, ...]`` leaves, written everywhere: ``obs`` and ``legal [B, A]`` the
    searched positions, ``out`` the search's output, ``reward [B]`` the step's,
    ``ended [B]`` it ended the game."""
    return Trajectories(obs=obs, action=out.action, reward=reward, policy=out.action_weights,
                        root_value=out.search_tree.summary().value, episode_end=ended,
                        written=jnp.ones(ended.shape, jnp.bool_), legal=legal,
                        policy_actions=getattr(out, "sampled_actions", None))


def batch_major(records: Any) -> Any:
    """A scan's stacked records, ``[T, B, ...] -> [B, T, ...]``."""
    return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), records)


def observe(state: ttt.State) -> jax.Array:
    """``[B, 18]`` float32: the mover's stones, then the opponent's (two planes)."""
    board = state.board.astype(jnp.float32)
    return jnp.concatenate([board == 1, board == -1], axis=-1).astype(jnp.float32)


def search(config: MuZeroConfig, model: MuZeroModel, params: Any, key: jax.Array,
           state: ttt.State, greedy: bool
           ) -> jaxpuct.PolicyOutput | SampledPolicyOutput:
    """The configured policy at ``state`` (``greedy``: no noise, argmax move)."""
    return search_roots(config, model, params, key, observe(state), ttt.legal(state), greedy)


def search_roots(config: MuZeroConfig, model: LearnedModel, params: Any,
                 key: jax.Array, obs: jax.Array, legal: jax.Array, greedy: bool,
                 root_noise: bool | None = None, explore: jax.Array | None = None
                 ) -> jaxpuct.PolicyOutput | SampledPolicyOutput:
    """The configured policy at observations ``obs [B, ...]`` (tic-tac-toe's ``[B,
    18]``, 2048's, :mod:`.game_2048`) with legal masks ``legal [B, A]`` (the roots
    of self-play, and of :mod:`.reanalyse` from the stored steps); Gumbel considers
    all ``A`` actions; ``key`` is one key or ``[B]`` keys. ``root_noise``: Dirichlet
    noise at a PUCT root (``None``: unless ``greedy``); the example reanalyses
    without it (``docs/muzero.md`` has the measurement). ``explore [B]`` bool, for a
    search that is not ``greedy``: where false, the element plays the greedy move
    (the most visited action, lowest index on ties; Gumbel: no Gumbel draw) while
    its target stays the sampling search's (the visit distribution at temperature
    1; Gumbel's improved policy) and its root noise stays as ``root_noise`` says:
    self-play after ``config.temperature_moves`` plies, :func:`explore_mask`.
    ``None``: every element samples its move.

    A :class:`.stochastic_model.StochasticMuZeroModel` is searched with chance
    nodes over its codes (Antonoglou et al. 2022): ``stochastic_gumbel_policy``
    for ``gumbel``, ``stochastic_policy`` for ``alphazero`` (the same noise,
    temperature and decision-node rule as the MuZero search's)."""
    root = model.root(params, obs, legal)
    noise = not greedy if root_noise is None else root_noise
    # Gumbel's scale: 1 samples, 0 is greedy (its target does not depend on it).
    randomness: Any = 0.0 if greedy else (
        1.0 if explore is None else jnp.where(explore, 1.0, 0.0))
    # A visit-count search keeps temperature 1 where it explores only in part: the
    # temperature sets the target N^(1/T) too, and MuZero's target is the visit
    # distribution at every ply; the move alone becomes the most visited below.
    temperature = 0.0 if greedy else 1.0
    out = _search(config, model, params, key, root, legal, noise, randomness, temperature)
    if greedy or explore is None or config.policy == "gumbel":
        return out
    return out.replace(action=jnp.where(explore, out.action, _most_visited(out)))


def _most_visited(out: jaxpuct.PolicyOutput | SampledPolicyOutput) -> jax.Array:
    """``[B]`` the root action of largest weight in ``out.action_weights`` (lowest
    index on ties, as temperature 0 chooses), a sampled search's slot mapped to
    its action id."""
    slot = jnp.argmax(out.action_weights, axis=-1)
    actions = getattr(out, "sampled_actions", None)
    if actions is None:
        return slot.astype(out.action.dtype)
    return jnp.take_along_axis(actions, slot[:, None], axis=-1)[:, 0].astype(out.action.dtype)


def _search(config: MuZeroConfig, model: LearnedModel, params: Any, key: jax.Array,
            root: jaxpuct.RootFnOutput, legal: jax.Array, noise: bool, randomness: Any,
            temperature: float) -> jaxpuct.PolicyOutput | SampledPolicyOutput:
    """:func:`search_roots`' call of the configured policy."""
    selection = muzero_puct_config(minmax_bounds=cast(MinMaxBounds, config.minmax_bounds))
    if isinstance(model, StochasticMuZeroModel):
        return _search_stochastic(config, model, params, key, root, randomness,
                                  temperature, noise, selection)
    if config.policy == "sampled":
        # The samples themselves stay random in a greedy search (the paper samples
        # at evaluation too); greedy removes the noise and plays the most visited.
        return jaxpuct.sampled_policy(params, key, root, model.recurrent_fn,
                                      config.num_simulations, num_samples=config.num_samples,
                                      selection=selection,
                                      dirichlet_fraction=0.25 if noise else 0.0,
                                      temperature=temperature)
    if config.policy == "gumbel":
        return jaxpuct.gumbel_policy(params, key, root, model.recurrent_fn,
                                     config.num_simulations,
                                     max_num_considered_actions=legal.shape[-1],
                                     gumbel_scale=randomness)
    return jaxpuct.alphazero_policy(params, key, root, model.recurrent_fn,
                                    config.num_simulations, selection=selection,
                                    dirichlet_fraction=0.25 if noise else 0.0,
                                    temperature=temperature)


def _search_stochastic(config: MuZeroConfig, model: StochasticMuZeroModel, params: Any,
                       key: jax.Array, root: jaxpuct.RootFnOutput, randomness: Any,
                       temperature: float, noise: bool, selection: Any
                       ) -> jaxpuct.PolicyOutput:
    """:func:`search_roots` with a stochastic model (``config.policy`` is gumbel or
    alphazero: :class:`.config.MuZeroConfig` refuses the sampled policy with it)."""
    if config.policy == "gumbel":
        return jaxpuct.stochastic_gumbel_policy(
            params, key, root, model.decision_recurrent_fn, model.chance_recurrent_fn,
            config.num_simulations, max_num_considered_actions=root.prior_logits.shape[-1],
            gumbel_scale=randomness)
    if config.policy != "alphazero":
        raise ValueError(f"MuZeroConfig.policy {config.policy!r} is not supported with a "
                         f"StochasticMuZeroModel (gumbel or alphazero).")
    return jaxpuct.stochastic_policy(params, key, root, model.decision_recurrent_fn,
                                     model.chance_recurrent_fn, config.num_simulations,
                                     selection=selection,
                                     dirichlet_fraction=0.25 if noise else 0.0,
                                     temperature=temperature)


def explore_mask(config: MuZeroConfig, plies: jax.Array) -> jax.Array | None:
    """``[B]`` bool: which games, ``plies [B]`` into them, still sample their move
    (``plies < config.temperature_moves``); ``None`` where every ply samples
    (``temperature_moves = -1``)."""
    if config.temperature_moves < 0:
        return None
    return plies < config.temperature_moves


@functools.partial(jax.jit, static_argnums=(0, 1), static_argnames=("batch_sharding",))
def play_games(config: MuZeroConfig, model: MuZeroModel, params: Any,
               key: jax.Array, batch_sharding: jax.sharding.Sharding | None = None
               ) -> Trajectories:
    """``config.batch_size`` games from the empty board to their ends; with
    ``batch_sharding`` (``NamedSharding(mesh, P("batch"))``) the games are split
    over its devices (``jit`` partitions the whole self-play over them)."""
    state = ttt.initial(config.batch_size)
    if batch_sharding is not None:
        state = jax.lax.with_sharding_constraint(state, batch_sharding)

    def ply(state, key_and_ply):
        key, plies = key_and_ply
        out = search_roots(config, model, params, key, observe(state), ttt.legal(state),
                           greedy=False,
                           explore=explore_mask(config, jnp.full(state.player.shape, plies)))
        running = ~state.terminal
        next_state, reward, terminal = ttt.step(state, out.action)
        value = out.search_tree.summary().value
        record = Trajectories(observe(state), out.action, reward, out.action_weights, value,
                              terminal & running, running, ttt.legal(state),
                              getattr(out, "sampled_actions", None))
        return next_state, record

    _, records = jax.lax.scan(ply, state, (jax.random.split(key, MAX_PLIES),
                                           jnp.arange(MAX_PLIES)))
    return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), records)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _greedy_moves(config: MuZeroConfig, model: MuZeroModel, params: Any,
                  state: ttt.State) -> tuple[jax.Array, jax.Array]:
    out = search(config, model, params, jax.random.key(0), state, greedy=True)
    root = model.root(params, observe(state), ttt.legal(state))
    prior_move = jnp.argmax(jnp.where(ttt.legal(state), root.prior_logits, -jnp.inf), -1)
    return out.action, prior_move


def evaluate_optimal_moves(config: MuZeroConfig, model: MuZeroModel, params: Any
                           ) -> dict[str, float]:
    """Fractions of the 4520 non-terminal positions where the greedy search move
    (``search_optimal``) and the prior's argmax (``prior_optimal``) are
    minimax-optimal; and ``lines_lost_as_x`` / ``lines_lost_as_o``: of every game
    of the greedy search against every minimax-optimal line of the opponent (the
    opponent branches over all its optimal moves; the search is deterministic and
    batch-independent, so its move at a position is the one computed here), how
    many the agent loses (``make demo``'s check of the AlphaZero agent)."""
    positions = ttt.all_positions()
    state = ttt.batch(positions)
    moves, prior = (np.asarray(x) for x in _greedy_moves(config, model, params, state))
    optimal = ttt.optimal_move_table()[[ttt.code(p) for p in positions]]
    rows = np.arange(len(positions))
    chosen = {ttt.code(p): int(m) for p, m in zip(positions, moves, strict=True)}
    lost_x, lost_o = (_lines_lost(chosen, agent) for agent in (1, -1))
    return {"search_optimal": float(optimal[rows, moves].mean()),
            "prior_optimal": float(optimal[rows, prior].mean()),
            "lines_lost_as_x": lost_x, "lines_lost_as_o": lost_o}


def _lines_lost(chosen: dict[int, int], agent: int) -> int:
    """Games lost by the agent playing ``chosen[code(position)]`` as ``agent``
    (1: X, -1: O) against every minimax-optimal line of the opponent."""
    table = ttt.optimal_move_table()
    lost, stack = 0, [ttt.EMPTY]
    while stack:
        pos = stack.pop()
        if ttt.is_terminal(pos):
            lost += ttt.winner(pos) == -agent
            continue
        if ttt.to_move(pos) == agent:
            stack.append(ttt.play(pos, chosen[ttt.code(pos)]))
        else:
            stack.extend(ttt.play(pos, int(a)) for a in np.flatnonzero(table[ttt.code(pos)]))
    return int(lost)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _match(config: MuZeroConfig, model: MuZeroModel, num_games: int, params: Any,
           key: jax.Array, minimax: bool) -> jax.Array:
    """``[num_games]`` outcome for the agent (+1 win, 0 draw, -1 loss); the agent is
    X in the first half of the games, O in the second."""
    table = jnp.asarray(ttt.optimal_move_table())
    agent_is_x = jnp.arange(num_games) < num_games // 2
    state = ttt.initial(num_games)

    def ply(carry, inputs):
        state, outcome = carry
        index, key = inputs
        agent_key, opponent_key = jax.random.split(key)
        agent_move = search(config, model, params, agent_key, state, greedy=True).action
        legal = ttt.legal(state)
        choices = jnp.where(minimax, table[ttt.codes(state)] & legal, legal)
        opponent_move = jax.random.categorical(
            opponent_key, jnp.where(choices, 0.0, -jnp.inf), axis=-1)
        agent_moves = agent_is_x == (index % 2 == 0)  # X moves at even plies
        action = jnp.where(agent_moves, agent_move, opponent_move).astype(jnp.int32)
        running = ~state.terminal
        state, reward, _ = ttt.step(state, action)
        outcome = outcome + jnp.where(running, jnp.where(agent_moves, reward, -reward), 0.0)
        return (state, outcome), None

    (_, outcome), _ = jax.lax.scan(
        ply, (state, jnp.zeros((num_games,), jnp.float32)),
        (jnp.arange(MAX_PLIES), jax.random.split(key, MAX_PLIES)))
    return outcome


def evaluate_at_counts(config: Any, counts: tuple[int, ...],
                       evaluate: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """``evaluate(config)``'s figures, and under ``eval_at_{S}`` those of
    ``evaluate`` on ``config`` with ``num_simulations = S`` for each ``S`` in
    ``counts`` (``config``: any frozen dataclass with ``num_simulations``). The
    caller closes ``evaluate`` over one network and one key, so that only the
    search's simulations differ between the figures."""
    row = dict(evaluate(config))
    for sims in counts:
        row[f"eval_at_{sims}"] = dict(evaluate(dataclasses.replace(config,
                                                                   num_simulations=sims)))
    return row


def evaluate_board(config: MuZeroConfig, model: MuZeroModel, params: Any, key: jax.Array
                   ) -> dict[str, Any]:
    """Tic-tac-toe's whole evaluation: :func:`evaluate_optimal_moves` and
    :func:`evaluate_games` (with ``key``) together."""
    return {**evaluate_optimal_moves(config, model, params),
            **evaluate_games(config, model, params, key)}


def evaluate_games(config: MuZeroConfig, model: MuZeroModel, params: Any,
                   key: jax.Array, num_games: int = 256) -> dict[str, float]:
    """Loss rate against minimax, win and loss rates against a random player."""
    minimax_key, random_key = jax.random.split(key)
    vs_minimax = np.asarray(_match(config, model, num_games, params, minimax_key, True))
    vs_random = np.asarray(_match(config, model, num_games, params, random_key, False))
    return {"loss_vs_minimax": float(np.mean(vs_minimax < 0)),
            "win_vs_random": float(np.mean(vs_random > 0)),
            "loss_vs_random": float(np.mean(vs_random < 0))}

"""pgx's ``backgammon`` as a stochastic game for :func:`jaxpuct.stochastic_policy`.

pgx (Koyamada et al. 2023, "Pgx: Hardware-Accelerated Parallel Game Simulators for
Reinforcement Learning") moves one checker per step: action ``6 * src + die``
(``src`` 0 is the no-op, 1 the bar, ``2 + p`` point ``p``; ``die`` 0-5 for 1-6), 156
actions. A step that uses the last playable die, or the no-op (legal only when no
checker can move), ends the turn, and pgx then rolls the next player's dice inside
that same step with the state's key (``pgx.backgammon._change_turn``). Search needs
the two halves apart, so this module splits that step:

* the *decision half* applies pgx's own move (``_update_by_action``, and
  ``_winning_step`` when the last checker is borne off); when the turn ends, the
  afterstate is the board flipped to the next player's view with that player to
  move and *no dice yet* (``_flip_board``; legal mask all ``False``);
* the *chance half* rolls: outcome ``k`` of :data:`DICE` (21 distinct rolls, a
  double with probability 1/36, the others 2/36) sets the dice, the playable dice
  and the legal mask as pgx's ``_change_turn`` does with that roll
  (``_set_playable_dice``, ``_legal_action_mask``).

Within a turn (a move that leaves dice to play) nothing is rolled: the afterstate is
the next state and its chance node has one outcome, 0, with probability 1 (logits
``[0, -inf, ...]``); :func:`chance` leaves it unchanged. Node kinds so alternate on
every path, as :mod:`jaxpuct.stochastic` requires. The bookkeeping of pgx's
``Env.step`` is repeated (step count, the observation of the player to move, an all
``True`` legal mask at the end of the game), so for the same roll the two halves give
pgx's next state field by field, except that the dice are stored low die first
(pgx keeps its random order; the legal masks and the play are the same).

pgx's rules functions are private (``pgx.backgammon._update_by_action`` and the
others named above, pgx 2.x), as :mod:`jaxpuct.envs.pgx_2048` uses its game's;
``tests/test_pgx_backgammon.py`` checks the split against pgx's own ``step`` over
random games. pgx is imported on first use only (``import jaxpuct`` never loads it).

Rules as pgx plays them (they differ from OpenSpiel's and the standard rules: see
:mod:`jaxpuct.alphazero.arena_backgammon`): any checker that can move may move, one
die at a time; pgx does not make a player use both dice (or the larger one) when a
choice would allow it. A win scores 1, a gammon 2, a backgammon 3 (pgx counts a
backgammon only for a loser's checker in the winner's home board, not on the bar).
:func:`standard_legal_mask` narrows pgx's legal micro-moves to the standard rule, as
OpenSpiel applies it (use both dice if possible, else the larger one; a double in
two halves of two checker moves each); :func:`make_search_fns` searches with it by
default (``rules="standard"``), so the tree plans with the game's rules at every
decision node, not only at the root.

Embeddings: a state is a batched pgx ``State``; an afterstate is
``(state, reward [B], roll [B] bool)``: the state after the move (flipped and without
dice when ``roll``), the reward of the move to its mover (the game's points when it
ends the game), and whether dice come next.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxpuct import prng
from jaxpuct.stochastic import ChanceRecurrentFnOutput, DecisionRecurrentFnOutput
from jaxpuct.types import RootFnOutput

__all__ = ["DICE", "DICE_PROBS", "NUM_ACTIONS", "NUM_FEATURES", "NUM_OUTCOMES", "RULES",
           "Afterstate", "chance", "decision", "dice_probs", "features", "init",
           "make_network_search_fns", "make_search_fns", "outcome_of_dice", "roll_dice",
           "rollout_return", "standard_legal_mask", "step", "try_first_moves"]

NUM_ACTIONS = 6 * 26
# Legal micro-moves of one position: at most 15 sources x 2 dice (the no-op excluded).
MAX_FIRST_MOVES = 32
RULES = ("standard", "pgx")
# The 21 distinct rolls (low die, high die), 1-6; outcome k is DICE[k].
DICE: tuple[tuple[int, int], ...] = tuple((lo, hi) for lo in range(1, 7)
                                          for hi in range(lo, 7))
NUM_OUTCOMES = len(DICE)
DICE_PROBS: tuple[float, ...] = tuple((1.0 if lo == hi else 2.0) / 36.0 for lo, hi in DICE)

PgxState = Any
# features(): 28 board cells x 2 sides x 4 unary levels, 6 dice counts, the pre-roll
# flag and the two pip counts.
NUM_FEATURES = 28 * 2 * 4 + 6 + 1 + 2


class Afterstate(NamedTuple):
    """The embedding of a chance node (leaves ``[B, ...]``).

    Attributes:
      state: pgx ``State`` after the move: flipped to the next player, without dice,
        when ``roll``; else the next state itself.
      reward: ``[B]`` float32 reward of the move to its mover.
      roll: ``[B]`` bool: the turn ended and dice are to be rolled.
    """

    state: PgxState
    reward: jax.Array
    roll: jax.Array


def _rules():
    """pgx's ``backgammon`` module, imported on first use with compile-time
    evaluation (its module-level JAX arrays must not become tracers of the first
    trace that imports it; see :func:`jaxpuct.envs.pgx_2048._rules`)."""
    with jax.ensure_compile_time_eval():
        from pgx import backgammon
    return backgammon


def outcome_of_dice(low: int, high: int) -> int:
    """The outcome index of the roll ``{low, high}`` (dice 1-6, either order)."""
    low, high = min(low, high), max(low, high)
    return DICE.index((low, high))


def dice_probs(roll: jax.Array) -> jax.Array:
    """``[B, 21]`` outcome probabilities: :data:`DICE_PROBS` where ``roll [B]``,
    else outcome 0 with probability 1."""
    rolled = jnp.asarray(DICE_PROBS, jnp.float32)
    fixed = jnp.zeros((NUM_OUTCOMES,), jnp.float32).at[0].set(1.0)
    return jnp.where(roll[:, None], rolled, fixed)


def _finish(env_state: PgxState) -> PgxState:
    """pgx ``Env.step``'s bookkeeping after a move: all-``True`` legal mask at the
    end of the game, the observation of the player to move."""
    bg = _rules()
    legal = jnp.where(env_state.terminated, True, env_state.legal_action_mask)
    env_state = env_state.replace(legal_action_mask=legal)
    return env_state.replace(observation=bg._observe(env_state, env_state.current_player))


def _decision_one(s: PgxState, action: jax.Array) -> Afterstate:
    bg = _rules()
    moved: PgxState = bg._update_by_action(s.replace(_step_count=s._step_count + 1), action)
    won = bg._is_all_off(moved._board)
    ends_turn = ~won & (bg._is_turn_end(moved) | (action // 6 == 0))
    flipped = moved.replace(
        current_player=(moved.current_player + 1) % 2, _board=bg._flip_board(moved._board),
        _turn=(moved._turn + 1) % 2, _dice=jnp.full((2,), -1, jnp.int32),
        _playable_dice=jnp.full((4,), -1, jnp.int32), _played_dice_num=jnp.int32(0),
        legal_action_mask=jnp.zeros_like(moved.legal_action_mask))
    after = jax.lax.cond(won, lambda: bg._winning_step(moved),
                         lambda: jax.tree.map(lambda a, b: jnp.where(ends_turn, a, b),
                                              flipped, moved))
    reward = jnp.where(won, after.rewards[s.current_player], 0.0).astype(jnp.float32)
    after = _finish(after)
    # A finished game stays as it is, with zero rewards (pgx's Env.step).
    ended = s.replace(rewards=jnp.zeros_like(s.rewards))
    after = jax.tree.map(lambda a, b: jnp.where(s.terminated, a, b), ended, after)
    return Afterstate(state=after, reward=jnp.where(s.terminated, 0.0, reward),
                      roll=ends_turn & ~s.terminated)


def decision(state: PgxState, action: jax.Array) -> Afterstate:
    """The decision half: batched pgx ``state``, ``action [B]`` -> :class:`Afterstate`.
    The action must be legal (pgx's ``Env.step`` would end the game with a penalty);
    a finished game is returned unchanged with zero rewards, as pgx does."""
    return jax.vmap(_decision_one)(state, action.astype(jnp.int32))


def _chance_one(after: Afterstate, outcome: jax.Array) -> PgxState:
    bg = _rules()
    s = after.state
    pairs = jnp.asarray(DICE, jnp.int32) - 1  # [21, 2], 0-5
    dice = pairs[outcome]
    rolled = s.replace(_dice=dice, _playable_dice=bg._set_playable_dice(dice),
                       _played_dice_num=jnp.int32(0),
                       legal_action_mask=bg._legal_action_mask(s._board, dice))
    rolled = rolled.replace(observation=bg._observe(rolled, rolled.current_player))
    return jax.tree.map(lambda a, b: jnp.where(after.roll, a, b), rolled, s)


def chance(afterstate: Afterstate, outcome: jax.Array) -> PgxState:
    """The chance half: ``afterstate``, ``outcome [B]`` in ``[0, 21)`` -> batched pgx
    state. Rows without a roll are returned unchanged (their only outcome is 0)."""
    return jax.vmap(_chance_one)(afterstate, outcome.astype(jnp.int32))


def step(state: PgxState, action: jax.Array, outcome: jax.Array) -> PgxState:
    """pgx's step with the dice given: ``chance(decision(state, action), outcome)``
    (``outcome [B]`` is used only where the move ends the turn)."""
    return chance(decision(state, action), outcome)


def init(key: jax.Array, batch_size: int) -> PgxState:
    """``[B]`` pgx initial states (``pgx.make("backgammon").init``, vmapped): the
    first player id and its opening roll (never a double) are drawn by pgx."""
    return _batched_init()(jax.random.split(key, batch_size))


@functools.cache
def _batched_init() -> Callable:
    """pgx's ``init``, vmapped and jitted once (run op by op it took 3.5 s)."""
    import pgx
    return jax.jit(jax.vmap(pgx.make("backgammon").init))


def _sample(weights: jax.Array, u: jax.Array) -> jax.Array:
    """``[B]`` index drawn from unnormalised ``weights [B, K]`` with uniforms
    ``u [B]`` (inverse CDF)."""
    cumulative = jnp.cumsum(weights, axis=-1)
    return jnp.argmax(cumulative > u[:, None] * cumulative[:, -1:], axis=-1).astype(jnp.int32)


def _first_of_half(s: PgxState) -> jax.Array:
    """Whether ``s``'s next micro-move starts one of OpenSpiel's checker-move pairs:
    the first die of a turn, or the third of a double (OpenSpiel plays a double as
    two actions of two checker moves, and applies the dice rule to each)."""
    double = s._dice[0] == s._dice[1]
    return (s._played_dice_num == 0) | (double & (s._played_dice_num == 2))


def try_first_moves(s: PgxState) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Each legal micro-move of one (unbatched) pgx state ``s``, played by pgx's own
    ``_update_by_action``.

    Returns:
      ``(tried [M], legal [M], ends [M], after [M, 156])`` with ``M =``
      :data:`MAX_FIRST_MOVES`: the moves tried (legal ones first, then padding with
      action 0), whether each is legal, whether the turn or the game ends after it,
      and pgx's legal mask after it.
    """
    bg = _rules()
    tried = jnp.nonzero(s.legal_action_mask, size=MAX_FIRST_MOVES, fill_value=0)[0]

    def play(action: jax.Array) -> tuple[jax.Array, jax.Array]:
        moved = bg._update_by_action(s, action)
        ends = jnp.asarray(bg._is_all_off(moved._board) | bg._is_turn_end(moved))
        return ends, moved.legal_action_mask

    ends, after = jax.vmap(play)(tried)
    return tried, s.legal_action_mask[tried], ends, after


def _standard_one(s: PgxState) -> jax.Array:
    legal = s.legal_action_mask
    tried, valid, ends, after = try_first_moves(s)
    real = valid & (tried // 6 != 0)
    pair = real & ~ends & jnp.any(after[:, 6:], axis=-1)
    die = tried % 6
    larger = real & (die == jnp.max(jnp.where(real, die, -1)))
    keep = jnp.where(jnp.any(pair), pair, larger)
    narrowed = jnp.zeros_like(legal).at[tried].max(keep)
    applies = _first_of_half(s) & jnp.any(real) & ~s.terminated
    return jnp.where(applies, narrowed, legal)


def standard_legal_mask(state: PgxState) -> jax.Array:
    """``[B, 156]`` bool: pgx's legal micro-moves of batched ``state`` under the
    standard dice rule, as OpenSpiel's ``backgammon`` applies it.

    At the first micro-move of a turn (and the third of a double), a checker move
    is legal only if a second checker move can follow it, when any first move
    allows one; when at most one die can be played, only moves with the larger die
    are legal. Later micro-moves, a position where only the no-op is legal, and a
    finished game keep pgx's mask. Each first move is tried with pgx's own
    ``_update_by_action`` (at most :data:`MAX_FIRST_MOVES` per position), so a call
    costs about that many pgx moves per row. The micro-move sequences it leaves are
    exactly the prefixes of OpenSpiel's legal turns: ``play_match`` of
    :mod:`jaxpuct.alphazero.arena_backgammon` checks it at every micro-move its
    agent plays.
    """
    return jax.vmap(_standard_one)(state)


def rollout_return(state: PgxState, rng_key: jax.Array, max_steps: int) -> jax.Array:
    """``[B]`` float32 outcome of one uniform random rollout from ``state``, to its
    player to move: micro-moves uniform over pgx's legal actions, dice from
    :data:`DICE_PROBS`, until the game ends (the points won or lost) or
    ``max_steps`` moves (0). All rows advance in one ``jax.lax.while_loop`` until
    the last ends; uniforms are drawn once, before the loop (:func:`jaxpuct.prng.uniform`)."""
    batch = state.terminated.shape[0]
    start_player = state.current_player
    u = prng.uniform(rng_key, (max_steps, 2, batch))
    probs = jnp.broadcast_to(jnp.asarray(DICE_PROBS, jnp.float32), (batch, NUM_OUTCOMES))

    def cond(c):
        s, t = c
        return (t < max_steps) & ~jnp.all(s.terminated)

    def body(c):
        s, t = c
        action = _sample(s.legal_action_mask.astype(jnp.float32), u[t, 0])
        outcome = _sample(probs, u[t, 1])
        new = step(s, action, outcome)
        done = s.terminated
        s = jax.tree.map(lambda old, x: jnp.where(
            done.reshape(done.shape + (1,) * (x.ndim - 1)), old, x), s, new)
        return s, t + 1

    final, _ = jax.lax.while_loop(cond, body, (state, jnp.int32(0)))
    won = jnp.take_along_axis(final.rewards, start_player[:, None], axis=1)[:, 0]
    return jnp.where(final.terminated & ~state.terminated, won, 0.0).astype(jnp.float32)


def make_search_fns(value: str = "rollouts", max_steps: int = 2000, rules: str = "standard"
                    ) -> tuple[Callable, Callable, Callable]:
    """``(root_fn, decision_recurrent_fn, chance_recurrent_fn)`` for backgammon.

    Uniform priors over the legal micro-moves (no network): with ``rules="standard"``
    those of :func:`standard_legal_mask` at every decision node (the game's rules,
    OpenSpiel's), with ``rules="pgx"`` pgx's own mask (looser: see the module
    docstring). Rollouts move uniformly over pgx's mask either way (the standard
    mask costs about 30 pgx moves per call). Values, from the view of the player to
    move (an afterstate's: of the player who moved):

    * ``value="rollouts"``: one uniform random rollout per new node
      (:func:`rollout_return`), as OpenSpiel's ``RandomRolloutEvaluator``; an
      afterstate that waits for dice rolls them at random first;
    * ``value="zero"``: 0 (only the end of the game informs the search).

    A move that ends the game has the game's points as its reward (and as its
    afterstate's value); the state it leads to is terminal. Discounts: ``-1`` when the
    turn passes, ``1`` within a turn (the same player moves again), 0 at the end.

    Args:
      value: ``"rollouts"`` or ``"zero"``.
      max_steps: micro-moves per rollout before it counts as 0.
      rules: ``"standard"`` or ``"pgx"``: the legal micro-moves of the tree's nodes.

    Returns:
      ``root_fn(state, rng_key) -> RootFnOutput`` (batched pgx ``state``: prior
      ``[B, 156]``, value ``[B]``, embedding the state, legal mask ``[B, 156]``);
      ``decision_recurrent_fn(params, key, action [B], state) ->
      (DecisionRecurrentFnOutput(chance_logits [B, 21], afterstate_value [B]),
      Afterstate)``; ``chance_recurrent_fn(params, key, outcome [B], afterstate) ->
      (ChanceRecurrentFnOutput(action_logits [B, 156], ...), state)``.
    """
    if value not in ("rollouts", "zero"):
        raise ValueError(f"value must be 'rollouts' or 'zero', got {value!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")
    if rules not in RULES:
        raise ValueError(f"rules must be one of {RULES}, got {rules!r}")

    def state_value(state, key):
        if value == "zero":
            return jnp.zeros(state.terminated.shape, jnp.float32)
        return jnp.where(state.terminated, 0.0, rollout_return(state, key, max_steps))

    def legal(state):
        mask = standard_legal_mask(state) if rules == "standard" else state.legal_action_mask
        return mask & ~state.terminated[:, None]

    def root_fn(state, rng_key):
        mask = legal(state)
        return RootFnOutput(prior_logits=jnp.zeros(mask.shape, jnp.float32),
                            value=state_value(state, rng_key), embedding=state,
                            legal_action_mask=mask)

    def decision_fn(params, rng_key, action, state):
        del params
        after = decision(state, action)
        probs = dice_probs(after.roll)
        roll_key, value_key = jax.random.split(rng_key)
        if value == "zero":
            v = jnp.zeros(action.shape, jnp.float32)
        else:
            u = jax.random.uniform(roll_key, action.shape)
            nxt = chance(after, _sample(probs, u))
            v = state_value(nxt, value_key)
        # The next player's view when the turn passes; the mover's within a turn.
        v = jnp.where(after.roll, -v, v)
        v = jnp.where(after.state.terminated, after.reward, v)
        out = DecisionRecurrentFnOutput(chance_logits=jnp.log(probs), afterstate_value=v)
        return out, after

    def chance_fn(params, rng_key, outcome, afterstate):
        del params
        state = chance(afterstate, outcome)
        terminal = state.terminated
        discount = jnp.where(terminal, 0.0, jnp.where(afterstate.roll, -1.0, 1.0))
        mask = legal(state)
        out = ChanceRecurrentFnOutput(
            action_logits=jnp.zeros(mask.shape, jnp.float32), value=state_value(state, rng_key),
            reward=afterstate.reward, discount=discount, legal_action_mask=mask,
            terminal=terminal)
        return out, state

    return root_fn, decision_fn, chance_fn


def roll_dice(afterstate: Afterstate, rng_key: jax.Array) -> PgxState:
    """The chance half with a random roll: ``chance(afterstate, k)``, ``k`` drawn
    from :func:`dice_probs` (rows without a roll stay as they are)."""
    u = jax.random.uniform(rng_key, afterstate.roll.shape)
    return chance(afterstate, _sample(dice_probs(afterstate.roll), u))


def features(obs: jax.Array) -> jax.Array:
    """``[B, NUM_FEATURES]`` float32 network input from pgx observations ``[B, 34]``.

    pgx's observation (player to move's view) is the board, 28 signed checker counts
    (24 points, the two bars, the two borne-off piles; the mover's checkers
    positive), then the counts of the 6 die faces still to play (all zero when the
    dice are not rolled yet). Raw counts are a poor input for a small network;
    Tesauro's TD-Gammon encoding (Tesauro 1995, "Temporal Difference Learning and
    TD-Gammon") is used instead: per cell and side, ``n >= 1``, ``n >= 2``,
    ``n >= 3`` and ``(n - 3) / 2`` above that (so a blot, a made point and spares
    are separate inputs); the dice counts / 4; whether the dice are still to be
    rolled; each side's pip count / 100 (``(24 - i)`` pips from point ``i`` for the
    mover, ``(i + 1)`` for the opponent, 25 from a bar).
    """
    obs = obs.astype(jnp.float32)
    board, dice = obs[:, :28], obs[:, 28:34]

    def unary(n):
        return jnp.stack([n >= 1, n >= 2, n >= 3], -1).astype(jnp.float32), \
            (jnp.maximum(n - 3.0, 0.0) / 2.0)[..., None]

    sides = []
    for n in (jnp.maximum(board, 0.0), jnp.maximum(-board, 0.0)):
        levels, spare = unary(n)
        sides.append(jnp.concatenate([levels, spare], -1).reshape(obs.shape[0], -1))
    points = jnp.arange(24, dtype=jnp.float32)
    mine, theirs = jnp.maximum(board[:, :24], 0.0), jnp.maximum(-board[:, :24], 0.0)
    # pgx's bars: index 24 the mover's, 25 the opponent's (its _bar_idx and + 1).
    pips = jnp.stack([jnp.sum(mine * (24.0 - points), -1)
                      + 25.0 * jnp.maximum(board[:, 24], 0.0),
                      jnp.sum(theirs * (points + 1.0), -1)
                      + 25.0 * jnp.maximum(-board[:, 25], 0.0)], -1) / 100.0
    pre_roll = (jnp.sum(dice, -1) == 0).astype(jnp.float32)[:, None]
    return jnp.concatenate(sides + [dice / 4.0, pre_roll, pips], -1)


def make_network_search_fns(apply_fn: Callable, rules: str = "standard",
                            value_scale: float = 3.0) -> tuple[Callable, Callable, Callable]:
    """``(root_fn, decision_recurrent_fn, chance_recurrent_fn)`` for backgammon with
    a policy-value network: AlphaZero's search over the true rules and dice.

    ``apply_fn(params, obs [B, 34]) -> (logits [B, 156], value [B] in [-1, 1])``
    reads pgx observations (the player to move's view; the dice counts are zero
    before a roll). Its value times ``value_scale`` is the expected points of the
    player to move (a game is worth 1, 2 or 3), so the tree's rewards (the game's
    points) and the network's values share one scale. Every decision node gets the
    network's prior over the legal micro-moves (``rules`` as in
    :func:`make_search_fns`) and its value; an afterstate gets the value of its
    board (after a turn the board waits for the next player's dice, so its value is
    the network's pre-roll estimate, negated to the mover's view). A move that ends
    the game has its points as reward and as its afterstate's value.

    Returns:
      ``root_fn(params, rng_key, state) -> RootFnOutput`` (prior ``[B, 156]`` masked
      to the legal micro-moves, value ``[B]``); ``decision_recurrent_fn(params, key,
      action [B], state)``; ``chance_recurrent_fn(params, key, outcome [B],
      afterstate)``, with the conventions of :func:`make_search_fns`.
    """
    if rules not in RULES:
        raise ValueError(f"rules must be one of {RULES}, got {rules!r}")
    if not value_scale > 0:
        raise ValueError(f"value_scale must be > 0, got {value_scale!r}")

    def legal(state):
        mask = standard_legal_mask(state) if rules == "standard" else state.legal_action_mask
        return mask & ~state.terminated[:, None]

    def evaluate(params, state):
        logits, value = apply_fn(params, state.observation)
        mask = legal(state)
        logits = jnp.where(mask, logits.astype(jnp.float32), jnp.finfo(jnp.float32).min)
        value = jnp.where(state.terminated, 0.0, value_scale * value).astype(jnp.float32)
        return logits, value, mask

    def root_fn(params, rng_key, state):
        del rng_key
        logits, value, mask = evaluate(params, state)
        return RootFnOutput(prior_logits=logits, value=value, embedding=state,
                            legal_action_mask=mask)

    def decision_fn(params, rng_key, action, state):
        del rng_key
        after = decision(state, action)
        _, v = apply_fn(params, after.state.observation)
        v = value_scale * v.astype(jnp.float32)
        v = jnp.where(after.roll, -v, v)
        v = jnp.where(after.state.terminated, after.reward, v)
        out = DecisionRecurrentFnOutput(chance_logits=jnp.log(dice_probs(after.roll)),
                                        afterstate_value=v)
        return out, after

    def chance_fn(params, rng_key, outcome, afterstate):
        del rng_key
        state = chance(afterstate, outcome)
        logits, value, mask = evaluate(params, state)
        terminal = state.terminated
        discount = jnp.where(terminal, 0.0, jnp.where(afterstate.roll, -1.0, 1.0))
        out = ChanceRecurrentFnOutput(
            action_logits=logits, value=value, reward=afterstate.reward, discount=discount,
            legal_action_mask=mask, terminal=terminal)
        return out, state

    return root_fn, decision_fn, chance_fn

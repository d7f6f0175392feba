"""Turn a policy-value network and an environment into search functions.

:func:`make_root_fn` and :func:`make_recurrent_fn` build, from

* ``apply_fn(params, obs [B, ...]) -> (logits [B, A], value [B])`` (e.g.
  ``functools.partial(jaxpuct.alphazero.networks.apply, graphdef)``), and
* an :class:`Environment` of batched, pure environment functions,

the ``root_fn(params, rng_key, state) -> RootFnOutput`` and
``recurrent_fn(params, rng_key, action [B], state) -> (RecurrentFnOutput,
new_state)`` of the search (the mctx signature), so that one ``jax.jit`` holds the
search, the network and the environment. The embedding is the environment state
itself: any pytree whose leaves have a leading ``[B]`` axis.

Conventions (those of :mod:`jaxpuct.types`, as in mctx's AlphaZero pgx example):

* values are from the view of the player to move at the state, so observations
  must be too; no ``current_player`` is needed;
* ``reward`` is the reward of the transition to the player who made the move;
* ``discount`` is ``-1`` between the two players of a zero-sum game (``1`` or a
  ``gamma`` for a single agent), and ``0`` after a terminal state;
* at a terminal state the value is ``0`` (the outcome is in the reward), no
  action is legal, and the flag ``terminal`` is set;
* illegal actions get the lowest finite logit, so their prior is 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from jaxpuct.envs.hashing import zobrist_hash
from jaxpuct.types import RecurrentFnOutput, RootFnOutput

__all__ = [
    "ApplyFn",
    "Environment",
    "make_recurrent_fn",
    "make_root_fn",
    "mask_logits",
    "zobrist_hash",
]

State = Any
Params = Any
ApplyFn = Callable[[Params, jax.Array], tuple[jax.Array, jax.Array]]


@dataclasses.dataclass(frozen=True)
class Environment:
    """Batched, pure functions of an environment (every state leaf is ``[B, ...]``).

    Attributes:
      step: ``(state, action [B] int32) -> state``, the state after the move.
      observe: ``state -> obs [B, ...]``, the network input, from the view of the
        player to move.
      legal_mask: ``state -> [B, A] bool``, ``True`` where an action is legal.
      terminal: ``state -> [B] bool``, ``True`` where the game is over.
      reward: ``(prev_state, state) -> [B] float``, the reward of the transition
        from ``prev_state`` to ``state`` to the player who moved in
        ``prev_state``. It takes both states because the mover is known from the
        state before the move (pgx, for example, keeps per-player rewards in the
        new state and the mover's id in the old one).
      state_hash: optional ``state -> [B, 2] uint32`` hash of the position,
        including the player to move (for graph search; see
        :func:`jaxpuct.envs.hashing.zobrist_hash`). ``None``: no hash is produced.
    """

    step: Callable[[State, jax.Array], State]
    observe: Callable[[State], jax.Array]
    legal_mask: Callable[[State], jax.Array]
    terminal: Callable[[State], jax.Array]
    reward: Callable[[State, State], jax.Array]
    state_hash: Callable[[State], jax.Array] | None = None


def mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Gives illegal actions the lowest finite logit (prior 0, and no NaN).

    Args:
      logits: ``[B, A]`` float.
      legal: ``[B, A]`` bool.

    Returns:
      ``[B, A]``: ``logits`` where legal, ``finfo.min`` elsewhere. A row with no
      legal action becomes uniform under softmax.
    """
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)


def _evaluate(apply_fn: ApplyFn, env: Environment, params: Params,
              state: State) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Network and rules at ``state``: ``(logits [B, A], value [B], legal [B, A],
    terminal [B])`` with the terminal conventions applied."""
    logits, value = apply_fn(params, env.observe(state))
    terminal = env.terminal(state).astype(bool)
    legal = env.legal_mask(state).astype(bool) & ~terminal[:, None]
    value = jnp.where(terminal, 0.0, value).astype(jnp.float32)
    return mask_logits(logits, legal), value, legal, terminal


def _hash(env: Environment, state: State) -> jax.Array | None:
    # Graph search reads ``state_hash``; tree search ignores it, and XLA drops the
    # unused computation.
    return None if env.state_hash is None else env.state_hash(state)


def make_root_fn(apply_fn: ApplyFn, env: Environment
                 ) -> Callable[[Params, jax.Array, State], RootFnOutput]:
    """Builds ``root_fn(params, rng_key, state) -> RootFnOutput``.

    The output has ``prior_logits [B, A]`` (illegal actions masked),
    ``value [B]`` (0 at a terminal state), ``embedding = state``,
    ``legal_action_mask [B, A]`` (all ``False`` at a terminal state, so a finished
    game is not searched) and ``state_hash [B, 2]`` when ``env.state_hash`` is
    set. ``rng_key`` is unused (the network is deterministic).
    """

    def root_fn(params: Params, rng_key: jax.Array, state: State) -> RootFnOutput:
        del rng_key
        logits, value, legal, _ = _evaluate(apply_fn, env, params, state)
        return RootFnOutput(prior_logits=logits, value=value, embedding=state,
                            legal_action_mask=legal, state_hash=_hash(env, state))

    return root_fn


def make_recurrent_fn(
    apply_fn: ApplyFn, env: Environment, *, discount: float = -1.0
) -> Callable[[Params, jax.Array, jax.Array, State], tuple[RecurrentFnOutput, State]]:
    """Builds ``recurrent_fn(params, rng_key, action [B], state) -> (out, new_state)``.

    Args:
      apply_fn: ``(params, obs [B, ...]) -> (logits [B, A], value [B])``.
      env: the environment functions.
      discount: between a node and its child while the game goes on: ``-1`` for
        two-player zero-sum games (values flip sign with the player to move),
        ``1`` (or ``gamma``) for single-agent games.

    The output has ``reward [B]`` (``env.reward``: to the mover),
    ``discount [B]`` (``discount``, or 0 when the new state is terminal, so that
    a search that expands terminal nodes, as mctx does, ignores what lies below
    them), ``prior_logits [B, A]`` (illegal masked), ``value [B]`` (0 when
    terminal), ``legal_action_mask [B, A]`` (all ``False`` when terminal),
    ``terminal [B]`` and ``state_hash [B, 2]`` when ``env.state_hash`` is set.
    ``rng_key`` is unused (deterministic environment and network).
    """

    def recurrent_fn(params: Params, rng_key: jax.Array, action: jax.Array,
                     state: State) -> tuple[RecurrentFnOutput, State]:
        del rng_key
        new_state = env.step(state, action.astype(jnp.int32))
        reward = env.reward(state, new_state).astype(jnp.float32)
        logits, value, legal, terminal = _evaluate(apply_fn, env, params, new_state)
        gamma = jnp.where(terminal, 0.0, jnp.float32(discount))
        out = RecurrentFnOutput(reward=reward, discount=gamma, prior_logits=logits,
                                value=value, legal_action_mask=legal, terminal=terminal,
                                state_hash=_hash(env, new_state))
        return out, new_state

    return recurrent_fn

"""Rollouts mixed into the leaf value, as in AlphaGo.

AlphaGo (Silver et al., "Mastering the game of Go with deep neural networks and
tree search", Nature 2016) evaluated each leaf ``s`` two ways: by the value
network ``v(s)`` and by the outcome ``z`` of a fast rollout from ``s`` to the end
of the game, and mixed them, ``V(s) = (1 - λ) v(s) + λ z`` with ``λ = 0.5``.

:func:`make_recurrent_fn` is :func:`jaxpuct.envs.adapter.make_recurrent_fn` with
that mix. The rollout runs inside ``recurrent_fn`` with the game's own batched
pure-JAX rules (an :class:`jaxpuct.envs.adapter.Environment`), one
``jax.lax.while_loop`` for the whole batch, so it stays inside the search's
``jax.jit``. Its policy is uniform over the legal actions by default, or the
softmax (or, ``greedy=True``, the argmax) of a given ``rollout_logits(state)``.
A rollout stops when the game ends or after ``max_steps`` moves; one cut short is
bootstrapped with the network's value there:

``z = sum_{t < T} g_t r_t + g_T v(s_T)`` with ``g_t = discount**t``,

the rewards ``r_t`` to the mover at step ``t`` seen from the player to move at
``s`` (``discount = -1`` flips the view every move in a two-player game), and the
last term only when ``s_T`` is not terminal. At a terminal leaf ``z = v = 0``
(its outcome is in the reward of the move that reached it), so ``V`` is the
leaf's own value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxpuct import prng
from jaxpuct.envs import adapter
from jaxpuct.envs.adapter import ApplyFn, Environment, mask_logits
from jaxpuct.tree import present

__all__ = ["DEFAULT_MIX", "make_recurrent_fn", "rollout_return"]

DEFAULT_MIX = 0.5  # AlphaGo's λ

State = Any
RolloutLogits = Callable[[State], jax.Array]


class _Carry(NamedTuple):
    """The rollout loop's state: every leaf ``[B]`` (or ``[B, ...]``)."""

    state: State
    done: jax.Array  # [B] bool: the game ended (or has no legal move)
    t: jax.Array  # () int32: moves played
    total: jax.Array  # [B] float32: discounted rewards so far, from the start's view
    sign: jax.Array  # [B] float32: discount**t


def _check(mix: float, max_steps: int) -> None:
    if not 0.0 <= mix <= 1.0:
        raise ValueError(f"mix must be in [0, 1] (the weight λ of the rollout), got {mix!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")


def rollout_return(apply_fn: ApplyFn, env: Environment, params: Any, state: State,
                   rng_key: jax.Array, *, max_steps: int,
                   rollout_logits: RolloutLogits | None = None, greedy: bool = False,
                   discount: float = -1.0) -> jax.Array:
    """The rollout outcome ``z [B]`` from ``state`` (leaves ``[B, ...]``).

    Args:
      apply_fn: ``(params, obs [B, ...]) -> (logits [B, A], value [B])``; only its
        value is used, at the states where a rollout is cut short.
      env: the game's batched rules.
      params: the network's parameters.
      state: where the rollouts start.
      rng_key: one key; the rollouts draw all their uniforms ``[max_steps, B]``
        from it at once (:func:`_uniforms`), move ``t`` of row ``b`` with
        ``u[t, b]``.
      max_steps: the most moves a rollout plays.
      rollout_logits: ``state -> [B, A]`` logits of the rollout policy (illegal
        actions are masked here); ``None``: uniform over the legal actions.
      greedy: play the argmax of the logits (lowest action on ties) instead of
        sampling.
      discount: per move; ``-1`` for two-player zero-sum games.

    Returns:
      ``[B]`` float32 ``z``, from the view of the player to move at ``state``.
    """
    _check(0.0, max_steps)
    gamma = jnp.float32(discount)

    def policy_logits(s: State, legal: jax.Array) -> jax.Array:
        if rollout_logits is None:
            logits = jnp.zeros(legal.shape, jnp.float32)
        else:
            logits = rollout_logits(s).astype(jnp.float32)
        return mask_logits(logits, legal)

    def sample(s: State, legal: jax.Array, u: jax.Array) -> jax.Array:
        # Inverse-CDF sampling with one uniform ``u [B]`` per row: the first action
        # whose cumulative weight exceeds ``u`` times the total. The uniforms of
        # every move are drawn before the loop, in one call: a key fold and a
        # categorical draw inside the loop ran the threefry hash (a loop of its
        # own on CPU) twice per move; the move's loop body fell from 51 kernels
        # and those two loops to 37 kernels (pgx connect four, B = 1).
        if rollout_logits is None:
            weights = legal.astype(jnp.float32)
        else:
            weights = jax.nn.softmax(policy_logits(s, legal), axis=-1)
            weights = jnp.where(legal, weights, 0.0)
        cumulative = jnp.cumsum(weights, axis=-1)
        threshold = u[:, None] * cumulative[:, -1:]
        return jnp.argmax(cumulative > threshold, axis=-1)

    def cond(c: _Carry) -> jax.Array:
        return (c.t < max_steps) & ~jnp.all(c.done)

    def body(c: _Carry) -> _Carry:
        legal = env.legal_mask(c.state).astype(bool)
        # A state with no legal move ends the rollout (as the search treats it).
        done = c.done | ~jnp.any(legal, axis=-1)
        if greedy:
            action = jnp.argmax(policy_logits(c.state, legal), axis=-1)
        else:
            draws = present(uniforms, "the rollout's uniforms")
            action = sample(c.state, legal, draws[jnp.minimum(c.t, max_steps - 1)])
        action = action.astype(jnp.int32)
        new_state = env.step(c.state, action)
        reward = env.reward(c.state, new_state).astype(jnp.float32)
        total = c.total + jnp.where(done, 0.0, c.sign * reward)
        # Finished games keep their last state: ``step`` on a terminal state is
        # not defined by every environment.
        state = jax.tree.map(
            lambda old, new: jnp.where(done.reshape(done.shape + (1,) * (old.ndim - 1)),
                                       old, new), c.state, new_state)
        done = done | env.terminal(new_state).astype(bool)
        return _Carry(state=state, done=done, t=c.t + 1, total=total,
                      sign=jnp.where(done, c.sign, c.sign * gamma))

    start_done = env.terminal(state).astype(bool)
    batch = start_done.shape[0]
    # Every move's uniform drawn at once, before the loop: one hash, no per-ply key.
    uniforms = None if greedy else prng.uniform(rng_key, (max_steps, batch))
    carry = _Carry(state=state, done=start_done, t=jnp.int32(0),
                   total=jnp.zeros((batch,), jnp.float32),
                   sign=jnp.ones((batch,), jnp.float32))
    carry = jax.lax.while_loop(cond, body, carry)
    # Cut short: bootstrap with the network's value; a finished rollout needs none.
    cut = ~carry.done & jnp.any(env.legal_mask(carry.state).astype(bool), axis=-1)
    value = jax.lax.cond(
        jnp.any(cut),
        lambda: apply_fn(params, env.observe(carry.state))[1].astype(jnp.float32),
        lambda: jnp.zeros((batch,), jnp.float32))
    return carry.total + jnp.where(cut, carry.sign * value, 0.0)


def make_recurrent_fn(apply_fn: ApplyFn, env: Environment, *, mix: float = DEFAULT_MIX,
                      max_steps: int = 256, rollout_logits: RolloutLogits | None = None,
                      greedy: bool = False, discount: float = -1.0,
                      rollout_env: Environment | None = None,
                      rollout_state: Callable[[State], State] | None = None) -> Callable:
    """:func:`jaxpuct.envs.adapter.make_recurrent_fn` whose leaf value is
    ``(1 - mix) * v + mix * z`` (AlphaGo's ``λ = mix``).

    Args:
      apply_fn: ``(params, obs [B, ...]) -> (logits [B, A], value [B])``.
      env: the game's batched rules.
      mix: ``λ`` in ``[0, 1]``; ``0`` is exactly the adapter's function (no
        rollout is played).
      max_steps: moves per rollout before bootstrapping (see
        :func:`rollout_return`).
      rollout_logits, greedy, discount: as in :func:`rollout_return`
        (``rollout_logits`` reads the rollout's states).
      rollout_env: other rules of the same game for the rollouts alone (cheaper
        ones, e.g. :func:`jaxpuct.envs.connect_four.environment` beside pgx's), with
        ``rollout_state``, the map from ``env``'s states to theirs (e.g.
        :func:`jaxpuct.envs.connect_four.from_pgx`). Both or neither; ``None``:
        ``env`` plays the rollouts. The tree keeps ``env``'s states.

    Returns:
      ``recurrent_fn(params, rng_key, action [B], state) -> (out, new_state)``;
      the rollouts sample with ``rng_key``, which the search passes anew each
      simulation. Only ``out.value`` differs from the adapter's; at a terminal
      state it stays 0.

    Raises:
      ValueError: ``mix`` or ``max_steps`` out of range, or only one of
        ``rollout_env`` and ``rollout_state`` given.
    """
    _check(mix, max_steps)
    if (rollout_env is None) != (rollout_state is None):
        raise ValueError("rollout_env and rollout_state go together (other rules for the "
                         "rollouts and the map from the tree's states to theirs), got "
                         f"rollout_env={'set' if rollout_env is not None else None} and "
                         f"rollout_state={'set' if rollout_state is not None else None}")
    base = adapter.make_recurrent_fn(apply_fn, env, discount=discount)
    if mix == 0.0:
        return base
    played_by = env if rollout_env is None else rollout_env

    def recurrent_fn(params: Any, rng_key: jax.Array, action: jax.Array, state: State):
        out, new_state = base(params, rng_key, action, state)
        start = new_state if rollout_state is None else rollout_state(new_state)
        z = rollout_return(apply_fn, played_by, params, start, rng_key, max_steps=max_steps,
                           rollout_logits=rollout_logits, greedy=greedy, discount=discount)
        terminal = False if out.terminal is None else out.terminal
        value = jnp.where(terminal, out.value, (1.0 - mix) * out.value + mix * z)
        return out.replace(value=value.astype(jnp.float32)), new_state

    return recurrent_fn

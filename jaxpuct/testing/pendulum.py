"""Pendulum swing-up in JAX: the dynamics of Gymnasium's ``Pendulum-v1``.

The continuous-control problem of sampled search: one torque ``u`` in
``[-2, 2]`` per step, 200 steps an episode, reward ``-(θ² + 0.1 θ̇² + 0.001 u²)``
with ``θ`` the angle from upright normalised to ``[-π, π)``. The equations
(semi-implicit Euler, ``dt = 0.05``, ``g = 10``, ``m = l = 1``, speed clipped to
``[-8, 8]``) follow the Gymnasium documentation of ``Pendulum-v1``: a policy
that scores ``R`` here scores ``R`` there from the same start. Gymnasium draws
the start uniformly from ``θ ∈ [-π, π]``, ``θ̇ ∈ [-1, 1]``; :func:`reset` does
the same from a JAX key. Good controllers reach a mean return of about -150
(the swing-up from hanging down costs about -300 to -400 alone; starts near the
top cost almost nothing).

Everything is batched over a leading ``[B]`` axis and jit-safe.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["DT", "EPISODE_STEPS", "MAX_SPEED", "MAX_TORQUE", "OBS_SIZE", "State",
           "angle_normalize", "observe", "reset", "step"]

MAX_SPEED = 8.0
MAX_TORQUE = 2.0
DT = 0.05
GRAVITY = 10.0
MASS = 1.0
LENGTH = 1.0
EPISODE_STEPS = 200
OBS_SIZE = 3


class State(NamedTuple):
    """``theta [B]`` (0 upright) and ``theta_dot [B]``, float32."""

    theta: jax.Array
    theta_dot: jax.Array


def angle_normalize(x: jax.Array) -> jax.Array:
    """``x`` wrapped to ``[-π, π)``."""
    return (x + jnp.pi) % (2 * jnp.pi) - jnp.pi


def reset(key: jax.Array, batch: int) -> State:
    """``B`` starts: ``θ ~ U[-π, π]``, ``θ̇ ~ U[-1, 1]`` (Gymnasium's)."""
    high = jnp.array([jnp.pi, 1.0], jnp.float32)
    x = jax.random.uniform(key, (batch, 2), jnp.float32, -high, high)
    return State(theta=x[:, 0], theta_dot=x[:, 1])


def observe(state: State) -> jax.Array:
    """``[B, 3]``: ``cos θ, sin θ, θ̇`` (Gymnasium's observation)."""
    return jnp.stack([jnp.cos(state.theta), jnp.sin(state.theta), state.theta_dot], axis=-1)


def step(state: State, torque: jax.Array) -> tuple[State, jax.Array]:
    """One step of ``torque [B]`` or ``[B, 1]`` (clipped to ``[-2, 2]``):
    ``(next state, reward [B])``, the reward ``-cost`` of the state *before* the
    step and the applied torque, as Gymnasium computes it."""
    u = jnp.clip(jnp.reshape(torque, state.theta.shape), -MAX_TORQUE, MAX_TORQUE)
    th, thdot = state.theta, state.theta_dot
    cost = angle_normalize(th) ** 2 + 0.1 * thdot ** 2 + 0.001 * u ** 2
    new_thdot = thdot + (3 * GRAVITY / (2 * LENGTH) * jnp.sin(th)
                         + 3.0 / (MASS * LENGTH ** 2) * u) * DT
    new_thdot = jnp.clip(new_thdot, -MAX_SPEED, MAX_SPEED)
    new_th = th + new_thdot * DT
    return State(theta=new_th.astype(jnp.float32),
                 theta_dot=new_thdot.astype(jnp.float32)), (-cost).astype(jnp.float32)

"""The targets of a ``K``-step unroll: n-step values, rewards and search policies.

MuZero (Schrittwieser et al. 2020, "MuZero Algorithm" and appendix G) trains
the unrolled model at positions ``t + k``, ``k = 0..K``, on

* the value target ``z_{t+k} = sum_{i<n} d**i u_{t+k+i} + d**n v_{t+k+n}``,
  ``u_j`` the reward of the step taken at ``j`` and ``v_j`` the root search
  value at ``j``; ``d = gamma`` for one player and ``d = -gamma`` for two
  players taking turns (each reward and value is from the view of its own
  mover, so a ply changes the sign);
* the reward target of unroll step ``k >= 1``: ``u_{t+k-1}``, the reward of the
  ``k``-th unrolled action (LightZero's ``target_reward[:, k - 1]``; the v1
  pseudocode's index is one off);
* the policy target ``pi_{t+k}``: the root search policy stored at ``t + k``:
  a distribution over all ``A`` actions, or, from a sampled search (Sampled
  MuZero, Hubert et al. 2021), weights over the ``K`` actions it sampled there,
  stored with their ids (``policy_actions``).

Past an episode's end the unroll continues in an *absorbing* state, as the
paper says ("states past the end of games are treated as absorbing states"):
value target 0, reward target 0 (both trained, so the model learns that
nothing more comes), and **no policy loss** (the pseudocode's empty policy
target; here a ``policy_mask`` of ``False``); muzero-general trains a uniform
policy there instead, LightZero a zero one. The actions unrolled past the end
are drawn uniformly by :mod:`.replay` (as muzero-general and LightZero do), so
the model does not learn anything from the next episode's moves. An n-step sum
stops at the end: rewards after it are 0 and the bootstrap value is 0 when
``t + k + n`` is past it.

*Truncation* (an episode cut by a time limit, Gymnasium's ``truncated``, as
Pendulum's 200 steps) is not an end of the task: the n-step sum that reaches a
truncated last step ``j`` bootstraps there with ``d**(j - t' + 1) v_end``,
``v_end`` the value of the state after ``j`` (Pardo et al. 2018, "Time Limits in
Reinforcement Learning"), and past it nothing is trained, since the
continuation is unknown: ``value_mask`` is ``False`` there (and for the rewards
of the unroll steps after the first one past it), where a terminal end trains
the absorbing zeros.

Layout: a *window* of ``W = K + n + 1`` consecutive buffer rows from the start
position; row ``j`` holds the step taken at ``t + j``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["UnrollTargets", "alive_mask", "n_step_values", "unroll_targets", "window_length"]


class UnrollTargets(NamedTuple):
    """Targets of one unroll of ``K`` steps for a batch of ``B`` start positions.

    Attributes:
      value: ``[B, K + 1]`` n-step value targets (0 past the end).
      reward: ``[B, K + 1]`` reward targets; ``reward[:, k]`` is that of unroll
        step ``k`` (the ``k``-th action); ``reward[:, 0]`` is 0 and unused.
      policy: ``[B, K + 1, P]`` search policies (0 past the end): ``P = A``, a
        weight per action, or ``P`` = the sampled search's samples per node, a
        weight per sampled action.
      policy_mask: ``[B, K + 1]`` bool, positions inside the episode (the policy
        loss is taken there only).
      policy_actions: the actions the weights of ``policy`` refer to (a sampled
        search's ``sampled_actions``): ``[B, K + 1, P]`` int32 ids (a slot the
        search could not fill has weight 0 and a placeholder id) or ``[B, K + 1,
        P, D]`` float32 vectors of a continuous space; ``None`` when ``policy`` is
        over all ``A`` actions.
      value_mask: ``[B, K + 1]`` bool, positions whose value target is known:
        inside the episode or past a terminal end (``False`` past a truncated
        one, module docstring); unroll step ``k``'s reward target is known where
        ``value_mask[:, k - 1]``. ``None``: all known.
    """

    value: jax.Array
    reward: jax.Array
    policy: jax.Array
    policy_mask: jax.Array
    policy_actions: jax.Array | None = None
    value_mask: jax.Array | None = None


def window_length(unroll_steps: int, td_steps: int) -> int:
    """``W = K + n + 1``: rows of a window, for ``z`` up to ``t + K``."""
    return unroll_steps + td_steps + 1


def alive_mask(episode_end: jax.Array, filled: jax.Array) -> jax.Array:
    """``[B, W]`` bool: window rows that are steps of the start row's episode.

    Args:
      episode_end: ``[B, W]`` bool, the step at that row ended its episode.
      filled: ``[B, W]`` bool, the row holds data at all.

    Row 0 is alive if filled; row ``j`` if filled and no row before it ended the
    episode.
    """
    ended = jnp.cumsum(episode_end.astype(jnp.int32), axis=-1) - episode_end.astype(jnp.int32)
    return filled & (ended == 0)


def n_step_values(rewards: jax.Array, values: jax.Array, episode_end: jax.Array,
                  valid: jax.Array, discount: float, td_steps: int,
                  end_value: jax.Array | None = None) -> jax.Array:
    """n-step bootstrapped values at every position of ``[B, L]`` sequences.

    ``z_j = sum_{i<n} d**i u_{j+i} + d**n v_{j+n}``, where a term counts only
    while its row is valid and no row in ``[j, j+i)`` ended the episode (and rows
    at ``j+i >= L`` count as past the end); where row ``j + i`` (``i < n``) ends
    the episode, ``d**(i+1) end_value_{j+i}`` is added (0 for a terminal end; the
    bootstrap of a truncated one).

    Args:
      rewards: ``[B, L]`` ``u_j``, the reward of the step taken at ``j``.
      values: ``[B, L]`` ``v_j``, the root search values.
      episode_end: ``[B, L]`` bool, the step taken at ``j`` ended the episode.
      valid: ``[B, L]`` bool, rows holding steps (the others are past an end).
      discount: ``d``, signed (``-gamma`` for two players taking turns).
      td_steps: ``n`` >= 1.
      end_value: ``[B, L]`` the value after a row that ends its episode, from the
        view of the player to move then (read only at valid ending rows), or
        ``None`` (0: every end terminal).

    Returns:
      ``[B, L]`` float32, 0 where not ``valid``.
    """
    batch, length = rewards.shape
    valid = valid.astype(jnp.bool_)

    def pad(x, fill):
        return jnp.concatenate([x, jnp.full((batch, td_steps), fill, x.dtype)], axis=-1)

    rewards = pad(jnp.where(valid, rewards, 0.0).astype(jnp.float32), 0.0)
    values = pad(jnp.where(valid, values, 0.0).astype(jnp.float32), 0.0)
    ends = episode_end.astype(jnp.bool_) & valid
    stop = pad(ends | ~valid, True)
    after_end = None if end_value is None else pad(
        jnp.where(ends, end_value, 0.0).astype(jnp.float32), 0.0)
    total = jnp.zeros((batch, length), jnp.float32)
    running = valid  # [B, L]: row j + i is still in j's episode
    scale = 1.0
    # n is small (5-10 in the paper): a Python loop of shifted slices.
    for i in range(td_steps):
        total = total + scale * jnp.where(running, rewards[:, i:i + length], 0.0)
        if after_end is not None:
            total = total + scale * discount * jnp.where(running, after_end[:, i:i + length],
                                                         0.0)
        running = running & ~stop[:, i:i + length]
        scale = scale * discount
    total = total + scale * jnp.where(running, values[:, td_steps:td_steps + length], 0.0)
    return jnp.where(valid, total, 0.0)


def unroll_targets(rewards: jax.Array, values: jax.Array, policies: jax.Array,
                   episode_end: jax.Array, filled: jax.Array, discount: float,
                   unroll_steps: int, td_steps: int,
                   policy_actions: jax.Array | None = None,
                   truncated: jax.Array | None = None,
                   end_value: jax.Array | None = None) -> UnrollTargets:
    """The targets of ``K`` unroll steps from windows of ``W = K + n + 1`` rows.

    Args:
      rewards: ``[B, W]`` rewards of the steps taken at ``t + j``.
      values: ``[B, W]`` root search values.
      policies: ``[B, W, P]`` root search policies.
      episode_end: ``[B, W]`` bool.
      filled: ``[B, W]`` bool, rows holding data.
      discount: signed ``d``.
      unroll_steps: ``K`` >= 1.
      td_steps: ``n`` >= 1.
      policy_actions: ``[B, W, P]`` int32 ids or ``[B, W, P, D]`` vectors of a
        sampled search's policies, or ``None`` (policies over all actions).
      truncated: ``[B, W]`` bool, the row's step ended its episode by truncation,
        or ``None`` (no truncation; ``value_mask`` is then ``None``).
      end_value: ``[B, W]`` the value after a truncated row (needs ``truncated``).

    Returns:
      :class:`UnrollTargets` (module docstring for the absorbing steps).
    """
    width = window_length(unroll_steps, td_steps)
    if rewards.shape[-1] != width:
        raise ValueError(f"windows must have K + n + 1 = {width} rows, got shape "
                         f"{tuple(rewards.shape)}.")
    alive = alive_mask(episode_end, filled)
    value_mask = None
    if truncated is not None:
        cut = alive & episode_end.astype(jnp.bool_) & truncated.astype(jnp.bool_)
        end_value = jnp.where(cut, 0.0 if end_value is None else end_value, 0.0)
        # A position is unknown once a truncated end lies strictly before it.
        value_mask = (jnp.cumsum(cut.astype(jnp.int32), axis=-1) - cut.astype(jnp.int32)) == 0
        value_mask = value_mask[:, :unroll_steps + 1]
    elif end_value is not None:
        raise ValueError("end_value needs truncated (the rows it belongs to).")
    z = n_step_values(rewards, values, episode_end, alive, discount, td_steps,
                      end_value=end_value)
    k1 = unroll_steps + 1
    # Unroll step k's reward is that of the step taken at t + k - 1.
    step_rewards = jnp.where(alive[:, :unroll_steps], rewards[:, :unroll_steps], 0.0)
    reward = jnp.concatenate([jnp.zeros_like(step_rewards[:, :1]), step_rewards], axis=-1)
    policy_mask = alive[:, :k1]
    policy = jnp.where(policy_mask[..., None], policies[:, :k1], 0.0)
    if policy_actions is not None:
        if policy_actions.shape[:policies.ndim] != policies.shape or not (
                policy_actions.ndim == policies.ndim
                or (policy_actions.ndim == policies.ndim + 1
                    and jnp.issubdtype(policy_actions.dtype, jnp.floating))):
            raise ValueError(f"policy_actions must be ids of the shape of policies "
                             f"{tuple(policies.shape)} or float vectors [..., D] over it, got "
                             f"{policy_actions.dtype}{list(policy_actions.shape)}.")
        policy_actions = policy_actions[:, :k1]
        if policy_actions.ndim == policies.ndim:
            policy_actions = policy_actions.astype(jnp.int32)
    return UnrollTargets(value=z[:, :k1], reward=reward.astype(jnp.float32),
                         policy=policy.astype(jnp.float32), policy_mask=policy_mask,
                         policy_actions=policy_actions, value_mask=value_mask)

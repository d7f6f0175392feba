"""A ring buffer of trajectory steps on the device, sampled as ``K``-step windows.

Each row is one step ``t`` of an episode: the observation ``o_t``, the action
``a_t`` taken (an id, or a vector ``[D]`` of a continuous space), its reward
``u_{t+1}`` (from the mover's view), the root search policy ``pi_t`` (over all
actions, or a sampled search's weights over its sampled actions, stored with
them) and value ``v_t``, the root's legal mask (a new search there,
:mod:`.reanalyse`, needs it; none for continuous actions), whether the step ended
the episode, whether that end was a truncation (a time limit) and the value
after it (:mod:`.targets`), and a priority. Episodes are written whole and
contiguously, one after another, with jitted scatters (the buffer is a pytree
of fixed-size arrays that can be donated); the oldest rows are overwritten
first.

Because every written trajectory ends with an ``episode_end`` row (the write
marks the last written step so), a window of consecutive rows from any filled
row stays inside its episode until an ``episode_end`` and never reads across
the write position into older data: :func:`.targets.alive_mask` cuts it there.
Write finished episodes: a trajectory written before its end is treated as
ending at its last written step (value 0 after it).

Sampling: ``B`` start rows, uniformly, or prioritised (Schaul et al. 2016, as
MuZero uses on Atari, appendix G): ``P(i) = p_i**alpha / sum_j p_j**alpha`` with
``p_i = |v_i - z_i|`` the distance between the stored root value and its n-step
target, and importance weights ``w_i = (M P(i))**-beta / max_batch w`` (``M``
filled rows). MuZero uses ``alpha = beta = 1``; LightZero 0.6 and 0.4.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxpuct._dataclass import Replaceable, mutable_pytree_dataclass
from jaxpuct.muzero.targets import UnrollTargets, n_step_values, unroll_targets, window_length

__all__ = ["Batch", "TrajectoryBuffer", "empty_buffer", "filled_rows", "sample",
           "trajectory_priorities", "update_priorities", "window_rows", "window_targets",
           "write_episodes"]

_INT32_MAX = 2**31 - 1
# Added to every priority so that a row whose target was met exactly can still
# be drawn (Schaul et al.'s small positive constant).
PRIORITY_EPSILON = 1e-6


@mutable_pytree_dataclass
class TrajectoryBuffer(Replaceable):
    """Rows ``[0, min(num_added, N))`` are filled; row ``next_row - 1`` is the newest.

    Attributes:
      obs: ``[N, ...]`` observations ``o_t``.
      action: ``[N]`` int32 action taken at ``t``, or ``[N, D]`` float32 for
        continuous actions.
      reward: ``[N]`` float32 its reward, from the mover's view.
      policy: ``[N, P]`` float32 root search policy: over all ``A`` actions
        (``P = A``), or a sampled search's weights over its ``P = K`` sampled
        actions.
      root_value: ``[N]`` float32 root search value, from the view of the player
        to move at ``t``.
      legal: ``[N, A]`` bool legal actions at ``o_t`` (all ``True`` where the
        writer gave none, all ``False`` in rows never written); ``[N, 0]`` for
        continuous actions.
      episode_end: ``[N]`` bool, the step ended the episode.
      priority: ``[N]`` float32 ``p_i`` (> 0 where filled).
      truncated: ``[N]`` bool, the step ended its episode by truncation.
      end_value: ``[N]`` float32, the value of the state after a truncated step
        (0 elsewhere).
      next_row: ``[]`` int32.
      num_added: ``[]`` int32, saturating at ``2**31 - 1``.
      policy_actions: the sampled actions ``policy`` weighs: ``[N, K]`` int32 ids
        (a slot the search could not fill: weight 0, placeholder id) or ``[N, K,
        D]`` float32 vectors; ``None`` when ``policy`` is over all actions.
    """

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    policy: jax.Array
    root_value: jax.Array
    legal: jax.Array
    episode_end: jax.Array
    priority: jax.Array
    truncated: jax.Array
    end_value: jax.Array
    next_row: jax.Array
    num_added: jax.Array
    policy_actions: jax.Array | None = None

    @property
    def size(self) -> int:
        return self.action.shape[0]

    @property
    def num_actions(self) -> int:
        """``A``, the width of the legal masks (``policy``'s is ``K`` when sampled;
        0 for continuous actions)."""
        return self.legal.shape[-1]

    @property
    def action_dim(self) -> int | None:
        """``D`` of continuous actions, or ``None`` for ids."""
        return self.action.shape[1] if self.action.ndim == 2 else None


class Batch(NamedTuple):
    """A sampled minibatch of ``B`` unrolls of ``K`` steps.

    Attributes:
      obs: ``[B, ...]`` observations at the start rows.
      actions: ``[B, K]`` int32 actions to unroll (uniform draws past an
        episode's end), or ``[B, K, D]`` float32 vectors (standard normal
        draws past an end).
      targets: :class:`.targets.UnrollTargets`.
      weights: ``[B]`` float32 importance weights (1 when uniform).
      index: ``[B]`` int32 start rows (for :func:`update_priorities`).
      next_obs: ``[B, K, ...]`` the observations ``o_{t+1} .. o_{t+K}`` at the
        window's next rows (:func:`sample` with ``next_observations``; the
        targets of the consistency loss), or ``None``. Row ``k - 1`` is an
        observation of the start row's episode only where
        ``targets.policy_mask[:, k]``.
    """

    obs: jax.Array
    actions: jax.Array
    targets: UnrollTargets
    weights: jax.Array
    # Shadows tuple.index on purpose: the name is the sampled rows' index.
    index: jax.Array  # pyright: ignore[reportIncompatibleMethodOverride]
    next_obs: jax.Array | None = None


def empty_buffer(size: int, obs_shape: tuple[int, ...], obs_dtype, num_actions: int,
                 num_samples: int | None = None, action_dim: int | None = None
                 ) -> TrajectoryBuffer:
    """A buffer of ``size`` rows, none filled.

    Args:
      num_actions: ``A`` of a discrete space (0 with ``action_dim``).
      num_samples: ``K``: the policies are a sampled search's (``policy [N, K]``
        and ``policy_actions [N, K]``, or ``[N, K, D]`` with ``action_dim``).
      action_dim: ``D``: actions are float vectors ``[D]`` (a continuous space,
        searched by a sampled search, so ``num_samples`` is required).
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size!r}.")
    if action_dim is not None:
        if action_dim < 1 or num_actions != 0 or num_samples is None or num_samples < 1:
            raise ValueError(f"continuous actions (action_dim = {action_dim!r}, which must be "
                             f">= 1) need num_actions = 0 and num_samples >= 1, got "
                             f"num_actions = {num_actions!r}, num_samples = {num_samples!r}.")
    elif num_samples is not None and not 1 <= num_samples <= num_actions:
        raise ValueError(f"num_samples must be in [1, num_actions = {num_actions}], got "
                         f"{num_samples!r}.")
    width = num_actions if num_samples is None else num_samples
    if action_dim is None:
        action = jnp.zeros((size,), jnp.int32)
        policy_actions = (None if num_samples is None
                          else jnp.full((size, width), -1, jnp.int32))
    else:
        action = jnp.zeros((size, action_dim), jnp.float32)
        policy_actions = jnp.zeros((size, width, action_dim), jnp.float32)
    return TrajectoryBuffer(
        obs=jnp.zeros((size, *obs_shape), obs_dtype),
        action=action,
        reward=jnp.zeros((size,), jnp.float32),
        policy=jnp.zeros((size, width), jnp.float32),
        policy_actions=policy_actions,
        root_value=jnp.zeros((size,), jnp.float32),
        legal=jnp.zeros((size, num_actions), jnp.bool_),
        episode_end=jnp.zeros((size,), jnp.bool_),
        priority=jnp.zeros((size,), jnp.float32),
        truncated=jnp.zeros((size,), jnp.bool_),
        end_value=jnp.zeros((size,), jnp.float32),
        next_row=jnp.zeros((), jnp.int32),
        num_added=jnp.zeros((), jnp.int32))


def filled_rows(buffer: TrajectoryBuffer) -> jax.Array:
    """``[]`` int32: rows holding data."""
    return jnp.minimum(buffer.num_added, buffer.size)


def last_written(written: jax.Array) -> jax.Array:
    """``[B, T]`` bool: the last ``True`` of each row of ``written [B, T]``."""
    later = jnp.cumsum(written[:, ::-1].astype(jnp.int32), axis=-1)[:, ::-1]
    return written & (later == 1)


def trajectory_priorities(reward: jax.Array, root_value: jax.Array,
                          episode_end: jax.Array, written: jax.Array, discount: float,
                          td_steps: int, truncated: jax.Array | None = None,
                          truncation_value: jax.Array | None = None) -> jax.Array:
    """``[B, T]`` priorities ``|v_t - z_t| + 1e-6`` of trajectories ``[B, T]``
    (module docstring), with the ends (and truncations ``[B]``) as
    :func:`write_episodes` marks them."""
    last = last_written(written)
    end = episode_end.astype(jnp.bool_) | last
    end_value = _end_values(last, truncated, truncation_value)
    z = n_step_values(reward, root_value, end, written, discount, td_steps,
                      end_value=None if truncated is None else end_value)
    return jnp.abs(root_value - z) + PRIORITY_EPSILON


def _end_values(last: jax.Array, truncated: jax.Array | None,
                truncation_value: jax.Array | None) -> jax.Array:
    """``[B, T]``: ``truncation_value [B]`` at the last written step of each
    truncated trajectory, 0 elsewhere."""
    if truncated is None:
        if truncation_value is not None:
            raise ValueError("truncation_value needs truncated (which trajectories it "
                             "belongs to).")
        return jnp.zeros(last.shape, jnp.float32)
    cut = last & truncated.astype(jnp.bool_)[:, None]
    value = 0.0 if truncation_value is None else truncation_value[:, None]
    return jnp.where(cut, value, 0.0).astype(jnp.float32)


def write_episodes(buffer: TrajectoryBuffer, obs: jax.Array, action: jax.Array,
                   reward: jax.Array, policy: jax.Array, root_value: jax.Array,
                   episode_end: jax.Array, written: jax.Array,
                   priority: jax.Array | None = None,
                   legal: jax.Array | None = None,
                   policy_actions: jax.Array | None = None,
                   truncated: jax.Array | None = None,
                   truncation_value: jax.Array | None = None) -> TrajectoryBuffer:
    """Appends the written steps of ``B`` trajectories, episode after episode.

    Args:
      obs, action, reward, policy, root_value, episode_end: ``[B, T, ...]`` the
        fields of :class:`TrajectoryBuffer` for ``B`` trajectories of ``T`` steps.
      written: ``[B, T]`` bool, the steps to append (a prefix of each row: the
        episode's steps; its last one is marked ``episode_end``).
      priority: ``[B, T]`` priorities (e.g. :func:`trajectory_priorities`), or
        ``None`` for the largest one in the buffer (1 in an empty buffer), so
        that new rows are drawn soon (Schaul et al. 2016).
      legal: ``[B, T, A]`` bool legal actions at each step's observation, or
        ``None`` for all legal (then a reanalysing search may pick any action at
        the root).
      policy_actions: ``[B, T, K]`` int32 sampled action ids (``[B, T, K, D]``
        vectors) of ``policy``; given exactly when the buffer holds a sampled
        search's policies.
      truncated: ``[B]`` bool, the trajectory's last written step was cut by a
        time limit, not an end of the task (``None``: none was).
      truncation_value: ``[B]`` the value of the state after a truncated
        trajectory's last step, from the view of the player to move there (the
        bootstrap of its n-step targets; e.g. the network's value there; ``None``
        with ``truncated``: 0).

    Returns:
      The buffer with the steps at ``next_row, next_row + 1, ...`` (mod ``N``).
    """
    batch, steps = written.shape
    n = buffer.size
    if (policy_actions is None) != (buffer.policy_actions is None):
        raise ValueError("policy_actions must be given exactly when the buffer holds a "
                         "sampled search's policies (empty_buffer(num_samples=K)); the buffer "
                         f"{'does' if buffer.policy_actions is not None else 'does not'}.")
    written = written.astype(jnp.bool_)
    last = last_written(written)
    episode_end = episode_end.astype(jnp.bool_) | last
    end_value = _end_values(last, truncated, truncation_value)
    cut = (jnp.zeros_like(last) if truncated is None
           else last & truncated.astype(jnp.bool_)[:, None])
    if priority is None:
        top = jnp.max(buffer.priority)
        priority = jnp.full((batch, steps), jnp.where(top > 0, top, 1.0))
    if legal is None:
        legal = jnp.ones((batch, steps, buffer.num_actions), jnp.bool_)
    flat = written.reshape(-1)
    offsets = jnp.cumsum(flat) - 1
    # Steps not written go to row n, out of bounds, and are dropped.
    index = jnp.where(flat, (buffer.next_row + offsets) % n, n)
    num_new = jnp.sum(flat).astype(jnp.int32)

    def put(dest, src):
        src = src.reshape(batch * steps, *src.shape[2:]).astype(dest.dtype)
        return dest.at[index].set(src, mode="drop")

    return TrajectoryBuffer(
        obs=put(buffer.obs, obs), action=put(buffer.action, action),
        reward=put(buffer.reward, reward), policy=put(buffer.policy, policy),
        root_value=put(buffer.root_value, root_value), legal=put(buffer.legal, legal),
        episode_end=put(buffer.episode_end, episode_end),
        priority=put(buffer.priority, priority),
        truncated=put(buffer.truncated, cut), end_value=put(buffer.end_value, end_value),
        next_row=(buffer.next_row + num_new) % n,
        num_added=jnp.minimum(buffer.num_added, _INT32_MAX - num_new) + num_new,
        policy_actions=(None if buffer.policy_actions is None
                        else put(buffer.policy_actions, policy_actions)))


def update_priorities(buffer: TrajectoryBuffer, index: jax.Array,
                      priority: jax.Array) -> TrajectoryBuffer:
    """New priorities ``[B]`` at rows ``index [B]`` (e.g. after a training step)."""
    return buffer.replace(priority=buffer.priority.at[index].set(
        jnp.maximum(priority, PRIORITY_EPSILON)))


def window_rows(buffer: TrajectoryBuffer, start: jax.Array, unroll_steps: int,
                td_steps: int) -> tuple[jax.Array, jax.Array]:
    """The rows of the windows from ``start [B]``: ``(index [B, W], filled [B, W])``,
    ``W = K + n + 1``; ``filled`` marks the rows that hold data."""
    n, filled = buffer.size, filled_rows(buffer)
    offsets = jnp.arange(window_length(unroll_steps, td_steps))
    index = (start[:, None] + offsets) % n  # [B, W]
    # In a buffer not yet full the rows past the newest are empty; a full
    # buffer's rows wrap around (writes are contiguous mod N).
    return index, (start[:, None] + offsets < filled) | (filled == n)


def sample(buffer: TrajectoryBuffer, rng: jax.Array, batch_size: int, unroll_steps: int,
           td_steps: int, discount: float, alpha: float = 0.0, beta: float = 1.0,
           next_observations: bool = False) -> Batch:
    """``batch_size`` start rows and the windows of their unrolls.

    Args:
      buffer: a buffer with at least one filled row.
      rng: one key.
      batch_size: ``B``.
      unroll_steps: ``K`` >= 1.
      td_steps: ``n`` >= 1.
      discount: signed ``d`` (``-gamma`` for two players taking turns).
      alpha: prioritisation exponent; 0 samples uniformly (static).
      beta: importance-weight exponent (used when ``alpha > 0``).
      next_observations: also gather ``Batch.next_obs``, the observations of the
        window's next ``K`` rows (static).

    Returns:
      :class:`Batch`.
    """
    start_key, action_key = jax.random.split(rng)
    n, filled = buffer.size, filled_rows(buffer)
    rows = jnp.arange(n)
    if alpha > 0:
        # Inverse-CDF sampling: one cumulative sum over the rows, then a binary
        # search per draw, O(N + B log N) (a categorical draw would be O(B N)).
        mass = jnp.where(rows < filled,
                         jnp.maximum(buffer.priority, PRIORITY_EPSILON) ** alpha, 0.0)
        cdf = jnp.cumsum(mass)
        u = jax.random.uniform(start_key, (batch_size,)) * cdf[-1]
        start = jnp.minimum(jnp.searchsorted(cdf, u, side="right"), jnp.maximum(filled - 1, 0))
        prob = mass[start] / cdf[-1]
        log_w = -beta * jnp.log(filled.astype(jnp.float32) * prob)
        weights = jnp.exp(log_w - jnp.max(log_w))
    else:
        start = jax.random.randint(start_key, (batch_size,), 0, jnp.maximum(filled, 1))
        weights = jnp.ones((batch_size,), jnp.float32)
    index, filled_window = window_rows(buffer, start, unroll_steps, td_steps)
    targets = window_targets(buffer, index, filled_window, discount, unroll_steps, td_steps)
    stored = buffer.action[index[:, :unroll_steps]]
    if buffer.action_dim is None:
        random_actions = jax.random.randint(action_key, (batch_size, unroll_steps), 0,
                                            buffer.num_actions)
    else:
        random_actions = jax.random.normal(action_key, stored.shape)
    # Actions are unrolled where their step is in the episode, random after.
    inside = targets.policy_mask[:, :unroll_steps].reshape(
        batch_size, unroll_steps, *(1,) * (stored.ndim - 2))
    actions = jnp.where(inside, stored, random_actions).astype(buffer.action.dtype)
    next_obs = buffer.obs[index[:, 1:unroll_steps + 1]] if next_observations else None
    return Batch(obs=buffer.obs[start], actions=actions, targets=targets,
                 weights=weights, index=start.astype(jnp.int32), next_obs=next_obs)


def window_targets(buffer: TrajectoryBuffer, index: jax.Array, filled: jax.Array,
                   discount: float, unroll_steps: int, td_steps: int,
                   policies: jax.Array | None = None, values: jax.Array | None = None,
                   policy_actions: jax.Array | None = None) -> UnrollTargets:
    """:func:`.targets.unroll_targets` of the windows at rows ``index [B, W]``
    (``filled [B, W]``), from the stored fields, or from ``policies [B, W, P]``,
    ``values [B, W]`` and ``policy_actions`` where given (:mod:`.reanalyse`)."""
    if policy_actions is None and buffer.policy_actions is not None:
        policy_actions = buffer.policy_actions[index]
    return unroll_targets(
        buffer.reward[index], buffer.root_value[index] if values is None else values,
        buffer.policy[index] if policies is None else policies, buffer.episode_end[index],
        filled, discount, unroll_steps, td_steps, policy_actions=policy_actions,
        truncated=buffer.truncated[index], end_value=buffer.end_value[index])

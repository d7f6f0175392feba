"""Reanalyse: fresh policy and value targets for part of a batch, from a new search.

Schrittwieser et al. 2021 ("Online and Offline Reinforcement Learning by
Planning with a Learned Model", MuZero Unplugged) and appendix H of
Schrittwieser et al. 2020: a stored step's search policy was made by an older
network; running the search again at the stored observation with the current
(or a target) network's parameters gives a better target for the same data.
Here it runs inside the jitted train step, on a fixed share of every sampled
batch, so the shapes stay static:

* the first ``R = round(fraction * B)`` rows of the batch are reanalysed, the
  other ``B - R`` keep the targets :func:`.replay.sample` made (bit for bit);
* for a reanalysed row with start ``t``, the search runs at the stored
  observations ``o_{t+k}``, ``k = 0..K`` (the policy targets ``pi_{t+k}``) and,
  with ``bootstrap``, at ``o_{t+k+n}`` (the value targets' bootstrap
  ``v_{t+k+n}``), each root with its stored legal mask; the targets are then
  rebuilt by :func:`.targets.unroll_targets` from the stored rewards, ends and
  truncations
  with the fresh root policies and values. The n-step rewards stay those that
  were observed (they are facts of the environment, not of the network), and so
  does a truncated episode's bootstrap after its cut (the state there is not in
  the buffer);
* without ``bootstrap`` only the policy positions are searched and the stored
  bootstrap values are kept: right when ``n`` is at least the longest episode
  (the value target is then a Monte Carlo return that no search can change,
  as in the tic-tac-toe example's ``n = 9``), and ``n`` fewer searches per row.

Positions past an episode's end (or rows not yet filled) are searched too,
because the shapes are fixed, and then masked by the targets exactly as in
:func:`.replay.sample` (no policy loss, value 0). Their stored legal mask may
be empty (an unfilled row): such a root is searched with every action legal,
so that no search sees a root without a legal action.

Keys: row ``b``'s searches use only ``fold_in(key, start_b)`` split over its
positions, and the policies take one key per root (their ``[B]``-key form), so
a row's new targets do not depend on the other rows of the batch, nor on its
place in it.

Cost: ``R * (K + 1)`` searches per train step (``R * (2K + 2)`` at most with
``bootstrap``), against ``B`` acting searches per self-play step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from jaxpuct.muzero.replay import Batch, TrajectoryBuffer, window_rows, window_targets
from jaxpuct.muzero.stochastic_training import StochasticBatch
from jaxpuct.sampled import SampledPolicyOutput
from jaxpuct.types import PolicyOutput

__all__ = ["SearchFn", "reanalyse_batch", "reanalysed_rows", "searched_positions"]

SearchFn = Callable[[Any, jax.Array, jax.Array, jax.Array],
                    PolicyOutput | SampledPolicyOutput]
"""``(params, keys [M], obs [M, ...], legal [M, A]) -> PolicyOutput``: the search
at ``M`` roots (e.g. :func:`.selfplay.search_roots` with its config bound); a
:class:`jaxpuct.sampled.SampledPolicyOutput` for a buffer of sampled policies (its
``action_weights [M, K]`` over its ``sampled_actions [M, K]``, or ``[M, K, D]``
vectors for continuous actions, whose ``legal`` is ``[M, 0]``: there is no mask)."""

BatchT = TypeVar("BatchT", Batch, StochasticBatch)
"""MuZero's batch, or Stochastic MuZero's with its observations: reanalyse
changes only ``targets``, so both go through it alike."""


def reanalysed_rows(fraction: float, batch_size: int) -> int:
    """``R = round(fraction * B)``: how many leading rows of a batch are reanalysed."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"reanalyse fraction must be in [0, 1], got {fraction!r}.")
    return int(round(fraction * batch_size))


def searched_positions(unroll_steps: int, td_steps: int, bootstrap: bool) -> tuple[int, ...]:
    """The window rows searched for a reanalysed row (static): ``0..K`` for the
    policies and, with ``bootstrap``, ``n..n + K`` for the values; ascending,
    each once."""
    policy = range(unroll_steps + 1)
    value = range(td_steps, td_steps + unroll_steps + 1) if bootstrap else range(0)
    return tuple(sorted(set(policy) | set(value)))


def reanalyse_batch(buffer: TrajectoryBuffer, batch: BatchT, params: Any, key: jax.Array,
                    search_fn: SearchFn, *, fraction: float, unroll_steps: int,
                    td_steps: int, discount: float, bootstrap: bool = True) -> BatchT:
    """``batch`` with its first ``round(fraction * B)`` rows' targets made anew.

    Args:
      buffer: the buffer ``batch`` was sampled from (its rows unchanged since).
      batch: a :class:`.replay.Batch` of ``B`` unrolls of ``K`` steps, or a
        :class:`.stochastic_training.StochasticBatch` (Stochastic MuZero's, with
        the windows' observations ``[B, K + 1, ...]``, which stay as they are).
      params: the network parameters the search runs with (the current ones, or a
        target network's).
      key: one key.
      search_fn: :data:`SearchFn`.
      fraction: share of the batch reanalysed, in ``[0, 1]`` (static); 0 returns
        ``batch`` itself.
      unroll_steps: ``K`` of ``batch`` (static).
      td_steps: ``n`` (static).
      discount: the signed ``d`` of :func:`.replay.sample` (static).
      bootstrap: also search the bootstrap positions ``t + k + n`` (static;
        module docstring).

    Returns:
      ``batch``'s type, with ``targets`` ``value [B, K + 1]`` and ``policy
      [B, K + 1, P]`` (and ``policy_actions`` with a sampled search) new in rows
      ``< R`` (``reward`` and ``policy_mask`` are those of the stored data,
      recomputed); every other field (``obs`` or ``observations``, ``actions``,
      ``weights``, ``index``) unchanged.
    """
    size = batch.index.shape[0]
    count = reanalysed_rows(fraction, size)
    if count == 0:
        return batch
    if batch.actions.shape[1] != unroll_steps:
        raise ValueError(f"batch.actions must have unroll_steps = {unroll_steps} columns, got "
                         f"shape {tuple(batch.actions.shape)}.")
    start = batch.index[:count]  # [R]
    index, filled = window_rows(buffer, start, unroll_steps, td_steps)  # [R, W]
    positions = jnp.asarray(searched_positions(unroll_steps, td_steps, bootstrap))
    rows = index[:, positions]  # [R, J]
    num_positions = rows.shape[1]
    obs = buffer.obs[rows.reshape(-1)]  # [R J, ...]
    legal = buffer.legal[rows.reshape(-1)]  # [R J, A]
    legal = jnp.where(jnp.any(legal, axis=-1, keepdims=True), legal, True)
    keys = jax.vmap(lambda s: jax.random.split(jax.random.fold_in(key, s), num_positions))(
        start).reshape(-1)  # [R J]
    out = search_fn(params, keys, obs, legal)
    width = buffer.policy.shape[-1]
    if out.action_weights.shape[-1] != width:
        raise ValueError(f"search_fn's action_weights must have the buffer's policy width "
                         f"{width}, got shape {tuple(out.action_weights.shape)}.")
    fresh_policy = out.action_weights.reshape(count, num_positions, width)
    fresh_value = out.search_tree.summary().value.reshape(count, num_positions)
    # Without bootstrap every stored value stays (mixing fresh values at the
    # positions that happen to be both kinds would make the targets depend on K).
    policies = buffer.policy[index].at[:, positions].set(fresh_policy.astype(jnp.float32))
    values = buffer.root_value[index]
    if bootstrap:
        values = values.at[:, positions].set(fresh_value.astype(jnp.float32))
    policy_actions = None
    if buffer.policy_actions is not None:
        # A sampled search's new weights refer to its own new samples.
        sampled = getattr(out, "sampled_actions", None)
        if sampled is None:
            raise ValueError("the buffer holds a sampled search's policies: search_fn must "
                             "return its sampled_actions (jaxpuct.sampled_policy).")
        stored = buffer.policy_actions[index]  # [R, W, K] ids or [R, W, K, D]
        policy_actions = stored.at[:, positions].set(
            sampled.reshape(count, num_positions, *stored.shape[2:]).astype(stored.dtype))
    fresh = window_targets(buffer, index, filled, discount, unroll_steps, td_steps,
                           policies=policies, values=values, policy_actions=policy_actions)
    targets = jax.tree.map(lambda new, old: jnp.concatenate([new, old[count:]], axis=0),
                           fresh, batch.targets)
    return batch._replace(targets=targets)

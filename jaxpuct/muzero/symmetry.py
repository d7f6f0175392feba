"""Board-symmetry augmentation of MuZero training batches (tic-tac-toe).

AlphaGo Zero (Silver et al., Nature 2017, Methods, "Domain knowledge") augmented
its training data with the 8 dihedral symmetries of the board; AlphaZero (Silver et
al., Science 2018) dropped it only to cover chess and shogi, whose rules are not
symmetric. The AlphaZero example of this package does the same per position
(:mod:`jaxpuct.alphazero.symmetry`). A MuZero training row is an unroll, not a
position: the observation at the start, ``K`` actions and ``K + 1`` policy, value
and reward targets. Under a symmetry ``d`` of the rules the whole unroll moves
together: the start board becomes ``d s``, every action ``a`` of the unroll the
action ``d a``, every policy target ``pi`` the policy ``d pi`` of the moved
position, and values and rewards (outcomes) stay as they are. Each row of a batch
gets one symmetry drawn uniformly (identity included), independently per row, so
the expected loss is the loss averaged over the group at the batch's own cost.

Tic-tac-toe's layout (:mod:`.selfplay`): ``obs [B, 18]``, the mover's 9 cells then
the opponent's, each row-major (``cell = 3 * row + col``), and ``action = cell``.
The tables are those of :func:`jaxpuct.envs.symmetries.dihedral` (``3``):
``CELLS[k, i]``, the cell of ``s`` that lands on cell ``i`` of ``d_k s`` (a
gather index, also for a policy over the cells); ``MOVES[k, a]``, the action of
``d_k s`` that action ``a`` of ``s`` becomes (its inverse permutation, a map of
action ids).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.envs import symmetries as sym
from jaxpuct.muzero.replay import Batch

__all__ = ["CELLS", "MOVES", "SYMMETRIC_GAMES", "augment_batch", "check_game",
           "random_augment"]

SYMMETRIC_GAMES: tuple[str, ...] = ("tic_tac_toe",)

_DIHEDRAL = sym.dihedral(3)
CELLS: np.ndarray = _DIHEDRAL.cells  # [8, 9] int32, gather: (d_k x)[i] = x[CELLS[k, i]]
MOVES: np.ndarray = np.argsort(CELLS, axis=1).astype(np.int32)  # [8, 9]: a -> d_k a


def check_game(game: str) -> None:
    """``ValueError`` unless ``game`` has augmentation here (:data:`SYMMETRIC_GAMES`)."""
    if game not in SYMMETRIC_GAMES:
        raise ValueError(f"symmetry_augment (--symmetry-augment) is defined for "
                         f"{', '.join(SYMMETRIC_GAMES)} only, not game {game!r}")


def augment_batch(batch: Batch, k: jax.Array) -> Batch:
    """Row ``b`` of a tic-tac-toe ``batch`` moved by symmetry ``k[b]``.

    Args:
      batch: :class:`.replay.Batch` of ``B`` unrolls: ``obs [B, 18]``, ``actions
        [B, K]`` ids, ``targets.policy [B, K + 1, 9]`` over the cells, or a
        sampled search's weights with ``targets.policy_actions [B, K + 1, P]``
        ids (ids outside ``0..8``, a slot the search could not fill, are kept).
      k: ``[B]`` int, symmetry indices in ``[0, 8)`` (numbering of
        :func:`jaxpuct.envs.symmetries.dihedral`: 0 is the identity).

    Returns:
      The batch with ``obs``, ``actions``, the policy targets and ``next_obs``
      (``[B, K, 18]``, when present) moved; values,
      rewards, masks, weights and ``index`` (the rows, for priorities) unchanged.
    """
    obs, actions, targets = batch.obs, batch.actions, batch.targets
    size = obs.shape[0]
    if obs.shape[1:] != (18,) or actions.ndim != 2 or k.shape != (size,):
        raise ValueError(f"a tic-tac-toe batch has obs [B, 18], actions [B, K] and k [B]; "
                         f"got {tuple(obs.shape)}, {tuple(actions.shape)} and "
                         f"{tuple(k.shape)}")
    cells = jnp.asarray(CELLS)[k]  # [B, 9]
    moves = jnp.asarray(MOVES)[k]  # [B, 9]
    planes = obs.reshape(size, 2, 9)
    obs = jnp.take_along_axis(planes, cells[:, None, :], axis=2).reshape(size, 18)
    actions = jnp.take_along_axis(moves, actions, axis=1)

    if targets.policy_actions is None:
        policy = jnp.take_along_axis(targets.policy, cells[:, None, :], axis=2)
        targets = targets._replace(policy=policy)
    else:
        ids = targets.policy_actions  # [B, K + 1, P]; the weights stay with their ids
        inside = (ids >= 0) & (ids < 9)
        moved = jnp.take_along_axis(moves[:, None, :], jnp.clip(ids, 0, 8), axis=2)
        targets = targets._replace(policy_actions=jnp.where(inside, moved, ids))
    next_obs = batch.next_obs
    if next_obs is not None:  # the consistency loss's observations move with the row
        steps = next_obs.shape[1]
        next_planes = next_obs.reshape(size, steps, 2, 9)
        next_obs = jnp.take_along_axis(next_planes, cells[:, None, None, :], axis=3
                                       ).reshape(size, steps, 18)
    return batch._replace(obs=obs, actions=actions, targets=targets, next_obs=next_obs)


def random_augment(batch: Batch, key: jax.Array) -> Batch:
    """:func:`augment_batch` with one symmetry per row drawn uniformly from ``key``."""
    k = sym.draw_symmetries(key, batch.obs.shape[0], CELLS.shape[0])
    return augment_batch(batch, k)

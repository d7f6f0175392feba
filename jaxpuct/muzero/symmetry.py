"""Board-symmetry augmentation of MuZero training batches (tic-tac-toe, connect four).

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

The games' layouts and groups (:data:`GROUPS`, tables of
:mod:`jaxpuct.envs.symmetries`):

* ``tic_tac_toe`` (:mod:`.selfplay`): ``obs [B, 18]``, the mover's 9 cells then the
  opponent's, each row-major (``cell = 3 * row + col``), ``action = cell``; the 8
  symmetries of :func:`jaxpuct.envs.symmetries.dihedral` (``3``).
* ``connect_four`` (:mod:`.board_game`): ``obs [B, 6, 7, 2]`` (pgx's, channels
  last), ``action = column``; gravity leaves only the left-right mirror
  (:func:`jaxpuct.envs.symmetries.left_right`): 2 symmetries.

For the tic-tac-toe group, ``CELLS[k, i]`` is the cell of ``s`` that lands on cell
``i`` of ``d_k s`` (a gather index, also for a policy over the cells) and
``MOVES[k, a]`` the action of ``d_k s`` that action ``a`` of ``s`` becomes (its
inverse permutation, a map of action ids).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.envs import symmetries as sym
from jaxpuct.muzero.replay import Batch

__all__ = ["CELLS", "GROUPS", "MOVES", "SYMMETRIC_GAMES", "augment_batch", "check_game",
           "random_augment"]

GROUPS: dict[str, sym.Symmetries] = {"tic_tac_toe": sym.dihedral(3),
                                     "connect_four": sym.left_right(6, 7)}
SYMMETRIC_GAMES: tuple[str, ...] = tuple(GROUPS)
# The observation of one position in each game's layout (module docstring).
_OBS_SHAPES: dict[str, tuple[int, ...]] = {"tic_tac_toe": (18,), "connect_four": (6, 7, 2)}

CELLS: np.ndarray = GROUPS["tic_tac_toe"].cells  # [8, 9] int32: (d_k x)[i] = x[CELLS[k, i]]
MOVES: np.ndarray = np.argsort(CELLS, axis=1).astype(np.int32)  # [8, 9]: a -> d_k a


def check_game(game: str) -> None:
    """``ValueError`` unless ``game`` has augmentation here (:data:`SYMMETRIC_GAMES`)."""
    if game not in SYMMETRIC_GAMES:
        raise ValueError(f"symmetry_augment (--symmetry-augment) is defined for "
                         f"{', '.join(SYMMETRIC_GAMES)} only, not game {game!r}")


def _move_obs(game: str, obs: jax.Array, k: jax.Array) -> jax.Array:
    """``d_k obs`` for ``obs [N, *obs_shape]`` and ``k [N]``, by the group's own
    :meth:`jaxpuct.envs.symmetries.Symmetries.transform_obs` on an ``[N, H, W, C]``
    board (tic-tac-toe's plane-major ``[N, 18]`` viewed as one)."""
    group = GROUPS[game]
    if game == "tic_tac_toe":
        board = obs.reshape(-1, 2, 3, 3).transpose(0, 2, 3, 1)
        return group.transform_obs(board, k).transpose(0, 3, 1, 2).reshape(obs.shape)
    return group.transform_obs(obs, k)


def augment_batch(batch: Batch, k: jax.Array, game: str = "tic_tac_toe") -> Batch:
    """Row ``b`` of a ``game`` ``batch`` moved by symmetry ``k[b]``.

    Args:
      batch: :class:`.replay.Batch` of ``B`` unrolls: ``obs [B, *obs_shape]`` in the
        game's layout (module docstring), ``actions [B, K]`` ids, ``targets.policy
        [B, K + 1, A]`` over the actions, or a sampled search's weights with
        ``targets.policy_actions [B, K + 1, P]`` ids (ids outside ``0..A-1``, a slot
        the search could not fill, are kept).
      k: ``[B]`` int, symmetry indices in ``[0, G)`` (the numbering of
        :data:`GROUPS`\\ ``[game]``: 0 is the identity).
      game: a key of :data:`GROUPS`.

    Returns:
      The batch with ``obs``, ``actions``, the policy targets and ``next_obs``
      (``[B, K, *obs_shape]``, when present) moved; values, rewards, masks,
      weights and ``index`` (the rows, for priorities) unchanged.
    """
    check_game(game)
    group, obs_shape = GROUPS[game], _OBS_SHAPES[game]
    obs, actions, targets = batch.obs, batch.actions, batch.targets
    size = obs.shape[0]
    if tuple(obs.shape[1:]) != obs_shape or actions.ndim != 2 or k.shape != (size,):
        raise ValueError(f"a {game} batch has obs [B, {', '.join(map(str, obs_shape))}], "
                         f"actions [B, K] and k [B]; got {tuple(obs.shape)}, "
                         f"{tuple(actions.shape)} and {tuple(k.shape)}")
    num_actions = group.num_actions
    policy_gather = jnp.asarray(group.actions)[k]  # [B, A]: (d p)[a] = p[gather[a]]
    # a -> d a: the inverse permutation of d's gather is the gather of d^-1.
    moves = jnp.asarray(group.actions)[jnp.asarray(group.inverse)[k]]
    obs = _move_obs(game, obs, k)
    actions = jnp.take_along_axis(moves, actions, axis=1)

    if targets.policy_actions is None:
        policy = jnp.take_along_axis(targets.policy, policy_gather[:, None, :], axis=2)
        targets = targets._replace(policy=policy)
    else:
        ids = targets.policy_actions  # [B, K + 1, P]; the weights stay with their ids
        inside = (ids >= 0) & (ids < num_actions)
        moved = jnp.take_along_axis(moves[:, None, :], jnp.clip(ids, 0, num_actions - 1),
                                    axis=2)
        targets = targets._replace(policy_actions=jnp.where(inside, moved, ids))
    next_obs = batch.next_obs
    if next_obs is not None:  # the consistency loss's observations move with the row
        steps = next_obs.shape[1]
        flat = next_obs.reshape(size * steps, *obs_shape)
        next_obs = _move_obs(game, flat, jnp.repeat(k, steps)).reshape(next_obs.shape)
    return batch._replace(obs=obs, actions=actions, targets=targets, next_obs=next_obs)


def random_augment(batch: Batch, key: jax.Array, game: str = "tic_tac_toe") -> Batch:
    """:func:`augment_batch` with one symmetry per row drawn uniformly from ``key``."""
    check_game(game)
    k = sym.draw_symmetries(key, batch.obs.shape[0], GROUPS[game].num_symmetries)
    return augment_batch(batch, k, game)

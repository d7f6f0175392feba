"""Board symmetries at evaluation time: one random symmetry per leaf, or the average.

AlphaGo (Silver et al., "Mastering the game of Go with deep neural networks and
tree search", Nature 2016, Methods, "Symmetries") evaluated each position of its
search under one of the 8 dihedral symmetries of the board, drawn uniformly at
random; AlphaGo Zero did the same (Silver et al., Nature 2017). Averaging the
network over all the symmetries is the deterministic alternative (an ensemble,
``K`` times the network's work). For a network ``f`` and a symmetry ``d`` of the
rules,

* random: ``f_k(s) = d_k^{-1} f(d_k s)`` with ``k`` uniform (a fresh ``k`` per
  leaf, drawn from ``recurrent_fn``'s key);
* average: ``f̄(s) = (1/K) sum_k d_k^{-1} f(d_k s)`` (probabilities and values
  averaged). ``f̄`` is equivariant, ``f̄(d_j s) = d_j f̄(s)``, for any ``f``:
  averaging over a group makes any function equivariant.

Here ``d`` acts on the observation's board cells and on the action vector; the
value is invariant. The tables are gather indices (:class:`Symmetries`): for
cells ``(d_k x)[i] = x[cells[k, i]]`` and for actions
``(d_k p)[a] = p[actions[k, a]]``; element 0 is the identity and actions off the
board (pass) map to themselves. :func:`dihedral` builds the 8 symmetries of a
square board (tic-tac-toe, othello, Go), :func:`left_right` the two of a board
whose rules have only that one (connect four: gravity breaks the others).
``jaxpuct.envs.pgx_games.symmetries(name)`` gives the table of each pgx game.

:func:`make_root_fn` and :func:`make_recurrent_fn` are the adapter's
(:mod:`jaxpuct.envs.adapter`) with the network evaluated under symmetries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.envs import adapter
from jaxpuct.envs.adapter import ApplyFn, Environment
from jaxpuct.envs.ensemble import mixture

__all__ = [
    "MODES",
    "Symmetries",
    "apply_with_symmetry",
    "dihedral",
    "draw_symmetries",
    "left_right",
    "make_recurrent_fn",
    "make_root_fn",
    "symmetric_apply",
]

MODES = ("average", "random")


@dataclasses.dataclass(frozen=True, eq=False)
class Symmetries:
    """``K`` symmetries of a board game as gather tables.

    Attributes:
      name: what the group is, e.g. ``"dihedral 8x8 + 1 pass"``.
      board_shape: ``(H, W)``, the leading observation axes after the batch.
      cells: ``[K, H * W]`` int32, ``(d_k x)[i] = x[cells[k, i]]`` over the
        row-major cells of an ``[H, W]`` board.
      actions: ``[K, A]`` int32, ``(d_k p)[a] = p[actions[k, a]]``.
      inverse: ``[K]`` int32, ``d_{inverse[k]} = d_k^{-1}``.
    """

    name: str
    board_shape: tuple[int, int]
    cells: np.ndarray
    actions: np.ndarray
    inverse: np.ndarray

    @property
    def num_symmetries(self) -> int:
        return self.cells.shape[0]

    @property
    def num_actions(self) -> int:
        return self.actions.shape[1]

    def transform_obs(self, obs: jax.Array, k: jax.Array) -> jax.Array:
        """``d_k obs``: ``obs [B, H, W, ...]``, ``k [B]`` int (one symmetry per row)."""
        height, width = self.board_shape
        if tuple(obs.shape[1:3]) != (height, width):
            raise ValueError(f"obs must be [B, {height}, {width}, ...] for {self.name}, "
                             f"got shape {tuple(obs.shape)}")
        batch = obs.shape[0]
        flat = obs.reshape(batch, height * width, -1)
        index = jnp.asarray(self.cells)[k]  # [B, H * W]
        return jnp.take_along_axis(flat, index[:, :, None], axis=1).reshape(obs.shape)

    def transform_policy(self, policy: jax.Array, k: jax.Array) -> jax.Array:
        """``d_k policy``: ``policy [B, A]`` (logits, probabilities or a mask), ``k [B]``."""
        if policy.shape[-1] != self.num_actions:
            raise ValueError(f"policy must be [B, {self.num_actions}] for {self.name}, "
                             f"got shape {tuple(policy.shape)}")
        return jnp.take_along_axis(policy, jnp.asarray(self.actions)[k], axis=1)

    def untransform_policy(self, policy: jax.Array, k: jax.Array) -> jax.Array:
        """``d_k^{-1} policy``: a policy of ``d_k s`` back to the actions of ``s``."""
        return self.transform_policy(policy, jnp.asarray(self.inverse)[k])


def _inverse(cells: np.ndarray) -> np.ndarray:
    """``[K]``: the ``j`` with ``d_j d_k = id``, i.e. ``cells[k][cells[j]] == arange``
    (``d_j`` applied after ``d_k`` gathers with ``cells[k][cells[j]]``)."""
    identity = np.arange(cells.shape[1])
    out = []
    for k in range(cells.shape[0]):
        matches = [j for j in range(cells.shape[0])
                   if np.array_equal(cells[k][cells[j]], identity)]
        if len(matches) != 1:
            raise ValueError(f"cells must form a group; symmetry {k} has "
                             f"{len(matches)} inverses, expected 1")
        out.append(matches[0])
    return np.asarray(out, np.int32)


def _from_grids(name: str, grids: list[np.ndarray], board_actions: bool,
                num_extra: int) -> Symmetries:
    """Tables from the transformed index grids ``op(arange(H*W).reshape(H, W))``
    (entry ``i`` of the result holds the source cell: a gather index)."""
    shape = grids[0].shape
    cells = np.stack([g.reshape(-1) for g in grids]).astype(np.int32)
    if board_actions:
        # Action = cell; extra actions (pass) after the board, fixed by every d.
        extra = np.arange(cells.shape[1], cells.shape[1] + num_extra)
        actions = np.concatenate([cells, np.broadcast_to(extra, (len(grids), num_extra))],
                                 axis=1).astype(np.int32)
    else:
        # Action = column (connect four): the top row's cells are 0 .. W - 1,
        # so its transformed indices are the transformed columns.
        actions = np.stack([g[0] for g in grids]).astype(np.int32)
    return Symmetries(name=name, board_shape=(int(shape[0]), int(shape[1])), cells=cells,
                      actions=actions, inverse=_inverse(cells))


def dihedral(size: int, num_pass_actions: int = 0) -> Symmetries:
    """The 8 symmetries of a ``size x size`` board (rotations and reflections).

    Actions are the row-major cells, then ``num_pass_actions`` actions that every
    symmetry fixes (Go's and othello's pass): ``A = size**2 + num_pass_actions``.
    Order: identity, rotations by 90, 180, 270 degrees, left-right and up-down
    mirrors, transpose, anti-transpose.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be an int >= 1, got {size!r}")
    grid = np.arange(size * size).reshape(size, size)
    grids = [grid, np.rot90(grid, 1), np.rot90(grid, 2), np.rot90(grid, 3),
             np.fliplr(grid), np.flipud(grid), grid.T, np.rot90(grid, 2).T]
    return _from_grids(f"dihedral {size}x{size} + {num_pass_actions} pass", grids,
                       board_actions=True, num_extra=num_pass_actions)


def left_right(rows: int, cols: int) -> Symmetries:
    """Identity and the left-right mirror of a ``rows x cols`` board whose actions
    are its ``cols`` columns (connect four: ``A = cols``)."""
    grid = np.arange(rows * cols).reshape(rows, cols)
    return _from_grids(f"left-right {rows}x{cols}", [grid, np.fliplr(grid)],
                       board_actions=False, num_extra=0)


# --------------------------------------------------------------------------------------
# The network under symmetries.
# --------------------------------------------------------------------------------------


def apply_with_symmetry(apply_fn: ApplyFn, symmetries: Symmetries, params: Any,
                        obs: jax.Array, k: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``d_k^{-1} f(d_k s)``: logits ``[B, A]`` for the actions of ``obs [B, H, W, ...]``
    and value ``[B]``, with symmetry ``k [B]`` per row."""
    logits, value = apply_fn(params, symmetries.transform_obs(obs, k))
    return symmetries.untransform_policy(logits, k), value


def symmetric_apply(apply_fn: ApplyFn, symmetries: Symmetries) -> ApplyFn:
    """The averaged network ``f̄(s) = (1/K) sum_k d_k^{-1} f(d_k s)``.

    The ``K`` transformed observations go through ``apply_fn`` as one batch of
    ``K * B``. Probabilities (softmax of the logits) and values are averaged (a
    mixture of the ``K`` policies, not a product); the logits returned are the
    log of the averaged probabilities (floored at the smallest normal float, so
    finite). Equivariant for any ``apply_fn``: ``f̄(d_j s) = d_j f̄(s)``.

    Returns:
      ``apply(params, obs [B, H, W, ...]) -> (logits [B, A], value [B])``, for
      :func:`jaxpuct.envs.adapter.make_root_fn` and ``make_recurrent_fn``.
    """
    num = symmetries.num_symmetries

    def apply(params: Any, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        batch = obs.shape[0]
        k = jnp.repeat(jnp.arange(num, dtype=jnp.int32), batch)  # [K * B], k-major
        tiled = jnp.tile(obs, (num,) + (1,) * (obs.ndim - 1))
        logits, value = apply_with_symmetry(apply_fn, symmetries, params, tiled, k)
        return mixture(logits.reshape(num, batch, -1), value.reshape(num, batch))

    return apply


def draw_symmetries(rng_key: jax.Array, batch_size: int, num_symmetries: int) -> jax.Array:
    """``[B]`` int32 symmetry indices, uniform and independent per row."""
    return jax.random.randint(rng_key, (batch_size,), 0, num_symmetries, jnp.int32)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")


def _random_apply(apply_fn: ApplyFn, symmetries: Symmetries, rng_key: jax.Array
                  ) -> ApplyFn:
    """``apply_fn`` under one random symmetry per row, drawn from ``rng_key``."""

    def apply(params: Any, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        k = draw_symmetries(rng_key, obs.shape[0], symmetries.num_symmetries)
        return apply_with_symmetry(apply_fn, symmetries, params, obs, k)

    return apply


def make_root_fn(apply_fn: ApplyFn, env: Environment, symmetries: Symmetries, *,
                 mode: str = "average") -> Callable:
    """:func:`jaxpuct.envs.adapter.make_root_fn` with the network under symmetries.

    Args:
      apply_fn: ``(params, obs [B, H, W, ...]) -> (logits [B, A], value [B])``.
      env: the environment (observations ``[B, H, W, ...]`` matching
        ``symmetries.board_shape``).
      symmetries: the tables, e.g. ``jaxpuct.envs.pgx_games.symmetries(name)``.
      mode: ``"average"`` (:func:`symmetric_apply`) or ``"random"`` (one symmetry
        per root, drawn from ``root_fn``'s ``rng_key`` by :func:`draw_symmetries`).
    """
    _check_mode(mode)
    if mode == "average":
        return adapter.make_root_fn(symmetric_apply(apply_fn, symmetries), env)

    def root_fn(params: Any, rng_key: jax.Array, state: Any):
        apply = _random_apply(apply_fn, symmetries, rng_key)
        return adapter.make_root_fn(apply, env)(params, rng_key, state)

    return root_fn


def make_recurrent_fn(apply_fn: ApplyFn, env: Environment, symmetries: Symmetries, *,
                      mode: str = "average", discount: float = -1.0) -> Callable:
    """:func:`jaxpuct.envs.adapter.make_recurrent_fn` with the network under symmetries.

    ``mode="random"`` draws one symmetry per leaf from the ``rng_key`` the search
    passes to ``recurrent_fn`` (a fresh key per simulation), with
    :func:`draw_symmetries`; ``"average"`` evaluates all ``K`` (``K`` times the
    network's batch). Other arguments as in :func:`make_root_fn` and the adapter.
    """
    _check_mode(mode)
    if mode == "average":
        return adapter.make_recurrent_fn(symmetric_apply(apply_fn, symmetries), env,
                                         discount=discount)

    def recurrent_fn(params: Any, rng_key: jax.Array, action: jax.Array, state: Any):
        apply = _random_apply(apply_fn, symmetries, rng_key)
        return adapter.make_recurrent_fn(apply, env, discount=discount)(
            params, rng_key, action, state)

    return recurrent_fn

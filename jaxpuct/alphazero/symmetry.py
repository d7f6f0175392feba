"""Board-symmetry data augmentation of self-play training samples.

AlphaGo Zero (Silver et al., "Mastering the game of Go without human knowledge",
Nature 2017, Methods, "Domain knowledge") augmented its training data with the 8
dihedral symmetries of the Go board (rotations and reflections): the rules are
invariant under them, so a position ``s`` with search policy ``pi`` and outcome
``z`` is as good a sample as ``(d s, d pi, z)`` for any symmetry ``d``. AlphaZero
(Silver et al., Science 2018) dropped the augmentation to cover chess and shogi,
whose rules are not symmetric; for the games here it still applies, and it
multiplies the distinct training positions at no search cost.

Rather than all ``K`` images of every sample (a ``K`` times larger batch), each
row of a training batch is replaced by one symmetry drawn uniformly at random
(identity included), independently per row: the expected loss is the loss
averaged over the group, at the batch's own cost. The outcome is invariant and
untouched.

Games and symmetries (pgx layouts, checked against pgx's rules in
``tests/test_symmetries.py``):

* ``connect_four``: observation ``[6, 7, 2]`` (row 0 the top row, channels last),
  actions the 7 columns. Gravity breaks every symmetry but the left-right mirror:
  index 0 the identity, 1 the mirror (width axis flipped, policy reversed over
  columns).
* ``tic_tac_toe``: observation ``[3, 3, 2]``, action ``row * 3 + col``. The 8
  dihedral symmetries, in the order of :func:`jaxpuct.envs.symmetries.dihedral`:
  0 identity, 1-3 ``np.rot90`` by 1, 2, 3 quarter turns (counter-clockwise),
  4 left-right mirror (``np.fliplr``), 5 up-down mirror (``np.flipud``),
  6 transpose, 7 anti-transpose; the policy is permuted as the cells are.

The gather tables are those of :func:`jaxpuct.envs.pgx_games.symmetries` (which
also serves evaluation under symmetries at search time); this module needs no pgx.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxpuct.envs import symmetries as sym
from jaxpuct.envs.pgx_games import symmetries as game_symmetries

__all__ = ["SYMMETRIC_GAMES", "apply_symmetry", "num_symmetries", "symmetry_augment_fn"]

SYMMETRIC_GAMES: tuple[str, ...] = ("connect_four", "tic_tac_toe")

AugmentFn = Callable[[jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def _table(game: str) -> sym.Symmetries:
    """The gather tables of ``game``; ``ValueError`` for a game without augmentation.

    Othello and Go have dihedral tables too (for search-time evaluation), but only
    the games of :data:`SYMMETRIC_GAMES` are offered for augmentation.
    """
    if game not in SYMMETRIC_GAMES:
        raise ValueError(f"no symmetry augmentation for game {game!r}; supported games: "
                         f"{', '.join(SYMMETRIC_GAMES)}")
    return game_symmetries(game)


def num_symmetries(game: str) -> int:
    """``K``, the number of symmetries of ``game`` (identity included): 2 for
    connect four, 8 for tic-tac-toe. ``ValueError`` for another game."""
    return _table(game).num_symmetries


def _check_batch(obs: jax.Array, policy: jax.Array) -> None:
    # Shapes are static under jit, so a mismatch fails at trace time, not silently.
    if obs.shape[:1] != policy.shape[:1] or policy.ndim != 2:
        raise ValueError(f"obs must be [M, ...] and policy [M, A] with the same M, got "
                         f"{tuple(obs.shape)} and {tuple(policy.shape)}")


def apply_symmetry(game: str, index: int | jax.Array, obs: jax.Array, policy: jax.Array
                   ) -> tuple[jax.Array, jax.Array]:
    """Symmetry number ``index`` of ``game`` (numbering in the module docstring)
    applied to a batch: the board of ``obs`` and the actions of ``policy`` move
    together, so ``policy`` stays the policy of the moved position.

    Args:
      game: one of :data:`SYMMETRIC_GAMES`.
      index: ``int`` or int array ``[]`` or ``[M]``, in ``[0, num_symmetries(game))``
        (one symmetry for the whole batch, or one per row).
      obs: ``[M, H, W, C]``, pgx's observation layout of ``game``.
      policy: ``[M, A]``, any per-action quantity: probabilities, logits or a
        legal-action mask (gathered, so dtype and values are kept).

    Returns:
      ``(obs [M, H, W, C], policy [M, A])``, transformed.

    Raises:
      ValueError: for another game or mismatched shapes.
    """
    table = _table(game)
    _check_batch(obs, policy)
    k = jnp.broadcast_to(jnp.asarray(index, jnp.int32), obs.shape[:1])
    return table.transform_obs(obs, k), table.transform_policy(policy, k)


def symmetry_augment_fn(game: str) -> AugmentFn:
    """The augmentation of ``game``'s training samples.

    Args:
      game: one of :data:`SYMMETRIC_GAMES`.

    Returns:
      ``fn(key, obs [M, *obs_shape], policy [M, A]) -> (obs, policy)``: each row
      independently replaced by a symmetry of the game drawn uniformly from
      ``key`` (identity included), observation and policy moved by the same one.
      Pure ``jnp`` gathers, jit-able; policy rows are permuted, so their sums and
      signs are kept. Values (outcomes) are invariant and need no transform.

    Raises:
      ValueError: for a game not in :data:`SYMMETRIC_GAMES` (naming the game and
        the supported ones).
    """
    table = _table(game)  # fail at construction, not inside the train step

    def augment(key: jax.Array, obs: jax.Array, policy: jax.Array
                ) -> tuple[jax.Array, jax.Array]:
        _check_batch(obs, policy)
        k = sym.draw_symmetries(key, obs.shape[0], table.num_symmetries)  # [M]
        return table.transform_obs(obs, k), table.transform_policy(policy, k)

    return augment

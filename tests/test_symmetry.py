"""jaxpuct.alphazero.symmetry: training-data augmentation by board symmetries.

The oracle is pgx's own rules: playing the transformed moves ``d(a_1), ...,
d(a_t)`` from the (symmetric) initial position must reach the transformed
position, with the transformed legal-action mask. The move maps are built here
from NumPy's ``rot90``/``fliplr``/... on index grids, independently of the
module's tables, in the numbering the module documents.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpuct.alphazero.symmetry import (
    SYMMETRIC_GAMES,
    apply_symmetry,
    num_symmetries,
    symmetry_augment_fn,
)

LAYOUT = {"connect_four": ((6, 7, 2), 7), "tic_tac_toe": ((3, 3, 2), 9)}
ROWS = 2000  # batch of the augmentation tests (one shape: one compilation per game)

# The documented numbering, as NumPy operations on an [H, W] board.
BOARD_OPS = {
    "connect_four": [lambda b: b, np.fliplr],
    "tic_tac_toe": [lambda b: b, lambda b: np.rot90(b, 1), lambda b: np.rot90(b, 2),
                    lambda b: np.rot90(b, 3), np.fliplr, np.flipud, lambda b: b.T,
                    lambda b: np.rot90(b, 2).T],
}


def _move_maps(game: str) -> np.ndarray:
    """``[K, A]``: ``maps[k, a]`` is the action that plays, on the board moved by
    symmetry ``k``, what ``a`` plays on the original board. Actions index a grid:
    the 7 columns (a ``[1, 7]`` grid) in connect four, the ``[3, 3]`` cells
    ``row * 3 + col`` in tic-tac-toe. ``op(grid)`` holds at each position the
    action that lands there, so its inverse permutation (argsort) maps ``a`` to
    its new place."""
    grid = np.arange(7).reshape(1, 7) if game == "connect_four" else np.arange(9).reshape(3, 3)
    return np.stack([np.argsort(op(grid).reshape(-1)) for op in BOARD_OPS[game]])


@functools.cache
def _env(game: str):
    pytest.importorskip("pgx")
    from jaxpuct.envs.pgx_games import make_pgx_game

    return make_pgx_game(game).env


@functools.partial(jax.jit, static_argnames=("game", "games", "moves"))
def _play(game: str, key: jax.Array, games: int, moves: int):
    """Plays ``games`` random legal sequences of ``moves`` moves and, for every
    symmetry ``k``, the moved sequences from the same initial states.

    Returns (each with a leading ``[T]`` step axis):
      ``played_obs [T, K, G, H, W, C]`` and ``played_legal [T, K, G, A]``: pgx's
      observation and legal mask after the moved sequences;
      ``moved_obs``, ``moved_legal``: the same shapes, ``apply_symmetry(k)`` of the
      original games' observation and legal mask.
    """
    env = _env(game)
    count = num_symmetries(game)
    maps = jnp.asarray(_move_maps(game))  # [K, A]
    init_key, play_key = jax.random.split(key)
    init_keys = jax.random.split(init_key, games)
    base = jax.vmap(env.init)(init_keys)  # [G]
    moved = jax.vmap(jax.vmap(env.init))(jnp.broadcast_to(init_keys, (count,) + init_keys.shape))
    step = jax.vmap(env.step)

    def one_move(carry, move_key):
        base, moved = carry
        # A uniformly random legal move of each original game (pgx marks every
        # action legal once a game is over, and then ignores the move).
        logits = jnp.where(base.legal_action_mask, 0.0, -jnp.inf)
        action = jax.random.categorical(move_key, logits)  # [G]
        base = step(base, action)
        moved = jax.vmap(step)(moved, maps[:, action])  # [K, G]
        expected = [apply_symmetry(game, k, base.observation, base.legal_action_mask)
                    for k in range(count)]
        out = (moved.observation, moved.legal_action_mask,
               jnp.stack([e[0] for e in expected]), jnp.stack([e[1] for e in expected]))
        return (base, moved), out

    _, out = jax.lax.scan(one_move, (base, moved), jax.random.split(play_key, moves))
    return out


@pytest.mark.parametrize("game, moves", [("connect_four", 24), ("tic_tac_toe", 9)])
def test_moved_games_reach_the_moved_positions(game, moves):
    count = num_symmetries(game)
    assert count == len(BOARD_OPS[game])
    played_obs, played_legal, moved_obs, moved_legal = _play(
        game, jax.random.PRNGKey(0), games=6, moves=moves)
    np.testing.assert_array_equal(played_obs, moved_obs)
    np.testing.assert_array_equal(played_legal, moved_legal)
    # Not vacuous: every non-identity symmetry moves some position it was shown.
    identity = np.asarray(moved_obs[:, :1])
    for k in range(1, count):
        assert np.any(np.asarray(moved_obs[:, k:k + 1]) != identity)


@functools.partial(jax.jit, static_argnames=("game",))
def _augment(game: str, key: jax.Array, obs: jax.Array, policy: jax.Array):
    """The augmentation of ``game`` and, for every symmetry ``k``, ``apply_symmetry(k)``
    of the same batch (``[K, M, ...]``)."""
    augmented = symmetry_augment_fn(game)(key, obs, policy)
    candidates = [apply_symmetry(game, k, obs, policy) for k in range(num_symmetries(game))]
    return augmented, (jnp.stack([c[0] for c in candidates]),
                       jnp.stack([c[1] for c in candidates]))


def _which_symmetry(augmented, candidates) -> np.ndarray:
    """``[M]``: the symmetry each augmented row is (observation and policy both),
    asserting there is exactly one."""
    obs, policy = (np.asarray(x) for x in augmented)
    cand_obs, cand_policy = (np.asarray(x) for x in candidates)
    same = np.all((cand_obs == obs).reshape(cand_obs.shape[:2] + (-1,)), axis=-1)
    same &= np.all(cand_policy == policy, axis=-1)  # [K, M]
    assert np.all(same.sum(axis=0) == 1)
    return np.argmax(same, axis=0)


@pytest.mark.parametrize("game", SYMMETRIC_GAMES)
def test_rows_get_one_symmetry_each_and_keep_their_policy_mass(game):
    shape, num_actions = LAYOUT[game]
    rng = np.random.default_rng(1)
    # Random (not game) boards: no symmetry fixes them, so each image is distinct.
    # Policies with varied total mass; ROWS rows, so _augment compiles once per game.
    obs = jnp.asarray(rng.normal(size=(ROWS,) + shape), jnp.float32)
    policy = rng.dirichlet(np.ones(num_actions), ROWS) * rng.uniform(0.5, 2.0, (ROWS, 1))
    policy = jnp.asarray(policy, jnp.float32)
    key_aug = jax.random.PRNGKey(1)
    augmented, candidates = _augment(game, key_aug, obs, policy)
    assert augmented[0].shape == obs.shape and augmented[1].shape == policy.shape
    assert augmented[0].dtype == obs.dtype and augmented[1].dtype == policy.dtype
    drawn = _which_symmetry(augmented, candidates)  # observation and policy agree
    assert len(set(drawn.tolist())) > 1  # rows draw independently
    out = np.asarray(augmented[1])
    assert np.all(out >= 0)
    np.testing.assert_allclose(out.sum(axis=1), np.asarray(policy).sum(axis=1), rtol=1e-6)
    np.testing.assert_array_equal(np.sort(out, axis=1), np.sort(np.asarray(policy), axis=1))
    # Same key, same draw (the choice comes from the key only).
    again, _ = _augment(game, key_aug, obs, policy)
    np.testing.assert_array_equal(again[0], augmented[0])


@pytest.mark.parametrize("game, low, high", [("connect_four", 0.40, 0.60),
                                             ("tic_tac_toe", 0.09, 0.16)])
def test_identical_rows_draw_every_symmetry_about_uniformly(game, low, high):
    shape, num_actions = LAYOUT[game]
    rng = np.random.default_rng(2)
    obs = rng.normal(size=shape)
    policy = rng.dirichlet(np.ones(num_actions))
    batch_obs = jnp.asarray(np.broadcast_to(obs, (ROWS,) + shape), jnp.float32)
    batch_policy = jnp.asarray(np.broadcast_to(policy, (ROWS, num_actions)), jnp.float32)
    augmented, candidates = _augment(game, jax.random.PRNGKey(4), batch_obs, batch_policy)
    freq = np.bincount(_which_symmetry(augmented, candidates),
                       minlength=num_symmetries(game)) / ROWS
    assert np.all((freq >= low) & (freq <= high)), freq  # expected 1 / K each


@pytest.mark.parametrize("call", [lambda: symmetry_augment_fn("othello"),
                                  lambda: apply_symmetry("othello", 0, None, None),
                                  lambda: num_symmetries("othello")])
def test_unsupported_game_names_it_and_the_supported_ones(call):
    with pytest.raises(ValueError, match=r"'othello'.*connect_four, tic_tac_toe"):
        call()


def test_mismatched_batch_is_rejected():
    with pytest.raises(ValueError, match="same M"):
        symmetry_augment_fn("connect_four")(jax.random.PRNGKey(0), jnp.zeros((3, 6, 7, 2)),
                                            jnp.zeros((2, 7)))

"""Board symmetries, in two sections.

* ``jaxpuct.envs.symmetries`` and the pgx games' tables: group structure, exact
  equivariance of the averaged network, random mode drawn from the recurrent_fn
  key, and agreement with the games' real rules (pgx).
* ``jaxpuct.alphazero.symmetry``: training-data augmentation. The oracle is pgx's
  own rules: playing the transformed moves ``d(a_1), ..., d(a_t)`` from the
  (symmetric) initial position must reach the transformed position, with the
  transformed legal-action mask.

Both sections check against move maps built here (``BOARD_OPS``, ``_move_maps``)
from NumPy's ``rot90``/``fliplr``/... on index grids, independently of the
modules' tables, in the numbering the modules document. Tests that need pgx skip
without it (the others run).
"""

from __future__ import annotations

import functools
import itertools

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
from jaxpuct.envs import symmetries as sym
from jaxpuct.envs.adapter import mask_logits
from jaxpuct.envs.pgx_games import PGX_GAMES, symmetries

# Observation shape and number of actions of each pgx game (checked against pgx
# in test_tables_match_the_pgx_layouts).
LAYOUT = {"tic_tac_toe": ((3, 3, 2), 9), "connect_four": ((6, 7, 2), 7),
          "othello": ((8, 8, 2), 65), "go_9x9": ((9, 9, 17), 82)}
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
def _pgx_game(name: str):
    """The pgx game ``name`` (one instance per game); skips the test without pgx."""
    pytest.importorskip("pgx")
    from jaxpuct.envs.pgx_games import make_pgx_game

    return make_pgx_game(name)


# ====================================================== jaxpuct.envs.symmetries


def _compose(table: np.ndarray, j: int, k: int) -> np.ndarray:
    """Gather table of ``d_j`` applied after ``d_k``."""
    return table[k][table[j]]


@pytest.mark.parametrize("name", PGX_GAMES)
def test_tables_form_a_group(name):
    s = symmetries(name)
    shape, num_actions = LAYOUT[name]
    count = 2 if name == "connect_four" else 8
    assert s.cells.shape == (count, shape[0] * shape[1])
    assert s.actions.shape == (count, num_actions)
    for table in (s.cells, s.actions):
        identity = np.arange(table.shape[1])
        assert np.array_equal(table[0], identity)
        for row in table:
            assert np.array_equal(np.sort(row), identity)  # a permutation
        assert len({row.tobytes() for row in table}) == count  # distinct
        for k in range(count):  # perm o inv = inv o perm = id
            assert np.array_equal(_compose(table, s.inverse[k], k), identity)
            assert np.array_equal(_compose(table, k, s.inverse[k]), identity)
    for j, k in itertools.product(range(count), repeat=2):
        # Closed under composition, and cells and actions compose alike.
        product = _compose(s.cells, j, k)
        matches = [m for m in range(count) if np.array_equal(s.cells[m], product)]
        assert len(matches) == 1
        assert np.array_equal(_compose(s.actions, j, k), s.actions[matches[0]])


@pytest.mark.parametrize("name", PGX_GAMES)
def test_actions_move_with_the_cells(name):
    s = symmetries(name)
    cells = s.cells.shape[1]
    if name == "connect_four":
        # A cell's column moves as the column actions do.
        for k in range(2):
            assert np.array_equal(s.cells[k] % 7, s.actions[k][np.arange(cells) % 7])
    else:
        assert np.array_equal(s.actions[:, :cells], s.cells)
        assert np.all(s.actions[:, cells:] == np.arange(cells, s.num_actions))  # pass


def test_dihedral_elements_are_the_rotations_and_mirrors():
    s = sym.dihedral(3)
    board = np.arange(9).reshape(3, 3)
    expected = [op(board) for op in BOARD_OPS["tic_tac_toe"]]
    obs = jnp.asarray(board, jnp.float32)[None, :, :, None]
    for k, image in enumerate(expected):
        moved = s.transform_obs(obs, jnp.array([k]))
        assert np.array_equal(np.asarray(moved)[0, :, :, 0], image)


def _random_network(shape, num_actions, seed=0):
    """A linear network that no symmetry leaves alone; logits of order 1 (weights
    scaled by 1/sqrt(inputs)), so float32 rounding stays near 1e-6."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    w = (rng.normal(size=(size, num_actions)) / np.sqrt(size)).astype(np.float32)
    b = rng.normal(size=(num_actions,)).astype(np.float32)
    v = (rng.normal(size=(size,)) / np.sqrt(size)).astype(np.float32)

    def apply(params, obs):
        flat = obs.reshape(obs.shape[0], -1).astype(jnp.float32)
        return flat @ w + b, jnp.tanh(flat @ v)

    return apply


@functools.partial(jax.jit, static_argnames=("name",))
def _both_sides(name, obs):
    """For every symmetry ``j``, with the averaged network ``f``: ``f(d_j s)`` and
    ``d_j f(s)`` (logits ``[K, B, A]``) and the values ``f(d_j s)`` ``[K, B]``."""
    s = symmetries(name)
    averaged = sym.symmetric_apply(_random_network(*LAYOUT[name]), s)
    logits, value = averaged(None, obs)

    def sides(j):
        k = jnp.full((obs.shape[0],), j)
        moved_logits, moved_value = averaged(None, s.transform_obs(obs, k))
        return moved_logits, s.transform_policy(logits, k), moved_value

    lhs, rhs, values = jax.vmap(sides)(jnp.arange(s.num_symmetries))
    return lhs, rhs, values, value


@pytest.mark.parametrize("name", PGX_GAMES)
def test_the_averaged_network_is_equivariant(name):
    s = symmetries(name)
    shape, _ = LAYOUT[name]
    obs = jax.random.normal(jax.random.PRNGKey(1), (3,) + shape)
    lhs, rhs, moved_value, value = _both_sides(name, obs)
    # f(d_j s) = d_j f(s), up to float32 rounding of sums taken in another order.
    np.testing.assert_allclose(lhs, rhs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(moved_value, np.broadcast_to(value, moved_value.shape),
                               rtol=1e-5, atol=1e-6)
    # The plain network is not equivariant (in NumPy: d_j is a gather), so the
    # check above has something to check.
    apply = _random_network(*LAYOUT[name])
    flat = np.asarray(obs).reshape(3, shape[0] * shape[1], -1)
    plain = np.asarray(apply(None, obs)[0])
    for j in range(1, s.num_symmetries):
        moved = np.asarray(apply(None, flat[:, s.cells[j]].reshape(obs.shape))[0])
        assert np.max(np.abs(moved - plain[:, s.actions[j]])) > 0.1


def test_the_averaged_policy_averages_probabilities():
    s = sym.left_right(1, 2)

    def apply(params, obs):
        # p(s) = [0.9, 0.1], value 1 at s = (0, 1); [0.3, 0.7] and 0 at its mirror.
        is_s = obs[:, 0, 0, 0] == 0.0
        logits = jnp.where(is_s[:, None], jnp.log(jnp.array([0.9, 0.1])),
                           jnp.log(jnp.array([0.3, 0.7])))
        return logits, jnp.where(is_s, 1.0, 0.0)

    logits, value = sym.symmetric_apply(apply, s)(None, jnp.array([[[[0.0], [1.0]]]]))
    # Mirror back: [0.3, 0.7] -> [0.7, 0.3]; mean with [0.9, 0.1].
    np.testing.assert_allclose(jnp.exp(logits), [[0.8, 0.2]], rtol=1e-6)
    np.testing.assert_allclose(value, [0.5])


@pytest.mark.parametrize("name", PGX_GAMES)
def test_tables_match_the_pgx_layouts(name):
    game = _pgx_game(name)
    shape, num_actions = LAYOUT[name]
    assert game.observation_shape == shape and game.num_actions == num_actions


@jax.jit
def _search_fns(key, action):
    """``{mode: (root, recurrent output)}`` on 4 initial tic-tac-toe states."""
    s = symmetries("tic_tac_toe")
    apply = _random_network((3, 3, 2), 9)
    ttt = _pgx_game("tic_tac_toe")
    state = ttt.init(jax.random.PRNGKey(0), 4)
    out = {}
    for mode in sym.MODES:
        root = sym.make_root_fn(apply, ttt.environment, s, mode=mode)(None, key, state)
        step, _ = sym.make_recurrent_fn(apply, ttt.environment, s, mode=mode)(
            None, key, action, state)
        out[mode] = (root, step)
    return out


def test_random_mode_draws_the_symmetry_from_the_key():
    s = symmetries("tic_tac_toe")
    apply = _random_network((3, 3, 2), 9)
    action = jnp.array([0, 4, 5, 8])
    ttt = _pgx_game("tic_tac_toe")
    state = ttt.init(jax.random.PRNGKey(0), 4)
    after = ttt.environment.step(state, action)

    @jax.jit
    def expected(key, st):
        k = sym.draw_symmetries(key, 4, 8)
        logits, value = sym.apply_with_symmetry(apply, s, None, st.observation, k)
        legal = st.legal_action_mask & ~st.terminated[:, None]
        return k, mask_logits(logits, legal), value

    seen = set()
    for seed in range(3):
        key = jax.random.PRNGKey(seed)
        root, out = _search_fns(key, action)["random"]
        for st, got in ((state, root), (after, out)):
            k, logits, value = expected(key, st)
            np.testing.assert_allclose(got.prior_logits, logits, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(got.value, value, rtol=1e-6, atol=1e-6)
        seen.add(tuple(np.asarray(k)))
    assert len(seen) == 3  # different keys, different symmetries


def test_average_mode_gives_a_symmetric_prior_on_the_empty_board():
    root, _ = _search_fns(jax.random.PRNGKey(0), jnp.array([0, 4, 5, 8]))["average"]
    prior = np.asarray(jax.nn.softmax(root.prior_logits))[0]
    np.testing.assert_allclose(prior[[0, 2, 6, 8]], prior[0], rtol=1e-5)  # corners
    np.testing.assert_allclose(prior[[1, 3, 5, 7]], prior[1], rtol=1e-5)  # edges
    assert abs(prior[0] - prior[1]) > 1e-3


@pytest.mark.parametrize("name, moves", [("tic_tac_toe", 5), ("connect_four", 10)])
def test_symmetric_move_sequences_give_symmetric_positions(name, moves):
    # The rules commute with each symmetry: playing d(a_1), ..., d(a_t) from the
    # (symmetric) start gives d of the position reached by a_1, ..., a_t.
    game = _pgx_game(name)
    s = symmetries(name)
    count, games = s.num_symmetries, 3
    k = jnp.repeat(jnp.arange(count), games)  # [K * G]
    to_moved = jnp.asarray(s.actions)[jnp.asarray(s.inverse)]  # a -> d_k a
    step = jax.jit(game.environment.step)
    state = game.init(jax.random.PRNGKey(0), count * games)
    rng = np.random.default_rng(0)
    for _ in range(moves):
        base = state.legal_action_mask[:games]  # the k = 0 games
        action = np.array([rng.choice(np.flatnonzero(row)) for row in np.asarray(base)])
        moved = to_moved[k, jnp.tile(jnp.asarray(action), count)]
        state = step(state, moved)
        base_obs = jnp.tile(state.observation[:games], (count, 1, 1, 1))
        assert np.array_equal(state.observation, s.transform_obs(base_obs, k))
        base_legal = jnp.tile(state.legal_action_mask[:games], (count, 1))
        assert np.array_equal(state.legal_action_mask, s.transform_policy(base_legal, k))


@pytest.mark.parametrize("call, match", [
    (lambda: symmetries("chess"), "unknown pgx game 'chess'"),
    (lambda: sym.dihedral(0), "size"),
    (lambda: sym.make_recurrent_fn(None, None, sym.dihedral(3), mode="all"), "mode"),
    (lambda: sym.dihedral(3).transform_obs(jnp.zeros((1, 4, 4, 2)), jnp.zeros(1, int)),
     r"obs must be \[B, 3, 3"),
    (lambda: sym.dihedral(3).transform_policy(jnp.zeros((1, 8)), jnp.zeros(1, int)),
     r"policy must be \[B, 9\]"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ============================================ jaxpuct.alphazero.symmetry (augmentation)


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
    env = _pgx_game(game).env
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

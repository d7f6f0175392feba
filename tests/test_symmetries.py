"""jaxpuct.envs.symmetries and the pgx games' tables: group structure, exact
equivariance of the averaged network, random mode drawn from the recurrent_fn key,
and agreement with the games' real rules (pgx)."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpuct.envs import symmetries as sym
from jaxpuct.envs.adapter import mask_logits
from jaxpuct.envs.pgx_games import PGX_GAMES, symmetries

# Observation shape and number of actions of each pgx game (checked against pgx
# in test_tables_match_the_pgx_layouts).
LAYOUT = {"tic_tac_toe": ((3, 3, 2), 9), "connect_four": ((6, 7, 2), 7),
          "othello": ((8, 8, 2), 65), "go_9x9": ((9, 9, 17), 82)}


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
    expected = [board, np.rot90(board), np.rot90(board, 2), np.rot90(board, 3),
                np.fliplr(board), np.flipud(board), board.T, np.rot90(board, 2).T]
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


pgx = pytest.importorskip("pgx")
from jaxpuct.envs.pgx_games import make_pgx_game  # noqa: E402


@pytest.mark.parametrize("name", PGX_GAMES)
def test_tables_match_the_pgx_layouts(name):
    game = make_pgx_game(name)
    shape, num_actions = LAYOUT[name]
    assert game.observation_shape == shape and game.num_actions == num_actions


TTT = make_pgx_game("tic_tac_toe")


@jax.jit
def _search_fns(key, action):
    """``{mode: (root, recurrent output)}`` on 4 initial tic-tac-toe states."""
    s = symmetries("tic_tac_toe")
    apply = _random_network((3, 3, 2), 9)
    state = TTT.init(jax.random.PRNGKey(0), 4)
    out = {}
    for mode in sym.MODES:
        root = sym.make_root_fn(apply, TTT.environment, s, mode=mode)(None, key, state)
        step, _ = sym.make_recurrent_fn(apply, TTT.environment, s, mode=mode)(
            None, key, action, state)
        out[mode] = (root, step)
    return out


def test_random_mode_draws_the_symmetry_from_the_key():
    s = symmetries("tic_tac_toe")
    apply = _random_network((3, 3, 2), 9)
    action = jnp.array([0, 4, 5, 8])
    state = TTT.init(jax.random.PRNGKey(0), 4)
    after = TTT.environment.step(state, action)

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
    game = make_pgx_game(name) if name != "tic_tac_toe" else TTT
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

"""jaxpuct.muzero.symmetry against oracles: the 8 permutations recomputed from
board coordinates in NumPy, their group structure, the exact tic-tac-toe tables
(optimal moves move with the board), a hand-built batch against a NumPy loop, and
the example's jitted train step with ``symmetry_augment``; connect four's mirror
against NumPy flips and against pgx's rules (mirrored moves replayed give the
mirrored boards).

Kept small: tiny shapes, one jitted function, a 4-row batch for the train step.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpuct.muzero import symmetry
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.replay import Batch
from jaxpuct.muzero.targets import UnrollTargets
from jaxpuct.testing import tictactoe as ttt


def coordinate_maps() -> list[np.ndarray]:
    """The 8 maps ``cell -> cell`` of the square, from ``(row, col)`` formulas:
    ``sigma[a]`` is where a stone on cell ``a`` goes."""
    formulas = [lambda r, c: (r, c), lambda r, c: (c, 2 - r), lambda r, c: (2 - r, 2 - c),
                lambda r, c: (2 - c, r), lambda r, c: (r, 2 - c), lambda r, c: (2 - r, c),
                lambda r, c: (c, r), lambda r, c: (2 - c, 2 - r)]
    maps = []
    for f in formulas:
        sigma = np.empty(9, np.int64)
        for r, c in itertools.product(range(3), range(3)):
            r2, c2 = f(r, c)
            sigma[3 * r + c] = 3 * r2 + c2
        maps.append(sigma)
    return maps


def move_board(board: np.ndarray, k: int) -> np.ndarray:
    """``d_k`` of a flat ``[..., 9]`` board by the gather table."""
    return board[..., symmetry.CELLS[k]]


def test_the_tables_are_the_dihedral_group_of_the_square():
    maps = coordinate_maps()
    moves = [tuple(m) for m in symmetry.MOVES]
    # The same 8 maps as the coordinate formulas, 8 distinct ones, identity first.
    assert sorted(moves) == sorted(tuple(m) for m in maps)
    assert len(set(moves)) == 8 and moves[0] == tuple(range(9))
    for k in range(8):
        # CELLS gathers what MOVES sends: a stone on a lands on MOVES[k, a].
        np.testing.assert_array_equal(symmetry.CELLS[k][symmetry.MOVES[k]], np.arange(9))
    # Closure and inverses under composition.
    for p, q in itertools.product(symmetry.MOVES, repeat=2):
        assert tuple(p[q]) in set(moves)
    for p in symmetry.MOVES:
        assert tuple(np.argsort(p)) in set(moves)
    # Each is a symmetry of the rules: the 8 lines go to lines.
    lines = {frozenset(line) for line in [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6),
                                          (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]}
    for p in symmetry.MOVES:
        assert {frozenset(int(p[a]) for a in line) for line in lines} == lines


def test_optimal_moves_move_with_the_board():
    """Over every non-terminal position: ``d s`` has the minimax value of ``s`` and
    its optimal moves are ``MOVES[k]`` of those of ``s`` (the exact tables)."""
    values, optimal = ttt.value_table(), ttt.optimal_move_table()
    positions = np.asarray(ttt.all_positions())
    codes = np.asarray([ttt.code(tuple(p)) for p in positions])
    for k in range(8):
        moved_codes = np.asarray([ttt.code(tuple(int(c) for c in m))
                                  for m in move_board(positions, k)])
        np.testing.assert_array_equal(values[moved_codes], values[codes])
        # optimal(d s)[MOVES[k, a]] == optimal(s)[a], i.e. optimal(d s) = gather by CELLS.
        np.testing.assert_array_equal(optimal[moved_codes],
                                      optimal[codes][:, symmetry.CELLS[k]])


def random_targets(rng: np.random.Generator, rows: int, k: int, num_actions: int,
                   sampled: bool) -> UnrollTargets:
    """Random ``[rows, K + 1]`` targets over ``num_actions``; ``sampled``: weights over
    ``num_actions // 2`` sampled ids instead, the last slot unfilled (-1)."""
    policy = rng.dirichlet(np.ones(num_actions), size=(rows, k + 1)).astype(np.float32)
    policy_actions = None
    if sampled:
        slots = num_actions // 2
        policy = policy[..., :slots]
        policy_actions = jnp.asarray(rng.integers(0, num_actions, (rows, k + 1, slots)),
                                     jnp.int32)
        policy_actions = policy_actions.at[:, :, slots - 1].set(-1)  # an unfilled slot
    return UnrollTargets(value=jnp.asarray(rng.normal(size=(rows, k + 1)), jnp.float32),
                         reward=jnp.asarray(rng.normal(size=(rows, k + 1)), jnp.float32),
                         policy=jnp.asarray(policy),
                         policy_mask=jnp.asarray(rng.random((rows, k + 1)) < 0.7),
                         policy_actions=policy_actions)


def hand_built_batch(rng: np.random.Generator, sampled: bool) -> Batch:
    """8 rows (one per symmetry), unrolls of K = 2, random planes and targets."""
    rows, k = 8, 2
    targets = random_targets(rng, rows, k, 9, sampled)
    return Batch(obs=jnp.asarray(rng.integers(0, 2, (rows, 18)), jnp.float32),
                 actions=jnp.asarray(rng.integers(0, 9, (rows, k)), jnp.int32),
                 targets=targets, weights=jnp.asarray(rng.random(rows), jnp.float32),
                 index=jnp.arange(rows, dtype=jnp.int32))


_augment = jax.jit(symmetry.augment_batch)


@pytest.mark.parametrize("sampled", [False, True])
def test_an_augmented_batch_is_the_permuted_original(sampled):
    batch = hand_built_batch(np.random.default_rng(3), sampled)
    ks = np.arange(8)
    out = jax.tree.map(np.asarray, _augment(batch, jnp.asarray(ks, jnp.int32)))
    src = jax.tree.map(np.asarray, batch)
    maps = coordinate_maps()
    for b, k in enumerate(ks):
        sigma = np.asarray(symmetry.MOVES[k])
        assert any(np.array_equal(sigma, m) for m in maps)
        for plane in range(2):
            expect = np.zeros(9, np.float32)
            expect[sigma] = src.obs[b, 9 * plane:9 * plane + 9]  # a stone on a goes to sigma[a]
            np.testing.assert_array_equal(out.obs[b, 9 * plane:9 * plane + 9], expect)
        np.testing.assert_array_equal(out.actions[b], sigma[src.actions[b]])
        if sampled:
            ids = src.targets.policy_actions[b]
            expect_ids = np.where(ids >= 0, sigma[np.clip(ids, 0, 8)], ids)
            np.testing.assert_array_equal(out.targets.policy_actions[b], expect_ids)
            np.testing.assert_array_equal(out.targets.policy[b], src.targets.policy[b])
        else:
            expect = np.zeros((3, 9), np.float32)
            expect[:, sigma] = src.targets.policy[b]
            np.testing.assert_array_equal(out.targets.policy[b], expect)
    for name in ("value", "reward", "policy_mask"):
        np.testing.assert_array_equal(getattr(out.targets, name),
                                      getattr(src.targets, name))
    np.testing.assert_array_equal(out.weights, src.weights)
    np.testing.assert_array_equal(out.index, src.index)


def test_playing_the_moved_action_on_the_moved_board_gives_the_moved_result():
    """Observation and actions move together: place action ``a`` on the mover's
    plane, then move the board, equals moving the board, then placing ``d a``."""
    batch = hand_built_batch(np.random.default_rng(5), sampled=False)
    batch = batch._replace(obs=jnp.zeros_like(batch.obs))
    ks = jnp.arange(8, dtype=jnp.int32)
    out = _augment(batch, ks)
    for b in range(8):
        board = np.zeros(9)
        board[int(batch.actions[b, 0])] = 1
        moved = np.zeros(9)
        moved[int(out.actions[b, 0])] = 1
        np.testing.assert_array_equal(move_board(board, b), moved)


def test_the_config_flag_refuses_games_without_symmetries_and_the_train_step_runs():
    from examples import muzero as example
    from jaxpuct.alphazero import config as config_lib
    from jaxpuct.muzero import replay

    with pytest.raises(ValueError, match="symmetry_augment"):
        MuZeroConfig(game="2048", symmetry_augment=True)
    with pytest.raises(ValueError, match="symmetry_augment"):
        symmetry.check_game("2048")
    args = example.build_parser().parse_args(["--symmetry-augment", "--policy", "alphazero"])
    config = config_lib.from_namespace(MuZeroConfig, args)
    assert config.symmetry_augment and not MuZeroConfig().symmetry_augment
    config = MuZeroConfig(policy="alphazero", hidden=(8,), latent_size=8, buffer_size=64,
                          train_batch_size=4, train_steps=1, unroll_steps=2,
                          symmetry_augment=True)
    graphdef, optimizer, ts = example.initial_state(config)
    rng = np.random.default_rng(0)
    games, plies = 2, 9
    written = np.arange(plies)[None, :] < np.asarray([[7], [9]])
    end = np.zeros((games, plies), bool)
    end[0, 6] = end[1, 8] = True
    buffer = replay.write_episodes(
        ts.buffer, obs=jnp.asarray(rng.integers(0, 2, (games, plies, 18)), jnp.float32),
        action=jnp.asarray(rng.integers(0, 9, (games, plies)), jnp.int32),
        reward=jnp.asarray(end * 1.0, jnp.float32),
        policy=jnp.asarray(rng.dirichlet(np.ones(9), (games, plies)), jnp.float32),
        root_value=jnp.zeros((games, plies), jnp.float32), episode_end=jnp.asarray(end),
        written=jnp.asarray(written))
    params, _, _, metrics, _ = example.train_step(
        config, graphdef, optimizer, ts.params, ts.opt_state, buffer, jax.random.key(1),
        None, jnp.int32(0), jnp.int32(0))
    assert all(np.isfinite(float(v)) for v in metrics.values())
    changed = jax.tree.leaves(jax.tree.map(lambda a, b: bool(jnp.any(a != b)), params,
                                           ts.params))
    assert any(changed)


_augment_c4 = jax.jit(symmetry.augment_batch, static_argnums=2)


def c4_batch(rng: np.random.Generator, rows: int, k: int, sampled: bool) -> Batch:
    """``rows`` connect-four unrolls of ``K = k`` with random planes, actions and
    targets, and the consistency loss's next observations."""
    targets = random_targets(rng, rows, k, 7, sampled)
    return Batch(obs=jnp.asarray(rng.random((rows, 6, 7, 2)) < 0.3),
                 actions=jnp.asarray(rng.integers(0, 7, (rows, k)), jnp.int32),
                 targets=targets, weights=jnp.asarray(rng.random(rows), jnp.float32),
                 index=jnp.arange(rows, dtype=jnp.int32),
                 next_obs=jnp.asarray(rng.random((rows, k, 6, 7, 2)) < 0.3))


@pytest.mark.parametrize("sampled", [False, True])
def test_connect_four_mirror_is_the_numpy_flip(sampled):
    group = symmetry.GROUPS["connect_four"]
    assert group.num_symmetries == 2
    batch = c4_batch(np.random.default_rng(11), 6, 3, sampled)
    ks = np.asarray([0, 1, 1, 0, 1, 0])
    out = jax.tree.map(np.asarray, _augment_c4(batch, jnp.asarray(ks, jnp.int32),
                                               "connect_four"))
    src = jax.tree.map(np.asarray, batch)
    for b, k in enumerate(ks):
        flip = (lambda x: x[..., ::-1, :]) if k else (lambda x: x)  # the width axis
        np.testing.assert_array_equal(out.obs[b], flip(src.obs[b]))
        np.testing.assert_array_equal(out.next_obs[b], flip(src.next_obs[b]))
        np.testing.assert_array_equal(out.actions[b],
                                      6 - src.actions[b] if k else src.actions[b])
        if sampled:
            ids = src.targets.policy_actions[b]
            expect = np.where(ids >= 0, 6 - ids, ids) if k else ids
            np.testing.assert_array_equal(out.targets.policy_actions[b], expect)
            np.testing.assert_array_equal(out.targets.policy[b], src.targets.policy[b])
        else:
            expect = src.targets.policy[b][:, ::-1] if k else src.targets.policy[b]
            np.testing.assert_array_equal(out.targets.policy[b], expect)
    for name in ("value", "reward", "policy_mask"):
        np.testing.assert_array_equal(getattr(out.targets, name),
                                      getattr(src.targets, name))
    with pytest.raises(ValueError, match=r"connect_four batch has obs \[B, 6, 7, 2\]"):
        symmetry.augment_batch(hand_built_batch(np.random.default_rng(0), False),
                               jnp.zeros(8, jnp.int32), "connect_four")


def test_connect_four_mirrored_moves_replayed_by_pgx_give_the_mirrored_boards():
    """The rules' oracle: a random pgx game's unrolls (observation, action, next
    observation), mirrored by ``augment_batch``, equal the observations pgx gives
    when the mirrored actions are played from the empty board."""
    pgx = pytest.importorskip("pgx")
    env = pgx.make("connect_four")
    init, step = jax.jit(env.init), jax.jit(env.step)
    rng = np.random.default_rng(2)
    state, observations, actions = init(jax.random.key(0)), [], []
    while not bool(state.terminated) and len(actions) < 20:
        observations.append(np.asarray(state.observation))
        action = int(rng.choice(np.flatnonzero(np.asarray(state.legal_action_mask))))
        actions.append(action)
        state = step(state, action)
    observations.append(np.asarray(state.observation))
    plies = len(actions)
    assert plies >= 8
    obs = np.stack(observations)  # [plies + 1, 6, 7, 2]
    unused = jnp.zeros((plies, 2), jnp.float32)
    batch = Batch(obs=jnp.asarray(obs[:-1]), actions=jnp.asarray(actions, jnp.int32)[:, None],
                  targets=UnrollTargets(value=unused, reward=unused,
                                        policy=jnp.full((plies, 2, 7), 1 / 7, jnp.float32),
                                        policy_mask=jnp.ones((plies, 2), bool)),
                  weights=jnp.ones(plies), index=jnp.arange(plies, dtype=jnp.int32),
                  next_obs=jnp.asarray(obs[1:, None]))
    moved = _augment_c4(batch, jnp.ones(plies, jnp.int32), "connect_four")
    mirror = init(jax.random.key(0))
    for t in range(plies):
        np.testing.assert_array_equal(np.asarray(moved.obs[t]), np.asarray(mirror.observation))
        mirror = step(mirror, int(moved.actions[t, 0]))
        np.testing.assert_array_equal(np.asarray(moved.next_obs[t, 0]),
                                      np.asarray(mirror.observation))
    assert not np.array_equal(np.asarray(moved.obs), obs[:-1])  # a non-trivial game

"""jaxpuct.envs.rollouts on tic-tac-toe (the JAX rules of jaxpuct.testing.tictactoe),
against exact playouts in NumPy, hand-computed bootstraps and the known outcome
frequencies of uniformly random play."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpuct.envs import adapter, rollouts
from jaxpuct.envs.adapter import Environment
from jaxpuct.testing import tictactoe as ttt

NET_VALUE = 0.25  # the stand-in network's value everywhere


def _reward(prev: ttt.State, new: ttt.State) -> jax.Array:
    """``[B]``: 1 when the mover completed a line (the new view is the opponent's,
    so the mover's stones are -1 there)."""
    won = jnp.any(jnp.all(new.board[:, ttt.LINES] == -1, axis=-1), axis=-1)
    return jnp.where(~prev.terminal & won, 1.0, 0.0).astype(jnp.float32)


ENV = Environment(
    step=lambda state, action: ttt.step(state, action)[0],
    observe=lambda state: state.board.astype(jnp.float32),
    legal_mask=ttt.legal,
    terminal=lambda state: state.terminal,
    reward=_reward,
)


def _apply(params, obs):
    """Logits that depend on the board; a constant value."""
    del params
    return obs * 0.5 - 0.1, jnp.full(obs.shape[:1], NET_VALUE, jnp.float32)


def _lowest_cell_first(state: ttt.State) -> jax.Array:
    """Greedy rollout policy: the lowest empty cell."""
    return -jnp.broadcast_to(jnp.arange(9, dtype=jnp.float32), state.board.shape)


@functools.partial(jax.jit, static_argnames=("max_steps", "greedy"))
def _returns(state, key, max_steps=9, greedy=False):
    return rollouts.rollout_return(
        _apply, ENV, None, state, key, max_steps=max_steps,
        rollout_logits=_lowest_cell_first if greedy else None, greedy=greedy)


def _exact_greedy_return(position: ttt.Position) -> float:
    """NumPy playout of the lowest-empty-cell policy; the outcome for the player to
    move at ``position``."""
    mover = ttt.to_move(position)
    while not ttt.is_terminal(position):
        position = ttt.play(position, ttt.legal_moves(position)[0])
    return float(ttt.winner(position) * mover)


def test_a_greedy_rollout_equals_an_exact_playout():
    rng = np.random.default_rng(0)
    positions = [p for p in ttt.all_positions() if not ttt.is_terminal(p)]
    sample = [positions[i] for i in rng.choice(len(positions), 128, replace=False)]
    z = np.asarray(_returns(ttt.batch(sample), jax.random.PRNGKey(0), greedy=True))
    assert z.tolist() == [_exact_greedy_return(p) for p in sample]
    assert {-1.0, 0.0, 1.0} <= set(z.tolist())  # the sample has every outcome


def test_a_one_ply_win_gives_plus_one_to_the_mover():
    # X to move, one empty cell (2), which completes X's top row: any policy wins.
    one_move = ttt.parse("XX. OOX XOO")
    # O to move, empty cells 3 and 7; 3 completes O's middle row, and the greedy
    # policy plays the lowest empty cell.
    two_moves = ttt.parse("XXO .OO X.X")
    assert ttt.to_move(one_move) == 1 and ttt.to_move(two_moves) == -1
    assert _returns(ttt.batch([one_move]), jax.random.PRNGKey(0)).tolist() == [1.0]
    z = _returns(ttt.batch([two_moves]), jax.random.PRNGKey(0), greedy=True)
    assert z.tolist() == [1.0]


def test_a_rollout_cut_short_is_bootstrapped_with_the_network_value():
    empty = ttt.batch([ttt.EMPTY])
    key = jax.random.PRNGKey(3)
    # One move (no game ends in one move): z = discount * v = -v; two moves: +v.
    np.testing.assert_array_equal(_returns(empty, key, max_steps=1), -NET_VALUE)
    np.testing.assert_array_equal(_returns(empty, key, max_steps=2), NET_VALUE)
    # X to move fills the last cell: a draw, so the rollout ends before the cap.
    full_soon = ttt.batch([ttt.parse("XOX XOO OX.")])
    assert _returns(full_soon, key, max_steps=1).tolist() == [0.0]  # ended: no bootstrap


def test_uniform_rollouts_match_random_play_statistics():
    # Uniformly random tic-tac-toe from the empty board: X wins 737/1260 (58.5%),
    # O wins 363/1260 (28.8%), draws 160/1260 (12.7%) (the exact probabilities of
    # random play). z is from X's view. 2000 games: standard error about 1.1%.
    z = np.asarray(_returns(ttt.batch([ttt.EMPTY] * 2000), jax.random.PRNGKey(7)))
    assert abs(np.mean(z == 1) - 737 / 1260) < 0.04
    assert abs(np.mean(z == -1) - 363 / 1260) < 0.04
    assert abs(np.mean(z == 0) - 160 / 1260) < 0.04


def test_rollouts_follow_the_key():
    empty = ttt.batch([ttt.EMPTY] * 2000)  # the shape above: no new compile
    a = np.asarray(_returns(empty, jax.random.PRNGKey(1)))
    b = np.asarray(_returns(empty, jax.random.PRNGKey(1)))
    c = np.asarray(_returns(empty, jax.random.PRNGKey(2)))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def _cell_value(params, obs):
    """Value ``sum_c (c + 1) * board[c]``: after one move from the empty board (the
    mover's stone is -1 in the new view) it is ``-(a + 1)``, so a rollout cut after
    one move returns ``z = a + 1`` and shows the move ``a`` it sampled."""
    del params
    return jnp.zeros_like(obs), obs @ jnp.arange(1.0, 10.0, dtype=jnp.float32)


def test_sampled_moves_follow_the_softmax_of_the_rollout_logits():
    # 4000 one-move rollouts from the empty board with logits (a - 4) / 2 over the 9
    # cells: each cell's frequency is its softmax probability (standard error
    # under 0.008 for every cell).
    logits = (jnp.arange(9, dtype=jnp.float32) - 4.0) / 2.0
    z = jax.jit(lambda state, key: rollouts.rollout_return(
        _cell_value, ENV, None, state, key, max_steps=1,
        rollout_logits=lambda s: jnp.broadcast_to(logits, s.board.shape)))(
        ttt.batch([ttt.EMPTY] * 4000), jax.random.PRNGKey(11))
    moves = np.asarray(z).astype(int) - 1
    frequency = np.bincount(moves, minlength=9) / len(moves)
    np.testing.assert_allclose(frequency, np.asarray(jax.nn.softmax(logits)), atol=0.03)


RECURRENT = {mix: rollouts.make_recurrent_fn(_apply, ENV, mix=mix, max_steps=9)
             for mix in (0.0, 0.5, 1.0)}
BASE = adapter.make_recurrent_fn(_apply, ENV)


@functools.partial(jax.jit, static_argnames=("mix",))
def _step(mix, key, action, state):
    fn = BASE if mix is None else RECURRENT[mix]
    return fn(None, key, action, state)[0]


def _positions():
    return ttt.batch([ttt.EMPTY, ttt.parse("XX. OO. ..."), ttt.parse("XOX XOO OX.")])


def test_mix_zero_is_bit_identical_to_no_rollout():
    action = jnp.array([4, 2, 8])
    key = jax.random.PRNGKey(0)
    plain, mixed = _step(None, key, action, _positions()), _step(0.0, key, action,
                                                                 _positions())
    for field in ("reward", "discount", "prior_logits", "value", "legal_action_mask",
                  "terminal"):
        x, y = np.asarray(getattr(plain, field)), np.asarray(getattr(mixed, field))
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), field


def test_the_leaf_value_mixes_network_and_rollout():
    # Row 0: X takes the centre (game goes on); row 1: X completes the top row
    # (terminal); row 2: X fills the last cell (a draw, terminal).
    action = jnp.array([4, 2, 8])
    key = jax.random.PRNGKey(5)
    half, full = _step(0.5, key, action, _positions()), _step(1.0, key, action,
                                                            _positions())
    after = ENV.step(_positions(), action)
    z = _returns(after, key)  # the same rollouts: same key, same state
    assert np.asarray(full.terminal).tolist() == [False, True, True]
    # A terminal state keeps its own value (0; the outcome is in the reward).
    assert np.asarray(half.value)[1:].tolist() == [0.0, 0.0]
    assert np.asarray(half.reward).tolist() == [0.0, 1.0, 0.0]
    np.testing.assert_allclose(half.value[0], 0.5 * NET_VALUE + 0.5 * z[0], rtol=1e-6)
    np.testing.assert_allclose(full.value[0], z[0], rtol=1e-6)


@pytest.mark.parametrize("kwargs, match", [
    (dict(mix=1.5), "mix must be in"), (dict(mix=-0.1), "mix"),
    (dict(max_steps=0), "max_steps must be an int >= 1"), (dict(max_steps=2.0), "max_steps"),
])
def test_bad_arguments_name_themselves(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rollouts.make_recurrent_fn(_apply, ENV, **kwargs)

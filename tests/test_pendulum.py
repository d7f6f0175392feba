"""The Pendulum-v1 dynamics against Gymnasium's equations written out in NumPy, the
example's stored n-step value targets (bootstrapped at the 200-step cut) against a
NumPy loop, and one small iteration of ``examples/pendulum.py`` (self-play, replay,
training) for each model under jit; the learned model's loss has its oracle in
``test_continuous_muzero.py``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpuct.muzero import replay as replay_lib
from jaxpuct.testing import pendulum as pend


def gym_step(th, thdot, u):
    """Gymnasium's ``PendulumEnv.step`` in float64 (g = 10, m = l = 1, dt = 0.05)."""
    u = np.clip(u, -2.0, 2.0)
    norm = ((th + np.pi) % (2 * np.pi)) - np.pi
    cost = norm ** 2 + 0.1 * thdot ** 2 + 0.001 * u ** 2
    new_thdot = np.clip(thdot + (3 * 10.0 / 2 * np.sin(th) + 3.0 * u) * 0.05, -8.0, 8.0)
    return th + new_thdot * 0.05, new_thdot, -cost


_STEP = jax.jit(pend.step)


def test_dynamics_match_gymnasiums_equations_over_a_random_rollout():
    rng = np.random.default_rng(0)
    state = pend.reset(jax.random.key(0), 16)
    th, thdot = (np.asarray(x, np.float64) for x in state)
    assert np.all(np.abs(th) <= np.pi) and np.all(np.abs(thdot) <= 1.0)
    for _ in range(60):
        u = rng.uniform(-3.0, 3.0, 16)  # beyond the bounds too: clipped
        state, reward = _STEP(state, jnp.asarray(u, jnp.float32)[:, None])
        th, thdot, want = gym_step(th, thdot, u)
        np.testing.assert_allclose(reward, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(state.theta, th, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(state.theta_dot, thdot, rtol=1e-4, atol=1e-4)
        th, thdot = (np.asarray(x, np.float64) for x in state)  # no drift in the check
    obs = np.asarray(pend.observe(state))
    np.testing.assert_allclose(obs, np.stack([np.cos(th), np.sin(th), thdot], -1), atol=1e-6)


def stored_value_targets(ex, config, replay, rows):
    """Position 0's value target of the windows from ``rows`` (no unroll)."""
    index, filled = replay_lib.window_rows(replay, rows, 1, config.td_steps)
    targets = replay_lib.window_targets(replay, index, filled, config.discount, 1,
                                        config.td_steps)
    return np.asarray(targets.value[:, 0])


def test_stored_targets_bootstrap_at_the_cut_and_one_training_iteration():
    from examples import pendulum as ex

    config = ex.Config(batch_size=2, num_simulations=3, num_samples=2, hidden=8,
                       train_steps=2, train_batch_size=8, replay_iterations=2, td_steps=3)
    graphdef, params = ex.nnx.split(ex.new_network(config, jax.random.key(0)))
    played = ex.play(config, graphdef, params, jax.random.key(2))
    assert played.sampled.shape == (2, pend.EPISODE_STEPS, 2, 1)
    np.testing.assert_allclose(np.asarray(played.weights).sum(-1), 1.0, atol=1e-5)
    size, length, n, gamma = 2 * pend.EPISODE_STEPS, pend.EPISODE_STEPS, 3, config.discount
    replay = ex.store(config, ex.empty_replay(config), played)
    assert int(replay_lib.filled_rows(replay)) == size
    # The episode is cut at 200 steps, not ended: the last n targets bootstrap
    # with the network's value after step 200.
    r, v = np.asarray(played.reward, np.float64), np.asarray(played.root_value, np.float64)
    v = np.concatenate([v, np.asarray(played.last_value)[:, None]], axis=1)
    want = np.zeros((2, length))
    for b in range(2):
        for t in range(length):
            m = min(n, length - t)
            want[b, t] = sum(gamma ** i * r[b, t + i] for i in range(m)) + gamma ** m * v[b, t + m]
    got = stored_value_targets(ex, config, replay, jnp.arange(size))
    np.testing.assert_allclose(got, want.reshape(-1), rtol=1e-4, atol=1e-3)
    optimizer = ex.make_optimizer(config)
    new, _, metrics = ex.train(config, graphdef, optimizer, params, optimizer.init(params),
                               replay, jax.random.key(3))
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert not np.allclose(jax.tree.leaves(new)[0], jax.tree.leaves(params)[0])
    # The third iteration's episodes overwrite the first's (a ring of two).
    again = played._replace(reward=played.reward + 1.0)
    replay = ex.store(config, ex.store(config, replay, played), again)
    np.testing.assert_array_equal(replay.reward[:size], np.asarray(again.reward).reshape(-1))
    np.testing.assert_array_equal(replay.reward[size:], np.asarray(played.reward).reshape(-1))


@pytest.mark.slow
def test_one_iteration_of_the_learned_model_from_the_muzero_package():
    from examples import pendulum as ex

    config = ex.Config(batch_size=2, num_simulations=3, num_samples=2, hidden=8,
                       latent_size=4, unroll_steps=3, train_steps=2, train_batch_size=16,
                       replay_iterations=1, model="learned")
    graphdef, params = ex.nnx.split(ex.new_network(config, jax.random.key(0)))
    played = ex.play(config, graphdef, params, jax.random.key(1))
    assert played.action.shape == (2, pend.EPISODE_STEPS, 1)
    replay = ex.store(config, ex.empty_replay(config), played)
    batch = ex.sample(config, replay, jax.random.key(2))
    assert batch.actions.shape == (16, 3, 1)
    optimizer = ex.make_optimizer(config)
    new, _, metrics = ex.train(config, graphdef, optimizer, params, optimizer.init(params),
                               replay, jax.random.key(3))
    assert all(np.isfinite(float(v)) and float(v) > 0 for v in metrics.values())
    assert not np.allclose(jax.tree.leaves(new)[0], jax.tree.leaves(params)[0])

"""The Pendulum-v1 dynamics against Gymnasium's equations written out in NumPy, the
example's n-step value targets against a NumPy loop, and one small iteration of
``examples/pendulum.py`` (self-play, replay, training) under jit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

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


def test_value_targets_and_one_training_iteration():
    from examples import pendulum as ex

    rng = np.random.default_rng(1)
    batch, length, n, gamma = 2, 7, 3, 0.9
    steps = ex.Steps(obs=None, sampled=None, weights=None,
                     reward=jnp.asarray(rng.normal(size=(batch, length)), jnp.float32),
                     root_value=jnp.asarray(rng.normal(size=(batch, length)), jnp.float32),
                     last_value=jnp.asarray(rng.normal(size=batch), jnp.float32))
    got = np.asarray(ex.value_targets(steps, gamma, n))
    r, v = np.asarray(steps.reward), np.asarray(steps.root_value)
    v = np.concatenate([v, np.asarray(steps.last_value)[:, None]], axis=1)
    for b in range(batch):
        for t in range(length):
            m = min(n, length - t)
            want = sum(gamma ** i * r[b, t + i] for i in range(m)) + gamma ** m * v[b, t + m]
            np.testing.assert_allclose(got[b, t], want, rtol=1e-5, atol=1e-5)

    config = ex.Config(batch_size=2, num_simulations=3, num_samples=2, hidden=8,
                       train_steps=2, train_batch_size=8, replay_iterations=2)
    net = ex.Network(config.hidden, config.value_scale, ex.nnx.Rngs(0))
    graphdef, params = ex.nnx.split(net)
    played = ex.play(config, graphdef, params, jax.random.key(2))
    assert played.sampled.shape == (2, pend.EPISODE_STEPS, 2, 1)
    np.testing.assert_allclose(np.asarray(played.weights).sum(-1), 1.0, atol=1e-5)
    size = 2 * pend.EPISODE_STEPS
    replay = ex.store(config, ex.empty_replay(config), played, jnp.int32(0))
    assert int(replay.filled) == size
    z = np.asarray(ex.value_targets(played, config.discount, config.td_steps)).reshape(-1)
    np.testing.assert_array_equal(replay.value[:size], z)
    np.testing.assert_array_equal(replay.value[size:], 0.0)
    # The third iteration overwrites the first slot of two.
    again = played._replace(reward=played.reward + 1.0)
    replay = ex.store(config, ex.store(config, replay, played, jnp.int32(1)), again,
                      jnp.int32(2))
    assert int(replay.filled) == 2 * size
    z2 = np.asarray(ex.value_targets(again, config.discount, config.td_steps)).reshape(-1)
    np.testing.assert_array_equal(replay.value[:size], z2)
    np.testing.assert_array_equal(replay.value[size:], z)
    optimizer = ex.optax.adam(config.learning_rate)
    new, _, metrics = ex.train(config, graphdef, optimizer, params, optimizer.init(params),
                               replay, jax.random.key(3))
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert not np.allclose(jax.tree.leaves(new)[0], jax.tree.leaves(params)[0])


def test_the_learned_models_unrolled_loss_matches_a_step_by_step_numpy_recomputation():
    from examples import pendulum as ex

    config = ex.Config(batch_size=2, num_simulations=3, num_samples=2, hidden=8,
                       latent_size=4, unroll_steps=3, train_batch_size=16, model="learned")
    graphdef, params = ex.nnx.split(ex.new_network(config, jax.random.key(0)))
    played = ex.play(config, graphdef, params, jax.random.key(1))
    replay = ex.store(config, ex.empty_replay(config), played, jnp.int32(0))
    rows = np.asarray(ex.sample_rows(config, replay, jax.random.key(2)))
    # Every unroll stays inside its episode.
    assert np.all(rows % pend.EPISODE_STEPS <= pend.EPISODE_STEPS - 1 - config.unroll_steps)
    loss, metrics = jax.jit(ex.unrolled_loss, static_argnums=(0, 1))(
        config, graphdef, params, replay, jnp.asarray(rows))
    model = ex.nnx.merge(graphdef, params)
    r = {k: np.asarray(getattr(replay, k), np.float64) for k in
         ("obs", "sampled", "weights", "value", "action", "reward")}
    latent = model.represent(jnp.asarray(r["obs"][rows], jnp.float32))
    policy = value = reward_total = 0.0
    u = config.unroll_steps
    for k in range(u + 1):
        weight = 1.0 if k == 0 else 1.0 / u
        prior, v = (np.asarray(x, np.float64) for x in model.predict(latent))
        mean, log_std = prior[:, :1], np.clip(prior[:, 1:], config.min_log_std, 2.0)
        a = r["sampled"][rows + k][..., 0]  # [N, K]
        log_pi = -0.5 * ((a - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
        policy += weight * np.mean(-np.sum(r["weights"][rows + k] * log_pi, -1))
        value += weight * np.mean(((v - r["value"][rows + k]) / config.value_scale) ** 2)
        if k < u:
            got_r, latent = model.dynamics(latent, jnp.asarray(r["action"][rows + k],
                                                               jnp.float32))
            reward_total += np.mean(((np.asarray(got_r) - r["reward"][rows + k])
                                     / config.reward_scale) ** 2) / u
    np.testing.assert_allclose(metrics["policy_loss"], policy, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(metrics["value_loss"], value, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(metrics["reward_loss"], reward_total, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(loss, policy + value + reward_total, rtol=1e-4, atol=1e-5)

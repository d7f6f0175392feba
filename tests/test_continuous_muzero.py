"""Sampled MuZero over a continuous action space in jaxpuct.muzero, and episodes
truncated by a time limit, against oracles: the buffer's windows of vector actions
and their n-step targets (bootstrapped at a truncation, absorbing at a terminal
end) against the episodes written out in NumPy; the unrolled loss (Gaussian
log-likelihood of the sampled vectors, categorical value and reward terms masked
past a truncation) against a step-by-step NumPy recomputation; the network's
bounded proposal and clipped action input; the model inside ``sampled_policy``;
reanalyse with the continuous search.

Shares test_muzero's NumPy helpers (two-hot, log-softmax) and its sizes.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import test_muzero as tm

import jaxpuct
from jaxpuct.muzero import reanalyse as rea
from jaxpuct.muzero import replay, training
from jaxpuct.muzero.model import MuZeroModel, muzero_puct_config
from jaxpuct.muzero.networks import MuZeroNetwork, NetworkConfig, init_network
from jaxpuct.sampled import GaussianActions

D, K = 2, 3  # action dimensions, samples per node
SCALE = 1.5  # the box [-1.5, 1.5]
SPACE = GaussianActions(D, min_log_std=-3.0)
SUPPORT = 5
NET = NetworkConfig(hidden=(16,), latent_size=8, value_support=SUPPORT, reward_support=SUPPORT,
                    action_scale=SCALE)
UNROLL, TD, ROWS = 3, 2, 32
LENGTHS = (4, 6, 5)
TRUNCATED = (True, False, True)  # the second episode ends (terminal)
LOSS = training.LossConfig(value_weight=0.5, reward_weight=0.7, policy_weight=1.3)


def nstep_numpy(rewards, values, discount, n, end_value):
    """z_t of one episode: the n-step sum, bootstrapped with ``end_value`` after
    the last step (0 for a terminal end)."""
    length = len(rewards)
    z = []
    for t in range(length):
        total = sum(discount ** i * rewards[t + i] for i in range(n) if t + i < length)
        total += (discount ** n * values[t + n] if t + n < length
                  else discount ** (length - t) * end_value)
        z.append(total)
    return np.array(z)


@functools.cache
def setting(discount=tm.GAMMA):
    """A continuous buffer of three episodes (15 of 32 rows), their NumPy fields and
    the row layout ``row -> (episode, step)``."""
    rng = np.random.default_rng(11)
    steps = max(LENGTHS)
    shapes = {"obs": (tm.OBS_SIZE,), "action": (D,), "reward": (), "policy": (K,),
              "root_value": (), "policy_actions": (K, D)}
    fields = {k: np.zeros((len(LENGTHS), steps, *s), np.float32) for k, s in shapes.items()}
    written = np.zeros((len(LENGTHS), steps), bool)
    layout = {}
    for b, length in enumerate(LENGTHS):
        for k, s in shapes.items():
            fields[k][b, :length] = rng.normal(size=(length, *s))
        weights = rng.random((length, K)) + 0.1
        fields["policy"][b, :length] = weights / weights.sum(-1, keepdims=True)
        written[b, :length] = True
        layout.update({len(layout) + t: (b, t) for t in range(length)})
    end_value = rng.normal(size=len(LENGTHS)).astype(np.float32)
    buffer = replay.empty_buffer(ROWS, (tm.OBS_SIZE,), jnp.float32, 0, num_samples=K,
                                 action_dim=D)
    buffer = jax.jit(replay.write_episodes)(
        buffer, episode_end=jnp.zeros(written.shape, bool), written=jnp.asarray(written),
        truncated=jnp.asarray(TRUNCATED), truncation_value=jnp.asarray(end_value),
        **{k: jnp.asarray(v) for k, v in fields.items()})
    return buffer, fields, end_value, layout


@functools.partial(jax.jit, static_argnums=(1,))
def _windows(buffer, discount):
    start = jnp.arange(sum(LENGTHS))
    index, filled = replay.window_rows(buffer, start, UNROLL, TD)
    return replay.window_targets(buffer, index, filled, discount, UNROLL, TD)


@pytest.mark.parametrize("discount", [tm.GAMMA, -1.0])
def test_windows_of_truncated_and_terminal_episodes_match_numpy(discount):
    buffer, fields, end_value, layout = setting()
    assert buffer.action.shape == (ROWS, D) and buffer.policy_actions.shape == (ROWS, K, D)
    assert buffer.legal.shape == (ROWS, 0) and buffer.action_dim == D
    got = jax.tree.map(np.asarray, _windows(buffer, discount))
    z = [nstep_numpy(fields["reward"][b, :n], fields["root_value"][b, :n], discount, TD,
                     end_value[b] if TRUNCATED[b] else 0.0) for b, n in enumerate(LENGTHS)]
    for row, (b, t) in layout.items():
        length = LENGTHS[b]
        for k in range(UNROLL + 1):
            inside = t + k < length
            known = inside or not TRUNCATED[b]
            assert got.value_mask[row, k] == known
            assert got.policy_mask[row, k] == inside
            np.testing.assert_allclose(got.value[row, k], z[b][t + k] if inside else 0.0,
                                       rtol=1e-5, atol=1e-6)
            if inside:
                np.testing.assert_array_equal(got.policy_actions[row, k],
                                              fields["policy_actions"][b, t + k])
            if k:
                want = fields["reward"][b, t + k - 1] if t + k - 1 < length else 0.0
                np.testing.assert_allclose(got.reward[row, k], want, rtol=1e-6)
    # The priorities see the same bootstrap at the truncation.
    prio = jax.jit(replay.trajectory_priorities, static_argnums=(4, 5))(
        jnp.asarray(fields["reward"]), jnp.asarray(fields["root_value"]),
        jnp.zeros(fields["reward"].shape, bool),
        jnp.asarray(np.arange(max(LENGTHS)) < np.array(LENGTHS)[:, None]), discount, TD,
        jnp.asarray(TRUNCATED), jnp.asarray(end_value))
    for b, length in enumerate(LENGTHS):
        np.testing.assert_allclose(
            np.asarray(prio)[b, :length],
            np.abs(fields["root_value"][b, :length] - z[b]) + replay.PRIORITY_EPSILON,
            rtol=1e-5, atol=1e-6)


_SAMPLE = jax.jit(replay.sample, static_argnums=(2, 3, 4, 5))


def test_sampled_batches_unroll_the_stored_vectors_inside_an_episode():
    buffer, fields, _, layout = setting()
    batch = _SAMPLE(buffer, jax.random.key(4), 16, UNROLL, TD, tm.GAMMA)
    assert batch.actions.shape == (16, UNROLL, D) and batch.actions.dtype == jnp.float32
    for b, start in enumerate(np.asarray(batch.index)):
        episode, t = layout[int(start)]
        for k in range(UNROLL):
            if t + k < LENGTHS[episode]:
                np.testing.assert_array_equal(batch.actions[b, k],
                                              fields["action"][episode, t + k])
    assert np.all(np.isfinite(np.asarray(batch.actions)))


def test_continuous_buffers_and_networks_refuse_bad_configurations_by_name():
    with pytest.raises(ValueError, match="need num_actions = 0 and num_samples >= 1"):
        replay.empty_buffer(8, (3,), jnp.float32, 0, action_dim=2)
    with pytest.raises(ValueError, match="need num_actions = 0"):
        replay.empty_buffer(8, (3,), jnp.float32, 4, num_samples=2, action_dim=2)
    with pytest.raises(ValueError, match="continuous actions need NetworkConfig.kind = 'mlp'"):
        init_network(NetworkConfig(kind="resnet"), SPACE, (3, 3, 2))
    with pytest.raises(ValueError, match="action_scale must be > 0"):
        NetworkConfig(action_scale=0.0)
    with pytest.raises(ValueError, match="end_value needs truncated"):
        jaxpuct.muzero.targets.unroll_targets(
            jnp.zeros((1, 6)), jnp.zeros((1, 6)), jnp.zeros((1, 6, 2)), jnp.zeros((1, 6), bool),
            jnp.ones((1, 6), bool), 1.0, 3, 2, end_value=jnp.zeros((1, 6)))


@functools.cache
def tiny_model():
    graphdef, params = init_network(NET, SPACE, tm.OBS_SIZE, jax.random.key(0, impl="rbg"))
    return MuZeroModel(graphdef, discount=0.9), params


@functools.partial(jax.jit, static_argnums=0)
def _forward(model, params, obs, action):
    net = model.network(params)
    latent = net.represent(obs)
    proposal, _ = net.predict(latent)
    return proposal, net.dynamics(latent, action)


def search_fn(params, keys, obs, legal):
    model, _ = tiny_model()
    assert legal.shape[-1] == 0  # no masks for vectors
    return jaxpuct.sampled_policy(params, keys, model.root(params, obs), model.recurrent_fn, 8,
                                  num_samples=K, action_space=SPACE,
                                  selection=muzero_puct_config())


_SEARCH = jax.jit(search_fn)


def test_the_network_bounds_its_proposal_clips_its_input_and_runs_in_the_sampled_search():
    model, params = tiny_model()
    assert isinstance(model.network(params), MuZeroNetwork)
    obs = jax.random.normal(jax.random.key(1), (5, tm.OBS_SIZE)) * 10
    inside = jnp.full((5, D), SCALE)
    proposal, (reward, latent) = _forward(model, params, obs, inside)
    assert proposal.shape == (5, 2 * D) and reward.shape == (5, 2 * SUPPORT + 1)
    assert np.all(np.abs(np.asarray(proposal[:, :D])) <= SCALE)
    # The dynamics sees the action the box applies: beyond it, the same as at it.
    _, (reward_out, latent_out) = _forward(model, params, obs, inside * 4)
    np.testing.assert_array_equal(reward_out, reward)
    np.testing.assert_array_equal(latent_out, latent)
    _, (reward_in, _) = _forward(model, params, obs, inside * 0.5)
    assert not np.allclose(reward_in, reward)

    out = _SEARCH(params, jax.random.split(jax.random.key(2), 5), obs, jnp.zeros((5, 0), bool))
    assert out.action.shape == (5, D) and out.sampled_actions.shape == (5, K, D)
    np.testing.assert_allclose(np.asarray(out.action_weights).sum(-1), 1.0, atol=1e-5)
    chosen = np.argmax(np.asarray(out.action_weights), -1)
    # A draw in proportion to the visits is one of the root's samples.
    played = np.asarray(out.action)
    assert all(np.any(np.all(np.asarray(out.sampled_actions[b]) == played[b], -1))
               for b in range(5)), chosen
    np.testing.assert_allclose(np.asarray(out.search_tree.node_discounts)[:, 1:2], 0.9)


@functools.partial(jax.jit, static_argnums=0)
def _loss(model, params, batch):
    return training.unroll_loss(model.network(params), batch, LOSS)


@functools.partial(jax.jit, static_argnums=0)
def _plain_unroll(model, params, obs, actions):
    net = model.network(params)
    latent = net.represent(obs)
    outs = []
    for k in range(actions.shape[1] + 1):
        proposal, value = net.predict(latent)
        reward = None
        if k < actions.shape[1]:
            reward, latent = net.dynamics(latent, actions[:, k])
        outs.append((proposal, value, reward))
    return outs


def test_the_unrolled_loss_matches_numpy_with_nothing_trained_past_a_truncation():
    model, params = tiny_model()
    buffer, _, _, _ = setting()
    batch = _SAMPLE(buffer, jax.random.key(6), 16, UNROLL, TD, tm.GAMMA)
    t = jax.tree.map(np.asarray, batch.targets)
    assert not t.value_mask.all()  # some windows cross a truncation
    loss, metrics = _loss(model, params, batch)
    outs = _plain_unroll(model, params, batch.obs, batch.actions)
    size = SUPPORT
    w = np.array([1.0] + [1.0 / UNROLL] * UNROLL)
    policy, value, reward = (np.zeros((16, UNROLL + 1)) for _ in range(3))
    for k, (proposal, v, r) in enumerate(outs):
        proposal = np.asarray(proposal, np.float64)
        mean, log_std = proposal[:, :D], np.clip(proposal[:, D:], SPACE.min_log_std,
                                                 SPACE.max_log_std)
        a = t.policy_actions[:, k]  # [B, K, D]
        z = (a - mean[:, None]) / np.exp(log_std)[:, None]
        log_pi = np.sum(-0.5 * z ** 2 - log_std[:, None] - 0.5 * np.log(2 * np.pi), -1)
        policy[:, k] = -np.sum(t.policy[:, k] * log_pi, -1) * t.policy_mask[:, k]
        value[:, k] = -np.sum(tm.two_hot_numpy(t.value[:, k], size)
                              * tm.log_softmax_numpy(v), -1) * t.value_mask[:, k]
        if r is not None:
            reward[:, k + 1] = -np.sum(tm.two_hot_numpy(t.reward[:, k + 1], size)
                                       * tm.log_softmax_numpy(r), -1) * t.value_mask[:, k]
    per_row = 1.3 * policy @ w + 0.5 * value @ w + 0.7 * reward[:, 1:] @ w[1:]
    np.testing.assert_allclose(loss, np.mean(per_row), rtol=1e-5)
    np.testing.assert_allclose(metrics["policy_loss"], np.mean(policy @ w), rtol=1e-5)
    np.testing.assert_allclose(metrics["value_loss"], np.mean(value @ w), rtol=1e-5)
    np.testing.assert_allclose(metrics["reward_loss"], np.mean(reward[:, 1:] @ w[1:]),
                               rtol=1e-5)


_REANALYSE = jax.jit(functools.partial(
    rea.reanalyse_batch, search_fn=search_fn, fraction=0.5, unroll_steps=UNROLL,
    td_steps=TD, discount=tm.GAMMA))


@pytest.mark.slow
def test_reanalyse_with_the_continuous_search_gives_its_samples_and_keeps_the_rest():
    model, params = tiny_model()
    buffer, _, _, layout = setting()
    batch = _SAMPLE(buffer, jax.random.key(8), 4, UNROLL, TD, tm.GAMMA)
    key = jax.random.key(3)
    got = _REANALYSE(buffer, batch, params, key)
    positions = rea.searched_positions(UNROLL, TD, bootstrap=True)
    for b in range(2):
        start = int(batch.index[b])
        episode, t = layout[start]
        rows = (start + np.asarray(positions)) % ROWS
        keys = jax.random.split(jax.random.fold_in(key, start), len(positions))
        direct = _SEARCH(params, keys, buffer.obs[rows], jnp.zeros((len(rows), 0), bool))
        for k in range(UNROLL + 1):
            if t + k < LENGTHS[episode]:
                np.testing.assert_array_equal(got.targets.policy_actions[b, k],
                                              direct.sampled_actions[k])
                np.testing.assert_array_equal(got.targets.policy[b, k],
                                              direct.action_weights[k])
    np.testing.assert_array_equal(got.targets.value_mask, batch.targets.value_mask)
    for new, old in zip(jax.tree.leaves(got.targets), jax.tree.leaves(batch.targets),
                        strict=True):
        np.testing.assert_array_equal(new[2:], old[2:])

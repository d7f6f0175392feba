"""EfficientZero's temporal-consistency loss in the MuZero package
(``jaxpuct.muzero.training.consistency_loss``): the term against a NumPy
recomputation, its masks and its stopped gradient, the sampler's next
observations, symmetry moving them with the row, the refusals, and the example
running with it (and redrawing its metrics.png)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxpuct.muzero import networks, replay, symmetry, training
from jaxpuct.muzero import targets as targets_lib
from jaxpuct.muzero.config import MuZeroConfig

OBS, ACTIONS, K, ROWS = 5, 3, 3, 6
CONFIG = networks.NetworkConfig(hidden=(16,), latent_size=6, projection=8)


def _network(config=CONFIG, seed=0):
    return networks.MuZeroNetwork(config, ACTIONS, (OBS,), rngs=nnx.Rngs(seed))


def _batch(seed=0, steps=K):
    rng = np.random.default_rng(seed)
    # Row 0: whole window in the episode; the others end it after 0..K steps.
    inside = np.ones((ROWS, steps + 1), bool)
    for row, end in enumerate([steps + 1, 1, 2, 3, steps + 1, 2][:ROWS]):
        inside[row, end:] = False
    targets = targets_lib.UnrollTargets(
        value=jnp.asarray(rng.normal(size=(ROWS, steps + 1)), jnp.float32),
        reward=jnp.asarray(rng.normal(size=(ROWS, steps + 1)), jnp.float32),
        policy=jnp.full((ROWS, steps + 1, ACTIONS), 1.0 / ACTIONS),
        policy_mask=jnp.asarray(inside))
    return replay.Batch(
        obs=jnp.asarray(rng.normal(size=(ROWS, OBS)), jnp.float32),
        actions=jnp.asarray(rng.integers(0, ACTIONS, (ROWS, steps)), jnp.int32),
        targets=targets, weights=jnp.asarray(rng.uniform(0.5, 1.5, ROWS), jnp.float32),
        index=jnp.arange(ROWS, dtype=jnp.int32),
        next_obs=jnp.asarray(rng.normal(size=(ROWS, steps, OBS)), jnp.float32))


ONLY_CONSISTENCY = training.LossConfig(policy_weight=0.0, value_weight=0.0,
                                       reward_weight=0.0, consistency_weight=2.0)


@jax.jit
def _loss(params, batch):
    net = nnx.merge(GRAPHDEF, params)
    return training.unroll_loss(net, batch, ONLY_CONSISTENCY)


GRAPHDEF, PARAMS = nnx.split(_network())


def test_the_term_matches_a_numpy_recomputation_with_its_masks_and_weights():
    batch = _batch()
    loss, metrics = _loss(PARAMS, batch)

    # The network's pieces one by one, the loss's arithmetic in NumPy (float64).
    net = nnx.merge(GRAPHDEF, PARAMS)
    latent = net.represent(batch.obs)
    online, target = [], []
    for k in range(K):
        _, latent = net.dynamics(latent, batch.actions[:, k])
        online.append(np.asarray(net.project(latent, predictor=True), np.float64))
        target.append(np.asarray(net.project(net.represent(batch.next_obs[:, k])), np.float64))
    online, target = np.stack(online, 1), np.stack(target, 1)  # [B, K, P]
    cos = np.sum(online * target, -1) / (np.linalg.norm(online, axis=-1)
                                         * np.linalg.norm(target, axis=-1))
    inside = np.asarray(batch.targets.policy_mask)[:, 1:]
    per_row = np.sum(np.where(inside, -cos, 0.0), axis=1) / K  # w_k = 1 / K
    expected = np.mean(np.asarray(batch.weights) * 2.0 * per_row)
    np.testing.assert_allclose(float(loss), expected, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(float(metrics["consistency_loss"]), per_row.mean(),
                               rtol=2e-5, atol=1e-6)
    # A row whose episode ends at its start step has no term at all.
    assert per_row[1] == 0.0 and not inside[1].any()


def test_observations_past_the_end_change_nothing_and_the_target_gets_no_gradient():
    batch = _batch(seed=1)
    inside = np.asarray(batch.targets.policy_mask)[:, 1:, None]
    garbage = jnp.where(inside, batch.next_obs, 1e3 * jnp.ones_like(batch.next_obs))
    assert float(_loss(PARAMS, batch)[0]) == float(
        _loss(PARAMS, batch._replace(next_obs=garbage))[0])

    # The target branch is a constant: no gradient reaches the real observations.
    def through_inputs(obs, next_obs):
        return _loss(PARAMS, batch._replace(obs=obs, next_obs=next_obs))[0]

    d_obs, d_next = jax.grad(through_inputs, argnums=(0, 1))(batch.obs, batch.next_obs)
    assert np.all(np.asarray(d_next) == 0.0)
    assert np.any(np.asarray(d_obs) != 0.0)  # the unrolled (online) branch learns

    grads = jax.grad(lambda p: _loss(p, batch)[0])(PARAMS)
    norms = {path: float(jnp.linalg.norm(jnp.ravel(leaf)))
             for path, leaf in jax.tree_util.tree_leaves_with_path(grads)}
    moved = {jax.tree_util.keystr(path) for path, n in norms.items() if n > 0}
    assert any("pred_out" in p for p in moved) and any("dyn_trunk" in p for p in moved)
    # The policy, value and reward heads carry no weight in this loss.
    assert not any("policy_out" in p or "value_out" in p or "reward_out" in p for p in moved)


def test_adam_on_the_term_alone_lowers_it_on_a_fixed_batch():
    batch = _batch(seed=2)
    optimizer = training.make_optimizer(ONLY_CONSISTENCY)
    step = jax.jit(lambda p, s: training.train_step(GRAPHDEF, optimizer, ONLY_CONSISTENCY,
                                                    p, s, batch))
    params, state = PARAMS, optimizer.init(PARAMS)
    first = None
    for _ in range(60):
        params, state, metrics = step(params, state)
        first = float(metrics["consistency_loss"]) if first is None else first
    last = float(_loss(params, batch)[1]["consistency_loss"])
    # -1 would be perfect agreement on every counted step (the mean over rows of
    # -(steps in the episode) / K is the floor).
    floor = -np.asarray(batch.targets.policy_mask)[:, 1:].sum(1).mean() / K
    assert last < first - 0.2 and last >= floor - 1e-5


def test_the_sampler_gives_the_windows_next_rows_after_the_buffer_wraps():
    size, steps = 16, 6
    buffer = replay.empty_buffer(size, (OBS,), jnp.float32, ACTIONS)
    rng = np.random.default_rng(3)
    write = jax.jit(replay.write_episodes)
    for _ in range(3):  # 3 x 6 rows into 16: the ring wraps
        obs = jnp.asarray(rng.normal(size=(1, steps, OBS)), jnp.float32)
        end = jnp.zeros((1, steps), bool).at[0, steps - 1].set(True)
        buffer = write(buffer, obs, jnp.zeros((1, steps), jnp.int32),
                       jnp.zeros((1, steps)), jnp.full((1, steps, ACTIONS), 1.0 / ACTIONS),
                       jnp.zeros((1, steps)), end, jnp.ones((1, steps), bool))
    batch = jax.jit(replay.sample, static_argnums=(2, 3, 4, 5, 6, 7, 8))(
        buffer, jax.random.key(0), 32, K, 2, 0.9, 0.0, 1.0, True)
    rows = (np.asarray(batch.index)[:, None] + 1 + np.arange(K)) % size
    np.testing.assert_array_equal(np.asarray(batch.next_obs), np.asarray(buffer.obs)[rows])
    plain = replay.sample(buffer, jax.random.key(0), 32, K, 2, 0.9)
    assert plain.next_obs is None
    np.testing.assert_array_equal(plain.index, batch.index)


def test_symmetry_moves_the_next_observations_with_the_row():
    rng = np.random.default_rng(4)
    obs = jnp.asarray(rng.integers(0, 2, (ROWS, 18)), jnp.float32)
    base = _batch()
    batch = base._replace(obs=obs, next_obs=jnp.repeat(obs[:, None], K, axis=1),
                          actions=jnp.asarray(rng.integers(0, 9, (ROWS, K)), jnp.int32),
                          targets=base.targets._replace(
                              policy=jnp.full((ROWS, K + 1, 9), 1.0 / 9)))
    moved = symmetry.augment_batch(batch, jnp.arange(ROWS) % 8)
    for k in range(K):
        np.testing.assert_array_equal(moved.next_obs[:, k], moved.obs)
    assert not np.array_equal(np.asarray(moved.obs), np.asarray(obs))


def test_missing_pieces_are_refused_by_name():
    with pytest.raises(ValueError, match="next_obs"):
        _loss(PARAMS, _batch()._replace(next_obs=None))
    plain = _network(networks.NetworkConfig(hidden=(16,), latent_size=6))
    with pytest.raises(ValueError, match="projection"):
        plain.project(jnp.zeros((1, 6)))
    with pytest.raises(ValueError, match="projection"):
        networks.NetworkConfig(projection=-1)
    with pytest.raises(ValueError, match="consistency_weight"):
        MuZeroConfig(game="2048", model="stochastic", consistency_weight=1.0)
    with pytest.raises(ValueError, match="consistency_weight"):
        training.LossConfig(consistency_weight=-1.0)
    assert MuZeroConfig(consistency_weight=2.0).network.projection == 128
    assert MuZeroConfig().network.projection == 0  # no heads, MuZero's parameters only


@pytest.mark.slow
def test_the_example_trains_with_the_term_and_reports_it(tmp_path, capsys):
    from examples import muzero as example

    example.main(["--game", "tic_tac_toe", "--iterations", "1", "--batch-size", "4",
                  "--num-simulations", "2", "--hidden", "8", "--latent-size", "4",
                  "--train-steps", "2", "--train-batch-size", "4", "--buffer-size", "64",
                  "--consistency-weight", "2", "--projection-size", "4",
                  "--symmetry-augment", "--eval-every", "0", "--checkpoint-every", "0",
                  "--extra-eval-simulations", "2", "--run-dir", str(tmp_path / "run")])
    rows = [json.loads(line) for line in
            (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert np.isfinite(rows[-1]["consistency_loss"])
    assert -1.0 <= rows[-1]["consistency_loss"] <= 1.0
    # An extra evaluation at the run's own count is the same evaluation.
    extra = rows[-1]["eval_at_2"]
    assert extra == {k: rows[-1][k] for k in extra} and "lines_lost_as_o" in extra
    # The run's evaluation redrew its metrics.png.
    assert (tmp_path / "run" / "metrics.png").stat().st_size > 1000
    capsys.readouterr()


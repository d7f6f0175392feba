"""Tests of jaxpuct.alphazero.networks: shapes, value range, functional apply, training."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from jaxpuct.alphazero import networks

OBS_SHAPE = (3, 3, 2)
NUM_ACTIONS = 9
BATCH = 5


def _rngs() -> nnx.Rngs:
    # An "rbg" key: its initialisers compile much faster on CPU than the default
    # threefry ones (about half of this module's time); the values are irrelevant.
    return nnx.Rngs(jax.random.key(0, impl="rbg"))


def _resnet(norm: str = "layer") -> networks.ResNetPolicyValue:
    return networks.ResNetPolicyValue(NUM_ACTIONS, OBS_SHAPE, num_blocks=1, channels=8,
                                      value_hidden=16, norm=norm, rngs=_rngs())


def _mlp() -> networks.MLPPolicyValue:
    return networks.MLPPolicyValue(NUM_ACTIONS, OBS_SHAPE, hidden=(16, 16), rngs=_rngs())


_BUILD = {"resnet_layer": lambda: _resnet("layer"), "resnet_batch": lambda: _resnet("batch"),
          "mlp": _mlp}
NAMES = sorted(_BUILD)


# Built on first use, not at import: both pytest workers import every test module
# while collecting (the three networks' initialisation took 1.9 s of it).
@functools.cache
def _model(name: str):
    return _BUILD[name]()


@functools.cache
def _split(name: str):
    return networks.split(_model(name))


@functools.cache
def _apply(name: str):
    """One jitted apply per model, shared by the tests (graphdef is static: closed over)."""
    return jax.jit(functools.partial(networks.apply, _split(name)[0]))


def _obs(batch: int = BATCH, seed: int = 0) -> jax.Array:
    return jax.random.normal(jax.random.PRNGKey(seed), (batch, *OBS_SHAPE))


@pytest.mark.parametrize("name", NAMES)
def test_shapes_and_value_range(name):
    _, state = _split(name)
    logits, value = _apply(name)(state, 3.0 * _obs())
    assert logits.shape == (BATCH, NUM_ACTIONS) and logits.dtype == jnp.float32
    assert value.shape == (BATCH,) and value.dtype == jnp.float32
    assert np.all(np.isfinite(logits))
    assert np.all(np.abs(value) <= 1.0)
    assert np.std(np.asarray(value)) > 0  # the value depends on the input


@pytest.mark.parametrize("name", NAMES)
def test_apply_is_per_sample(name):
    _, state = _split(name)
    obs = _obs()
    logits, value = _apply(name)(state, obs)
    # Each sample's output does not depend on the rest of the batch (inference
    # mode, BatchNorm included), so a batched search equals its elements searched
    # alone.
    alone_logits, alone_value = _apply(name)(state, jnp.concatenate([obs[2:3]] * BATCH))
    np.testing.assert_allclose(alone_logits[0], logits[2], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(alone_value[0], value[2], rtol=1e-5, atol=1e-5)


def test_apply_matches_model_call_and_accepts_flat_observations():
    graphdef, state = _split("mlp")
    obs = _obs()
    logits, value = _apply("mlp")(state, obs)
    ref_logits, ref_value = _model("mlp")(obs)
    np.testing.assert_allclose(logits, ref_logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(value, ref_value, rtol=1e-5, atol=1e-5)
    flat_logits, flat_value = networks.apply(graphdef, state, obs.reshape(BATCH, -1))
    np.testing.assert_allclose(flat_logits, logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(flat_value, value, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [
    dict(num_actions=0),
    dict(obs_shape=(3, 3)),
    dict(obs_shape=(3, 0, 2)),
    dict(num_blocks=-1),
    dict(channels=0),
    dict(value_hidden=0),
    dict(norm="group"),
])
def test_resnet_rejects_bad_sizes(kwargs):
    args = dict(num_actions=NUM_ACTIONS, obs_shape=OBS_SHAPE, num_blocks=1, channels=4)
    args.update(kwargs)
    with pytest.raises(ValueError):
        networks.ResNetPolicyValue(**args, rngs=nnx.Rngs(0))


@pytest.mark.parametrize("kwargs", [
    dict(num_actions=-3), dict(obs_shape=0), dict(obs_shape=()), dict(hidden=()),
    dict(hidden=(8, 0)),
])
def test_mlp_rejects_bad_sizes(kwargs):
    args = dict(num_actions=NUM_ACTIONS, obs_shape=18)
    args.update(kwargs)
    with pytest.raises(ValueError):
        networks.MLPPolicyValue(**args, rngs=nnx.Rngs(0))


@pytest.mark.parametrize("name", ["resnet_layer", "mlp"])
def test_wrong_observation_shape_raises(name):
    _, state = _split(name)
    with pytest.raises(ValueError, match="expected observations"):
        _apply(name)(state, jnp.zeros((2, 4, 4, 2)))


def _loss(logits, value, target_policy, target_value):
    policy_loss = optax.softmax_cross_entropy(logits, target_policy).mean()
    return policy_loss + jnp.mean((value - target_value) ** 2)


def _targets():
    key_p, key_v = jax.random.split(jax.random.PRNGKey(1))
    target_policy = jax.nn.softmax(jax.random.normal(key_p, (BATCH, NUM_ACTIONS)))
    target_value = jax.random.uniform(key_v, (BATCH,), minval=-1.0, maxval=1.0)
    return target_policy, target_value


@pytest.mark.parametrize("name", ["resnet_layer", "mlp"])
def test_functional_gradient_step_lowers_loss(name):
    graphdef, state = _split(name)
    obs = _obs()
    target_policy, target_value = _targets()
    optimizer = optax.sgd(0.1)

    def loss_fn(params):
        return _loss(*networks.apply(graphdef, params, obs), target_policy, target_value)

    @jax.jit
    def train_step(params, opt_state):
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    params, opt_state = state, optimizer.init(state)
    losses = []
    for _ in range(3):
        params, opt_state, loss = train_step(params, opt_state)
        losses.append(float(loss))
    assert losses[-1] < losses[0]
    # The split state is not modified in place.
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(
        lambda a, b: bool(jnp.all(a == b)), state, _split(name)[1]))


def test_batchnorm_training_updates_statistics_and_lowers_loss():
    model = _resnet("batch")
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
    obs = _obs()
    target_policy, target_value = _targets()
    stats_before = jax.tree_util.tree_leaves(nnx.state(model, nnx.BatchStat))

    @nnx.jit
    def train_step(model, optimizer):
        def loss_fn(model):
            return _loss(*model(obs, train=True), target_policy, target_value)

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    losses = [float(train_step(model, optimizer)) for _ in range(3)]
    assert losses[-1] < losses[0]
    stats_after = jax.tree_util.tree_leaves(nnx.state(model, nnx.BatchStat))
    assert any(not np.allclose(a, b) for a, b in zip(stats_before, stats_after, strict=True))

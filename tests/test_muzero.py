"""jaxpuct.muzero against oracles: NumPy recomputations of the transform, the
two-hot projection, the n-step targets and the unrolled loss; the gradient
scaling through jax.grad; the model inside both policies with check_tree.

Kept small for the suite's time budget: tiny networks, one jitted function per
kind of call, shared across cases at module level.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpuct
from jaxpuct.muzero import model as model_lib
from jaxpuct.muzero import networks
from jaxpuct.muzero import value_transform as vt
from jaxpuct.testing import check_tree

EPS = 1e-3


def h_numpy(x):
    """Pohlen et al.'s transform in float64, the textbook form."""
    x = np.asarray(x, np.float64)
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + EPS * x


# ----------------------------------------------------------------- value transform


def test_transform_matches_float64_and_round_trips_from_0_to_1e6():
    magnitudes = np.concatenate([[0.0], np.logspace(-6, 6, 241)])
    x = np.concatenate([magnitudes, -magnitudes]).astype(np.float32)
    y = np.asarray(vt.h(x))
    y64 = h_numpy(x)
    nonzero = x != 0
    # The forward transform keeps float32's relative precision (a few ulps).
    assert np.max(np.abs(y - y64)[nonzero] / np.abs(y64)[nonzero]) < 5e-7
    back = np.asarray(vt.h_inverse(y))
    rel = np.abs(back - x)[nonzero] / np.abs(x)[nonzero]
    # Measured: max relative error 4.4e-7 over 1e-6 ... 1e6; exact at 0.
    assert np.max(rel) < 2e-6, np.max(rel)
    assert back[0] == 0.0 and np.all(np.sign(back) == np.sign(x))
    # The inverse of the float64 transform, too (the inverse alone is exact).
    back64 = np.asarray(vt.h_inverse(y64.astype(np.float32)))
    assert np.max(np.abs(back64 - x)[nonzero] / np.abs(x)[nonzero]) < 2e-6


def test_two_hot_matches_numpy_and_its_expectation_gives_the_scalar_back():
    support = vt.Support(5)
    x = np.array([0.0, 0.3, -0.3, 1.0, -2.5, 17.0, 30.0, -30.0, 1e4, -1e4], np.float32)
    probs = np.asarray(vt.scalar_to_two_hot(jnp.asarray(x), support))
    expected = np.zeros((len(x), 11))
    for row, value in enumerate(h_numpy(x)):
        y = min(max(value, -5.0), 5.0)
        low = int(np.floor(y))
        expected[row, low + 5] += 1.0 - (y - low)
        if low < 5:
            expected[row, low + 6] += y - low
    np.testing.assert_allclose(probs, expected, atol=1e-6)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
    inside = np.abs(h_numpy(x)) <= 5  # beyond the support the target is clipped
    back = np.asarray(vt.two_hot_to_scalar(jnp.asarray(probs), support))
    np.testing.assert_allclose(back[inside], x[inside], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(back[~inside], np.sign(x[~inside]) * float(vt.h_inverse(5.0)),
                               rtol=1e-6)
    # Logits that are the log of the two-hot decode to the same scalar.
    logits = np.log(np.maximum(probs, 1e-30))
    np.testing.assert_allclose(vt.logits_to_scalar(jnp.asarray(logits), support)[inside],
                               x[inside], rtol=1e-4, atol=1e-5)
    # The worked example: h(x) = 3.7 puts 0.3 on atom 3 and 0.7 on atom 4.
    np.testing.assert_allclose(vt.scalar_to_two_hot(vt.h_inverse(3.7), support)[8:10],
                               [0.3, 0.7], atol=1e-5)
    with pytest.raises(ValueError, match="11 atoms"):
        vt.logits_to_scalar(jnp.zeros((2, 10)), support)


# ---------------------------------------------------------------- network and model

NUM_ACTIONS = 4
OBS_SIZE = 6
CATEGORICAL = networks.NetworkConfig(hidden=(16,), latent_size=8, value_support=5,
                                     reward_support=5)


@functools.cache
def tiny_model(config=CATEGORICAL, obs_shape=(OBS_SIZE,), discount=0.9, zero_sum=False):
    # An "rbg" key: its initialisers compile much faster on CPU than threefry's.
    graphdef, state = networks.init_network(config, NUM_ACTIONS, obs_shape,
                                            jax.random.key(0, impl="rbg"))
    return model_lib.MuZeroModel(graphdef, discount=discount, zero_sum=zero_sum), state


@functools.partial(jax.jit, static_argnums=0)
def _recurrent(model, params, action, latent):
    return model.recurrent_fn(params, jax.random.key(0), action, latent)


@functools.partial(jax.jit, static_argnums=0)
def _forward(model, params, obs, action):
    net = model.network(params)
    latent = net.represent(obs)
    reward, next_latent = net.dynamics(latent, action)
    return latent, reward, next_latent, net.predict(next_latent)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _both_policies(model, num_simulations, params, key, obs, legal):
    root = model.root(params, obs, legal)
    puct = jaxpuct.alphazero_policy(params, key, root, model.recurrent_fn, num_simulations,
                                    selection=model_lib.muzero_puct_config())
    gumbel = jaxpuct.gumbel_policy(params, key, root, model.recurrent_fn, num_simulations,
                                   max_num_considered_actions=4)
    return root, puct, gumbel


def test_latents_are_min_max_scaled_and_the_heads_have_the_support():
    for config, shape in ((CATEGORICAL, (OBS_SIZE,)),
                          (networks.NetworkConfig(kind="resnet", hidden=(8,), channels=4,
                                                  num_blocks=1, value_support=3), (2, 3, 2))):
        model, params = tiny_model(config, shape)
        obs = jax.random.normal(jax.random.key(1), (3, *shape))
        latent, reward, next_latent, (logits, value) = _forward(model, params, obs,
                                                                jnp.array([0, 1, 3]))
        for s in (latent, next_latent):
            flat = np.asarray(s).reshape(3, -1)
            np.testing.assert_allclose(flat.min(1), 0.0, atol=1e-6)
            np.testing.assert_allclose(flat.max(1), 1.0, atol=1e-6)
        assert logits.shape == (3, NUM_ACTIONS) and value.shape == (3, config.value.num_atoms)
        assert reward.shape == ((3, config.reward.num_atoms) if config.reward else (3,))
    # Action planes: A = 7 over a 2x3 board takes 2 planes; action 6 is cell 0 of plane 1.
    planes = np.asarray(networks.action_planes(jnp.array([4, 6]), 7, (2, 3)))
    assert planes.shape == (2, 2, 3, 2) and planes.sum() == 2
    assert planes[0, 1, 1, 0] == 1 and planes[1, 0, 0, 1] == 1


def test_recurrent_fn_is_batch_independent_and_passes_the_discount():
    model, params = tiny_model(zero_sum=True)
    latent = _forward(model, params, jax.random.normal(jax.random.key(2), (4, OBS_SIZE)),
                      jnp.zeros((4,), jnp.int32))[0]
    action = jnp.array([0, 3, 1, 2], jnp.int32)
    out, nxt = _recurrent(model, params, action, latent)
    np.testing.assert_allclose(out.discount, -0.9)
    assert out.legal_action_mask is None and out.terminal is None
    for b in range(4):
        one, one_next = _recurrent(model, params, action[b:b + 1], latent[b:b + 1])
        for got, want in ((one.reward, out.reward), (one.value, out.value),
                          (one.prior_logits, out.prior_logits), (one_next, nxt)):
            np.testing.assert_allclose(got[0], want[b], rtol=1e-5, atol=1e-6)


def test_model_runs_inside_both_policies_with_a_root_mask_only():
    model, params = tiny_model()
    obs = jax.random.normal(jax.random.key(3), (3, OBS_SIZE))
    legal = jnp.array([[1, 1, 1, 1], [0, 1, 0, 1], [1, 0, 0, 0]], jnp.bool_)
    root, puct, gumbel = _both_policies(model, 12, params, jax.random.key(0), obs, legal)
    for out in (puct, gumbel):
        tree = out.search_tree
        check_tree(tree, 12)
        weights = np.asarray(out.action_weights)
        assert np.all(weights[~np.asarray(legal)] == 0)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert np.all(np.asarray(legal)[np.arange(3), np.asarray(out.action)])
        # Below the root every action is legal (the model has no mask) and the
        # edges carry the model's discount.
        children = np.asarray(tree.children_index)[:, 1:]
        nodes = np.arange(children.shape[1])[None, :] + 1 < np.asarray(tree.num_nodes)[:, None]
        assert np.all(children[nodes] != jaxpuct.ILLEGAL)
        discounts = np.asarray(tree.node_discounts)[:, 1:]
        np.testing.assert_allclose(discounts[nodes], 0.9)
    # The last root has one legal move: every simulation goes there.
    assert int(puct.search_tree.edge_visits[2, 0, 0]) == 12

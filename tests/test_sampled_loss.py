"""The policy loss on a sampled search's target, against NumPy, and a Gaussian
policy trained on it that finds a one-step problem's optimum."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpuct
from jaxpuct import sampled


def _np_log_softmax(x: np.ndarray) -> np.ndarray:
    x = np.where(x <= np.finfo(np.float32).min, -np.inf, x.astype(np.float64))
    top = np.max(x, axis=-1, keepdims=True)
    return x - top - np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True))


_loss = jax.jit(jaxpuct.sampled_policy_loss, static_argnums=0)
_grad = jax.jit(jax.grad(lambda space, logits, actions, weights: jnp.sum(
    jaxpuct.sampled_policy_loss(space, logits, actions, weights)), argnums=1),
    static_argnums=0)


def test_discrete_loss_and_gradient_equal_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 6)).astype(np.float32)
    logits[0, 2] = -np.inf                      # masked as in the search
    logits[1, 4] = np.finfo(np.float32).min
    logits[2, :] = -np.inf                      # no legal action: weights 0
    actions = np.array([[0, 2, 5], [4, 1, 3], [-1, -1, -1]], np.int32)
    weights = np.array([[0.5, 0.0, 0.5], [0.0, 0.25, 0.75], [0.0, 0.0, 0.0]], np.float32)
    space = sampled.DiscreteActions(6)
    got = np.asarray(_loss(space, logits, actions, weights))
    log_pi = _np_log_softmax(logits[:2])
    want = [-(0.5 * log_pi[0, 0] + 0.5 * log_pi[0, 5]),
            -(0.25 * log_pi[1, 1] + 0.75 * log_pi[1, 3])]
    np.testing.assert_allclose(got, want + [0.0], rtol=1e-5)
    # d/dlogits of -Σ w log softmax = (Σ w) softmax - w at the ids; 0 where masked.
    grad = np.asarray(_grad(space, logits, actions, weights))
    expected = np.zeros_like(grad)
    for b in range(2):
        expected[b] = weights[b].sum() * np.exp(log_pi[b])
        np.add.at(expected[b], actions[b], -weights[b])
    np.testing.assert_allclose(grad, expected, atol=1e-6)


def test_factored_loss_equals_the_discrete_loss_over_the_joint_logits():
    sizes = (2, 3, 2)
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, sum(sizes))).astype(np.float32)
    logits[1, 3] = -np.inf                       # factor 1's value 1 illegal in row 1
    joint = np.array([[logits[b, v0] + logits[b, 2 + v1] + logits[b, 5 + v2]
                       for v0, v1, v2 in itertools.product(*map(range, sizes))]
                      for b in range(2)], np.float32)  # [2, 12], agent 0 most significant
    actions = np.array([[0, 5, 11, 7], [2, 9, 6, 4]], np.int32)
    weights = np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.0, 0.0]], np.float32)
    got = _loss(sampled.FactoredActions(sizes), logits, actions, weights)
    want = _loss(sampled.DiscreteActions(12), joint, actions, weights)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    at_ids = np.take_along_axis(_np_log_softmax(joint), actions, 1)
    np.testing.assert_allclose(got, -np.sum(np.where(weights > 0, weights * at_ids, 0), 1),
                               rtol=1e-5)


def test_gaussian_loss_equals_numpy_density():
    rng = np.random.default_rng(2)
    params = rng.normal(size=(2, 4)).astype(np.float32)  # D = 2: mean, log std
    actions = rng.normal(size=(2, 3, 2)).astype(np.float32)
    weights = rng.dirichlet(np.ones(3), size=2).astype(np.float32)
    got = _loss(sampled.GaussianActions(2), params, actions, weights)
    mean, std = params[:, None, :2], np.exp(params[:, None, 2:])
    log_density = np.sum(-0.5 * ((actions - mean) / std) ** 2 - np.log(std)
                         - 0.5 * np.log(2 * np.pi), axis=-1)
    np.testing.assert_allclose(got, -np.sum(weights * log_density, axis=1), rtol=1e-5)


@pytest.mark.parametrize("space, logits, actions, weights, words", [
    (sampled.DiscreteActions(6), (2, 5), (2, 3), (2, 3), "prior_logits must be [B, 6]"),
    (sampled.FactoredActions((2, 3)), (2, 6), (2, 3), (2, 3), "prior_logits must be [B, 5]"),
    (sampled.DiscreteActions(6), (2, 6), (2, 3, 1), (2, 3), "actions must be [B, K]"),
    (sampled.GaussianActions(2), (2, 4), (2, 3, 1), (2, 3), "actions must be [B, K, 2]"),
    (sampled.DiscreteActions(6), (2, 6), (2, 3), (2, 4), "weights must be [B, K] = [2, 3]"),
])
def test_bad_shapes_are_named(space, logits, actions, weights, words):
    with pytest.raises(ValueError) as info:
        jaxpuct.sampled_policy_loss(space, jnp.zeros(logits), jnp.zeros(actions, jnp.int32
                                    if len(actions) == 2 else jnp.float32), jnp.zeros(weights))
    assert words in str(info.value), str(info.value)


# A one-step problem with a continuous action: reward -(a - 0.7)^2, then the end.
_OPTIMUM, _SPACE = 0.7, sampled.GaussianActions(1)


def _bandit(params, key, action, embedding):
    del params, key
    reward = -(action[:, 0] - _OPTIMUM) ** 2
    batch = action.shape[0]
    return jaxpuct.RecurrentFnOutput(
        reward=reward, discount=jnp.zeros(batch), prior_logits=jnp.zeros((batch, 2)),
        value=jnp.zeros(batch), terminal=jnp.ones(batch, bool)), embedding


@jax.jit
def _policy_step(key, theta):
    """``-∇ loss`` of the Gaussian policy ``theta [B, 2]`` (the root's prior logits)
    on its sampled search's target, and on uniform weights over the same samples."""
    batch = theta.shape[0]
    root = jaxpuct.RootFnOutput(prior_logits=theta, value=jnp.zeros(batch),
                                embedding=jnp.zeros(batch))
    out = jaxpuct.sampled_policy(None, key, root, _bandit, 8, num_samples=4,
                                 action_space=_SPACE, dirichlet_fraction=0.0)

    def step(weights):
        return -jax.grad(lambda t: jnp.sum(jaxpuct.sampled_policy_loss(
            _SPACE, t, out.sampled_actions, weights)))(theta)

    return step(out.action_weights), step(jnp.full(out.action_weights.shape, 0.25))


def test_the_sampled_target_moves_a_gaussian_policy_towards_the_optimum():
    """Policy improvement: from N(0, 1) and N(1.4, 1), with the optimum at 0.7, a
    gradient step on the search's target moves the mean towards the optimum (64
    rows each); the same samples weighted uniformly (the policy's own draws, no
    search) move it nowhere on average."""
    start = np.repeat([0.0, 1.4], 64)
    theta = jnp.stack([jnp.asarray(start, jnp.float32), jnp.zeros(128)], 1)
    searched, uniform = (np.asarray(g)[:, 0] for g in _policy_step(jax.random.PRNGKey(0),
                                                                   theta))
    for half, towards in ((slice(0, 64), 1.0), (slice(64, 128), -1.0)):
        move, error = searched[half].mean(), searched[half].std() / 8.0
        assert towards * move > 4 * error, (move, error)
        control, control_error = uniform[half].mean(), uniform[half].std() / 8.0
        assert abs(control) < 3 * control_error, (control, control_error)

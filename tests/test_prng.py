"""``jaxpuct.prng``: the search's random numbers equal ``jax.random``'s bit for bit
(vmapped over a batch of keys), for raw and typed Threefry keys under ``jax.jit``;
other key implementations and float64 go to ``jax.random`` itself; and a search's
program keeps no call of JAX's Threefry (whose rolled loops were a fifth of the Gumbel
search's compiled code)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxpuct
from jaxpuct import prng


def _vmap_over(fn, keys, batch_ndim):
    for _ in range(batch_ndim):
        fn = jax.vmap(fn)
    return fn(keys)


def _data(keys):
    if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(keys))
    return np.asarray(keys)


def _keys(seed: int, batch: tuple[int, ...], typed: bool):
    root = jax.random.key(seed) if typed else jax.random.PRNGKey(seed)
    if not batch:
        return root
    flat = jax.random.split(root, int(np.prod(batch)))
    return flat.reshape(batch + flat.shape[1:])


# (ours, jax.random's for one key): every function the search calls.
CASES = {
    "split": (lambda k: prng.split(k, 5), lambda k: jax.random.split(k, 5)),
    "fold_in": (lambda k: prng.fold_in(k, 123456789), lambda k: jax.random.fold_in(k, 123456789)),
    "bits": (lambda k: prng.bits(k, (3, 4)), lambda k: jax.random.bits(k, (3, 4))),
    "uniform": (lambda k: prng.uniform(k, (7,)), lambda k: jax.random.uniform(k, (7,))),
    "gumbel": (lambda k: prng.gumbel(k, (2, 9)), lambda k: jax.random.gumbel(k, (2, 9))),
}


@pytest.mark.parametrize("typed", [False, True], ids=["raw", "typed"])
@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), batch=st.sampled_from([(), (3,), (2, 3)]))
def test_equals_jax_random(name, typed, seed, batch):
    ours, theirs = CASES[name]
    keys = _keys(seed, batch, typed)
    got = jax.jit(ours)(keys)
    want = _vmap_over(theirs, keys, len(batch))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(_data(got), _data(want))


@pytest.mark.parametrize("typed", [False, True], ids=["raw", "typed"])
def test_fold_in_per_key_and_per_datum(typed):
    keys = _keys(7, (4,), typed)
    data = jnp.array([0, 1, 2**31, 2**32 - 1], jnp.uint32)
    got = jax.jit(prng.fold_in)(keys, data)
    np.testing.assert_array_equal(_data(got), _data(jax.vmap(jax.random.fold_in)(keys, data)))
    one = _keys(8, (), typed)
    steps = jnp.arange(6, dtype=jnp.int32)
    got = jax.jit(prng.fold_in)(one, steps)
    want = jax.vmap(jax.random.fold_in, (None, 0))(one, steps)
    np.testing.assert_array_equal(_data(got), _data(want))


def test_categorical_equals_jax_random():
    keys = _keys(3, (64,), False)
    logits = jax.random.normal(jax.random.PRNGKey(4), (64, 6))
    logits = logits.at[:, 2].set(-jnp.inf)
    got = jax.jit(prng.categorical)(keys, logits)
    want = jax.vmap(jax.random.categorical)(keys, logits)
    np.testing.assert_array_equal(got, want)
    assert not np.any(np.asarray(got) == 2)


def test_other_implementations_go_to_jax_random():
    keys = jax.random.split(jax.random.key(1, impl="rbg"), 3)
    assert not prng.is_threefry(keys)
    np.testing.assert_array_equal(
        _data(prng.split(keys, 2)), _data(jax.vmap(lambda k: jax.random.split(k, 2))(keys)))
    np.testing.assert_array_equal(
        prng.gumbel(keys, (5,)), jax.vmap(lambda k: jax.random.gumbel(k, (5,)))(keys))
    np.testing.assert_array_equal(
        _data(prng.fold_in(keys[0], jnp.arange(3))),
        _data(jax.vmap(jax.random.fold_in, (None, 0))(keys[0], jnp.arange(3))))


def test_non_partitionable_threefry_goes_to_jax_random():
    keys = _keys(5, (3,), False)
    before = jax.config.jax_threefry_partitionable
    try:
        jax.config.update("jax_threefry_partitionable", False)
        assert not prng.is_threefry(keys)
        got = prng.split(keys, 3)
        want = jax.vmap(lambda k: jax.random.split(k, 3))(keys)
    finally:
        jax.config.update("jax_threefry_partitionable", before)
    np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(not hasattr(jax, "enable_x64"), reason="jax.enable_x64 is newer")
def test_float_draws_under_x64_go_to_jax_random():
    """Under x64 ``jax.random`` draws float64 by default: its own stream, kept."""
    keys = _keys(6, (3,), False)
    with jax.enable_x64(True):
        got = prng.gumbel(keys, (4,))
        want = jax.vmap(lambda k: jax.random.gumbel(k, (4,)))(keys)
        assert got.dtype == want.dtype == jnp.float64
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(_data(prng.split(keys, 2)),
                                      _data(jax.vmap(lambda k: jax.random.split(k, 2))(keys)))


def test_too_large_a_draw_is_refused():
    with pytest.raises(ValueError, match="2\\*\\*32"):
        jax.eval_shape(lambda k: prng.bits(k, (2**16, 2**16)), jax.random.PRNGKey(0))


@pytest.mark.parametrize("policy", ["gumbel", "alphazero"])
def test_search_program_has_no_jax_threefry(policy):
    """The search's keys, Gumbel draw, sampled move and Dirichlet noise come from
    ``jaxpuct.prng``; a ``jax.random`` call left in a search would show up as one of
    its primitives (as ``jax.random.split`` does in the check's own first lines)."""
    old = str(jax.make_jaxpr(lambda k: jax.random.gumbel(jax.random.split(k)[0], (2,)))(
        jax.random.PRNGKey(0)))
    assert "random_split" in old and "random_bits" in old
    batch, actions = 4, 3

    def recurrent_fn(params, key, action, state):
        out = jaxpuct.RecurrentFnOutput(
            reward=jnp.zeros(batch), discount=-jnp.ones(batch),
            prior_logits=jnp.zeros((batch, actions)), value=jnp.zeros(batch))
        return out, state

    root = jaxpuct.RootFnOutput(prior_logits=jnp.zeros((batch, actions)),
                                value=jnp.zeros(batch), embedding=jnp.zeros(batch))

    def search(key):
        if policy == "gumbel":
            return jaxpuct.gumbel_policy(None, key, root, recurrent_fn, 8).action
        return jaxpuct.alphazero_policy(None, key, root, recurrent_fn, 8, temperature=1.0,
                                        dirichlet_fraction=0.25).action

    text = str(jax.make_jaxpr(search)(jax.random.PRNGKey(0)))
    for primitive in ("random_split", "random_fold_in", "random_bits", "threefry2x32",
                      "random_gamma"):
        assert primitive not in text


_log_gamma = jax.jit(prng.log_gamma, static_argnames=("shape",))


@pytest.mark.parametrize("alpha", [0.03, 0.3, 1.0, 2.5, 30.0])
def test_log_gamma_moments(alpha):
    """``log G`` for ``G ~ Gamma(alpha, 1)`` has mean ``digamma(alpha)`` and variance
    ``trigamma(alpha)``; 20,000 draws, mean within 4 standard errors, variance within
    10% (its relative standard error is at most about 2% here). Finite even at Go's
    alpha of 0.03, where most draws are below float32's smallest number."""
    from jax.scipy.special import digamma, polygamma

    keys = _keys(11, (50,), False)
    draws = np.asarray(_log_gamma(keys, alpha, shape=(400,)), np.float64).ravel()
    assert np.all(np.isfinite(draws))
    mean, var = float(digamma(alpha)), float(polygamma(1, alpha))
    assert abs(draws.mean() - mean) < 4 * np.sqrt(var / draws.size)
    assert abs(draws.var() / var - 1) < 0.10


def test_log_gamma_draws_are_per_key():
    """A key's draws do not depend on the others in the batch (the rejection loop
    runs until every draw is accepted, but a draw keeps its first accepted round)."""
    keys = _keys(12, (6,), True)
    together = np.asarray(_log_gamma(keys, 0.3, shape=(5,)))
    for b in range(6):
        alone = np.asarray(_log_gamma(keys[b:b + 1], 0.3, shape=(5,)))
        np.testing.assert_array_equal(alone[0], together[b])


def test_log_gamma_of_a_bad_alpha_is_nan():
    keys = _keys(13, (4,), False)
    alpha = jnp.array([0.0, -1.0, jnp.nan, jnp.inf])[:, None]
    assert np.all(np.isnan(np.asarray(_log_gamma(keys, alpha, shape=(3,)))))


def test_dirichlet_noise_moments():
    """Each component of ``Dir(alpha, ..., alpha)`` over ``n`` legal actions has mean
    ``1/n`` and variance ``(1/n)(1 - 1/n) / (n alpha + 1)``; the illegal ones get none."""
    n_legal, alpha, rows = 5, 0.3, 8000
    legal = np.zeros((rows, 7), bool)
    legal[:, 1:1 + n_legal] = True
    prior = legal / n_legal
    keys = jax.random.split(jax.random.PRNGKey(14), rows)
    noise = np.asarray(jax.jit(jaxpuct.roots.dirichlet_noise)(keys, prior, legal, 1.0, alpha))
    assert np.all(noise[:, ~legal[0]] == 0)
    np.testing.assert_allclose(noise.sum(-1), 1.0, atol=1e-5)
    mean = 1 / n_legal
    var = mean * (1 - mean) / (n_legal * alpha + 1)
    part = noise[:, legal[0]]
    assert np.all(np.abs(part.mean(0) - mean) < 4 * np.sqrt(var / rows))
    assert np.all(np.abs(part.var(0) / var - 1) < 0.1)

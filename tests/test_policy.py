"""The move and the training target: temperature, value weighting and root noise,
against NumPy transcriptions of the docstrings of ``jaxpuct/policies.py``."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxpuct

B, A = 6, 5


def reference_visit_policy(counts, temperature, legal=None):
    """``π(a) ∝ N(a)^(1/τ)``; τ = 0: one-hot on the first most visited action."""
    counts = np.asarray(counts, np.float64)
    if legal is not None:
        counts = np.where(legal, counts, 0.0)
    tau = np.broadcast_to(np.asarray(temperature, np.float64), counts.shape[:1])
    out = np.zeros_like(counts)
    for b in range(counts.shape[0]):
        if counts[b].sum() == 0:
            continue
        if tau[b] == 0:
            out[b, np.argmax(counts[b])] = 1.0
        else:
            powered = counts[b] ** (1.0 / tau[b])
            if not np.isfinite(powered).all() or powered.sum() == 0:
                # Very small τ overflows float64 too: scale by the maximum first.
                powered = (counts[b] / counts[b].max()) ** (1.0 / tau[b])
            out[b] = powered / powered.sum()
    return out


def reference_value_weighted(counts, q):
    w = np.asarray(counts, np.float64) * np.clip(1.0 + np.asarray(q, np.float64), 0.0, 2.0)
    total = w.sum(-1, keepdims=True)
    return np.where(total > 0, w / np.where(total > 0, total, 1.0), 0.0)


_visit_policy = sc.jit(jaxpuct.final_move.visit_policy)
_value_weighted = sc.jit(jaxpuct.final_move.value_weighted_policy)


@st.composite
def visit_counts(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    top = draw(st.sampled_from([1, 3, 100, 10_000]))
    counts = rng.integers(0, top + 1, (B, A)) * (rng.random((B, A)) < 0.7)
    counts[0] = 0  # a row with no visit
    counts[1, :2] = top  # a tie for the most visits
    return counts.astype(np.int32)


@settings(max_examples=40, deadline=None)
@given(counts=visit_counts(),
       tau=st.lists(st.sampled_from([0.0, 0.0, 0.05, 0.25, 0.5, 1.0, 2.0, 10.0]),
                    min_size=B, max_size=B),
       mask_seed=st.integers(0, 1000))
def test_visit_policy_matches_reference(counts, tau, mask_seed):
    tau = np.asarray(tau, np.float32)
    legal = np.random.default_rng(mask_seed).random((B, A)) < 0.8
    for legal_arg in (None, legal):
        got = np.asarray(_visit_policy(counts, tau, legal_arg))
        want = reference_visit_policy(counts, tau, legal_arg)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    # τ = 0 is one-hot on the lowest index among the most visited.
    got = np.asarray(_visit_policy(counts, np.zeros(B, np.float32), None))
    visited = counts.sum(-1) > 0
    assert np.all(got[~visited] == 0)
    np.testing.assert_array_equal(got[visited], np.eye(A)[np.argmax(counts[visited], -1)])
    assert got[1, 0] == 1.0  # the tie between actions 0 and 1 goes to 0
    # A scalar τ equals the same τ for every row.
    np.testing.assert_array_equal(_visit_policy(counts, tau[2], None),
                                  _visit_policy(counts, np.full(B, tau[2]), None))


@settings(max_examples=20, deadline=None)
@given(counts=visit_counts(), seed=st.integers(0, 1000))
def test_value_weighted_matches_reference(counts, seed):
    q = np.random.default_rng(seed).uniform(-1.5, 1.5, (B, A)).astype(np.float32)
    got = np.asarray(_value_weighted(counts, q))
    np.testing.assert_allclose(got, reference_value_weighted(counts, q), rtol=2e-6, atol=1e-7)


# ------------------------------------------------------------------ through the policy

_TAUS = np.array([0.0, 0.5, 1.0, 2.0], np.float32)


@pytest.mark.parametrize("value_weighted", [False, True])
def test_policy_weights_and_action(value_weighted):
    forest, roots, invalid = sc.noisy_inputs()
    out = sc.game_policy(forest, roots, sc.element_keys(0, 4), invalid, _TAUS,
                         value_weighted=value_weighted, **sc.NOISY_SPEC)
    summary = out.search_tree.summary()
    counts = np.asarray(summary.visit_counts)
    assert np.all(counts.sum(-1) == sc.NOISY_SPEC["sims"])
    base = (reference_value_weighted(counts, summary.qvalues) if value_weighted
            else counts)
    want = reference_visit_policy(base, _TAUS)
    np.testing.assert_allclose(out.action_weights, want, rtol=2e-5, atol=1e-6)
    action = np.asarray(out.action)
    assert action[0] == np.argmax(base[0])  # τ = 0: the argmax
    assert np.all(want[np.arange(4), action] > 0)  # sampled where the weight is positive
    if value_weighted:
        # N·(1 + Q) really differs from N here (the test would be vacuous otherwise).
        assert not np.allclose(want, reference_visit_policy(counts, _TAUS), atol=1e-3)


def test_temperature_one_samples_in_proportion_to_visits():
    """Over 300 keys, how often each action is played matches the mean weights."""
    forest, roots, invalid = sc.noisy_inputs()
    ones = np.ones(4, np.float32)
    played, weights = [], []
    for seed in range(300):
        out = sc.game_policy(forest, roots, sc.element_keys(1000 + seed, 4), invalid, ones,
                             **sc.NOISY_SPEC)
        played.append(np.eye(sc.NUM_ACTIONS)[np.asarray(out.action)])
        weights.append(np.asarray(out.action_weights))
    frequency, mean_weight = np.mean(played, 0), np.mean(weights, 0)
    # Binomial standard error <= 0.5 / sqrt(300) = 0.029; 4.5 of them.
    np.testing.assert_allclose(frequency, mean_weight, atol=0.13)
    assert np.all(frequency[1, 0] == 0)  # never an invalid action


def test_dirichlet_noise_only_on_legal_actions():
    forest, roots, invalid = sc.noisy_inputs()
    invalid = invalid.copy()
    invalid[2, 2] = True
    out = sc.game_policy(forest, roots, sc.element_keys(5, 4), invalid, _TAUS,
                         **sc.NOISY_SPEC)
    tree = out.search_tree
    noised = np.asarray(tree.root_prior)
    network = np.asarray(tree.children_prior[:, 0])  # never noised
    legal = ~invalid  # every root action of these games is legal
    assert np.all(noised[~legal] == 0)
    assert np.all(network[~legal] == 0)
    np.testing.assert_allclose(noised.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(network.sum(-1), 1.0, atol=1e-6)
    assert np.all(np.abs(noised - network)[legal] > 1e-4)  # the noise is there
    # ε = 0.25: at most a quarter of the mass moves.
    assert np.all(np.abs(noised - network) <= 0.25 + 1e-6)
    assert np.all(np.asarray(tree.edge_visits[:, 0])[~legal] == 0)


_dirichlet = sc.jit(jaxpuct.roots.dirichlet_noise)  # fraction and alpha traced: one compile


def test_dirichlet_noise_function():
    keys = jax.random.split(jax.random.key(0), 64)
    legal = np.random.default_rng(0).random((64, A)) < 0.6
    legal[:, 0] = True
    prior = np.where(legal, 1.0, 0.0)
    prior = (prior / prior.sum(-1, keepdims=True)).astype(np.float32)
    noised = np.asarray(_dirichlet(keys, prior, legal, 0.25, 0.3))
    assert np.all(noised[~legal] == 0)
    np.testing.assert_allclose(noised.sum(-1), 1.0, atol=1e-6)
    noise = (noised - 0.75 * prior) / 0.25  # the Dirichlet draw itself
    assert np.all(noise >= -1e-6)
    # With a single legal action the draw puts all its mass there.
    single = legal.sum(-1) == 1
    np.testing.assert_allclose(noise[single].max(-1), 1.0, atol=1e-5)
    # Tiny α: every gamma draw can underflow; the fallback keeps it a distribution.
    tiny = np.asarray(_dirichlet(keys, prior, legal, 1.0, 1e-6))
    assert np.all(np.isfinite(tiny)) and np.all(tiny[~legal] == 0)
    np.testing.assert_allclose(tiny.sum(-1), 1.0, atol=1e-5)


def test_masked_softmax_handles_empty_and_non_finite_rows():
    logits = jnp.array([[1.0, 2.0, 3.0], [jnp.nan, 0.0, 1.0], [1.0, jnp.inf, 0.0],
                        [5.0, 5.0, 5.0]])
    legal = jnp.array([[True, False, True], [True, True, False], [True, True, True],
                       [False, False, False]])
    p = np.asarray(jax.jit(jaxpuct.numerics.masked_softmax)(logits, legal))
    e = np.exp([1.0, 3.0])
    np.testing.assert_allclose(p[0], [e[0] / e.sum(), 0, e[1] / e.sum()], rtol=1e-6)
    np.testing.assert_allclose(p[1], [0.5, 0.5, 0.0])  # NaN on a legal action: uniform
    np.testing.assert_allclose(p[2], [1 / 3] * 3, rtol=1e-6)
    np.testing.assert_array_equal(p[3], [0, 0, 0])
    # NaN on an illegal action is ignored.
    q = np.asarray(jax.jit(jaxpuct.numerics.masked_softmax)(jnp.array([[0.0, jnp.nan]]),
                                                   jnp.array([[True, False]])))
    np.testing.assert_array_equal(q, [[1.0, 0.0]])


@sc.jit(static_argnames=("greedy",))
def _choose(keys, counts, tau, greedy):
    weights = jaxpuct.final_move.visit_policy(counts, tau)
    # greedy: the temperature is a Python 0 (known at trace time); else traced.
    return (jaxpuct.final_move.choose_action(keys, weights, 0.0 if greedy else tau),
            jaxpuct.final_move.sample_action(keys, weights))


@settings(max_examples=20, deadline=None)
@given(visit_counts(), st.integers(0, 2**31 - 1))
def test_greedy_choice_is_the_draw_without_random_numbers(counts, seed):
    """At a temperature known to be 0 the move is the argmax of the one-hot weights
    (lowest index on ties, -1 without visits): exactly what the draw returns, so the
    policies skip the draw; a traced temperature draws."""
    keys = jax.random.split(jax.random.PRNGKey(seed), B)
    tau = np.zeros(B, np.float32)
    for greedy in (True, False):
        chosen, drawn = _choose(keys, counts, tau, greedy=greedy)
        np.testing.assert_array_equal(chosen, drawn)
    want = np.where(counts.sum(-1) > 0, np.argmax(counts, -1), -1)
    np.testing.assert_array_equal(chosen, want)


def test_greedy_search_compiles_without_random_draws():
    """A search with no root noise, a temperature of 0 and a ``recurrent_fn`` that
    ignores its key needs no random numbers: the compiled program has no Threefry
    (no ``xor``, which Threefry's rounds are made of and nothing else in these
    searches uses; the function names of the program's stack-frame table may still
    name it); at temperature 1 it draws the move. Likewise a Gumbel search with
    ``gumbel_scale`` 0."""

    def draws(hlo_text):
        return len(re.findall(r"\bxor\(", hlo_text))

    def recurrent_fn(params, key, action, embedding):
        del params, key
        out = jaxpuct.RecurrentFnOutput(
            reward=jnp.zeros(action.shape), discount=jnp.ones(action.shape),
            prior_logits=jnp.zeros(action.shape + (3,)), value=jnp.zeros(action.shape))
        return out, embedding

    root = jaxpuct.RootFnOutput(prior_logits=jnp.zeros((1, 3)), value=jnp.zeros(1),
                                embedding=jnp.zeros(1))

    def program(temperature):
        def search(key):
            return jaxpuct.alphazero_policy(None, key, root, recurrent_fn, 4,
                                            dirichlet_fraction=0.0,
                                            temperature=temperature).action
        return jax.jit(search).lower(jax.random.PRNGKey(0)).compile().as_text()

    assert draws(program(0.0)) == 0
    assert draws(program(1.0)) > 0

    def gumbel_program(scale):
        def search(key):
            return jaxpuct.gumbel_policy(None, key, root, recurrent_fn, 4,
                                         gumbel_scale=scale).action
        return jax.jit(search).lower(jax.random.PRNGKey(0)).compile().as_text()

    assert draws(gumbel_program(0.0)) == 0
    assert draws(gumbel_program(1.0)) > 0

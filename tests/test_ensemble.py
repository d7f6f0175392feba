"""Ensembles of networks (``jaxpuct.envs.ensemble``) against NumPy.

The averaged network of ``M`` members is the mean of their softmax probabilities
and of their values; recomputed here in float64 from each member's own output.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpuct.envs import ensemble
from jaxpuct.envs import symmetries as sym

OBS = ACTIONS = 5  # one row of five cells, an action per cell


def _member(seed: int) -> dict:
    k1, k2 = jax.random.split(jax.random.key(seed))
    return {"w": jax.random.normal(k1, (OBS, ACTIONS)), "v": jax.random.normal(k2, (OBS,))}


def _apply(params: dict, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    # obs [B, 1, OBS, 1], the layout of a one-row board, so symmetries apply too.
    flat = obs.reshape(obs.shape[0], OBS)
    return flat @ params["w"], jnp.tanh(flat @ params["v"])


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _obs(batch: int, seed: int = 7) -> jax.Array:
    return jax.random.normal(jax.random.key(seed), (batch, 1, OBS, 1))


def test_the_ensemble_averages_its_members_probabilities_and_values():
    members = [_member(s) for s in range(3)]
    obs = _obs(6)
    logits, value = jax.jit(ensemble.ensemble_apply(_apply))(
        ensemble.stack_params(members), obs)
    outs = [tuple(np.asarray(x, np.float64) for x in _apply(m, obs)) for m in members]
    np.testing.assert_allclose(np.exp(logits), np.mean([_softmax(lg) for lg, _ in outs], 0),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(value, np.mean([v for _, v in outs], 0), rtol=1e-5, atol=1e-6)
    # Each member alone differs from the mixture, so the check above can fail.
    for lg, _ in outs:
        assert np.abs(_softmax(lg) - np.exp(np.asarray(logits))).max() > 1e-3


def test_one_member_and_copies_of_one_member_are_that_member():
    member = _member(0)
    obs = _obs(4)
    lg, v = _apply(member, obs)
    for copies in (1, 3):
        logits, value = ensemble.ensemble_apply(_apply)(
            ensemble.stack_params([member] * copies), obs)
        np.testing.assert_allclose(jax.nn.softmax(logits), jax.nn.softmax(lg), rtol=1e-5,
                                   atol=1e-7)
        np.testing.assert_allclose(value, v, rtol=1e-6)


def test_rows_are_independent():
    """A row's output depends on that row only: replacing the others (here with
    huge values) leaves it bit for bit the same."""
    apply = jax.jit(ensemble.ensemble_apply(_apply))
    stacked = ensemble.stack_params([_member(1), _member(2)])
    obs = _obs(5)
    noisy = obs.at[1:].set(1e30)
    a, b = apply(stacked, obs), apply(stacked, noisy)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(np.asarray(x)[0], np.asarray(y)[0])


def test_mixture_floors_impossible_actions_at_a_finite_logit():
    lowest = jnp.finfo(jnp.float32).min
    logits = jnp.array([[[0.0, lowest]], [[0.0, lowest]]])  # [M = 2, B = 1, A = 2]
    out, value = ensemble.mixture(logits, jnp.array([[1.0], [-0.5]]))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.exp(out), [[1.0, 0.0]], atol=1e-30)
    np.testing.assert_allclose(value, [0.25])


def test_the_ensemble_under_symmetries_is_the_mean_over_both():
    """Symmetries of an ensemble: the mean over the ``K`` symmetries and the ``M``
    members, each pair's output mapped back (here the two-cell mirror of a row)."""
    table = sym.left_right(1, OBS)
    members = [_member(s) for s in (3, 4)]
    obs = _obs(3)
    logits, value = sym.symmetric_apply(ensemble.ensemble_apply(_apply), table)(
        ensemble.stack_params(members), obs)
    mirrored = obs[:, :, ::-1]
    probs, values = [], []
    for m in members:
        for o, back in ((obs, lambda p: p), (mirrored, lambda p: p[:, table.actions[1]])):
            lg, v = _apply(m, o)
            probs.append(back(_softmax(np.asarray(lg, np.float64))))
            values.append(np.asarray(v, np.float64))
    np.testing.assert_allclose(np.exp(logits), np.mean(probs, 0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(value, np.mean(values, 0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("members, match", [
    ([], "at least one member"),
    ([{"w": jnp.zeros((OBS, ACTIONS))}, {"v": jnp.zeros((OBS, ACTIONS))}],
     r"params\[1\] has another structure"),
    ([{"w": jnp.zeros((OBS, ACTIONS))}, {"w": jnp.zeros((OBS, ACTIONS + 1))}],
     r"params\[1\] has other shapes"),
])
def test_members_of_other_architectures_are_refused(members, match):
    with pytest.raises(ValueError, match=match):
        ensemble.stack_params(members)


# ------------------------------------------- the ensemble as the network of a search
# PUCT with an ensemble is checked through the arena (tests/test_reliability.py); here
# the other roots: Gumbel's sequential halving and the sampled search.


def _ttt_member(seed: int) -> dict:
    k1, k2 = jax.random.split(jax.random.key(seed))
    return {"w": jax.random.normal(k1, (18, 9)), "v": 0.1 * jax.random.normal(k2, (18,))}


def _ttt_apply(params: dict, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    flat = obs.reshape(obs.shape[0], -1).astype(jnp.float32)  # [B, 3, 3, 2] -> [B, 18]
    return flat @ params["w"], jnp.tanh(flat @ params["v"])


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["gumbel", "sampled"])
def test_gumbel_and_sampled_searches_take_an_ensemble_as_their_network(policy):
    pytest.importorskip("pgx")
    import jaxpuct
    from jaxpuct.envs import adapter
    from jaxpuct.envs.pgx_games import make_pgx_game

    game = make_pgx_game("tic_tac_toe")
    state = game.init(jax.random.key(3), 2)
    state = game.environment.step(state, jnp.array([4, 0], jnp.int32))  # two positions

    def search(apply_fn, params):
        root = adapter.make_root_fn(apply_fn, game.environment)(params, None, state)
        recurrent_fn = adapter.make_recurrent_fn(apply_fn, game.environment)
        if policy == "gumbel":
            return jaxpuct.gumbel_policy(params, jax.random.key(0), root, recurrent_fn, 8)
        return jaxpuct.sampled_policy(params, jax.random.key(0), root, recurrent_fn, 8,
                                      num_samples=4)

    members = [_ttt_member(0), _ttt_member(1)]
    mixed = ensemble.ensemble_apply(_ttt_apply)
    run = jax.jit(search, static_argnums=0)
    alone = run(_ttt_apply, members[0])
    copies = run(mixed, ensemble.stack_params([members[0]] * 2))
    pair = run(mixed, ensemble.stack_params(members))
    # Copies of one network search as that network does.
    np.testing.assert_array_equal(copies.action, alone.action)
    np.testing.assert_allclose(copies.action_weights, alone.action_weights, atol=1e-5)
    # Two networks: Gumbel's root prior is NumPy's mixture of theirs (the mean of each
    # one's softmax over all actions, renormalised over the legal ones as one
    # network's logits are; the sampled root holds its K samples' instead), the
    # target a distribution, the move legal.
    legal = np.asarray(state.legal_action_mask)
    if policy == "gumbel":
        obs = np.asarray(state.observation, np.float64).reshape(2, 18)
        mixture = np.mean([_softmax(obs @ np.asarray(m["w"], np.float64)) for m in members],
                          0)
        prior = np.where(legal, mixture, 0.0)
        np.testing.assert_allclose(pair.search_tree.root_prior,
                                   prior / prior.sum(-1, keepdims=True), atol=1e-5)
    weights = np.asarray(pair.action_weights)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert legal[np.arange(2), np.asarray(pair.action)].all()
    assert np.abs(weights - np.asarray(alone.action_weights)).max() > 1e-3

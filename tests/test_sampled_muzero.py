"""Sampled MuZero's targets (Hubert et al. 2021) in jaxpuct.muzero, against oracles:
the buffer's windows of sampled policies (weights over K sampled ids) against the
episodes written out in NumPy; the unrolled loss on them equals the loss on the
same weights scattered over all A actions and a NumPy recomputation; reanalyse
with a sampled search equals that search called directly; self-play with the
sampled policy stores legal, distinct samples that hold the move played.

Shares test_muzero's tiny network, its episodes and its jitted unroll.
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
from jaxpuct.muzero import replay, selfplay
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.model import MuZeroModel, muzero_puct_config
from jaxpuct.muzero.networks import init_network

K = 2  # sampled actions per node, of tm.NUM_ACTIONS = 4
NUM_SIMULATIONS = 8
FIELDS = (("obs", (tm.OBS_SIZE,), np.float32), ("action", (), np.int32),
          ("reward", (), np.float32), ("policy", (K,), np.float32),
          ("root_value", (), np.float32), ("legal", (tm.NUM_ACTIONS,), bool),
          ("policy_actions", (K,), np.int32))


def sampled_episode(rng, length):
    """An episode whose policies are weights over K distinct legal sampled ids (every
    third step with one slot unfilled: weight 0, and an out-of-range id -1 that the
    loss must ignore); the move taken is one of the samples."""
    e = tm.random_episode(rng, length)
    ids = np.stack([rng.permutation(tm.NUM_ACTIONS)[:K] for _ in range(length)])
    weights = rng.random((length, K)).astype(np.float32) + 0.1
    legal = rng.random((length, tm.NUM_ACTIONS)) < 0.3
    legal[np.arange(length)[:, None], ids] = True
    invalid = np.arange(length) % 3 == 0
    ids[invalid, -1], weights[invalid, -1] = -1, 0.0
    e["policy"] = weights / weights.sum(-1, keepdims=True)
    e["policy_actions"] = ids.astype(np.int32)
    e["action"] = ids[np.arange(length), 0]
    e["legal"] = legal
    return e


_WRITE = jax.jit(replay.write_episodes)


@functools.cache
def setting():
    """A sampled-policy buffer of three episodes (19 of 32 rows) and its row layout."""
    rng = np.random.default_rng(7)
    episodes = [sampled_episode(rng, length) for length in (4, 7, 8)]
    steps = 8
    fields = {name: np.zeros((len(episodes), steps, *shape), dtype)
              for name, shape, dtype in FIELDS}
    written = np.zeros((len(episodes), steps), bool)
    layout = {}  # row -> (episode, step)
    for b, e in enumerate(episodes):
        length = len(e["reward"])
        for name in fields:
            fields[name][b, :length] = e[name]
        written[b, :length] = True
        for t in range(length):
            layout[len(layout)] = (e, t)
    buffer = replay.empty_buffer(tm.BUFFER, (tm.OBS_SIZE,), jnp.float32, tm.NUM_ACTIONS,
                                 num_samples=K)
    buffer = _WRITE(buffer, episode_end=jnp.zeros(written.shape, jnp.bool_),
                    written=jnp.asarray(written), **{k: jnp.asarray(v) for k, v in fields.items()})
    return buffer, layout


def dense(policy, ids, num_actions):
    """``[..., A]`` weights of ``policy [..., K]`` scattered to their ids (-1: none)."""
    out = np.zeros(policy.shape[:-1] + (num_actions,), np.float64)
    lead = np.indices(policy.shape[:-1])
    for j in range(policy.shape[-1]):
        valid = ids[..., j] >= 0
        out[(*(x[valid] for x in lead), ids[..., j][valid])] += policy[..., j][valid]
    return out


def test_sampled_windows_match_numpy_and_their_loss_is_the_dense_cross_entropy():
    buffer, layout = setting()
    assert buffer.policy.shape == (tm.BUFFER, K) and buffer.num_actions == tm.NUM_ACTIONS
    batch = tm.sample(buffer, jax.random.key(2))
    t_ = jax.tree.map(np.asarray, batch.targets)
    for b, start in enumerate(np.asarray(batch.index)):
        episode, t = layout[int(start)]
        length = len(episode["reward"])
        for step in range(tm.UNROLL + 1):
            if t + step < length:
                np.testing.assert_array_equal(t_.policy[b, step], episode["policy"][t + step])
                np.testing.assert_array_equal(t_.policy_actions[b, step],
                                              episode["policy_actions"][t + step])
            else:
                np.testing.assert_array_equal(t_.policy[b, step], 0.0)
    # Past an episode's end the unrolled actions are drawn over all A actions, not K.
    actions = np.asarray(batch.actions)
    assert actions.min() >= 0 and actions.max() == tm.NUM_ACTIONS - 1

    model, params = tm.tiny_model()
    _, _, sampled = tm._train_step(model, params, tm.OPTIMIZER.init(params), batch)
    spread = batch._replace(targets=batch.targets._replace(
        policy=jnp.asarray(dense(t_.policy, t_.policy_actions, tm.NUM_ACTIONS), jnp.float32),
        policy_actions=None))
    _, _, full = tm._train_step(model, params, tm.OPTIMIZER.init(params), spread)
    for name in ("loss", "policy_loss", "value_loss", "reward_loss"):
        np.testing.assert_allclose(sampled[name], full[name], rtol=1e-6, err_msg=name)
    # And in NumPy: -sum_j w_j log softmax(logits)[a_j], weighted 1, 1/K, ... over steps.
    logits = np.asarray(tm._plain_unroll(model, params, batch.obs, batch.actions)[0])
    log_p = tm.log_softmax_numpy(logits)
    ids = np.clip(t_.policy_actions, 0, None)
    per_step = -np.sum(t_.policy * np.take_along_axis(log_p, ids, -1), -1) * t_.policy_mask
    w = np.array([1.0] + [1.0 / tm.UNROLL] * tm.UNROLL)
    np.testing.assert_allclose(sampled["policy_loss"], np.mean(per_step @ w), rtol=1e-5)


def test_sampled_buffers_refuse_mismatched_policies_by_name():
    buffer, _ = setting()
    args = {name: jnp.zeros((1, 2, *shape), dtype) for name, shape, dtype in FIELDS
            if name not in ("policy_actions", "legal")}
    with pytest.raises(ValueError, match="policy_actions must be given exactly when"):
        replay.write_episodes(buffer, **args, episode_end=jnp.zeros((1, 2), bool),
                              written=jnp.ones((1, 2), bool))
    with pytest.raises(ValueError, match=r"num_samples must be in \[1, num_actions = 4\], "
                                         "got 5"):
        replay.empty_buffer(8, (tm.OBS_SIZE,), jnp.float32, tm.NUM_ACTIONS, num_samples=5)
    with pytest.raises(ValueError, match="num_samples must be at most the game's 9 actions, "
                                         "got 10"):
        MuZeroConfig(policy="sampled", num_samples=10)


def search_fn(params, keys, obs, legal):
    """The sampled search with Dirichlet noise at the root: the keys matter."""
    model, _ = tm.tiny_model()
    root = model.root(params, obs, legal)
    return jaxpuct.sampled_policy(params, keys, root, model.recurrent_fn, NUM_SIMULATIONS,
                                  num_samples=K, selection=muzero_puct_config())


_REANALYSE = jax.jit(functools.partial(
    rea.reanalyse_batch, search_fn=search_fn, fraction=0.5, unroll_steps=tm.UNROLL,
    td_steps=tm.TD, discount=tm.GAMMA))
_SEARCH = jax.jit(search_fn)


@pytest.mark.slow
def test_reanalyse_with_the_sampled_search_gives_its_weights_and_its_samples():
    _, params = tm.tiny_model()
    buffer, layout = setting()
    batch = jax.tree.map(lambda x: x[:4], tm.sample(buffer, jax.random.key(5)))
    key = jax.random.key(3)
    got = _REANALYSE(buffer, batch, params, key)
    positions = rea.searched_positions(tm.UNROLL, tm.TD, bootstrap=True)
    legal = np.asarray(buffer.legal)
    for b in range(2):
        start = int(batch.index[b])
        episode, t = layout[start]
        rows = (start + np.asarray(positions)) % tm.BUFFER
        stored_legal = legal[rows]
        stored_legal[~stored_legal.any(-1)] = True
        keys = jax.random.split(jax.random.fold_in(key, start), len(positions))
        direct = _SEARCH(params, keys, buffer.obs[rows], jnp.asarray(stored_legal))
        for k in range(tm.UNROLL + 1):
            if t + k >= len(episode["reward"]):
                continue
            ids = np.asarray(got.targets.policy_actions[b, k])
            np.testing.assert_array_equal(ids, direct.sampled_actions[k])
            np.testing.assert_array_equal(got.targets.policy[b, k], direct.action_weights[k])
            assert np.all(episode["legal"][t + k][ids[ids >= 0]])
    # New samples, not the stored ones; the other rows bit for bit.
    assert not np.array_equal(got.targets.policy_actions[:2], batch.targets.policy_actions[:2])
    for new, old in zip(jax.tree.leaves(got.targets), jax.tree.leaves(batch.targets),
                        strict=True):
        np.testing.assert_array_equal(new[2:], old[2:])


@pytest.mark.slow
def test_self_play_with_the_sampled_policy_stores_legal_distinct_samples_with_the_move():
    config = MuZeroConfig(policy="sampled", num_samples=3, batch_size=6, num_simulations=6,
                          hidden=(16,), latent_size=8)
    graphdef, params = init_network(config.network, 9, selfplay.OBS_SHAPE,
                                    jax.random.key(0, impl="rbg"))
    model = MuZeroModel(graphdef, discount=config.discount, zero_sum=True)
    games = jax.tree.map(np.asarray, selfplay.play_games(config, model, params,
                                                         jax.random.key(1)))
    assert games.policy.shape == (6, 9, 3) and games.policy_actions.shape == (6, 9, 3)
    steps = games.written
    assert steps.sum() >= 6 * 5  # every game has at least five plies
    ids, weights = games.policy_actions[steps], games.policy[steps]
    for row_ids, row_legal, row_w, move in zip(ids, games.legal[steps], weights,
                                               games.action[steps], strict=True):
        # Three distinct legal samples while three moves are legal, every legal one
        # after: the filled slots first, then the slots a search cannot fill, which
        # hold the placeholder id 0 with weight 0 (a legal id or not, so they are
        # read with their weights; jaxpuct.sampled.gumbel_top_k).
        filled = int(min(3, row_legal.sum()))
        assert len(set(row_ids[:filled])) == filled and row_legal[row_ids[:filled]].all()
        assert (row_ids[filled:] == 0).all() and (row_w[filled:] == 0).all()
        assert row_legal[row_ids[row_w > 0]].all() and move in row_ids[row_w > 0]
        np.testing.assert_allclose(row_w.sum(), 1.0, atol=1e-6)

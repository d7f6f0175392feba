"""jaxpuct.muzero against oracles: NumPy recomputations of the transform, the
two-hot projection, the n-step targets and the unrolled loss; the gradient
scaling through jax.grad; the model inside both policies with check_tree.

Kept small for the suite's time budget: tiny networks, one jitted function per
kind of call, shared across cases at module level.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import jaxpuct
from jaxpuct.muzero import model as model_lib
from jaxpuct.muzero import networks, replay, training
from jaxpuct.muzero import targets as targets_lib
from jaxpuct.muzero import value_transform as vt
from jaxpuct.testing import check_tree
from jaxpuct.testing import tictactoe as ttt

EPS = 1e-3
GAMMA = 0.9  # the discount of the file's model, the ring test and the chain


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


def h_inverse_numpy(y):
    """The textbook inverse in float64 (no cancellation to fear there)."""
    b = (np.sqrt(1 + 4 * EPS * (np.abs(y) + 1 + EPS)) - 1) / (2 * EPS)
    return np.sign(y) * (b * b - 1)


@jax.jit
def _two_hot_round_trip(x):
    support = vt.Support(5)
    probs = vt.scalar_to_two_hot(x, support)
    logits = jnp.log(jnp.maximum(probs, 1e-30))
    return (probs, vt.two_hot_to_scalar(probs, support), vt.logits_to_scalar(logits, support),
            vt.h_inverse(5.0))


def test_two_hot_matches_numpy_and_its_expectation_gives_the_scalar_back():
    x = np.array([0.0, 0.3, -0.3, 1.0, -2.5, 17.0, 30.0, -30.0, 1e4, -1e4,
                  h_inverse_numpy(3.7)], np.float32)
    probs, back, decoded, edge = (np.asarray(a) for a in _two_hot_round_trip(jnp.asarray(x)))
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
    np.testing.assert_allclose(back[inside], x[inside], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(back[~inside], np.sign(x[~inside]) * edge, rtol=1e-6)
    # Logits that are the log of the two-hot decode to the same scalar.
    np.testing.assert_allclose(decoded[inside], x[inside], rtol=1e-4, atol=1e-5)
    # The worked example: h(x) = 3.7 puts 0.3 on atom 3 and 0.7 on atom 4.
    np.testing.assert_allclose(probs[-1, 8:10], [0.3, 0.7], atol=1e-5)
    with pytest.raises(ValueError, match="11 atoms"):
        vt.logits_to_scalar(jnp.zeros((2, 10)), vt.Support(5))


# ---------------------------------------------------------------- network and model

NUM_ACTIONS = 4
OBS_SIZE = 6
CATEGORICAL = networks.NetworkConfig(hidden=(16,), latent_size=8, value_support=5,
                                     reward_support=5)


@functools.cache
def tiny_model(zero_sum=False):
    """The one small network of the file (its compiled functions are shared)."""
    # An "rbg" key: its initialisers compile much faster on CPU than threefry's.
    graphdef, state = networks.init_network(CATEGORICAL, NUM_ACTIONS, (OBS_SIZE,),
                                            jax.random.key(0, impl="rbg"))
    return model_lib.MuZeroModel(graphdef, discount=GAMMA, zero_sum=zero_sum), state


@functools.partial(jax.jit, static_argnums=0)
def _recurrent(model, params, action, latent):
    return model.recurrent_fn(params, jax.random.key(0), action, latent)


@functools.partial(jax.jit, static_argnums=0)
def _forward(model, params, obs, action):
    net = model.network(params)
    latent = net.represent(obs)
    reward, next_latent = net.dynamics(latent, action)
    return latent, reward, next_latent, net.predict(next_latent)


def _init_and_forward(config, obs_shape, obs, action):
    """A new network and one step of it."""
    net = networks.MuZeroNetwork(config, NUM_ACTIONS, obs_shape,
                                 rngs=nnx.Rngs(jax.random.key(0, impl="rbg")))
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
    model, params = tiny_model()
    obs = jax.random.normal(jax.random.key(1), (3, OBS_SIZE))
    action = jnp.array([0, 1, 3])
    latent, reward, next_latent, (logits, value) = _forward(model, params, obs, action)
    for s in (latent, next_latent):
        np.testing.assert_allclose(s.min(1), 0.0, atol=1e-6)
        np.testing.assert_allclose(s.max(1), 1.0, atol=1e-6)
    assert logits.shape == (3, NUM_ACTIONS) and value.shape == (3, 11)
    assert reward.shape == (3, 11)
    # The ResNet's shapes, traced only (no compile: the suite's budget); its latent
    # scaling and action planes are the functions checked here and below.
    resnet = networks.NetworkConfig(kind="resnet", hidden=(8,), channels=4, num_blocks=1,
                                    value_support=3)
    shapes = jax.eval_shape(functools.partial(_init_and_forward, resnet, (2, 3, 2)),
                            jax.ShapeDtypeStruct((3, 2, 3, 2), jnp.float32), action)
    latent, reward, next_latent, (logits, value) = shapes
    assert latent.shape == next_latent.shape == (3, 2, 3, 4)
    assert reward.shape == (3,) and logits.shape == (3, NUM_ACTIONS) and value.shape == (3, 7)
    # Action planes: A = 7 over a 2x3 board takes 2 planes; action 6 is cell 0 of plane 1.
    planes = np.asarray(networks.action_planes(jnp.array([4, 6]), 7, (2, 3)))
    assert planes.shape == (2, 2, 3, 2) and planes.sum() == 2
    assert planes[0, 1, 1, 0] == 1 and planes[1, 0, 0, 1] == 1


def test_action_planes_encode_columns_and_constants_as_numpy_does():
    """``"column"``: ones on the whole column of the action (connect four's drops),
    the mirror of a column is the plane of the mirrored action; ``"constant"``: a
    plane of ones per action. Against NumPy; a dynamics reads ``C + P`` channels
    (traced); an encoding that does not fit is refused by name."""
    actions = np.array([0, 6, 3, 5])
    column = np.asarray(networks.action_planes(jnp.asarray(actions), 7, (6, 7), "column"))
    rows, cols = np.meshgrid(np.arange(6), np.arange(7), indexing="ij")
    expected = np.stack([(cols == a) & (rows >= 0) for a in actions])[..., None]
    np.testing.assert_array_equal(column, expected.astype(np.float32))
    mirrored = np.asarray(networks.action_planes(jnp.asarray(6 - actions), 7, (6, 7), "column"))
    np.testing.assert_array_equal(mirrored, column[:, :, ::-1])
    constant = np.asarray(networks.action_planes(jnp.asarray(actions[:2] % 4), 4, (4, 4),
                                                 "constant"))
    expected = np.zeros((2, 4, 4, 4), np.float32)
    expected[0, :, :, 0] = expected[1, :, :, 2] = 1.0
    np.testing.assert_array_equal(constant, expected)
    assert [networks.action_plane_count(4, (2, 4), e) for e in networks.ACTION_ENCODINGS] == \
        [1, 1, 4]
    for encoding, planes in (("column", 1), ("constant", NUM_ACTIONS)):
        config = networks.NetworkConfig(kind="resnet", hidden=(8,), channels=4, num_blocks=0,
                                        action_encoding=encoding)
        params = jax.eval_shape(lambda c=config: nnx.state(networks.MuZeroNetwork(
            c, NUM_ACTIONS, (2, 4, 2), rngs=nnx.Rngs(0))))
        kernels = [x.shape for p, x in jax.tree_util.tree_leaves_with_path(params)
                   if "dyn_tower" in jax.tree_util.keystr(p) and len(x.shape) == 4]
        assert kernels[0][2] == 4 + planes, kernels
    with pytest.raises(ValueError, match="num_actions 4 against a board of width 3"):
        networks.MuZeroNetwork(networks.NetworkConfig(kind="resnet", action_encoding="column"),
                               NUM_ACTIONS, (2, 3, 2), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="action_encoding"):
        networks.NetworkConfig(action_encoding="row")  # type: ignore[arg-type]
    from jaxpuct.muzero.config import MuZeroConfig
    with pytest.raises(ValueError, match="'column' is for a game whose actions are columns"):
        MuZeroConfig(game="2048", action_encoding="column")


def test_latent_scaling_differentiates_as_jnp_min_and_max():
    """Values and gradients of ``scale_latent`` equal the plain formula's with
    ``jnp.min`` / ``jnp.max`` (ties at the extremes split the gradient), on rows
    with several tied zeros and a tied maximum, as ReLU latents have."""
    x = jax.nn.relu(jax.random.normal(jax.random.key(3), (4, 12)))
    x = x.at[1].set(jnp.where(x[1] > 0, 2.0, x[1])).at[2].set(0.0)  # ties; a constant row
    cotangent = jax.random.normal(jax.random.key(4), x.shape)

    def plain(x):
        low, high = jnp.min(x, 1, keepdims=True), jnp.max(x, 1, keepdims=True)
        return (x - low) / jnp.maximum(high - low, 1e-5)

    ours = jax.jit(jax.value_and_grad(lambda x: jnp.sum(networks.scale_latent(x, 1e-5)
                                                        * cotangent)))(x)
    theirs = jax.value_and_grad(lambda x: jnp.sum(plain(x) * cotangent))(x)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5, atol=1e-6)
    assert np.all(np.isfinite(np.asarray(ours[1])))


def test_recurrent_fn_is_batch_independent_and_passes_the_discount():
    model, params = tiny_model()
    model = dataclasses.replace(model, zero_sum=True)
    rng = np.random.default_rng(2)
    obs = jnp.asarray(rng.normal(size=(4, OBS_SIZE)), jnp.float32)
    latent = _forward(tiny_model()[0], params, obs, jnp.zeros((4,), jnp.int32))[0]
    action = jnp.array([0, 3, 1, 2], jnp.int32)
    out, nxt = _recurrent(model, params, action, latent)
    np.testing.assert_allclose(out.discount, -0.9)
    assert out.legal_action_mask is None and out.terminal is None
    # Row b's outputs do not depend on the other rows: replace them by other
    # latents and actions, and permute the batch.
    others = jnp.asarray(rng.random((4, CATEGORICAL.latent_size)), jnp.float32)
    for b in range(4):
        mixed_latent = others.at[b].set(latent[b])
        mixed_action = jnp.roll(action, 1).at[b].set(action[b])
        one, one_next = _recurrent(model, params, mixed_action, mixed_latent)
        for got, want in ((one.reward, out.reward), (one.value, out.value),
                          (one.prior_logits, out.prior_logits), (one_next, nxt)):
            np.testing.assert_allclose(got[b], want[b], rtol=1e-5, atol=1e-6)
    perm = jnp.array([2, 0, 3, 1])
    permuted, permuted_next = _recurrent(model, params, action[perm], latent[perm])
    np.testing.assert_allclose(permuted.value, out.value[perm], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(permuted_next, nxt[perm], rtol=1e-5, atol=1e-6)


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


# --------------------------------------------------------------- targets and replay


def nstep_numpy(rewards, values, discount, n):
    """z_t of one episode (lists), the definition written out."""
    length = len(rewards)
    z = []
    for t in range(length):
        total = sum(discount ** i * rewards[t + i] for i in range(n) if t + i < length)
        if t + n < length:
            total += discount ** n * values[t + n]
        z.append(total)
    return z


@functools.partial(jax.jit, static_argnums=(4, 5))
def _n_step(rewards, values, episode_end, valid, discount, n):
    return targets_lib.n_step_values(rewards, values, episode_end, valid, discount, n)


@pytest.mark.parametrize("discount", [0.9, -1.0])
def test_n_step_values_match_numpy_on_trajectories_with_episode_ends(discount):
    rng = np.random.default_rng(0)
    n = 3
    # Row 0: episodes of 4 and 5 steps back to back, then 1 empty row; row 1: one
    # episode of 2 steps and 8 empty rows; row 2: an episode of 10 (no end inside).
    lengths = [[4, 5], [2], [10]]
    rewards = rng.normal(size=(3, 10)).astype(np.float32)
    values = rng.normal(size=(3, 10)).astype(np.float32)
    end = np.zeros((3, 10), bool)
    valid = np.zeros((3, 10), bool)
    expected = np.zeros((3, 10))
    for row, episodes in enumerate(lengths):
        start = 0
        for length in episodes:
            stop = start + length
            valid[row, start:stop] = True
            end[row, stop - 1] = stop < 10 or row != 2
            expected[row, start:stop] = nstep_numpy(rewards[row, start:stop],
                                                    values[row, start:stop], discount, n)
            start = stop
    # Row 2 has no end: the sequence's own end cuts the sum as an episode end would.
    got = _n_step(jnp.asarray(rewards), jnp.asarray(values), jnp.asarray(end),
                  jnp.asarray(valid), discount, n)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def write_numpy_episodes(buffer, episodes, write):
    """Writes up to 10 episodes of up to 8 steps (dicts of per-step arrays) as one
    call padded to [10, 8] (one compiled write); the write itself marks each
    episode's last step as its end."""
    count, steps = 10, 8

    def field(name, shape=(), dtype=np.float32):
        out = np.zeros((count, steps, *shape), dtype)
        for b, e in enumerate(episodes):
            out[b, :len(e[name])] = e[name]
        return jnp.asarray(out)

    written = np.zeros((count, steps), bool)
    for b, e in enumerate(episodes):
        written[b, :len(e["reward"])] = True
    return write(buffer, field("obs", (OBS_SIZE,)), field("action", (), np.int32),
                 field("reward"), field("policy", (NUM_ACTIONS,)), field("root_value"),
                 jnp.zeros(written.shape, jnp.bool_), jnp.asarray(written))


def random_episode(rng, length):
    policy = rng.random((length, NUM_ACTIONS)).astype(np.float32)
    return {"obs": rng.normal(size=(length, OBS_SIZE)).astype(np.float32),
            "action": rng.integers(0, NUM_ACTIONS, length),
            "reward": rng.normal(size=length).astype(np.float32),
            "policy": policy / policy.sum(-1, keepdims=True),
            "root_value": rng.normal(size=length).astype(np.float32)}


_WRITE = jax.jit(lambda buf, obs, action, reward, policy, value, end, written: (
    replay.write_episodes(buf, obs, action, reward, policy, value, end, written)))
_SAMPLE = jax.jit(replay.sample, static_argnums=(2, 3, 4, 5, 6, 7))
# One sampling shape for the ring test and the chain: K = 3 unroll steps, n = 3.
BUFFER, BATCH, UNROLL, TD = 32, 64, 3, 3


def sample(buffer, key, alpha=0.0, beta=1.0):
    return _SAMPLE(buffer, key, BATCH, UNROLL, TD, GAMMA, alpha, beta)


def test_ring_buffer_windows_give_the_numpy_targets_after_wrapping():
    rng = np.random.default_rng(1)
    k, n, discount = UNROLL, TD, GAMMA
    buffer = replay.empty_buffer(BUFFER, (OBS_SIZE,), jnp.float32, NUM_ACTIONS)
    first = [random_episode(rng, length) for length in (4, 7, 8, 8)]
    second = [random_episode(rng, 6), random_episode(rng, 4)]
    buffer = write_numpy_episodes(buffer, first, _WRITE)
    buffer = write_numpy_episodes(buffer, second, _WRITE)
    # 37 steps in a ring of 32: the newest 5 rows overwrite the first episode (4
    # rows) and the first step of the second. From row 5 (the oldest) the rows
    # hold the second episode's steps 1..6, the third and fourth, then the fifth
    # and sixth across the wrap.
    assert int(buffer.next_row) == 5 and int(replay.filled_rows(buffer)) == BUFFER
    layout = {}  # row -> (episode, step)
    row = 5
    for episode, first_step in [(first[1], 1), (first[2], 0), (first[3], 0), (second[0], 0),
                                (second[1], 0)]:
        for t in range(first_step, len(episode["reward"])):
            layout[row % BUFFER] = (episode, t)
            row += 1
    assert sorted(layout) == list(range(BUFFER))
    batch = sample(buffer, jax.random.key(4))
    np.testing.assert_array_equal(batch.weights, 1.0)
    assert len(set(np.asarray(batch.index).tolist())) > 10  # most rows drawn
    for b, start in enumerate(np.asarray(batch.index)):
        episode, t = layout[int(start)]
        length = len(episode["reward"])
        z = nstep_numpy(episode["reward"], episode["root_value"], discount, n)
        np.testing.assert_allclose(batch.obs[b], episode["obs"][t], rtol=1e-6)
        for step in range(k + 1):
            inside = t + step < length
            np.testing.assert_allclose(batch.targets.value[b, step],
                                       z[t + step] if inside else 0.0, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{start} {t} {step} {length}")
            assert bool(batch.targets.policy_mask[b, step]) == inside
            np.testing.assert_allclose(batch.targets.policy[b, step],
                                       episode["policy"][t + step] if inside else 0.0,
                                       rtol=1e-6)
            if step:
                acted = t + step - 1 < length
                np.testing.assert_allclose(
                    batch.targets.reward[b, step],
                    episode["reward"][t + step - 1] if acted else 0.0, rtol=1e-6)
                if acted:
                    assert int(batch.actions[b, step - 1]) == episode["action"][t + step - 1]
    assert np.all((np.asarray(batch.actions) >= 0) & (np.asarray(batch.actions) < NUM_ACTIONS))


def test_prioritised_sampling_follows_the_priorities_with_importance_weights():
    rng = np.random.default_rng(2)
    buffer = replay.empty_buffer(BUFFER, (OBS_SIZE,), jnp.float32, NUM_ACTIONS)
    buffer = write_numpy_episodes(buffer, [random_episode(rng, 6)], _WRITE)
    # New rows take the largest priority so far (1 in an empty buffer).
    np.testing.assert_array_equal(buffer.priority[:6], 1.0)
    priority = np.array([0.5, 1.0, 2.0, 4.0, 0.25, 1.0], np.float32)
    buffer = replay.update_priorities(buffer, jnp.arange(6), jnp.asarray(priority))
    alpha, beta = 0.5, 0.4
    batches = [sample(buffer, jax.random.key(i), alpha, beta) for i in range(60)]
    index = np.concatenate([np.asarray(b.index) for b in batches])
    assert index.max() < 6  # only filled rows
    p = priority ** alpha / np.sum(priority ** alpha)
    freq = np.bincount(index, minlength=6) / len(index)
    np.testing.assert_allclose(freq, p, atol=0.03)
    for batch in batches[:3]:
        w = (6 * p[np.asarray(batch.index)]) ** -beta
        np.testing.assert_allclose(batch.weights, w / w.max(), rtol=1e-5)
    # The priorities of trajectories: |v - z| (+1e-6).
    episode = random_episode(rng, 4)
    written = jnp.ones((1, 4), jnp.bool_)
    got = replay.trajectory_priorities(jnp.asarray(episode["reward"])[None],
                                       jnp.asarray(episode["root_value"])[None],
                                       jnp.zeros((1, 4), jnp.bool_), written, 0.9, 2)
    z = nstep_numpy(episode["reward"], episode["root_value"], 0.9, 2)
    np.testing.assert_allclose(got[0], np.abs(episode["root_value"] - z) + 1e-6, rtol=1e-5)


# ------------------------------------------------------------------ loss and training

LOSS = training.LossConfig(value_weight=0.25, reward_weight=0.7, policy_weight=1.3)


OPTIMIZER = training.make_optimizer(training.LossConfig(learning_rate=3e-3, weight_decay=0.0))


@functools.partial(jax.jit, static_argnums=0)
def _train_step(model, params, opt_state, batch):
    """One step; its metrics are those of the loss at the incoming ``params``."""
    return training.train_step(model.graphdef, OPTIMIZER, LOSS, params, opt_state, batch)


@functools.partial(jax.jit, static_argnums=0)
def _plain_unroll(model, params, obs, actions):
    """The unroll written out step by step, without any gradient scaling."""
    net = model.network(params)
    latent = net.represent(obs)
    logits, values, rewards = [], [], []
    for k in range(actions.shape[1] + 1):
        p, v = net.predict(latent)
        logits.append(p)
        values.append(v)
        if k < actions.shape[1]:
            r, latent = net.dynamics(latent, actions[:, k])
            rewards.append(r)
    return jnp.stack(logits, 1), jnp.stack(values, 1), jnp.stack(rewards, 1)


def log_softmax_numpy(x):
    x = np.asarray(x, np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def two_hot_numpy(x, size):
    y = np.clip(h_numpy(x), -size, size)
    low = np.floor(y)
    out = np.zeros(np.shape(x) + (2 * size + 1,))
    np.put_along_axis(out, (low + size).astype(int)[..., None], (1 - (y - low))[..., None],
                      -1)
    upper = np.minimum(low + size + 1, 2 * size).astype(int)[..., None]
    np.put_along_axis(out, upper, np.take_along_axis(out, upper, -1) + (y - low)[..., None],
                      -1)
    return out


def random_batch(rng, batch, k):
    policy = rng.random((batch, k + 1, NUM_ACTIONS)).astype(np.float32)
    mask = rng.random((batch, k + 1)) < 0.8
    mask[:, 0] = True
    targets = targets_lib.UnrollTargets(
        value=jnp.asarray(rng.normal(size=(batch, k + 1)) * 3, jnp.float32),
        reward=jnp.asarray(rng.normal(size=(batch, k + 1)), jnp.float32),
        policy=jnp.asarray(policy / policy.sum(-1, keepdims=True)),
        policy_mask=jnp.asarray(mask))
    return replay.Batch(obs=jnp.asarray(rng.normal(size=(batch, OBS_SIZE)), jnp.float32),
                        actions=jnp.asarray(rng.integers(0, NUM_ACTIONS, (batch, k)),
                                            jnp.int32),
                        targets=targets,
                        weights=jnp.asarray(rng.random(batch) + 0.5, jnp.float32),
                        index=jnp.zeros((batch,), jnp.int32))


def test_unroll_loss_matches_a_numpy_recomputation():
    model, params = tiny_model()
    k = UNROLL
    batch = random_batch(np.random.default_rng(3), BATCH, k)
    _, _, metrics = _train_step(model, params, OPTIMIZER.init(params), batch)
    loss = metrics["loss"]
    logits, values, rewards = (np.asarray(x) for x in
                               _plain_unroll(model, params, batch.obs, batch.actions))
    t = jax.tree.map(np.asarray, batch.targets)
    size = CATEGORICAL.value_support
    policy = -np.sum(t.policy * log_softmax_numpy(logits), -1) * t.policy_mask
    value = -np.sum(two_hot_numpy(t.value, size) * log_softmax_numpy(values), -1)
    reward = -np.sum(two_hot_numpy(t.reward[:, 1:], size) * log_softmax_numpy(rewards), -1)
    w = np.array([1.0] + [1.0 / k] * k)
    per_row = 1.3 * policy @ w + 0.25 * value @ w + 0.7 * reward @ w[1:]
    np.testing.assert_allclose(loss, np.mean(np.asarray(batch.weights) * per_row), rtol=1e-5)
    np.testing.assert_allclose(metrics["policy_loss"], np.mean(policy @ w), rtol=1e-5)
    np.testing.assert_allclose(metrics["reward_loss"], np.mean(reward @ w[1:]), rtol=1e-5)
    v0 = np.asarray(vt.logits_to_scalar(jnp.asarray(values[:, 0]), CATEGORICAL.value))
    np.testing.assert_allclose(metrics["priority"], np.abs(v0 - t.value[:, 0]), rtol=1e-5)
    # A scalar (tanh) head's loss is the squared error.
    np.testing.assert_allclose(training.head_loss(jnp.array([0.5, -0.2]), jnp.array([1.0, 0.3]),
                                                  None), [0.25, 0.25], rtol=1e-6)


@functools.partial(jax.jit, static_argnums=0)
def _reward_gradient(model, params, obs, actions, scale, step_weights):
    """d(sum_k step_weights[k] * sum of step k's reward logits) / d(parameters)."""
    def rewards(p):
        preds = training.unroll(model.network(p), obs, actions, scale)
        return jnp.sum(preds.reward, axis=(0, 2)) @ step_weights
    return jax.grad(rewards)(params)


def test_the_gradient_is_halved_at_each_dynamics_input():
    model, params = tiny_model()
    rng = np.random.default_rng(4)
    obs = jnp.asarray(rng.normal(size=(3, OBS_SIZE)), jnp.float32)
    actions = jnp.asarray(rng.integers(0, NUM_ACTIONS, (3, 2)), jnp.int32)
    for k, weights in enumerate(np.eye(2, dtype=np.float32)):
        halved = _reward_gradient(model, params, obs, actions, 0.5, weights)
        plain = _reward_gradient(model, params, obs, actions, 1.0, weights)
        for (path, got), (_, want) in zip(jax.tree_util.tree_leaves_with_path(halved),
                                          jax.tree_util.tree_leaves_with_path(plain),
                                          strict=True):
            name = jax.tree_util.keystr(path)
            if "repr" in name:
                # Step k's reward reaches the representation through k + 1
                # dynamics inputs.
                np.testing.assert_allclose(got, 0.5 ** (k + 1) * want, rtol=1e-5, atol=1e-8)
            elif k == 0 and ("dyn" in name or "reward" in name):
                # The first step's reward sees its dynamics unscaled.
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)
    assert any("repr" in jax.tree_util.keystr(p) and np.abs(g).max() > 0
               for p, g in jax.tree_util.tree_leaves_with_path(plain))


# ------------------------------------------------- a chain MDP: fit, then search

# Positions 0, 1, 2 (observed one-hot in OBS_SIZE features). Action 1 moves right
# with reward 0, and at position 2 ends the episode with reward 1; any other
# action ends it at once with reward 0.1. With gamma = 0.9 the optimal return
# from position p is 0.9 ** (2 - p) >= 0.81 by always taking 1, where a one-step
# greedy choice takes the 0.1.
CHAIN_ACTIONS = 2  # the root's legal actions: 0 and 1 (2 and 3 act as 0 below it)


def chain_episodes():
    """Every episode from position 0 of the chain: 1s, then a leaving action."""
    episodes = []
    for rights in range(4):
        leaves = [None] if rights == 3 else [0, 2, 3]
        for leave in leaves:
            actions = [1] * rights + ([] if leave is None else [leave])
            rewards = [0.0] * rights + ([0.1] if leave is not None else [])
            if leave is None:
                rewards[-1] = 1.0
            obs = np.eye(OBS_SIZE, dtype=np.float32)[np.arange(len(actions))]
            episodes.append({"obs": obs, "action": np.array(actions),
                             "reward": np.array(rewards, np.float32),
                             "policy": np.full((len(actions), NUM_ACTIONS), 1 / NUM_ACTIONS,
                                               np.float32),
                             "root_value": np.zeros(len(actions), np.float32)})
    return episodes


@pytest.mark.slow
def test_a_model_trained_on_a_chain_fits_its_rewards_and_the_search_plays_optimally():
    model, params = tiny_model()
    buffer = replay.empty_buffer(BUFFER, (OBS_SIZE,), jnp.float32, NUM_ACTIONS)
    buffer = write_numpy_episodes(buffer, chain_episodes(), _WRITE)
    opt_state = OPTIMIZER.init(params)
    # n = 3 covers every episode: the value targets are the discounted returns.
    for step in range(1000):
        batch = sample(buffer, jax.random.key(step))
        params, opt_state, _ = _train_step(model, params, opt_state, batch)
    obs = jnp.eye(OBS_SIZE, dtype=jnp.float32)[:3]  # positions 0, 1, 2
    # The rewards of actions 0 and 1 at each position, read through the model.
    _, reward0, _, _ = _forward(model, params, obs, jnp.zeros((3,), jnp.int32))
    _, reward1, _, _ = _forward(model, params, obs, jnp.ones((3,), jnp.int32))
    reward0 = vt.logits_to_scalar(reward0, CATEGORICAL.reward)
    reward1 = vt.logits_to_scalar(reward1, CATEGORICAL.reward)
    np.testing.assert_allclose(reward0, 0.1, atol=0.05)
    np.testing.assert_allclose(reward1, [0.0, 0.0, 1.0], atol=0.1)
    legal = jnp.arange(NUM_ACTIONS)[None, :] < CHAIN_ACTIONS
    _, puct, gumbel = _both_policies(model, 12, params, jax.random.key(7), obs,
                                     jnp.broadcast_to(legal, (3, NUM_ACTIONS)))
    for out in (puct, gumbel):
        check_tree(out.search_tree, 12)
        np.testing.assert_array_equal(np.argmax(out.action_weights, -1), [1, 1, 1])
    # Searched Q: leaving is worth its 0.1 (then the learned absorbing value 0);
    # the last step right its 1; further from the end Q(p, 1) is a mean over a
    # subtree that still holds exploratory moves, below the optimal 0.9 ** (2 - p)
    # but above leaving.
    q = np.asarray(puct.search_tree.summary().qvalues)
    np.testing.assert_allclose(q[:, 0], 0.1, atol=0.05)
    np.testing.assert_allclose(q[2, 1], 1.0, atol=0.1)
    assert np.all(q[:, 1] > q[:, 0] + 0.2) and np.all(q[:, 1] < GAMMA ** (2 - np.arange(3)) + 0.1)


def test_the_example_command_line_is_generated_from_the_config():
    from examples import muzero as example
    from jaxpuct.alphazero import config as config_lib
    from jaxpuct.muzero.config import MuZeroConfig

    args = example.build_parser().parse_args(
        ["--iterations", "3", "--policy", "alphazero", "--hidden", "8,8", "--discount", "0.5",
         "--reward-weight", "3"])
    config = config_lib.from_namespace(MuZeroConfig, args)
    assert (args.iterations, config.policy, config.hidden, config.discount) == (
        3, "alphazero", (8, 8), 0.5)
    assert MuZeroConfig.from_json(config.to_json()) == config
    assert config.network.hidden == (8, 8) and config.network.value_support is None
    assert config.loss.reward_weight == 3.0 and config.network.action_encoding == "cell"
    # A run saved before a field existed reads back with the field's default (the
    # behaviour it was trained with: a connect-four run of the one-square encoding).
    old = {k: v for k, v in config.to_json().items()
           if k not in ("action_encoding", "reward_weight")}
    assert MuZeroConfig.from_json(old) == dataclasses.replace(config, reward_weight=1.0)
    c4 = example.build_parser(example.game_defaults(["--game", "connect_four"])).parse_args(
        ["--game", "connect_four"])
    assert config_lib.from_namespace(MuZeroConfig, c4).network.action_encoding == "column"
    with pytest.raises(ValueError, match="discount"):
        MuZeroConfig(discount=0.0)
    with pytest.raises(ValueError, match="policy"):
        MuZeroConfig(policy="muzero")


def test_lines_lost_counts_losses_against_every_optimal_line():
    from jaxpuct.muzero.selfplay import _lines_lost

    table = ttt.optimal_move_table()
    positions = ttt.all_positions()
    perfect = {ttt.code(p): int(np.flatnonzero(table[ttt.code(p)])[0]) for p in positions}
    first_legal = {ttt.code(p): ttt.legal_moves(p)[0] for p in positions}
    assert (_lines_lost(perfect, 1), _lines_lost(perfect, -1)) == (0, 0)
    # Always the first empty cell: as O it loses on many of X's optimal lines.
    assert _lines_lost(first_legal, 1) + _lines_lost(first_legal, -1) > 0

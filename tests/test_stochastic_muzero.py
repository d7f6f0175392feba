"""Stochastic MuZero (jaxpuct.muzero.stochastic_*) against oracles: the straight-through
code and its gradient against the softmax's Jacobian in NumPy; the unrolled loss
against a NumPy recomputation over a plain step-by-step unroll; the code prior of a
two-outcome MDP against the outcomes' known probabilities; both chance-node
policies on the model with check_tree.

One tiny network and one compiled train step shared by the loss and MDP tests
(same shapes), for the suite's time budget.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import jaxpuct
from jaxpuct.muzero import model as model_lib
from jaxpuct.muzero import replay
from jaxpuct.muzero import stochastic_networks as snet
from jaxpuct.muzero import stochastic_training as st
from jaxpuct.muzero import targets as targets_lib
from jaxpuct.muzero.networks import NetworkConfig
from jaxpuct.muzero.stochastic_model import StochasticMuZeroModel
from jaxpuct.muzero.training import LossConfig
from jaxpuct.testing import check_tree

NUM_ACTIONS, NUM_CODES, OBS_SIZE = 2, 3, 4
CONFIG = NetworkConfig(hidden=(16,), latent_size=8, value_support=3, reward_support=3)
GAMMA = 0.9
# One batch shape for the loss test and the MDP: B = 20 windows, K = 2, n = 2.
BATCH, UNROLL, TD = 20, 2, 2
LOSS = st.StochasticLossConfig(
    base=LossConfig(policy_weight=1.3, value_weight=0.25, reward_weight=0.7,
                    learning_rate=1e-2, weight_decay=0.0),
    afterstate_value_weight=0.4, code_weight=0.9, commitment_weight=0.01)
OPTIMIZER = st.make_stochastic_optimizer(LOSS)
# Jitted, as everything the tests call: op by op, each small op is a compile.
_OPT_INIT = jax.jit(OPTIMIZER.init)
_EMPTY = jax.jit(replay.empty_buffer, static_argnums=(0, 1, 2, 3))
_TARGETS = jax.jit(targets_lib.unroll_targets, static_argnums=(5, 6, 7))


@functools.cache
def tiny_model():
    """The file's one network. Its weights are drawn in NumPy into the abstract state
    (kernels ~ N(0, 1 / fan_in), biases 0, LayerNorm scales 1): the jitted
    initialiser of init_stochastic_network costs ~1.8 CPU s of XLA compile here."""
    graphdef, abstract = nnx.split(nnx.eval_shape(lambda: snet.StochasticMuZeroNetwork(
        CONFIG, NUM_ACTIONS, NUM_CODES, OBS_SIZE, rngs=nnx.Rngs(0))))
    rng = np.random.default_rng(0)

    def draw(path, leaf):
        name = jax.tree_util.keystr(path)
        if "kernel" in name:
            value = rng.normal(size=leaf.shape) / np.sqrt(leaf.shape[0])
        else:
            value = np.full(leaf.shape, 1.0 if "scale" in name else 0.0)
        return jnp.asarray(value, leaf.dtype)

    return (StochasticMuZeroModel(graphdef, discount=GAMMA),
            jax.tree_util.tree_map_with_path(draw, abstract))


def softmax_numpy(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def log_softmax_numpy(x):
    return np.log(softmax_numpy(x))


def h_numpy(x):
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + 1e-3 * x


def two_hot_numpy(x, size):
    y = np.clip(h_numpy(np.asarray(x, np.float64)), -size, size)
    low = np.floor(y)
    out = np.zeros(np.shape(x) + (2 * size + 1,))
    np.put_along_axis(out, (low + size).astype(int)[..., None], (1 - (y - low))[..., None], -1)
    upper = np.minimum(low + size + 1, 2 * size).astype(int)[..., None]
    np.put_along_axis(out, upper, np.take_along_axis(out, upper, -1) + (y - low)[..., None], -1)
    return out


# ------------------------------------------------------------ the straight-through code


@jax.jit
def _code_and_gradients(logits, cotangent):
    code = snet.straight_through_code(logits)
    grad = jax.grad(lambda x: jnp.sum(cotangent * snet.straight_through_code(x)))(logits)
    commit, commit_grads = jax.value_and_grad(
        lambda c, x: jnp.sum(snet.commitment_loss(c, x)), argnums=(0, 1))(code, logits)
    return code, grad, commit, commit_grads


def test_the_code_is_exactly_one_hot_and_its_gradient_is_the_softmax_gradient():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 4)).astype(np.float32) * 3
    logits[4] = [0.5, 2.0, 2.0, -1.0]  # a tie: the lowest index wins
    cotangent = rng.normal(size=(5, 4)).astype(np.float32)
    code, grad, commit, (grad_code, grad_logits) = (
        jax.tree.map(np.asarray, _code_and_gradients(jnp.asarray(logits),
                                                     jnp.asarray(cotangent))))
    expected = np.eye(4)[np.argmax(logits, -1)]
    np.testing.assert_array_equal(code, expected)  # exact zeros and ones
    assert np.argmax(logits[4]) == 1 and code[4, 1] == 1
    # Straight through: d<g, code>/d logits = J_softmax^T g, the softmax's Jacobian
    # diag(s) - s s^T written out in float64.
    s = softmax_numpy(logits)
    jacobian = np.einsum("bi,ij->bij", s, np.eye(4)) - np.einsum("bi,bj->bij", s, s)
    np.testing.assert_allclose(grad, np.einsum("bij,bi->bj", jacobian, cotangent),
                               rtol=1e-5, atol=1e-6)
    # Commitment ||c - s||^2: its value, no gradient into the code, and 2 J^T (s - c)
    # into the logits.
    np.testing.assert_allclose(commit, np.sum((expected - s) ** 2), rtol=1e-5)
    np.testing.assert_array_equal(grad_code, 0.0)
    np.testing.assert_allclose(grad_logits,
                               np.einsum("bij,bi->bj", jacobian, 2 * (s - expected)),
                               rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ loss and training

_WRITE = jax.jit(replay.write_episodes)
_SAMPLE = jax.jit(st.sample, static_argnums=(2, 3, 4, 5))


@functools.partial(jax.jit, static_argnums=0)
def _train_step(model, params, opt_state, batch):
    return st.stochastic_train_step(model.graphdef, OPTIMIZER, LOSS, params, opt_state, batch)


def numpy_unroll(params, observations, actions, code_mask):
    """The network and its unroll in float64 NumPy, step by step from the weights
    (dense, LayerNorm with Flax's epsilon 1e-6, ReLU, latent min-max scaling),
    codes from the encoder's argmax where masked in, code 0 elsewhere."""
    w = jax.tree.map(lambda x: np.asarray(x, np.float64), nnx.to_pure_dict(params))

    def dense(d, x):
        return x @ d["kernel"] + d["bias"]

    def trunk(d, x):
        for i in range(len(d["layers"])):
            y = dense(d["layers"][i], x)
            y = (y - y.mean(-1, keepdims=True)) / np.sqrt(y.var(-1, keepdims=True) + 1e-6)
            x = np.maximum(y * d["norms"][i]["scale"] + d["norms"][i]["bias"], 0.0)
        return x

    def scale(x):
        low, high = x.min(-1, keepdims=True), x.max(-1, keepdims=True)
        return (x - low) / np.maximum(high - low, CONFIG.latent_epsilon)

    def predict(latent):
        y = trunk(w["pred_trunk"], latent)
        return dense(w["policy_out"], y), dense(w["value_out"], y)

    obs = np.asarray(observations, np.float64)
    latent = scale(dense(w["repr_out"], trunk(w["repr_trunk"], obs[:, 0])))
    out = {name: [] for name in ("policy", "value", "reward", "q", "sigma", "code", "enc")}
    for k in range(actions.shape[1] + 1):
        p, v = predict(latent)
        out["policy"].append(p)
        out["value"].append(v)
        if k == actions.shape[1]:
            break
        action = np.eye(NUM_ACTIONS)[np.asarray(actions[:, k])]
        afterstate = scale(dense(w["after_out"],
                                 trunk(w["after_trunk"], np.concatenate([latent, action], -1))))
        y = trunk(w["after_pred_trunk"], afterstate)
        sigma, q = dense(w["code_out"], y), dense(w["q_out"], y)
        enc = dense(w["enc_out"], trunk(w["enc_trunk"], np.concatenate([obs[:, k], obs[:, k + 1]],
                                                                       -1)))
        code = np.where(code_mask[:, k, None], np.eye(NUM_CODES)[np.argmax(enc, -1)],
                        np.eye(NUM_CODES)[0])
        y = trunk(w["dyn_trunk"], np.concatenate([afterstate, code], -1))
        r, latent = dense(w["reward_out"], y), scale(dense(w["dyn_out"], y))
        for name, x in (("q", q), ("sigma", sigma), ("code", code), ("enc", enc),
                        ("reward", r)):
            out[name].append(x)
    return {name: np.stack(xs, 1) for name, xs in out.items()}


def random_episode(rng, length):
    policy = rng.random((length, NUM_ACTIONS)).astype(np.float32)
    return {"obs": rng.normal(size=(length, OBS_SIZE)).astype(np.float32),
            "action": rng.integers(0, NUM_ACTIONS, length),
            "reward": rng.normal(size=length).astype(np.float32),
            "policy": policy / policy.sum(-1, keepdims=True),
            "root_value": rng.normal(size=length).astype(np.float32) * 2}


def write(buffer, episodes):
    """Episodes (dicts of per-step arrays) as one write of [len, 6] steps."""
    steps = 6

    def field(name, shape=(), dtype=np.float32):
        out = np.zeros((len(episodes), steps, *shape), dtype)
        for b, e in enumerate(episodes):
            out[b, :len(e[name])] = e[name]
        return jnp.asarray(out)

    written = np.zeros((len(episodes), steps), bool)
    for b, e in enumerate(episodes):
        written[b, :len(e["reward"])] = True
    return _WRITE(buffer, field("obs", (OBS_SIZE,)), field("action", (), np.int32),
                  field("reward"), field("policy", (NUM_ACTIONS,)), field("root_value"),
                  np.zeros(written.shape, bool), written)


def test_sampled_windows_and_the_unrolled_loss_match_a_numpy_recomputation():
    model, params = tiny_model()
    rng = np.random.default_rng(1)
    buffer = _EMPTY(32, (OBS_SIZE,), jnp.float32, NUM_ACTIONS)
    episodes = [random_episode(rng, n) for n in (3, 5, 2, 6, 4)]
    buffer = write(buffer, episodes)
    batch = _SAMPLE(buffer, jax.random.key(2), BATCH, UNROLL, TD, GAMMA)
    # The windows' observations are the buffer's next rows, inside the episode.
    obs_rows = [(e, t) for e in episodes for t in range(len(e["reward"]))]
    mask = np.asarray(batch.targets.policy_mask)
    for b, start in enumerate(np.asarray(batch.index)):
        episode, t = obs_rows[int(start)]
        for k in range(UNROLL + 1):
            assert mask[b, k] == (t + k < len(episode["reward"]))
            if mask[b, k]:
                np.testing.assert_array_equal(batch.observations[b, k], episode["obs"][t + k])
    code_mask = mask[:, 1:]
    assert code_mask.any() and not code_mask.all()  # both kinds of transition are here
    _, _, metrics = _train_step(model, params, _OPT_INIT(params), batch)
    out = numpy_unroll(params, batch.observations, batch.actions, code_mask)
    t = jax.tree.map(np.asarray, batch.targets)
    n = CONFIG.value_support
    w = np.array([1.0] + [1.0 / UNROLL] * UNROLL)
    policy = (-np.sum(t.policy * log_softmax_numpy(out["policy"]), -1) * t.policy_mask) @ w
    value = -np.sum(two_hot_numpy(t.value, n) * log_softmax_numpy(out["value"]), -1) @ w
    reward = -np.sum(two_hot_numpy(t.reward[:, 1:], n) * log_softmax_numpy(out["reward"]),
                     -1) @ w[1:]
    q = -np.sum(two_hot_numpy(t.value[:, :-1], n) * log_softmax_numpy(out["q"]), -1) @ w[1:]
    code = out["code"]
    prior = (-np.sum(code * log_softmax_numpy(out["sigma"]), -1) * code_mask) @ w[1:]
    commit = (np.sum((code - softmax_numpy(out["enc"])) ** 2, -1) * code_mask) @ w[1:]
    per_row = (1.3 * policy + 0.25 * value + 0.7 * reward + 0.4 * q + 0.9 * prior
               + 0.01 * commit)
    np.testing.assert_allclose(metrics["loss"], np.mean(np.asarray(batch.weights) * per_row),
                               rtol=1e-5)
    for name, term in (("afterstate_value_loss", q), ("code_loss", prior),
                       ("commitment_loss", commit), ("reward_loss", reward)):
        np.testing.assert_allclose(metrics[name], np.mean(term), rtol=1e-5, err_msg=name)
    with pytest.raises(ValueError, match=r"observations must be \[B, K \+ 1"):
        st.stochastic_unroll(model.network(params), batch.observations[:, :2], batch.actions,
                             jnp.asarray(code_mask))


# ---------------------------------------------- a two-outcome MDP: the learned prior

# From s0 (observed one-hot at feature 0) action 0 leads by chance to s1 (p = 0.7,
# reward +1) or s2 (p = 0.3, reward -1); from s1 or s2 action 0 ends the episode with
# reward 0. The data hold the outcomes at exactly those frequencies (7 and 3 of 10
# episodes), and the batch is every window of them (10 from s0 and 10 from s1 or s2),
# so the code prior's cross-entropy at s0's afterstate is lowest at sigma = (0.7, 0.3)
# on the codes of the two transitions, once the encoder gives them different codes.
P_FIRST = 0.7


def mdp_batch():
    eye = np.eye(OBS_SIZE, dtype=np.float32)
    width = targets_lib.window_length(UNROLL, TD)
    rows = {"obs": [], "reward": [], "end": [], "filled": []}
    for episode in range(10):
        first = episode < 7
        reward = 1.0 if first else -1.0
        episode_obs = [eye[0], eye[1] if first else eye[2]]
        for start in (0, 1):
            length = 2 - start
            obs = np.zeros((UNROLL + 1, OBS_SIZE), np.float32)
            obs[:length] = episode_obs[start:]
            rewards = np.zeros(width, np.float32)
            rewards[:length] = [reward, 0.0][start:]
            end = np.zeros(width, bool)
            end[length - 1] = True
            filled = np.arange(width) < length
            for name, x in zip(rows, (obs, rewards, end, filled), strict=True):
                rows[name].append(x)
    rows = {name: np.stack(x) for name, x in rows.items()}
    policies = np.full((BATCH, width, NUM_ACTIONS), 1.0 / NUM_ACTIONS, np.float32)
    targets = _TARGETS(rows["reward"], np.zeros((BATCH, width), np.float32), policies,
                       rows["end"], rows["filled"], GAMMA, UNROLL, TD)
    return st.StochasticBatch(observations=jnp.asarray(rows["obs"]),
                              actions=jnp.asarray(np.zeros((BATCH, UNROLL), np.int32)),
                              targets=targets, weights=jnp.asarray(np.ones(BATCH, np.float32)),
                              index=jnp.asarray(np.zeros(BATCH, np.int32)))


@functools.partial(jax.jit, static_argnums=0)
def _prior_and_codes(model, params, obs, next_obs):
    net = model.network(params)
    sigma, _ = net.afterstate_predict(net.afterstate_dynamics(net.represent(obs),
                                                              jnp.zeros((2,), jnp.int32)))
    code, _ = net.encode(obs, next_obs)
    reward, _ = net.dynamics(net.afterstate_dynamics(net.represent(obs),
                                                     jnp.zeros((2,), jnp.int32)), code)
    return jax.nn.softmax(sigma, -1), code, reward


def test_the_code_prior_learns_the_outcome_probabilities_of_a_two_outcome_mdp():
    model, params = tiny_model()
    batch = mdp_batch()
    opt_state = _OPT_INIT(params)
    for _ in range(200):
        params, opt_state, metrics = _train_step(model, params, opt_state, batch)
    eye = np.eye(OBS_SIZE, dtype=np.float32)
    prior, code, _ = _prior_and_codes(model, params, eye[[0, 0]], eye[1:3])
    prior, code = np.asarray(prior), np.asarray(code)
    first, second = np.argmax(code, -1)
    assert first != second, (code, prior)  # the encoder tells the outcomes apart
    # Tolerance 0.02: the full batch has the outcomes at exactly 0.7 / 0.3, so the
    # cross-entropy's optimum is there and no sampling noise moves it; what is left
    # is the optimiser's distance from it after 200 Adam steps (measured from this
    # initialisation: within 0.002 after 100 steps, 1e-4 after 200). Whether the
    # encoder separates the outcomes depends on the initialisation: of six NumPy
    # draws (seeds 0-5 of tiny_model), three did within 200 steps, five within 600,
    # one not at all (both outcomes on one code, prior 1.0); this is seed 0.
    np.testing.assert_allclose(prior[0, [first, second]], [P_FIRST, 1 - P_FIRST], atol=0.02)
    np.testing.assert_allclose(prior[0], prior[1])
    assert float(metrics["commitment_loss"]) < 0.05


# ------------------------------------------------------------------ both policies


@functools.partial(jax.jit, static_argnums=(0, 1))
def _both_policies(model, num_simulations, params, key, obs, legal):
    root = model.root(params, obs, legal)
    puct = jaxpuct.stochastic_policy(params, key, root, model.decision_recurrent_fn,
                                     model.chance_recurrent_fn, num_simulations,
                                     selection=model_lib.muzero_puct_config())
    gumbel = jaxpuct.stochastic_gumbel_policy(params, key, root, model.decision_recurrent_fn,
                                              model.chance_recurrent_fn, num_simulations,
                                              max_num_considered_actions=2)
    return puct, gumbel


def test_both_chance_node_policies_run_on_the_model_under_jit():
    model, params = tiny_model()
    # The library's initialiser gives the state the test's NumPy draw fills (traced
    # only: its compile is what the NumPy draw saves).
    shapes = jax.eval_shape(lambda: snet.init_stochastic_network(
        CONFIG, NUM_ACTIONS, NUM_CODES, OBS_SIZE, 0)[1])
    assert jax.tree.structure(shapes) == jax.tree.structure(params)
    assert all(jax.tree.leaves(jax.tree.map(
        lambda a, b: a.shape == b.shape and a.dtype == b.dtype, shapes, params)))
    obs = np.random.default_rng(3).normal(size=(2, OBS_SIZE)).astype(np.float32)
    legal = np.array([[True, True], [False, True]])
    simulations = 8
    puct, gumbel = _both_policies(model, simulations, params, jax.random.key(0), obs, legal)
    for out in (puct, gumbel):
        tree = out.search_tree
        check_tree(tree, simulations)
        weights = np.asarray(out.action_weights)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert weights[1, 0] == 0 and int(out.action[1]) == 1
        # Chance nodes carry the model's code prior: C = 3 outcomes, edges of
        # width max(A, C) = 3.
        assert tree.children_prior.shape[-1] == NUM_CODES
        decision = np.asarray(tree.embeddings.is_decision)
        used = np.arange(decision.shape[1])[None] < np.asarray(tree.num_nodes)[:, None]
        assert np.any(used & ~decision) and np.any(used[:, 1:] & decision[:, 1:])
        prior = np.asarray(tree.children_prior)
        np.testing.assert_allclose(prior[used & ~decision].sum(-1), 1.0, atol=1e-5)
        # Edges into chance nodes: reward 0, discount 1; into decision nodes: the
        # model's gamma.
        discounts = np.asarray(tree.node_discounts)
        below = used & (np.arange(decision.shape[1])[None] > 0)
        np.testing.assert_array_equal(discounts[below & ~decision], 1.0)
        np.testing.assert_array_equal(np.asarray(tree.node_rewards)[below & ~decision], 0.0)
        np.testing.assert_allclose(discounts[below & decision], GAMMA, rtol=1e-6)
    # Gumbel's root visits both legal actions of row 0: the chance node of action 0
    # holds the model's code prior softmax(sigma(phi(h(o), 0))) (computed apart).
    gumbel_tree = gumbel.search_tree
    node = int(gumbel_tree.children_index[0, 0, 0])
    assert node > 0
    expected, _, _ = _prior_and_codes(model, params, obs, obs)
    np.testing.assert_allclose(gumbel_tree.children_prior[0, node], expected[0], rtol=1e-5)


# ------------------------------------------------------------------ the ResNet family

RESNET = NetworkConfig(kind="resnet", hidden=(8,), channels=4, num_blocks=1,
                       value_support=3, reward_support=2)
# A 2 x 2 board with 5 actions: the action spans two planes (ceil(5 / 4)).
BOARD, RESNET_ACTIONS = (2, 2, 3), 5


@functools.partial(jax.jit, static_argnums=0)
def _resnet_dynamics(graphdef, state, afterstate, codes):
    net = nnx.merge(graphdef, state)
    return [net.dynamics(afterstate, code) for code in codes]


def test_the_resnet_family_has_the_shapes_of_the_contract_and_reads_the_code():
    """Shapes by tracing only (``jax.eval_shape``: no compile) of every function,
    the unrolled loss and both searches on the model; then one compiled call: the
    dynamics' reward and next latent change with the code, which enters as planes."""
    batch, k = 3, 2
    graphdef, state = nnx.split(nnx.eval_shape(lambda: snet.StochasticMuZeroNetwork(
        RESNET, RESNET_ACTIONS, NUM_CODES, BOARD, rngs=nnx.Rngs(0))))
    obs = jax.ShapeDtypeStruct((batch, *BOARD), jnp.bool_)
    action = jax.ShapeDtypeStruct((batch,), jnp.int32)

    def functions(state, obs, action):
        net = nnx.merge(graphdef, state)
        latent = net.represent(obs)
        after = net.afterstate_dynamics(latent, action)
        code, enc_logits = net.encode(obs, obs)
        return (latent, net.predict(latent), after, net.afterstate_predict(after),
                net.dynamics(after, code), code, enc_logits)

    latent, (policy, value), after, (code_logits, q), (reward, nxt), code, enc = \
        jax.eval_shape(functions, state, obs, action)
    assert latent.shape == after.shape == nxt.shape == (batch, 2, 2, RESNET.channels)
    assert policy.shape == (batch, RESNET_ACTIONS)
    assert value.shape == q.shape == (batch, 2 * 3 + 1)
    assert reward.shape == (batch, 2 * 2 + 1)
    assert code_logits.shape == code.shape == enc.shape == (batch, NUM_CODES)

    def loss(state, observations):
        targets = targets_lib.UnrollTargets(
            value=jnp.zeros((batch, k + 1)), reward=jnp.zeros((batch, k + 1)),
            policy=jnp.full((batch, k + 1, RESNET_ACTIONS), 1.0 / RESNET_ACTIONS),
            policy_mask=jnp.ones((batch, k + 1), jnp.bool_))
        return st.stochastic_unroll_loss(nnx.merge(graphdef, state), st.StochasticBatch(
            observations=observations, actions=jnp.zeros((batch, k), jnp.int32),
            targets=targets, weights=jnp.ones((batch,)),
            index=jnp.zeros((batch,), jnp.int32)), LOSS)

    total, metrics = jax.eval_shape(
        loss, state, jax.ShapeDtypeStruct((batch, k + 1, *BOARD), jnp.bool_))
    assert total.shape == () and metrics["priority"].shape == (batch,)
    model = StochasticMuZeroModel(graphdef, discount=GAMMA)
    puct, gumbel = jax.eval_shape(lambda s, o: _both_policies(
        model, 4, s, jax.random.key(0), o, jnp.ones((batch, RESNET_ACTIONS), jnp.bool_)),
        state, obs)
    for out in (puct, gumbel):
        assert out.action.shape == (batch,)
        assert out.action_weights.shape == (batch, RESNET_ACTIONS)
    with pytest.raises(ValueError, match="obs_shape"):
        snet.StochasticMuZeroNetwork(RESNET, RESNET_ACTIONS, NUM_CODES, 12, rngs=nnx.Rngs(0))
    # The code changes what the dynamics gives (random weights, NumPy-drawn: no
    # initialiser to compile).
    rng = np.random.default_rng(1)
    concrete = jax.tree.map(
        lambda leaf: jnp.asarray(rng.normal(size=leaf.shape) * 0.5, leaf.dtype), state)
    afterstate = jnp.asarray(rng.uniform(size=(batch, 2, 2, RESNET.channels)), jnp.float32)
    codes = [jax.nn.one_hot(jnp.full((batch,), c), NUM_CODES) for c in range(2)]
    (r0, s0), (r1, s1) = _resnet_dynamics(graphdef, concrete, afterstate, codes)
    assert np.all(np.abs(np.asarray(r0) - np.asarray(r1)).max(-1) > 1e-4)
    assert np.all(np.abs(np.asarray(s0) - np.asarray(s1)).reshape(batch, -1).max(-1) > 1e-4)

"""Stochastic MuZero in the MuZero example's loop on 2048 (``examples/muzero.py --game
2048 --model stochastic``): the self-play segment searched through the stochastic
model, written to the buffer, gives sampled windows whose observations are the
boards the rules produced (each next one the moved board plus one new tile, checked
against ``pgx_2048.move`` in NumPy), and whose code mask is off exactly where the
next board is not stored; the loop's train step lowers the loss on a fixed batch;
the configurations the loop does not support are refused, naming the argument.

One tiny configuration, one segment and one compiled train step, for the suite's
time budget.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples import muzero as example
from jaxpuct.envs import pgx_2048
from jaxpuct.muzero import game_2048, replay, selfplay, stochastic_training
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.stochastic_model import StochasticMuZeroModel

CONFIG = MuZeroConfig(game="2048", model="stochastic", policy="alphazero", num_codes=4,
                      batch_size=2, segment_length=12, num_simulations=4, hidden=(16,),
                      latent_size=8, value_support=5, reward_support=5, discount=0.997,
                      td_steps=3, unroll_steps=2, buffer_size=64, train_batch_size=16,
                      train_steps=1, learning_rate=1e-2, weight_decay=0.0)
_WRITE = jax.jit(replay.write_episodes)
_SAMPLE = jax.jit(stochastic_training.sample, static_argnums=(2, 3, 4, 5))
_MOVE = jax.jit(pgx_2048.move)
_SAMPLE_BATCH = jax.jit(example.sample_batch, static_argnums=(0, 1))
_DIRECT = jax.jit(functools.partial(selfplay.search_roots, greedy=False, root_noise=False),
                  static_argnums=(0, 1))


@functools.cache
def setting():
    """The loop's state after one self-play segment written to its buffer."""
    graphdef, optimizer, ts = example.initial_state(CONFIG)
    model = example.make_model(CONFIG, graphdef)
    boards, segment = game_2048.play_segment(CONFIG, model, ts.params, ts.boards,
                                             jax.random.key(1))
    buffer = _WRITE(ts.buffer, **segment.write_kwargs())
    return graphdef, optimizer, ts, model, boards, segment, buffer


def decode(obs):
    """``[..., 288]`` one-hot observations -> ``[..., 16]`` exponents."""
    obs = np.asarray(obs)
    return obs.reshape(*obs.shape[:-1], 16, game_2048.NUM_EXPONENTS).argmax(-1)


@pytest.mark.slow
def test_sampled_windows_hold_the_boards_the_environment_produced():
    _, _, ts, model, boards, segment, buffer = setting()
    assert isinstance(model, StochasticMuZeroModel)
    seg = jax.tree.map(np.asarray, segment.trajectories)
    b, t = CONFIG.batch_size, CONFIG.segment_length
    board = decode(seg.obs)  # [B, T, 16]
    np.testing.assert_array_equal(board[:, 0], np.asarray(ts.boards.board))
    assert np.all(seg.legal[np.arange(b)[:, None], np.arange(t), seg.action])
    np.testing.assert_allclose(seg.policy.sum(-1), 1.0, atol=1e-5)
    # The environment's boards: the one after each move is the next searched board,
    # or the boards the segment ends on.
    produced = np.concatenate([board[:, 1:], np.asarray(boards.board)[:, None]], axis=1)
    k = CONFIG.unroll_steps
    batch = _SAMPLE(buffer, jax.random.key(2), 48, k, CONFIG.td_steps,
                    CONFIG.signed_discount)
    observations = decode(batch.observations)  # [48, K + 1, 16]
    actions, index = np.asarray(batch.actions), np.asarray(batch.index)
    code_mask = np.asarray(batch.targets.policy_mask)[:, 1:]  # [48, K]
    ends = seg.episode_end | (np.arange(t)[None] == t - 1)  # ended or cut: no next board
    checked = 0
    for row in range(len(index)):
        # Written game after game, one segment each, from row 0 (not wrapped).
        game, step = divmod(int(index[row]), t)
        for j in range(k + 1):
            if step + j >= t:
                break
            np.testing.assert_array_equal(observations[row, j], board[game, step + j])
            if j == k:
                break
            # A code is learned from this transition exactly when its next board is
            # stored in the episode's window.
            assert code_mask[row, j] == (not ends[game, step:step + j + 1].any())
            if code_mask[row, j]:
                assert actions[row, j] == seg.action[game, step + j]
                nxt = observations[row, j + 1]
                np.testing.assert_array_equal(nxt, produced[game, step + j])
                moved, _ = _MOVE(jnp.asarray(observations[row, j][None]),
                                 jnp.asarray(actions[row, j])[None])
                new = nxt != np.asarray(moved)[0]
                assert new.sum() == 1 and np.asarray(moved)[0][new] == 0 and nxt[new] in (1, 2)
                checked += 1
    assert checked > 20 and not code_mask.all()


def test_the_loop_train_step_lowers_the_loss_on_a_fixed_batch():
    graphdef, optimizer, ts, _, _, _, buffer = setting()
    params, opt_state, key, losses = ts.params, ts.opt_state, jax.random.key(3), []
    for _ in range(6):
        # The same key and step: the same sampled batch every time.
        params, opt_state, _, metrics, _ = example.train_step(
            CONFIG, graphdef, optimizer, params, opt_state, buffer, key, None, jnp.int32(0),
            jnp.int32(0))
        losses.append(float(metrics["loss"]))
    assert set(metrics) == set(example.LOSS_NAMES + example.STOCHASTIC_LOSS_NAMES)
    assert 1.0 <= float(metrics["code_perplexity"]) <= CONFIG.num_codes
    assert np.all(np.isfinite(losses)) and losses[-1] < 0.9 * losses[0], losses


@pytest.mark.parametrize("policy", [pytest.param("alphazero", marks=pytest.mark.slow), "gumbel"])
def test_reanalyse_remakes_the_first_rows_targets_with_the_chance_node_search(policy):
    """The loop's batch with ``--reanalyse-fraction 0.5``, for both searches over
    chance nodes: the same rows and observations as without; the first half's
    policy targets are the stochastic search run directly at the stored boards,
    and each value target moves by ``d^n`` times (fresh root value - stored one)
    exactly where it bootstraps inside the segment; the other rows' targets
    unchanged (bit for bit where they are not floats, within float rounding where
    they are)."""
    _, _, ts, model, _, segment, buffer = setting()
    config = dataclasses.replace(CONFIG, policy=policy)
    reanalysing = dataclasses.replace(config, reanalyse_fraction=0.5)
    key, step = jax.random.key(4), jnp.int32(1)
    plain = _SAMPLE_BATCH(config, model, buffer, key, step, ts.params)
    got = _SAMPLE_BATCH(reanalysing, model, buffer, key, step, ts.params)
    assert isinstance(got, stochastic_training.StochasticBatch)
    for name in ("observations", "actions", "weights", "index"):
        np.testing.assert_array_equal(getattr(got, name), getattr(plain, name))
    count = CONFIG.train_batch_size // 2
    for new, old in zip(jax.tree.leaves(got.targets), jax.tree.leaves(plain.targets),
                        strict=True):
        if jnp.issubdtype(new.dtype, jnp.floating):
            # Two compiled programs: XLA may fuse the n-step sums differently in each
            # (seen: 1 ulp, 4e-8 at -0.2, after the Dirichlet sampler changed what else
            # the reanalysing program holds); a wrong row or step moves them by far more.
            np.testing.assert_allclose(new[count:], old[count:], rtol=1e-6, atol=0)
        else:
            np.testing.assert_array_equal(new[count:], old[count:])
    k_max, n, d = CONFIG.unroll_steps, CONFIG.td_steps, CONFIG.signed_discount
    positions = np.arange(k_max + n + 1)  # bootstrap: policies 0..K, values n..n+K
    ends = np.asarray(segment.trajectories.episode_end)
    t_len = CONFIG.segment_length
    search_key = jax.random.fold_in(key, CONFIG.train_steps + step)
    bootstrapped = 0
    for b in range(count):
        start = int(got.index[b])
        rows = (start + positions) % buffer.size
        legal = np.asarray(buffer.legal)[rows]
        legal[~legal.any(-1)] = True
        keys = jax.random.split(jax.random.fold_in(search_key, start), len(positions))
        direct = _DIRECT(reanalysing, model, ts.params, keys, buffer.obs[rows],
                         jnp.asarray(legal))
        policy = np.asarray(direct.action_weights)
        fresh = np.asarray(direct.search_tree.summary().value)
        stored = np.asarray(buffer.root_value)[rows]
        game, t = divmod(start, t_len)  # one segment per game, written from row 0
        for k in range(k_max + 1):
            if not got.targets.policy_mask[b, k]:
                continue
            # The reanalysing step and the direct search are two compiled programs:
            # XLA may fuse Gumbel's softmax differently in each, so its weights can
            # differ by an ulp (seen on one host: 6e-8); a wrong key or position
            # moves them by orders of magnitude more.
            np.testing.assert_allclose(got.targets.policy[b, k], policy[k],
                                       rtol=1e-5, atol=1e-6)
            inside = t + k + n < t_len and not ends[game, t + k:t + k + n].any()
            shift = d ** n * (fresh[k + n] - stored[k + n]) if inside else 0.0
            np.testing.assert_allclose(got.targets.value[b, k] - plain.targets.value[b, k],
                                       shift, rtol=1e-4, atol=1e-5)
            bootstrapped += inside
    assert bootstrapped > 5
    assert not np.allclose(got.targets.policy[:count], plain.targets.policy[:count])


def test_the_true_outcome_of_each_transition_is_the_spawn_that_made_the_next_board():
    # Every outcome on afterstates with empty cells: pgx_2048.spawn's board, observed,
    # gives its outcome back through spawn_outcome (the move made by _MOVE).
    rng = np.random.default_rng(0)
    boards = rng.integers(0, 5, (64, 16)) * (rng.random((64, 16)) < 0.6)
    actions = rng.integers(0, 4, 64)
    after, _ = _MOVE(jnp.asarray(boards, jnp.int32), jnp.asarray(actions, jnp.int32))
    after = np.asarray(after)
    empty = after == 0
    outcomes = np.array([2 * rng.choice(np.flatnonzero(e)) + rng.integers(0, 2)
                         for e in empty])
    nxt = pgx_2048.spawn(jnp.asarray(after), jnp.asarray(outcomes))
    got = jax.jit(game_2048.spawn_outcome)(game_2048.observe(jnp.asarray(boards)),
                                           jnp.asarray(actions),
                                           game_2048.observe(nxt))
    np.testing.assert_array_equal(got, outcomes)
    assert len(set(outcomes.tolist())) > 20

    # The loop's stored windows: where a transition has a code, its true outcome
    # spawned on the moved board is the next stored board.
    _, _, _, _, _, _, buffer = setting()
    batch = _SAMPLE(buffer, jax.random.key(2), 48, CONFIG.unroll_steps, CONFIG.td_steps,
                    CONFIG.signed_discount)
    mask = np.asarray(batch.targets.policy_mask)[:, 1:]
    obs = np.asarray(batch.observations)
    k = CONFIG.unroll_steps
    outcome = np.asarray(game_2048.spawn_outcome(
        jnp.asarray(obs[:, :-1].reshape(-1, 288)), batch.actions.reshape(-1),
        jnp.asarray(obs[:, 1:].reshape(-1, 288)))).reshape(-1, k)
    moved, _ = _MOVE(jnp.asarray(decode(obs[:, :-1]).reshape(-1, 16), jnp.int32),
                     batch.actions.reshape(-1))
    spawned = np.asarray(pgx_2048.spawn(moved, jnp.asarray(outcome.reshape(-1))))
    same = (spawned == decode(obs[:, 1:]).reshape(-1, 16)).all(-1).reshape(-1, k)
    assert same[mask].all() and mask.sum() > 20


TRUE_CODES = dataclasses.replace(CONFIG, num_codes=32, chance_codes="true")


@pytest.mark.slow
def test_with_true_codes_the_prior_learns_the_outcome_and_the_encoder_is_unused():
    """``chance_codes='true'``: the code fed to the dynamics is the one-hot of the
    true outcome, the code loss is the prior's cross-entropy to it (NumPy), there is
    no commitment term, the encoder's parameters get no gradient, and the loop's
    train step lowers the loss."""
    from flax import nnx

    _, _, _, _, _, _, buffer = setting()
    graphdef, optimizer, ts = example.initial_state(TRUE_CODES)
    loss_config = TRUE_CODES.stochastic_loss
    assert loss_config.chance_outcome is game_2048.spawn_outcome
    batch = _SAMPLE(buffer, jax.random.key(5), 16, TRUE_CODES.unroll_steps,
                    TRUE_CODES.td_steps, TRUE_CODES.signed_discount)

    def loss(params):
        return stochastic_training.stochastic_unroll_loss(nnx.merge(graphdef, params),
                                                          batch, loss_config)

    (_, metrics), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(ts.params)
    mask = np.asarray(batch.targets.policy_mask)[:, 1:]
    obs, k = batch.observations, TRUE_CODES.unroll_steps
    outcome = np.asarray(game_2048.spawn_outcome(
        obs[:, :-1].reshape(-1, 288), batch.actions.reshape(-1),
        obs[:, 1:].reshape(-1, 288))).reshape(-1, k)
    preds = stochastic_training.stochastic_unroll(
        nnx.merge(graphdef, ts.params), obs, batch.actions, jnp.asarray(mask),
        outcomes=jnp.asarray(outcome))
    code = np.asarray(preds.code)
    expected = np.where(mask[..., None], np.eye(32)[outcome], np.eye(32)[0])
    np.testing.assert_array_equal(code, expected)
    logits = np.asarray(preds.code_logits, np.float64)
    log_sigma = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
        -1, keepdims=True)) - logits.max(-1, keepdims=True)
    ce = -(expected * log_sigma).sum(-1) * mask  # [B, K]
    np.testing.assert_allclose(float(metrics["code_loss"]), (ce @ np.full(k, 1 / k)).mean(),
                               rtol=1e-5)
    assert float(metrics["commitment_loss"]) == 0.0
    encoder = [g for path, g in jax.tree_util.tree_leaves_with_path(grads)
               if "enc" in jax.tree_util.keystr(path)]
    assert encoder and all(not np.any(np.asarray(g)) for g in encoder)
    dynamics = [g for path, g in jax.tree_util.tree_leaves_with_path(grads)
                if "dyn" in jax.tree_util.keystr(path)]
    assert any(np.any(np.asarray(g)) for g in dynamics)

    params, opt_state, losses = ts.params, ts.opt_state, []
    for _ in range(6):
        params, opt_state, _, step_metrics, _ = example.train_step(
            TRUE_CODES, graphdef, optimizer, params, opt_state, buffer, jax.random.key(3),
            None, jnp.int32(0), jnp.int32(0))
        losses.append(float(step_metrics["loss"]))
    assert np.all(np.isfinite(losses)) and losses[-1] < 0.9 * losses[0], losses


@pytest.mark.parametrize("change", [
    {"game": "tic_tac_toe"}, {"policy": "sampled"},
    {"game": "connect_four", "network_kind": "resnet"},
    {"num_codes": 8, "chance_codes": "true"}])
def test_unsupported_arguments_are_refused_by_name(change):
    base = {k: v for k, v in CONFIG.to_json().items() if k not in change}
    name = next(iter(change))
    with pytest.raises(ValueError, match=f"MuZeroConfig.{name} .* with model 'stochastic'"):
        MuZeroConfig.from_json({**base, **change})
    MuZeroConfig.from_json({**base, **change, "model": "muzero"})  # MuZero runs it


def test_a_stochastic_model_with_the_sampled_policy_is_refused_when_traced():
    """Past the config (a library caller's own model): the search refuses at trace
    time, naming the argument."""
    _, _, ts, model, _, _, _ = setting()
    config = dataclasses.replace(CONFIG, model="muzero", policy="sampled")

    def search(params):
        return selfplay.search_roots(config, model, params, jax.random.key(0),
                                     jnp.zeros((2, *game_2048.OBS_SHAPE)),
                                     jnp.ones((2, 4), jnp.bool_), False)

    with pytest.raises(ValueError, match="MuZeroConfig.policy 'sampled' .*Stochastic"):
        jax.eval_shape(search, ts.params)


def test_the_command_line_names_the_model():
    flags = ["--game", "2048", "--model", "stochastic", "--num-codes", "8", "--policy",
             "alphazero"]
    args = example.build_parser(example.game_defaults(flags)).parse_args(flags)
    config = example.config_lib.from_namespace(MuZeroConfig, args)
    assert (config.model, config.num_codes, config.value_support) == ("stochastic", 8, 150)
    assert MuZeroConfig.from_json(config.to_json()) == config
    with pytest.raises(ValueError, match="model"):
        MuZeroConfig(model="afterstate")

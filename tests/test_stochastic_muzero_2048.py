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


@pytest.mark.parametrize("policy", ["alphazero", "gumbel"])
def test_reanalyse_remakes_the_first_rows_targets_with_the_chance_node_search(policy):
    """The loop's batch with ``--reanalyse-fraction 0.5``, for both searches over
    chance nodes: the same rows and observations as without; the first half's
    policy targets are the stochastic search run directly at the stored boards,
    and each value target moves by ``d^n`` times (fresh root value - stored one)
    exactly where it bootstraps inside the segment; the other rows' targets bit
    for bit."""
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
            np.testing.assert_array_equal(got.targets.policy[b, k], policy[k])
            inside = t + k + n < t_len and not ends[game, t + k:t + k + n].any()
            shift = d ** n * (fresh[k + n] - stored[k + n]) if inside else 0.0
            np.testing.assert_allclose(got.targets.value[b, k] - plain.targets.value[b, k],
                                       shift, rtol=1e-4, atol=1e-5)
            bootstrapped += inside
    assert bootstrapped > 5
    assert not np.allclose(got.targets.policy[:count], plain.targets.policy[:count])


@pytest.mark.parametrize("change", [
    {"game": "tic_tac_toe"}, {"policy": "sampled"},
    {"game": "connect_four", "network_kind": "resnet"}])
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

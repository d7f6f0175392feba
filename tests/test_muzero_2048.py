"""MuZero's 2048 self-play segments (jaxpuct.muzero.game_2048) against the rules
replayed in NumPy: every recorded move is legal and pays the merge score of
``pgx_2048.move``; the next board is the moved one with one new tile, or a fresh
board after a game's end; a game's final score and length are the sums over its
moves; the game running at the segment's end is marked truncated with the model's
value of the board it stopped at; and the segment written to the buffer gives
windows that stop at the ends. The greedy evaluation plays whole games.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpuct.envs import pgx_2048
from jaxpuct.muzero import game_2048, replay
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.model import MuZeroModel
from jaxpuct.muzero.networks import init_network

CONFIG = MuZeroConfig(game="2048", batch_size=3, segment_length=32, num_simulations=4,
                      hidden=(16,), latent_size=8, value_support=5, reward_support=5,
                      discount=0.997, td_steps=3, unroll_steps=2)


@functools.cache
def setting():
    graphdef, params = init_network(CONFIG.network, 4, game_2048.OBS_SHAPE,
                                    jax.random.key(0, impl="rbg"))
    model = MuZeroModel(graphdef, discount=CONFIG.discount)
    start = game_2048.fresh_boards(jax.random.key(1), CONFIG.batch_size)
    # Game 0 ends at its first move whatever the search picks, so every seed has an
    # end (and a fresh board after it) inside the segment: 15 distinct tiles of at
    # least 8 around an empty corner. A move fills the corner's row or column and the
    # new tile (a 2 or a 4) the only empty cell, and no two neighbours are then equal.
    start = start._replace(board=start.board.at[0].set(jnp.arange(2, 18).at[0].set(0)))
    boards, segment = game_2048.play_segment(CONFIG, model, params, start, jax.random.key(2))
    return model, params, start, boards, jax.tree.map(np.asarray, segment)


def decode(obs):
    return obs.reshape(*obs.shape[:-1], 16, game_2048.NUM_EXPONENTS).argmax(-1)


_MOVE = jax.jit(pgx_2048.move)
_LEGAL = jax.jit(pgx_2048.legal_actions)


def test_a_segment_follows_the_rules_and_restarts_ended_games():
    model, params, start, boards, segment = setting()
    seg = segment.trajectories
    b, t = CONFIG.batch_size, CONFIG.segment_length
    board = decode(seg.obs)  # [B, T, 16]
    np.testing.assert_array_equal(board[:, 0], start.board)
    np.testing.assert_array_equal(seg.legal, np.asarray(_LEGAL(jnp.asarray(
        board.reshape(-1, 16)))).reshape(b, t, 4))
    assert np.all(seg.legal[np.arange(b)[:, None], np.arange(t), seg.action])
    after, score = (np.asarray(x).reshape(b, t, *x.shape[1:]) for x in _MOVE(
        jnp.asarray(board.reshape(-1, 16)), jnp.asarray(seg.action.reshape(-1))))
    np.testing.assert_allclose(seg.reward, score)
    assert seg.episode_end.any(), "no game ended: lengthen the segment"
    next_board = np.concatenate([board[:, 1:], np.asarray(boards.board)[:, None]], axis=1)
    for row in range(b):
        total, length = float(start.score[row]), int(start.moves[row])
        for step in range(t):
            total, length = total + seg.reward[row, step], length + 1
            nxt = next_board[row, step]
            if seg.episode_end[row, step]:
                assert (segment.final_score[row, step] == total
                        and segment.final_moves[row, step] == length)
                # A fresh board: two tiles, 2s or 4s.
                assert np.count_nonzero(nxt) == 2 and set(nxt[nxt > 0]) <= {1, 2}
                total, length = 0.0, 0
                continue
            assert np.isnan(segment.final_score[row, step])
            new = nxt != after[row, step]
            assert new.sum() == 1 and after[row, step][new] == 0 and nxt[new] in (1, 2)
            assert seg.legal[row, step + 1].any() if step + 1 < t else True
        np.testing.assert_allclose(boards.score[row], total, rtol=1e-6)
        assert int(boards.moves[row]) == length
    np.testing.assert_array_equal(segment.truncated, ~seg.episode_end[:, -1])
    final = model.root(params, game_2048.observe(boards.board))
    np.testing.assert_allclose(segment.truncation_value, final.value, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(seg.policy.sum(-1), 1.0, atol=1e-5)


def test_the_written_segment_gives_windows_that_stop_at_each_end():
    _, _, _, _, segment = setting()
    seg = segment.trajectories
    buffer = replay.empty_buffer(1024, game_2048.OBS_SHAPE, jnp.bool_, 4)
    buffer = jax.jit(replay.write_episodes)(
        buffer, **{k: None if v is None else jnp.asarray(v)
                   for k, v in segment.write_kwargs().items()})
    size = CONFIG.batch_size * CONFIG.segment_length
    np.testing.assert_array_equal(np.asarray(buffer.obs[:size]),
                                  seg.obs.reshape(size, -1).astype(bool))
    index, filled = replay.window_rows(buffer, jnp.arange(size), 2, 3)
    targets = jax.tree.map(np.asarray, replay.window_targets(
        buffer, index, filled, CONFIG.discount, 2, 3))
    ends = seg.episode_end.reshape(-1)
    cut = np.zeros(size, bool)
    cut[CONFIG.segment_length - 1::CONFIG.segment_length] = segment.truncated
    for row in range(size - 2):
        # Position 1 is inside the episode unless the start row ends it.
        assert targets.policy_mask[row, 1] == (not (ends[row] or cut[row]))
        assert targets.value_mask[row, 1] == (not cut[row])


def test_the_greedy_evaluation_plays_whole_games():
    model, params, _, _, _ = setting()
    result = game_2048.evaluate(CONFIG, model, params, jax.random.key(5), num_games=2,
                                max_moves=400)
    assert result["eval_unfinished"] == 0
    assert result["eval_moves"] > 10 and result["eval_score"] > 0


def test_pgx_rules_first_imported_inside_a_trace_do_not_leak_tracers():
    """pgx's play2048 makes arrays when imported; imported first inside jit (as
    self-play does) they leaked into every later call (UnexpectedTracerError)."""
    import os
    import subprocess
    import sys

    script = ("import jax, jax.numpy as jnp\n"
              "from jaxpuct.envs import pgx_2048\n"
              "board = jnp.zeros((2, 16), jnp.int32).at[:, 0].set(1)\n"
              "scan = lambda b: jax.lax.scan(lambda c, _: (c, pgx_2048.legal_actions(b)), 0,"
              " None, length=2)[1]\n"
              "jax.jit(scan)(board)\n"
              "import pgx\n"
              "env = pgx.make('2048')\n"
              "keys = jax.random.split(jax.random.PRNGKey(0), 2)\n"
              "print(jax.jit(jax.vmap(env.init))(keys)._board.shape)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env={"JAX_PLATFORMS": "cpu", **os.environ})
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.slow
def test_the_example_evaluates_at_extra_simulation_counts_on_the_same_games(tmp_path, capsys):
    import json

    from examples import muzero as example

    flags = ["--game", "2048", "--batch-size", "2", "--segment-length", "4",
             "--num-simulations", "2", "--hidden", "8", "--latent-size", "4",
             "--value-support", "5", "--reward-support", "5", "--train-steps", "1",
             "--train-batch-size", "4", "--buffer-size", "64", "--iterations", "1",
             "--eval-every", "0", "--checkpoint-every", "0", "--eval-games", "8",
             "--run-dir", str(tmp_path)]
    example.main([*flags, "--extra-eval-simulations", "2"])
    (row,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    # At the run's own count the extra evaluation is the same 8 games.
    own = {k: row[k] for k in ("eval_score", "eval_score_se", "eval_median", "eval_moves",
                               "eval_unfinished")}
    assert row["eval_at_2"] == own and own["eval_unfinished"] == 0
    assert (tmp_path / "metrics.png").stat().st_size > 1000
    with pytest.raises(SystemExit):
        example.main(["--game", "connect_four", "--extra-eval-simulations", "8"])
    assert "--extra-eval-simulations is for games 2048 and tic_tac_toe" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        example.main([*flags, "--eval-games", "0"])
    assert "--eval-games must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_a_resnet_reads_the_flat_board_as_planes_of_exponents():
    """2048 with ``--network-kind resnet`` (both models): the buffer keeps the
    one-hot board flat, the networks read it as ``[4, 4, 18]`` planes, row-major,
    so a flat observation and the same one reshaped give the same latent."""
    from flax import nnx

    from examples import muzero as example
    from jaxpuct.muzero import networks
    from jaxpuct.muzero import stochastic_networks as snet

    boards = jnp.array([[1, 0, 0, 2, 0, 3, 0, 0, 0, 0, 4, 0, 0, 0, 0, 11],
                        [0] * 15 + [1]], jnp.int32)
    flat = game_2048.observe(boards)  # [2, 288]
    planes = flat.reshape(2, *game_2048.BOARD_SHAPE)
    # The plane of cell (r, c) is one-hot at the cell's exponent.
    np.testing.assert_array_equal(np.argmax(np.asarray(planes), -1),
                                  np.asarray(boards).reshape(2, 4, 4))
    config = networks.NetworkConfig(kind="resnet", hidden=(8,), channels=4, num_blocks=1,
                                    value_support=3, reward_support=3)
    nets = [networks.MuZeroNetwork(config, 4, game_2048.BOARD_SHAPE, rngs=nnx.Rngs(0)),
            snet.StochasticMuZeroNetwork(config, 4, 8, game_2048.BOARD_SHAPE,
                                         rngs=nnx.Rngs(0))]
    for net in nets:
        np.testing.assert_array_equal(net.represent(flat), net.represent(planes))
        assert net.represent(flat).shape == (2, 4, 4, 4)
        with pytest.raises(ValueError, match="expected observations"):
            net.represent(flat[:, :-1])
    for model in ("muzero", "stochastic"):
        run = MuZeroConfig(game="2048", model=model, network_kind="resnet", channels=4,
                           num_blocks=1, hidden=(8,), value_support=3, reward_support=3,
                           buffer_size=32, batch_size=2)
        graphdef, _, ts = example.initial_state(run)
        assert ts.buffer.obs.shape == (32, *game_2048.OBS_SHAPE)  # stored flat
        root = jax.eval_shape(lambda p: example.make_model(run, graphdef).root(  # noqa: B023
            p, jnp.zeros((2, *game_2048.OBS_SHAPE), jnp.bool_)), ts.params)
        assert root.prior_logits.shape == (2, 4)
    with pytest.raises(ValueError, match="network_kind"):
        MuZeroConfig(game="tic_tac_toe", network_kind="resnet")

"""MuZero on connect four (``jaxpuct.muzero.board_game``, ``examples/muzero.py
--game connect_four``): a self-play segment replayed against the rules written out
in NumPy, the truncation bootstrap against the model, and the example's iteration
with its evaluation against OpenSpiel's MCTSBot (whose arena cross-checks every
move against OpenSpiel's rules)."""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest

pytest.importorskip("flax")
pytest.importorskip("pgx")

from jaxpuct.muzero import board_game  # noqa: E402
from jaxpuct.muzero.config import MuZeroConfig  # noqa: E402
from jaxpuct.muzero.model import MuZeroModel  # noqa: E402
from jaxpuct.muzero.networks import init_network  # noqa: E402

ROWS, COLUMNS = 6, 7
# A tiny network and search: the rules, not the play, are under test.
TINY = dict(game="connect_four", network_kind="resnet", channels=4, num_blocks=0,
            hidden=(8,), batch_size=6, segment_length=30, num_simulations=2,
            buffer_size=512, train_batch_size=8, train_steps=1, td_steps=42,
            symmetry_augment=True)


def _wins(stones: np.ndarray) -> bool:
    """Four of ``stones [6, 7]`` in a row, a column or a diagonal."""
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(ROWS):
            for c in range(COLUMNS):
                cells = [(r + i * dr, c + i * dc) for i in range(4)]
                if all(0 <= rr < ROWS and 0 <= cc < COLUMNS and stones[rr, cc]
                       for rr, cc in cells):
                    return True
    return False


def _landing_row(occupied: np.ndarray, column: int) -> int:
    """The row a stone dropped in ``column`` lands on (row 0 is the top, as pgx's
    observation)."""
    empty = np.flatnonzero(~occupied[:, column])
    return int(empty.max())


def test_a_segment_follows_the_rules_and_restarts_ended_games():
    config = MuZeroConfig(**TINY)
    graphdef, params = init_network(config.network, 7, (ROWS, COLUMNS, 2), 0)
    model = MuZeroModel(graphdef, zero_sum=True)
    games = board_game.fresh_games("connect_four", jax.random.key(1), config.batch_size)
    games, segment = board_game.play_segment(config, model, params, games, jax.random.key(2))
    t = segment.trajectories
    obs, action, reward, ended = (np.asarray(x) for x in (t.obs, t.action, t.reward,
                                                          t.episode_end))
    legal, policy = np.asarray(t.legal), np.asarray(t.policy)
    final_plies = np.asarray(segment.final_plies)
    rows, steps = action.shape
    assert obs.shape == (rows, steps, ROWS, COLUMNS, 2) and obs.dtype == np.bool_
    np.testing.assert_allclose(policy.sum(-1), 1.0, atol=1e-5)
    assert np.all(policy[~legal] == 0)
    assert np.all(np.asarray(t.written))
    endings = 0
    for b in range(rows):
        plies = int(np.sum(obs[b, 0]))  # stones on the board: plies played
        for s in range(steps):
            mine, theirs = obs[b, s, ..., 0], obs[b, s, ..., 1]
            occupied = mine | theirs
            np.testing.assert_array_equal(legal[b, s], ~occupied[0])  # a column has room
            column = int(action[b, s])
            assert legal[b, s, column]
            after = mine.copy()
            after[_landing_row(occupied, column), column] = True
            won, full = _wins(after), bool(np.all(after | theirs))
            assert reward[b, s] == (1.0 if won else 0.0)
            assert ended[b, s] == (won or full)
            plies += 1
            assert final_plies[b, s] == (plies if ended[b, s] else 0)
            if s + 1 == steps:
                continue
            if ended[b, s]:
                endings += 1
                assert not obs[b, s + 1].any()  # a fresh game
                plies = 0
            else:  # the opponent to move: the planes swap
                np.testing.assert_array_equal(obs[b, s + 1, ..., 0], theirs)
                np.testing.assert_array_equal(obs[b, s + 1, ..., 1], after)
    assert endings > 0  # 30 random-ish plies of 6 games: some end (else the test is weak)
    # The running game is cut, bootstrapped with the model's value of where it stopped.
    np.testing.assert_array_equal(np.asarray(segment.truncated), ~ended[:, -1])
    env = board_game.game("connect_four").environment
    value = model.root(params, env.observe(games.state), env.legal_mask(games.state)).value
    np.testing.assert_allclose(np.asarray(segment.truncation_value), np.asarray(value),
                               rtol=1e-5, atol=1e-6)


def test_moves_turn_greedy_after_temperature_moves_plies_of_each_game():
    """``temperature_moves = 3``: from the fourth ply of each game (three stones on
    the board, whoever started) the move is the most visited action of the stored
    visit target; before it the move is sampled. Games restart inside the
    segment, so the count is per game, not per segment step."""
    config = MuZeroConfig(**{**TINY, "policy": "alphazero", "num_simulations": 16,
                             "segment_length": 24, "temperature_moves": 3})
    graphdef, params = init_network(config.network, 7, (ROWS, COLUMNS, 2), 0)
    model = MuZeroModel(graphdef, zero_sum=True)
    games = board_game.fresh_games("connect_four", jax.random.key(4), config.batch_size)
    _, segment = board_game.play_segment(config, model, params, games, jax.random.key(5))
    t = segment.trajectories
    stones = np.asarray(t.obs).sum((-3, -2, -1))
    action, policy = np.asarray(t.action), np.asarray(t.policy)
    late, early = stones >= 3, stones < 3
    assert np.any(np.asarray(t.episode_end)[:, :-4])  # a game restarted in the segment
    np.testing.assert_array_equal(action[late], policy.argmax(-1)[late])
    assert np.mean((policy[late] > 0).sum(-1) > 1) > 0.5  # visit targets, not one-hot
    assert np.any(action[early] != policy.argmax(-1)[early])


@pytest.mark.slow
def test_the_example_evaluates_against_mcts_resumes_bit_for_bit_and_plays_the_arena(
        tmp_path):
    """``examples/muzero.py --game connect_four`` from its flags: one iteration with
    its evaluation against MCTSBot, then ``--resume`` for a second one, ends
    exactly where two uninterrupted iterations do (the checkpoint holds the network,
    optimiser, buffer, games in progress and key; the evaluation draws no training
    randomness); ``examples/arena.py`` recognises the run and plays it."""
    pytest.importorskip("pyspiel")
    from examples import arena as arena_example
    from examples import muzero as example
    from jaxpuct.alphazero import checkpoints

    flags = [(f"--{k.replace('_', '-')}" if v else f"--no-{k.replace('_', '-')}")
             if isinstance(v, bool) else
             f"--{k.replace('_', '-')}={','.join(map(str, v)) if isinstance(v, tuple) else v}"
             for k, v in TINY.items()]
    config = example.config_lib.from_namespace(
        MuZeroConfig, example.build_parser(example.game_defaults(flags)).parse_args(flags))
    assert all(getattr(config, k) == v for k, v in TINY.items())
    split, whole, rows = str(tmp_path / "split"), str(tmp_path / "whole"), []
    example.run(config, 1, split, log=rows.append, eval_every=1, checkpoint_every=1,
                eval_games=2, eval_simulations=2, opponent_simulations=2)
    row = json.loads(rows[-1])
    assert row["mcts_games"] == 2 and row["mcts_wins"] + row["mcts_draws"] + row[
        "mcts_losses"] == 2
    assert row["env_steps"] == TINY["batch_size"] * TINY["segment_length"]
    assert 0 <= row["mcts_score_low"] <= row["mcts_score"] <= row["mcts_score_high"] <= 1
    assert np.isfinite(row["loss"])
    assert (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()[-1] == rows[-1]
    # The last iteration always evaluates: at the example's defaults (64 games, MCTSBot
    # with 1,000 simulations) that was 30 of this test's 49 CPU-seconds.
    quiet, small_eval = [].append, dict(eval_games=2, eval_simulations=2, opponent_simulations=2)
    example.run(config, 2, split, log=quiet, eval_every=0, checkpoint_every=1, resume=True,
                **small_eval)
    example.run(config, 2, whole, log=quiet, eval_every=0, checkpoint_every=1,
                keep_checkpoints=1, **small_eval)
    listed = {d: sorted(n for n in os.listdir(os.path.join(d, "checkpoints"))
                        if n.isdigit()) for d in (split, whole)}
    assert listed == {split: ["1", "2"], whole: ["2"]}
    with pytest.raises(ValueError, match="keep_checkpoints must be >= 1"):
        example.run(config, 2, whole, keep_checkpoints=0)
    template = example.initial_state(config)[2]
    a, b = (checkpoints.restore_checkpoint(d, template, config) for d in (whole, split))
    assert int(a.iteration) == int(b.iteration) == 2
    # Placed as the fresh state is (uncommitted): jit then reuses its compilations.
    assert not any(x.committed for x in jax.tree.leaves(b))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    result = arena_example.main(["--run-dir", split, "--opponent", "random", "--games", "2",
                                 "--simulations", "2"])
    assert result.game == "connect_four" and result.total.games == 2


def test_connect_four_configuration_is_checked():
    with pytest.raises(ValueError, match="network_kind"):
        MuZeroConfig(game="tic_tac_toe", network_kind="resnet")
    config = MuZeroConfig(**TINY)
    assert (config.zero_sum, config.signed_discount, config.max_plies, config.num_actions) == (
        True, -1.0, 42, 7)
    assert config.network.kind == "resnet" and config.network.num_blocks == 0
    with pytest.raises(ValueError, match="num_samples"):
        MuZeroConfig(**TINY, policy="sampled", num_samples=8)


def _drop(stones: np.ndarray, empty: np.ndarray, column: int) -> np.ndarray:
    """``stones [6, 7]`` with one more dropped in ``column``."""
    out = stones.copy()
    out[_landing_row(~empty, column), column] = True
    return out


@pytest.mark.slow
def test_the_tactics_probe_labels_wins_and_replies_as_the_rules_do():
    """``benchmarks.muzero_tactics``' labels against the rules in NumPy: a legal
    move wins at once iff the mover's stones then hold four in a row, and the
    opponent has a winning reply iff some drop of theirs then does (after a move
    that neither wins nor fills the board); the positions are running games."""
    from benchmarks import muzero_tactics

    state, n = muzero_tactics.random_positions(40, 3)
    wins, replies = muzero_tactics.move_outcomes(state)
    obs, legal = np.asarray(state.observation), np.asarray(state.legal_action_mask)
    assert n > 20 and wins.any() and replies.any()
    for i in range(n):
        mine, theirs = obs[i, ..., 0].astype(bool), obs[i, ..., 1].astype(bool)
        assert not _wins(mine) and not _wins(theirs) and legal[i].any()
        np.testing.assert_array_equal(legal[i], ~(mine | theirs)[0])
        for a in range(COLUMNS):
            if not legal[i, a]:
                assert not wins[i, a] and not replies[i, a]
                continue
            after = _drop(mine, ~(mine | theirs), a)
            assert wins[i, a] == _wins(after), (i, a)
            empty = ~(after | theirs)
            reply = not _wins(after) and any(
                _wins(_drop(theirs, empty, b)) for b in range(COLUMNS) if empty[0, b])
            assert replies[i, a] == reply, (i, a)

"""Backgammon with a network inside the chance-node search, and the example that
trains it (``examples/known_chance_backgammon.py``)."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pgx")
pytest.importorskip("flax")

import jaxpuct  # noqa: E402
from jaxpuct.envs import pgx_backgammon as bg  # noqa: E402

_DECISION = jax.jit(bg.decision)
_ROLL = jax.jit(bg.roll_dice)
_FEATURES = jax.jit(bg.features)


def _positions(batch: int = 12, plies: int = 60, seed: int = 0):
    """``plies`` random micro-moves of ``batch`` games, every state kept."""
    rng = np.random.default_rng(seed)
    state = bg.init(jax.random.key(seed), batch)
    kept = [state]
    for t in range(plies):
        legal = np.asarray(state.legal_action_mask)
        action = np.array([rng.choice(np.flatnonzero(m)) for m in legal], np.int32)
        state = _ROLL(_DECISION(state, jnp.asarray(action)), jax.random.key(1000 + t))
        kept.append(state)
    return kept


def _numpy_features(obs: np.ndarray) -> np.ndarray:
    rows = []
    for o in obs.astype(np.int64):
        board, dice = o[:28], o[28:]
        row = []
        for side in (np.maximum(board, 0), np.maximum(-board, 0)):
            for n in side:
                row += [n >= 1, n >= 2, n >= 3, max(n - 3, 0) / 2]
        row += list(dice / 4) + [float(dice.sum() == 0)]
        mine = sum(max(board[i], 0) * (24 - i) for i in range(24)) + 25 * max(board[24], 0)
        theirs = sum(max(-board[i], 0) * (i + 1) for i in range(24)) + 25 * max(-board[25], 0)
        rows.append(row + [mine / 100, theirs / 100])
    return np.asarray(rows, np.float32)


def test_features_match_a_numpy_recomputation_and_the_opening_pip_counts():
    states = _positions()
    obs = np.concatenate([np.asarray(s.observation) for s in states])
    got = np.asarray(_FEATURES(jnp.asarray(obs)))
    assert got.shape == (obs.shape[0], bg.NUM_FEATURES)
    np.testing.assert_allclose(got, _numpy_features(obs), rtol=1e-6, atol=1e-6)
    # Both sides start with 167 pips; some positions had checkers on a bar.
    np.testing.assert_allclose(got[0, -2:], [1.67, 1.67], rtol=1e-6)
    assert np.any(obs[:, 24] > 0) or np.any(obs[:, 25] < 0)


def _zero_apply(params, obs):
    del params
    return jnp.zeros((obs.shape[0], bg.NUM_ACTIONS)), jnp.zeros((obs.shape[0],))


@pytest.mark.slow
@pytest.mark.parametrize("rules", ["standard", "pgx"])
def test_a_zero_network_searches_exactly_as_the_pure_zero_value_search(rules):
    state = _positions(batch=6, plies=30, seed=3)[-1]
    net = bg.make_network_search_fns(_zero_apply, rules)
    pure = bg.make_search_fns("zero", rules=rules)

    @jax.jit
    def both(key):
        a = jaxpuct.stochastic_policy(None, key, net[0](None, key, state), net[1], net[2], 24,
                                      dirichlet_fraction=0.0, temperature=0.0,
                                      chance_backup="expectation")
        b = jaxpuct.stochastic_policy(None, key, pure[0](state, key), pure[1], pure[2], 24,
                                      dirichlet_fraction=0.0, temperature=0.0,
                                      chance_backup="expectation")
        return a.action_weights, b.action_weights, a.search_tree.node_values[:, 0], \
            b.search_tree.node_values[:, 0]

    wa, wb, va, vb = both(jax.random.key(5))
    np.testing.assert_array_equal(np.asarray(wa), np.asarray(wb))
    np.testing.assert_array_equal(np.asarray(va), np.asarray(vb))


def test_network_values_enter_the_tree_in_points_from_each_movers_view():
    """A network whose value reads the board: ``tanh`` of the pip-count lead / 50.
    Roots, afterstates and chance children get ``3 x`` that from the player to
    move's view; an afterstate that passes the turn gets it negated (the board is
    the opponent's, before their roll); the game's points where a move ends it."""
    def pip_apply(params, obs):
        del params
        f = bg.features(obs)
        return jnp.zeros((obs.shape[0], bg.NUM_ACTIONS)), jnp.tanh(2.0 * (f[:, -1] - f[:, -2]))

    def oracle(obs):
        f = _numpy_features(np.asarray(obs))
        return 3.0 * np.tanh(2.0 * (f[:, -1] - f[:, -2]))

    root_fn, decision_fn, chance_fn = (jax.jit(f) for f in bg.make_network_search_fns(
        pip_apply, "pgx", 3.0))
    states = _positions(batch=16, plies=200, seed=7)
    ended = 0
    for state in states[::20] + [states[-1]]:
        root = root_fn(None, jax.random.key(0), state)
        live = ~np.asarray(state.terminated)
        np.testing.assert_allclose(np.asarray(root.value),
                                   np.where(live, oracle(state.observation), 0.0), atol=1e-5)
        probs = np.asarray(jax.nn.softmax(root.prior_logits))
        legal = np.asarray(state.legal_action_mask)
        assert np.all(probs[live][~legal[live]] < 1e-30)
        action = jnp.asarray(np.argmax(legal & live[:, None], -1), jnp.int32)
        out, after = decision_fn(None, jax.random.key(1), action, state)
        v = oracle(after.state.observation)
        roll, term = np.asarray(after.roll), np.asarray(after.state.terminated)
        expected = np.where(term, np.asarray(after.reward), np.where(roll, -v, v))
        np.testing.assert_allclose(np.asarray(out.afterstate_value)[live], expected[live],
                                   atol=1e-5)
        ended += int(np.sum(term & live))
        c_out, nxt = chance_fn(None, jax.random.key(2), jnp.full(action.shape, 4), after)
        np.testing.assert_allclose(
            np.asarray(c_out.value),
            np.where(np.asarray(nxt.terminated), 0.0, oracle(nxt.observation)), atol=1e-5)
        np.testing.assert_array_equal(np.asarray(c_out.discount)[live & ~term],
                                      np.where(roll, -1.0, 1.0)[live & ~term])


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="rules"):
        bg.make_network_search_fns(_zero_apply, "openspiel")
    with pytest.raises(ValueError, match="value_scale"):
        bg.make_network_search_fns(_zero_apply, value_scale=0.0)


@pytest.mark.slow
def test_the_example_trains_evaluates_saves_and_its_network_plays_the_arena(tmp_path, capsys):
    from examples import known_chance_backgammon as kcb

    run_dir = str(tmp_path / "run")
    last = kcb.main(["--batch-size", "4", "--num-simulations", "2", "--selfplay-steps", "6",
                     "--trajectory-length", "5", "--train-batch-size", "32",
                     "--train-steps", "2", "--buffer-size", "64", "--eval-games", "2",
                     "--eval-simulations", "2", "--eval-opponent", "random", "--hidden", "8",
                     "--iterations", "2",
                     "--run-dir", run_dir])
    def refuse(name):
        raise ValueError(f"bare {name} in a metrics line")

    rows = [json.loads(line, parse_constant=refuse)
            for line in capsys.readouterr().out.splitlines()]
    # Every game reaches the 5-micro-move cut-off within the first iteration's 6 moves;
    # no optimiser step before the buffer holds a minibatch (20 rows < 32).
    assert rows[0]["games_cut_off"] == rows[0]["games_finished"] == 4
    assert rows[0]["buffer_rows"] == 20 and rows[0]["policy_loss"] is None
    assert np.isfinite(rows[1]["policy_loss"]) and rows[1]["value_loss"] >= 0
    assert last["eval_wins"] + last["eval_losses"] + last["eval_unfinished"] == 2

    config, graphdef, params = kcb.load_params(run_dir)
    assert config.hidden == 8 and json.load(open(os.path.join(run_dir, "params.json")))[
        "iteration"] == 2
    apply = kcb.make_apply(graphdef)
    state = bg.init(jax.random.key(0), 3)
    logits, value = apply(params, state.observation)
    assert logits.shape == (3, bg.NUM_ACTIONS) and value.shape == (3,)

    pytest.importorskip("pyspiel")
    from examples import arena_backgammon

    capsys.readouterr()
    record = str(tmp_path / "arena.json")
    arena_backgammon.main(["--checkpoint", run_dir, "--simulations", "2", "--rules", "pgx",
                           "--opponent", "random", "--games", "2", "--json", record])
    report = capsys.readouterr().out
    assert f"the network of {run_dir}" in report and "both colours (2 games)" in report
    written = json.load(open(record))
    assert written["args"]["value"] == "network"
    assert [r["agent_first"] for r in written["game_records"]] == [True, False]
    assert [r["points"] for r in written["game_records"]] == written["points"]
    assert all(len(r["openspiel_history"]) > 20 for r in written["game_records"])

    # A wall-clock budget alone has no iteration cap: it stops after the iteration
    # that passes it (here the first), and a run with neither end is refused.
    capsys.readouterr()
    kcb.main(["--batch-size", "4", "--num-simulations", "2", "--selfplay-steps", "6",
              "--trajectory-length", "5", "--train-batch-size", "32", "--train-steps", "2",
              "--buffer-size", "64", "--eval-games", "2", "--eval-simulations", "2",
              "--eval-opponent", "random", "--hidden", "8", "--max-minutes", "0"])
    assert [json.loads(line)["iteration"] for line in capsys.readouterr().out.splitlines()
            ] == [1]
    with pytest.raises(ValueError, match="iterations or max_minutes"):
        kcb.run(config, None, 0, None)

    with open(os.path.join(run_dir, "params.npz"), "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ValueError, match="SHA-256"):
        kcb.load_params(run_dir)

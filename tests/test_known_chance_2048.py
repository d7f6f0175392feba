"""The known-rules 2048 baseline (``examples/known_chance_2048.py``): both root
rules run end to end, and the greedy Gumbel search over the true chance model
does not depend on its key."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from examples import known_chance_2048 as kc
from jaxpuct.envs import pgx_2048


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["alphazero", "gumbel"])
def test_the_example_runs_both_root_rules_and_counts_its_steps(policy, capsys, tmp_path):
    run_dir = str(tmp_path / "run")
    last = kc.main(["--policy", policy, "--batch-size", "4", "--segment-length", "8",
                    "--num-simulations", "4", "--hidden", "8", "--value-support", "5",
                    "--train-steps", "2", "--buffer-size", "128",
                    "--train-batch-size", "8", "--iterations", "2", "--eval-every", "0",
                    "--eval-games", "8", "--seed", "5", "--run-dir", run_dir])

    def refuse(name):
        raise ValueError(f"bare {name} in a metrics line")

    rows = [json.loads(line, parse_constant=refuse)
            for line in capsys.readouterr().out.splitlines()]
    assert [r["env_steps"] for r in rows] == [32, 64]
    assert 0 < rows[0]["train_cpu_seconds"] <= rows[1]["train_cpu_seconds"]
    assert rows[1]["train_cpu_seconds"] <= rows[1]["cpu_seconds"]
    assert "eval_score" not in rows[0] and last is not rows[0]
    # 8 evaluation games (--eval-games) from fresh boards, every one played to its end.
    assert last["eval_unfinished"] == 0 and last["eval_score"] > 0
    assert last["eval_moves"] > 0 and np.isfinite(last["value_loss"])

    # Its lines are what benchmarks.curves_2048 reads: the one evaluation, at 64 steps.
    from benchmarks import curves_2048

    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (evaluated,) = curves_2048.evaluations(str(log))
    assert (evaluated["env_steps"], evaluated["score"]) == (64, last["eval_score"])
    curves_2048.main(["--run", f"a={log}", "--run", f"a={log}", "--steps", "64",
                      "--json", str(tmp_path / "all.json")])
    out = capsys.readouterr().out
    assert f"{last['eval_score']:,.0f}" in out and "mean of 2 seeds" in out
    assert json.load(open(tmp_path / "all.json"))["a"][str(log)][0]["env_steps"] == 64

    # The saved network is the one the last evaluation used: the run's keys
    # replayed give iteration 2's evaluation again.
    config, graphdef, params, iteration = kc.restore(run_dir)
    assert iteration == 2 and config.seed == 5 and config.policy == policy
    key = jax.random.split(jax.random.key(5), 3)[2]
    for _ in range(2):
        play_key, _, key = jax.random.split(key, 3)
    again = kc.evaluate_at(config, graphdef, params, jax.random.fold_in(play_key, 1), games=8)
    assert again == {k: last[k] for k in again}
    # --evaluate plays it again; an extra count equal to the run's own is the same games.
    row = kc.main(["--evaluate", run_dir, "--extra-eval-simulations", "4", "--eval-games", "8",
                   "--seed", "1"])
    assert json.loads(capsys.readouterr().out) == row and row["iteration"] == 2
    assert row["eval_at_4"] == {k: row[k] for k in row["eval_at_4"]}


def test_eval_games_below_one_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        kc.main(["--eval-games", "0"])
    assert "--eval-games must be >= 1, got 0" in capsys.readouterr().err


def test_the_greedy_gumbel_search_is_the_same_for_every_key():
    config = kc.Config(policy="gumbel", num_simulations=8, hidden=8, value_support=5)
    graphdef, params = nnx.split(kc.ValueNetwork(config, nnx.Rngs(0)))
    search = jax.jit(lambda key, board: kc.make_search(config, graphdef, params)(
        key, board, None, True))
    # Boards with illegal moves: tiles packed against the left and bottom edges.
    boards = jnp.array([[1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3, 1, 2, 0],
                        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0],
                        [2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]], jnp.int32)
    first = search(jax.random.key(0), boards)
    for seed in (1, 2):
        again = search(jax.random.key(seed), boards)
        np.testing.assert_array_equal(again.action, first.action)
        np.testing.assert_allclose(again.action_weights, first.action_weights)
    legal = pgx_2048.legal_actions(boards)
    assert not bool(jnp.all(legal)), "the boards should include an illegal move"
    assert bool(jnp.all(jnp.take_along_axis(legal, first.action[:, None], 1)))


def test_random_chance_ties_show_the_search_other_spawns():
    """``--chance-ties random``: the chance nodes' tied spawns (every empty cell is
    as likely) are drawn from the key, where ``first`` takes the same cells for
    every key."""
    config = kc.Config(num_simulations=8, hidden=8, value_support=5, chance_ties="random")
    assert kc.Config().chance_ties == "first"
    graphdef, params = nnx.split(kc.ValueNetwork(config, nnx.Rngs(0)))
    search = jax.jit(lambda key, board: kc.make_search(config, graphdef, params)(
        key, board, None, True).search_tree.edge_visits)
    boards = jnp.zeros((1, 16), jnp.int32).at[0, 12].set(1)
    visits = [np.asarray(search(jax.random.key(seed), boards)) for seed in range(4)]
    assert any(not np.array_equal(v, visits[0]) for v in visits[1:])


@pytest.mark.parametrize("text", ["0", "4,x", "-3"])
def test_bad_extra_simulation_counts_are_refused_by_name(text, capsys):
    with pytest.raises(SystemExit):
        kc.main(["--extra-eval-simulations", text, "--iterations", "0"])
    assert "--extra-eval-simulations" in capsys.readouterr().err


def test_curves_read_the_extra_evaluations_with_at(tmp_path, capsys):
    from benchmarks import curves_2048

    own = {"eval_score": 100.0, "eval_score_se": 10.0, "eval_median": 90.0, "eval_moves": 50.0}
    deeper = {"eval_score": 300.0, "eval_score_se": 20.0, "eval_median": 280.0,
              "eval_moves": 90.0}
    rows = [{"iteration": 1, "env_steps": 64, "train_cpu_seconds": 2.0},
            {"iteration": 2, "env_steps": 128, "train_cpu_seconds": 4.0, **own,
             "eval_at_50": deeper}]
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (at_own,) = curves_2048.evaluations(str(log))
    (at_50,) = curves_2048.evaluations(str(log), 50)
    assert (at_own["score"], at_50["score"], at_50["se"]) == (100.0, 300.0, 20.0)
    assert curves_2048.evaluations(str(log), 16) == []
    assert curves_2048.run_spec("m=runs/a@b@50") == ("m", "runs/a@b", 50)
    assert curves_2048.run_spec("m=runs/a@b") == ("m", "runs/a@b", None)
    curves_2048.main(["--run", f"deeper={log}@50", "--steps", "128"])
    assert "300 [260, 340]" in capsys.readouterr().out


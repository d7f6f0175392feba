"""``benchmarks/connect_four_curves.py`` on a hand-built run directory: the points it
reads from ``metrics.jsonl`` and ``arena/step_*.json``, the table it prints for one
bot strength, and the plot it writes (no JAX; quick)."""

import json

import pytest

from benchmarks import connect_four_curves as curves


def _run_dir(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    records = [
        {"iteration": 1, "seconds": 50.0, "train_seconds": 40.0},  # no MCTSBot evaluation
        {"iteration": 2, "seconds": 200.0, "train_seconds": 120.0, "mcts_score": 0.6,
         "mcts_score_low": 0.5, "mcts_score_high": 0.7, "mcts_simulations": 1000,
         "mcts_agent_simulations": 256, "eval_mcts_first_win": 20, "eval_mcts_first_draw": 2,
         "eval_mcts_first_loss": 10, "eval_mcts_second_win": 15, "eval_mcts_second_draw": 1,
         "eval_mcts_second_loss": 16},
        # A run from before train_seconds: the x axis falls back to seconds.
        {"iteration": 3, "seconds": 300.0, "mcts_score": 0.4, "mcts_score_low": 0.3,
         "mcts_score_high": 0.5, "mcts_simulations": 10000, "eval_mcts_first_win": 4,
         "eval_mcts_first_loss": 4},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "arena").mkdir()
    (tmp_path / "arena" / "step_3.json").write_text(json.dumps({
        "total": {"score": 0.75, "score_low": 0.6, "score_high": 0.85}, "games": 128,
        "player": "jaxpuct (4x32 ResNet, 512 simulations, greedy)",
        "opponent": "OpenSpiel MCTSBot (1000 simulations, UCT c=2)"}))
    return tmp_path


def test_points_come_from_the_metrics_and_the_arena_matches(tmp_path):
    points = curves.points(str(_run_dir(tmp_path)))
    assert [(p["iteration"], p["source"]) for p in points] == [
        (2, "training"), (3, "arena"), (3, "training")]
    training, arena, old = points
    assert training == dict(iteration=2, score=0.6, low=0.5, high=0.7, games=64,
                            agent_sims=256, bot_sims=1000, source="training", minutes=2.0)
    assert arena == dict(iteration=3, score=0.75, low=0.6, high=0.85, games=128,
                         agent_sims=512, bot_sims=1000, source="arena", minutes=5.0)
    assert (old["games"], old["bot_sims"], old["agent_sims"], old["minutes"]) == (
        8, 10000, None, 5.0)


def test_the_table_keeps_one_bot_strength_and_the_plot_is_written(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    run = _run_dir(tmp_path / "run")
    out = tmp_path / "curve.png"
    curves.main(["--run", f"a={run}", "--out", str(out)])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| a |")]
    assert lines == ["| a | 2 | 2.0 | 256 | 64 | 0.600 [0.500, 0.700] |",
                     "| a | 3 | 5.0 | 512 | 128 | 0.750 [0.600, 0.850] |"]
    assert out.stat().st_size > 1000
    curves.main(["--run", f"a={run}", "--bot-simulations", "10000"])
    assert "| a | 3 | 5.0 | None | 8 | 0.400 [0.300, 0.500] |" in capsys.readouterr().out

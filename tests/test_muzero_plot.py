"""``examples/muzero_plot.py``: a MuZero run's metrics.png for each game's
evaluations, from a metrics.jsonl with a torn last line."""

import json


def test_the_metrics_plot_draws_each_games_evaluations(tmp_path):
    from examples import muzero_plot

    common = {"loss": 1.0, "policy_loss": 0.5, "value_loss": 0.3, "reward_loss": 0.2}
    games = {
        "2048": [{"iteration": 1, **common, "selfplay_score": 900.0},
                 {"iteration": 2, **common, "selfplay_score": 1100.0, "eval_score": 1200.0,
                  "eval_score_se": 50.0}],
        "connect_four": [{"iteration": 1, **common, "consistency_loss": -0.4,
                          "mcts_score": 0.2, "mcts_score_low": 0.1, "mcts_score_high": 0.3,
                          "mcts_simulations": 1000}],
        "tic_tac_toe": [{"iteration": 1, **common, "search_optimal": 0.9,
                         "prior_optimal": 0.8, "lines_lost_as_x": 1, "lines_lost_as_o": 0}],
    }
    for name, rows in games.items():
        run = tmp_path / name
        run.mkdir()
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows)
                                           + '{"iteration": 3, "lo')  # a torn last line
        assert muzero_plot.read_metrics(str(run)) == rows
        assert muzero_plot.main([str(run)]) == 0
        assert (run / "metrics.png").stat().st_size > 1000

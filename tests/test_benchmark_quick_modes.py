"""The benchmarks' own smoke modes (``--quick``), and others at their smallest
sizes, run as a user runs them, so that the commands the docs give do not rot. Slow
tier: 3-30 s of CPU apiece. What each must print is the line its figure comes from."""

import importlib

import pytest

CASES = {
    "graph_vs_tree": (["--quick"], "graph / tree = "),
    "reuse_cost": (["--quick"], "reuse cost: "),
    "vmap_cost": (["--quick"], "vmap / flat = "),
    "sampled_oracle": (["--quick"], "exact P(a* in S)"),
    # B = 1 beside OpenSpiel's C++ MCTSBot (docs/benchmarks.md, B = 1 section).
    "single_search": (["--sims", "8", "--reps", "1", "--games", "tic_tac_toe", "--ks", "1",
                       "--variants", "mcts,zero,rollout"], "| tic_tac_toe | jaxpuct rollout K=1 |"),
    # Cold compile of a self-play step in a child process (docs/benchmarks.md, Compile).
    "compile_time": (["--policies", "jaxpuct/puct", "--repeats", "1", "--warm", "0",
                      "--batch", "2", "--simulations", "2", "--cores", "0"],
                     "| jaxpuct/puct | 1 |"),
    # Sampled search over the joint actions of several agents (docs/sampled_search.md).
    "pathfinding": (["--instances", "2", "--simulations", "8", "--samples", "4", "--reps",
                     "1", "--sweep"], "factored K=4     8"),
    "sampled": (["--quick"], "sampled K=16"),
    # Early stopping on the tic-tac-toe oracle (docs/analysis.md).
    "early_stop": (["--sims", "8", "--positions", "8", "--single", "2", "--reps", "1"],
                   "| 8 | yes |"),
    # Several leaves per step against each other in the arena (docs/benchmarks.md).
    "arena_leaves": (["--games", "tic_tac_toe", "--values", "zero", "--ks", "1,4", "--sims",
                      "16", "--matches", "2"], "| tic_tac_toe | zero | 4 | 16 |"),
    # Where a B = 1 simulation's time goes (docs/benchmarks.md, B = 1 section).
    "single_profile": (["--sims", "8", "--reps", "1", "--repeats", "1", "--games",
                        "tic_tac_toe"], "| whole simulation, rollout |"),
    # Stochastic MuZero's chance codes on the two-outcome MDP (docs/muzero.md).
    "code_collapse": (["--seeds", "1", "--steps", "5", "--commitment", "0.0"],
                      "0.0\t0\t5\t"),
    # The learned model's k-step errors on held-out games (docs/muzero.md).
    "muzero_model_quality": (["--iterations", "1", "--seeds", "0", "--fractions", "0",
                              "--held-out", "4"], "| 0 | 0.0 | 5 |"),
    # A Gaussian policy on its own sampled search's target (docs/sampled_search.md).
    "sampled_training": ([], "| 8 | 4 | 0.1 | 200 |"),
    # Several leaves per step: decision quality per network call (docs/analysis.md);
    # its speed part took 101 s at --quick, so it is left out here.
    "multileaf": (["--quick", "--skip-speed"], "S =  256 K =  4"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_quick_mode_runs_and_reports(name, capsys):
    if name in ("single_search", "arena_leaves"):
        pytest.importorskip("pyspiel")
    argv, line = CASES[name]
    module = importlib.import_module(f"benchmarks.{name}")
    module.main(argv)
    out = capsys.readouterr().out
    assert line in out, out[-2000:]

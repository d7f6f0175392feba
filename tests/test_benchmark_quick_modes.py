"""The benchmarks' own smoke modes (``--quick``), and two others at their smallest
sizes, run as a user runs them, so that the commands the docs give do not rot. Slow
tier: 3-20 s of CPU apiece. What each must print is the line its figure comes from."""

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
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_quick_mode_runs_and_reports(name, capsys):
    if name == "single_search":
        pytest.importorskip("pyspiel")
    argv, line = CASES[name]
    module = importlib.import_module(f"benchmarks.{name}")
    module.main(argv)
    out = capsys.readouterr().out
    assert line in out, out[-2000:]

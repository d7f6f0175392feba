"""The benchmarks' own smoke modes (``--quick``), run as a user runs them, so that the
commands the docs give do not rot. Slow tier: 8-20 s of CPU apiece. What each must
print is the line its figure comes from."""

import importlib

import pytest

CASES = {
    "graph_vs_tree": "graph / tree = ",
    "reuse_cost": "reuse cost: ",
    "vmap_cost": "vmap / flat = ",
    "sampled_oracle": "exact P(a* in S)",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_quick_mode_runs_and_reports(name, capsys):
    module = importlib.import_module(f"benchmarks.{name}")
    module.main(["--quick"])
    out = capsys.readouterr().out
    assert CASES[name] in out, out[-2000:]

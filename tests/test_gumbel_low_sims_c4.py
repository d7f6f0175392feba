"""The connect-four Gumbel/PUCT grid driver: its shards and its tables."""

import json
import os
import sys

import numpy as np
import pytest

from benchmarks import gumbel_low_sims, gumbel_targets
from benchmarks import gumbel_low_sims_c4 as g
from jaxpuct.alphazero import scores


def test_shards_partition_the_grid_seeds_outermost():
    full = g.grid(["gumbel", "alphazero"], [2, 4, 8, 16], [0, 1, 2], "0/1")
    assert len(full) == len(set(full)) == 24
    assert [c[2] for c in full] == sorted(c[2] for c in full)
    shards = [g.grid(["gumbel", "alphazero"], [2, 4, 8, 16], [0, 1, 2], f"{i}/2")
              for i in range(2)]
    assert sorted(shards[0] + shards[1]) == sorted(full)
    # Each shard gets half of every seed, so a grid cut short holds whole seeds.
    for shard in shards:
        assert [sum(c[2] == s for c in shard) for s in range(3)] == [4, 4, 4]


def _write(rd, name, obj):
    os.makedirs(rd, exist_ok=True)
    with open(os.path.join(rd, name), "w") as f:
        json.dump(obj, f)


def test_table_means_ranges_and_pooled_arena(tmp_path):
    out = str(tmp_path)
    keeps = {0: 0.6, 1: 0.8}
    wins = {0: (10, 2), 1: (20, 4)}        # (wins, draws) of 64 games
    for seed in (0, 1):
        rd = g.run_dir(out, "gumbel", 4, seed)
        _write(rd, "row.json", {"policy": "gumbel", "sims": 4, "seed": seed, "label": "",
                                "iterations": 20 + seed, "cpu_seconds": 300.0})
        point = {k: {"search": keeps[seed], "prior": 0.5, "search_critical": 0.1}
                 for k in g.SETS}
        _write(rd, "perfect.json", [{"step": 10, "train_seconds": 100.0, **point}])
        w, d = wins[seed]
        _write(rd, "arena.json", {"games": 64, "total": {"wins": w, "draws": d}})
    row = [line for line in g.table(out).splitlines() if "| gumbel | 4 |" in line]
    assert len(row) == 1
    cells = [c.strip() for c in row[0].split("|")]
    assert cells[4] == "2"
    assert cells[5] == "20 [20, 21]"
    assert cells[7] == "0.700 [0.600, 0.800]"
    assert cells[10] == "0.500 [0.500, 0.500]"
    score = (30 + 6 / 2) / 128
    lo, hi = scores.wilson_interval(score, 128)
    assert cells[-3] == f"30/6/{128 - 36}"
    assert cells[-2] == f"{score:.3f} [{lo:.3f}, {hi:.3f}]"


def test_entropy_closed_form():
    p = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(gumbel_targets.entropy(p), [0.0, np.log(2), np.log(3)])


def test_run_child_reports_a_failure_with_a_long_stderr():
    # More than a pipe's buffer of stderr: the driver must not block on it.
    code = "import sys; sys.stderr.write('x' * 200000 + 'END'); sys.exit(3)"
    with pytest.raises(RuntimeError, match="END"):
        gumbel_low_sims.run_child([sys.executable, "-c", code])
    assert gumbel_low_sims.run_child([sys.executable, "-c", "pass"]) >= 0.0

"""benchmarks/device_run.sh cannot rot unseen: its shell parses, and its Python parts
run in-process at tiny sizes (one small compile, the rest traced or built from real
result rows) into a report with every section.

The script's own smoke mode (``benchmarks/device_run.sh --smoke``) runs every part on
CPU for real; it costs minutes of CPU, so the suite runs this cheaper check instead.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("mctx")
pytest.importorskip("pgx")

from benchmarks import compare_mctx, device_report, max_batch, selfplay_step  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "device_run.sh"
INFO = {"device": "TEST DEVICE", "cpu": "test cpu", "versions": "jax test",
        "python": "3.x", "date": "2026-01-01 00:00 UTC"}


def test_script_parses_and_has_every_part():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    text = SCRIPT.read_text()
    assert "set -euo pipefail" in text
    for module in ("compare_mctx", "selfplay_step", "multileaf", "max_batch",
                   "device_report"):
        assert f"benchmarks.{module}" in text, module
    for key in "abcd":  # each part under its own timeout, in both modes
        assert text.count(f"part {key} ") == 2, key
    help_text = subprocess.run(["bash", str(SCRIPT), "--help"], check=True,
                               capture_output=True, text=True).stdout
    assert "--smoke" in help_text


def test_cases_and_out_of_memory():
    assert compare_mctx.parse_cases("16384:64:82, 256:800:362") == (
        (16384, 64, 82), (256, 800, 362))
    with pytest.raises(ValueError):
        compare_mctx.parse_cases("16384:64")
    assert max_batch.is_out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Out of memory"))
    assert not max_batch.is_out_of_memory(RuntimeError("shape mismatch"))


def test_the_memory_checks_refusal_is_a_ceiling_not_a_crash():
    # The error jaxpuct raised on an H200 at B = 2,097,152, made here with a small
    # device_bytes; max_batch's doubling must stop on it instead of dying.
    from jaxpuct.memory import check_trees_fit
    with pytest.raises(ValueError) as refused:
        check_trees_fit(2_097_152, 362, 17, device_bytes=1 << 30)
    assert max_batch.is_refused_by_memory_check(refused.value)
    assert not max_batch.is_refused_by_memory_check(ValueError("num_actions must be > 0"))
    assert not max_batch.is_out_of_memory(refused.value)


@pytest.mark.slow
def test_each_search_doubles_in_a_process_of_its_own(tmp_path):
    # Two searches, one batch each, in two child processes; their rows come back
    # and are appended to the shared rows file, as device_run.sh reads them.
    rows_json = tmp_path / "rows.jsonl"
    cfg = max_batch.MaxBatchConfig(sims=2, num_actions=4, start=2, max_batch=2, budget=600,
                                   searches=(compare_mctx.JAXPUCT_MCTX_RULE,
                                             compare_mctx.MCTX))
    rows = max_batch.search_in_processes(cfg, str(rows_json))
    assert [(r["impl"], r["B"], r["status"]) for r in rows] == [
        (compare_mctx.JAXPUCT_MCTX_RULE, 2, "ok"), (compare_mctx.MCTX, 2, "ok")]
    assert [json.loads(line)["impl"] for line in rows_json.read_text().splitlines()] == [
        compare_mctx.JAXPUCT_MCTX_RULE, compare_mctx.MCTX]


def test_parts_write_a_report_with_every_section(tmp_path):
    rows = tmp_path / "rows.jsonl"
    # a: real result rows of the grid's code path, from given timings (no compile).
    timings = {name: compare_mctx.Timing(compile_s=1.0, times=[t]) for name, t in
               ((compare_mctx.JAXPUCT_MCTX_RULE, 0.01), (compare_mctx.MCTX, 0.05))}
    compare_mctx.append_rows(str(rows), "grid", compare_mctx._search_rows(
        dict(B=4, S=8, A=82), timings, 4, 8))
    # b: the self-play steps traced against the installed jax, pgx and mctx.
    cfg = selfplay_step.StepConfig(games=("connect_four",), batch=2, sims=2, quick=True,
                                   trace_only=True,
                                   steps=(selfplay_step.JAXPUCT_GUMBEL,
                                          selfplay_step.MCTX_PUCT))
    traced = selfplay_step.run(cfg, str(rows))
    assert [r["impl"] for r in traced] == [selfplay_step.MCTX_PUCT,
                                           selfplay_step.JAXPUCT_GUMBEL, selfplay_step.NETWORK]
    # c: the multileaf printout, as the script tees it.
    (tmp_path / "multileaf.txt").write_text("connect_four search, S = 64\n   1    1  64\n")
    # d: one real compile and call, the doubling stopped by max_batch.
    found = max_batch.search(max_batch.MaxBatchConfig(
        sims=2, num_actions=4, start=2, max_batch=2,
        searches=(compare_mctx.JAXPUCT_MCTX_RULE,)), str(rows))
    assert [(r["B"], r["status"]) for r in found] == [(2, "ok")]
    # e: a row in benchmarks.kernels --time's format, from given medians.
    with open(rows, "a") as f:
        f.write(json.dumps(dict(workload="kernels_time", B=8, A=82, S=64, policy="gumbel",
                                jaxpuct_ms=15.6, mctx_ms=18.0, x_mctx=18.0 / 15.6, n=5))
                + "\n")
    (tmp_path / "status.txt").write_text("a ok 3\nb timeout 170\nc ok 2\nd ok 5\ne ok 9\n")

    for line in rows.read_text().splitlines():
        json.loads(line)
    text = Path(device_report.write(str(tmp_path), info=INFO)).read_text()
    assert "TEST DEVICE" in text and "2026-01-01" in text
    for heading in device_report.HEADINGS:
        assert heading in text, heading
    sections = text.split("\n## ")[1:]
    assert len(sections) == len(device_report.PARTS)
    for section in sections:
        assert "No results" not in section, section
    assert "| 4 | 8 | 82 | mctx |" in sections[0]
    assert "connect_four" in sections[1] and "timeout (170 s)" in sections[1]
    assert "S = 64" in sections[2]
    assert "| jaxpuct/mctx-rule | 2 | 4 | 2 |" in sections[3]
    assert "| 8 | 82 | 64 | gumbel | 5 | 15.6 | 18 | 1.15 |" in sections[4]


def test_report_without_results_says_so(tmp_path):
    text = device_report.build(str(tmp_path), info=INFO)
    for heading in device_report.HEADINGS:
        assert heading in text
    assert text.count("No results") == len(device_report.PARTS)


def _conv_flops(height: int, width: int, kernel: int, c_in: int, c_out: int) -> int:
    """Multiply-adds (x2) of a stride-1 SAME convolution, counting only the taps that
    fall on the board (XLA's cost analysis skips the padding)."""
    half = kernel // 2
    rows = sum(height - abs(d) for d in range(-half, half + 1))
    cols = sum(width - abs(d) for d in range(-half, half + 1))
    return 2 * rows * cols * c_in * c_out


def test_network_flops_are_its_convolutions_and_dense_layers_plus_little(monkeypatch):
    # One residual block of 8 channels on connect four's [6, 7, 2] board: the
    # convolutions and dense layers by hand; the rest (norms, activations, adds) is
    # small, so XLA's count must lie just above them.
    monkeypatch.setattr(selfplay_step, "QUICK_NET", selfplay_step.Net(1, 8, 8))
    cfg = selfplay_step.StepConfig(games=("connect_four",), batch=4, sims=2, quick=True)
    parts = selfplay_step.game_parts("connect_four", cfg)
    flops = selfplay_step.network_flops(parts.apply_fn, parts.params,
                                        parts.state.observation.astype("float32"))
    h, w, c, hidden = 6, 7, 8, 8
    by_hand = (_conv_flops(h, w, 3, 2, c) + 2 * _conv_flops(h, w, 3, c, c)  # stem, block
               + _conv_flops(h, w, 1, c, 2) + 2 * (h * w * 2) * 7  # policy head
               + _conv_flops(h, w, 1, c, 1) + 2 * (h * w) * hidden + 2 * hidden)  # value
    assert by_hand * 4 <= flops <= 1.25 * by_hand * 4, (flops, by_hand * 4)
    assert selfplay_step.matmul_gflops(64, reps=2) > 0

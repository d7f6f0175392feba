"""The largest batch a search fits in the device's memory, by doubling.

For each search (``jaxpuct/mctx-rule``: ``jaxpuct.alphazero_policy`` with mctx's
rule; ``mctx``: ``mctx.muzero_policy``), on the deep-tree synthetic game of
``benchmarks.compare_mctx`` with a small S: B = ``--start``, doubled until the
compile or the call runs out of memory (caught: XLA's ``RESOURCE_EXHAUSTED`` or
"out of memory"), B reaches ``--max-batch``, or its share of ``--budget`` seconds
has passed.
Each B is compiled, called once (warm-up) and timed once; every row is appended
to ``--rows-json`` as it is measured, so a run cut short keeps what it found.
jaxpuct's trace-time memory check can refuse a batch before anything is
allocated; that row says ``refused`` and ends the doubling as an out-of-memory
error would.

Each search runs in a process of its own (``--one-process`` turns that off): on
an H200, after mctx's doubling, jaxpuct ran out of memory at a batch it had run
in a fresh process, so the first search's leftovers would set the second's
ceiling.

    python -m benchmarks.max_batch [--simulations 16] [--num-actions 362]
        [--start 1024] [--max-batch 16777216] [--budget 90] [--rows-json rows.jsonl]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import jax

from benchmarks.compare_mctx import (
    JAXPUCT_MCTX_RULE,
    MCTX,
    Config,
    Table,
    append_rows,
    search_impls,
    synthetic_game,
)


@dataclasses.dataclass(frozen=True)
class MaxBatchConfig:
    """Settings of a doubling search.

    Attributes:
      sims: simulations per search.
      num_actions: A.
      start: the first B.
      max_batch: the last B tried however much memory is left.
      budget: seconds after which no larger B is started.
      searches: which searches, from ``jaxpuct/mctx-rule`` and ``mctx``.
    """

    sims: int = 16
    num_actions: int = 362
    start: int = 1024
    max_batch: int = 1 << 24
    budget: float = 90.0
    searches: tuple[str, ...] = (JAXPUCT_MCTX_RULE, MCTX)


def is_out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is XLA's (or the allocator's) out-of-memory error."""
    text = str(err)
    return ("RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()
            or isinstance(err, MemoryError))


def is_refused_by_memory_check(err: BaseException) -> bool:
    """Whether ``err`` is jaxpuct's trace-time refusal of trees larger than the
    device's memory (``jaxpuct.memory.check_trees_fit``): the same ceiling as an
    out-of-memory error, found before anything is allocated."""
    return isinstance(err, ValueError) and "bytes of device memory" in str(err)


def _peak_bytes() -> int | None:
    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # noqa: BLE001 - not every backend reports memory
        return None
    return None if not stats else stats.get("peak_bytes_in_use")


def try_batch(name: str, batch: int, cfg: MaxBatchConfig) -> dict[str, Any]:
    """Compiles and runs one search at B = ``batch``; a row with ``status`` ``ok``
    (and the time), ``oom`` or ``refused`` (jaxpuct's own memory check; both with
    the error's first line)."""
    row: dict[str, Any] = dict(impl=name, B=batch, S=cfg.sims, A=cfg.num_actions)
    start = time.perf_counter()
    try:
        root, recurrent_fn = synthetic_game(batch, cfg.num_actions, 3.0, 1.0)
        impl = next(i for i in search_impls(recurrent_fn, root, None, cfg.sims, Config())
                    if i.name == name)
        compiled = jax.jit(impl.fn).lower(*impl.args).compile()
        row["compile_s"] = time.perf_counter() - start
        jax.block_until_ready(compiled(*impl.args))
        call = time.perf_counter()
        jax.block_until_ready(compiled(*impl.args))
        row["median_s"] = time.perf_counter() - call
        row["sims_per_s"] = batch * cfg.sims / row["median_s"]
        row["status"] = "ok"
        row["peak_bytes"] = _peak_bytes()
    except Exception as err:  # noqa: BLE001 - only out-of-memory errors are expected
        if is_refused_by_memory_check(err):
            row["status"] = "refused"  # jaxpuct's own check, before any allocation
        elif is_out_of_memory(err):
            row["status"] = "oom"
        else:
            raise
        row["error"] = str(err).strip().splitlines()[0][:200]
    finally:
        gc.collect()
    return row


def search(cfg: MaxBatchConfig, rows_json: str | None = None) -> list[dict[str, Any]]:
    """The doubling search of every search in ``cfg``; returns all rows."""
    rows = []
    for name in cfg.searches:  # an equal share of the budget each
        deadline = time.perf_counter() + cfg.budget / max(len(cfg.searches), 1)
        batch = cfg.start
        while batch <= cfg.max_batch and time.perf_counter() < deadline:
            row = try_batch(name, batch, cfg)
            rows.append(row)
            print(f"  {name:<18} B={batch:<9} {row['status']}"
                  + (f"  {row['median_s']:.4f} s  {row['sims_per_s']:,.0f} sims/s"
                     if row["status"] == "ok" else f"  {row.get('error', '')}"), flush=True)
            if rows_json:
                with open(rows_json, "a") as f:
                    f.write(json.dumps(dict(row, workload="max_batch")) + "\n")
            if row["status"] != "ok":
                break
            batch *= 2
        jax.clear_caches()
    return rows


def summary(rows: list[dict[str, Any]]) -> Table:
    """Per search: the largest B that ran and the first that did not."""
    out = []
    for name in dict.fromkeys(r["impl"] for r in rows):
        mine = [r for r in rows if r["impl"] == name]
        ok = [r for r in mine if r["status"] == "ok"]
        failed = [r for r in mine if r["status"] != "ok"]
        best = max(ok, key=lambda r: r["B"]) if ok else None
        peak = best.get("peak_bytes") if best else None
        out.append([name, mine[0]["S"], mine[0]["A"], best["B"] if best else "-",
                    f"{best['sims_per_s']:,.0f}" if best else "-",
                    f"{peak / 2**30:.1f}" if peak else "-",
                    failed[0]["B"] if failed else "none (limit or budget)"])
    return Table("Largest batch that fits (doubling B)",
                 ["search", "S", "A", "largest B run", "sims/s there", "peak GiB",
                  "first B that did not fit"], out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulations", type=int, default=16)
    parser.add_argument("--num-actions", type=int, default=362)
    parser.add_argument("--start", type=int, default=1024)
    parser.add_argument("--max-batch", type=int, default=1 << 24)
    parser.add_argument("--budget", type=float, default=90.0)
    parser.add_argument("--searches", default=f"{JAXPUCT_MCTX_RULE},{MCTX}")
    parser.add_argument("--rows-json", default=None)
    parser.add_argument("--one-process", action="store_true",
                        help="all searches in this process (default: one process each)")
    args = parser.parse_args(argv)
    cfg = MaxBatchConfig(sims=args.simulations, num_actions=args.num_actions,
                         start=args.start, max_batch=args.max_batch, budget=args.budget,
                         searches=tuple(s for s in args.searches.split(",") if s))
    if len(cfg.searches) > 1 and not args.one_process:
        # This process never creates a JAX backend: on a GPU it would take its share
        # of the memory the children measure.
        rows = search_in_processes(cfg, args.rows_json)
    else:
        print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; {cfg}", flush=True)
        rows = search(cfg, args.rows_json)
    print("\n" + summary(rows).markdown(), flush=True)


def search_in_processes(cfg: MaxBatchConfig,
                        rows_json: str | None = None) -> list[dict[str, Any]]:
    """:func:`search` for each of ``cfg.searches`` in a fresh Python process, each
    with its share of the budget; the rows of all, also appended to ``rows_json``.
    A child that fails keeps the rows it wrote, and the next search still runs."""
    from benchmarks.device_report import read_rows  # it imports this module

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=root + (os.pathsep + path if path else ""))
    rows: list[dict[str, Any]] = []
    share = cfg.budget / len(cfg.searches)
    for name in cfg.searches:
        with tempfile.TemporaryDirectory() as tmp:
            child_rows = os.path.join(tmp, "rows.jsonl")
            command = [sys.executable, "-m", "benchmarks.max_batch", "--one-process",
                       "--simulations", str(cfg.sims), "--num-actions", str(cfg.num_actions),
                       "--start", str(cfg.start), "--max-batch", str(cfg.max_batch),
                       "--budget", str(share), "--searches", name, "--rows-json", child_rows]
            result = subprocess.run(command, check=False, env=env)
            if result.returncode != 0:
                print(f"  {name}: its process exited with {result.returncode}", flush=True)
            mine = read_rows(child_rows)  # a child killed mid-line loses that line only
            rows += mine
            if rows_json and mine:
                append_rows(rows_json, "max_batch", mine)
    return rows


if __name__ == "__main__":
    main()

"""Gumbel against PUCT self-play at low simulation counts on tic-tac-toe.

Danihelka et al. (2022, "Policy improvement by planning with Gumbel") report
that Gumbel MuZero keeps learning at 2-16 simulations where MuZero does not.
This driver runs ``examples.selfplay`` once per (policy, S, seed), one run at a
time, each pinned to one core (``taskset -c CORE``) and stopped by
``--iterations`` (an equal-iterations grid, whatever the load on the core) or
by ``--max-minutes`` (wall seconds spent in self-play and training, first compile
included; on a pinned core with one run at a time wall is close to CPU, and the
CPU seconds of every run are measured too), and prints per cell the mean and
the min / max over seeds of: iterations done, losing lines against minimax
over every optimal reply as X / as O (``examples/ttt_minimax.py``) at the
end, and the final training loss.

    python -m benchmarks.gumbel_low_sims --out /tmp/gumlow/grid
    python -m benchmarks.gumbel_low_sims --sims 4 --policies gumbel \\
        --label vs002 --extra "--value-scale 0.02" --out /tmp/gumlow/grid

``--extra`` is passed to every run (a candidate fix); rows are appended to
``OUT/runs.jsonl``, so an interrupted grid continues where it stopped
(``--table`` prints the table of what is there).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np


def run_child(cmd: list[str]) -> float:
    """Runs ``cmd`` to its end and returns its CPU seconds (user + system, from
    its ``rusage``); its stderr goes to a file, so a chatty child cannot block on
    a full pipe, and its tail is in the error if it fails."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        if status != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{err.read()[-2000:]}")
    return usage.ru_utime + usage.ru_stime


def run_one(policy: str, sims: int, seed: int, minutes: float, out: str, extra: str,
            core: int, eval_every: int, label: str = "", iterations: int = 0) -> dict:
    """One training run in a child process; its metrics and CPU seconds."""
    run_dir = os.path.join(out, f"{label + '_' if label else ''}{policy}_s{sims}_seed{seed}")
    cmd = ["taskset", "-c", str(core), sys.executable, "-m", "examples.selfplay",
           "--game", "tic_tac_toe", "--policy", policy, "--num-simulations", str(sims),
           "--seed", str(seed), "--max-minutes", str(minutes),
           "--iterations", str(iterations or 1_000_000),
           "--eval-every", str(eval_every), "--checkpoint-every", "0",
           "--temperature-moves", "9", "--lr-decay-steps", "4000",
           "--run-dir", run_dir, "--overwrite", "--no-progress", "--no-plot",
           *shlex.split(extra)]
    start = time.time()
    cpu_seconds = run_child(cmd)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    evals = [{"iteration": r["iteration"], "train_seconds": r["train_seconds"],
              "x": r["eval_minimax_first_loss"], "o": r["eval_minimax_second_loss"]}
             for r in records if "eval_minimax_first_loss" in r]
    last = records[-1]
    return {"policy": policy, "sims": sims, "seed": seed, "extra": extra,
            "minutes": minutes, "iteration_budget": iterations, "run_dir": run_dir,
            "iterations": last["iteration"],
            "train_seconds": last["train_seconds"], "wall_seconds": time.time() - start,
            "cpu_seconds": cpu_seconds,
            "loss": last["loss"], "policy_loss": last.get("policy_loss"),
            "x": evals[-1]["x"], "o": evals[-1]["o"], "evals": evals}


def _cell(values: list[float], digits: int = 0) -> str:
    a = np.asarray(values, dtype=float)
    f = f"{{:.{digits}f}}"
    return f"{f.format(a.mean())} [{f.format(a.min())}, {f.format(a.max())}]"


def table(rows: list[dict]) -> str:
    """Mean [min, max] over seeds per (label, policy, S)."""
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r.get("label", ""), r["policy"], r["sims"]), []).append(r)
    lines = ["| run | policy | S | seeds | iterations | CPU s | lost as X | lost as O "
             "| X + O | final loss |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (label, policy, sims), rs in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][2],
                                                                          kv[0][1])):
        lines.append(
            f"| {label or 'grid'} | {policy} | {sims} | {len(rs)} "
            f"| {_cell([r['iterations'] for r in rs])} | {_cell([r['cpu_seconds'] for r in rs])} "
            f"| {_cell([r['x'] for r in rs], 1)} | {_cell([r['o'] for r in rs], 1)} "
            f"| {_cell([r['x'] + r['o'] for r in rs], 1)} "
            f"| {_cell([r['loss'] for r in rs], 3)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--policies", default="gumbel,alphazero")
    p.add_argument("--sims", default="2,4,8,16")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--minutes", type=float, default=0.75,
                   help="--max-minutes of every run")
    p.add_argument("--iterations", type=int, default=0,
                   help="stop every run after this many iterations (0: by --minutes only); "
                   "an equal-iterations grid does not depend on how loaded the core is")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--extra", default="", help="flags passed to every run")
    p.add_argument("--label", default="", help="name of this set of runs in the table")
    p.add_argument("--core", type=int, default=0)
    p.add_argument("--out", default="/tmp/gumbel_low_sims")
    p.add_argument("--table", action="store_true", help="print the table of OUT only")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "runs.jsonl")
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            rows = [json.loads(line) for line in f]
    if not args.table:
        done = {(r.get("label", ""), r["policy"], r["sims"], r["seed"]) for r in rows}
        for sims in map(int, args.sims.split(",")):
            for policy in args.policies.split(","):
                for seed in map(int, args.seeds.split(",")):
                    if (args.label, policy, sims, seed) in done:
                        continue
                    row = run_one(policy, sims, seed, args.minutes, args.out, args.extra,
                                  args.core, args.eval_every, args.label,
                                  args.iterations)
                    row["label"] = args.label
                    rows.append(row)
                    with open(path, "a") as f:
                        f.write(json.dumps(row) + "\n")
                    print(f"{args.label or 'grid'} {policy} S={sims} seed={seed}: "
                          f"{row['iterations']} it., {row['cpu_seconds']:.0f} CPU s, "
                          f"lost X/O {row['x']}/{row['o']}, loss {row['loss']:.3f}",
                          flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()

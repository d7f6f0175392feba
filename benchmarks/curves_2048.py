"""2048 runs of several methods on one axis: the greedy evaluations each run logged
against environment steps and against its self-play and training CPU time; one
plot, a markdown table and a JSON record.

A run is a ``metrics.jsonl`` of ``examples/muzero.py --game 2048`` (its run
directory) or the JSON lines ``examples/known_chance_2048.py`` prints (a file).
The rows read are those with ``eval_score`` (64 greedy games from fresh boards;
``eval_score_se`` their standard error); the CPU axis is ``train_cpu_seconds``
(self-play and training, evaluations excluded, in both examples). Runs given the
same method name are seeds of one method: the table lists each and their mean.
``PATH@S`` reads a run's evaluations at ``S`` simulations (``eval_at_S``, logged by
``--extra-eval-simulations``) in place of those at its own count.

    python -m benchmarks.curves_2048 --run "known rules=runs/known-s0.jsonl" \\
        --run "known rules=runs/known-s1.jsonl" --run MuZero=runs/muzero-s0 ... \\
        --out docs/muzero_2048_one_axis.png --json docs/muzero_2048_one_axis.json
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os

# The 95% t quantile for 63 degrees of freedom (64 games).
T_63 = 1.998


def evaluations(path: str, at: int | None = None) -> list[dict]:
    """The evaluated rows of one run, by iteration: ``[{iteration, env_steps,
    cpu_seconds, score, se, median, moves}]``; with ``at``, its evaluations at
    ``at`` simulations (``eval_at_{at}``, the examples' ``--extra-eval-simulations``)
    instead of at the run's own count."""
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    out = []
    with open(path) as f:
        for line in f:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            e = r if at is None else r.get(f"eval_at_{at}") or {}
            if e.get("eval_score") is None:
                continue
            out.append(dict(iteration=r["iteration"], env_steps=r["env_steps"],
                            cpu_seconds=r["train_cpu_seconds"], score=e["eval_score"],
                            se=e["eval_score_se"], median=e.get("eval_median"),
                            moves=e.get("eval_moves")))
    return sorted(out, key=lambda e: e["iteration"])


def run_spec(spec: str) -> tuple[str, str, int | None]:
    """``METHOD=PATH`` or ``METHOD=PATH@S`` (its evaluations at ``S`` simulations)
    -> ``(method, path, S or None)``."""
    method, sep, path = spec.partition("=")
    if not sep:
        raise ValueError(f"--run takes METHOD=PATH[@S], got {spec!r}")
    base, at_sep, sims = path.rpartition("@")
    if at_sep and sims.isdigit():
        return method, base, int(sims)
    return method, path, None


def table(runs: dict[str, list[tuple[str, list[dict]]]], steps: int) -> str:
    """Each run's evaluation at ``steps`` environment steps (95% t interval), and
    each method's mean over its seeds."""
    lines = [f"| method | run | greedy score at {steps:,} steps, 95% | median | CPU-s |",
             "|---|---|---|---|---|"]
    for method, seeds in runs.items():
        finals = []
        for path, evals in seeds:
            at = [e for e in evals if e["env_steps"] == steps]
            if not at:
                lines.append(f"| {method} | {path} | not reached | | |")
                continue
            e = at[0]
            half = T_63 * e["se"]
            finals.append(e)
            lines.append(f"| {method} | {path} | {e['score']:,.0f} [{e['score'] - half:,.0f}, "
                         f"{e['score'] + half:,.0f}] | {e['median']:,.0f} | "
                         f"{e['cpu_seconds']:,.0f} |")
        if len(finals) > 1:
            mean = sum(e["score"] for e in finals) / len(finals)
            spread = math.sqrt(sum((e["score"] - mean) ** 2 for e in finals) / (len(finals) - 1))
            cpu = sum(e["cpu_seconds"] for e in finals) / len(finals)
            lines.append(f"| {method} | mean of {len(finals)} seeds (sd between seeds) | "
                         f"**{mean:,.0f}** (sd {spread:,.0f}) | | {cpu:,.0f} |")
    return "\n".join(lines)


def plot(runs: dict[str, list[tuple[str, list[dict]]]], out: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for i, (method, seeds) in enumerate(runs.items()):
        colour = f"C{i}"
        for j, (_, evals) in enumerate(seeds):
            for ax, key, scale in ((axes[0], "env_steps", 1e6), (axes[1], "cpu_seconds", 60.0)):
                x = [e[key] / scale for e in evals]
                y = [e["score"] for e in evals]
                err = [T_63 * e["se"] for e in evals]
                ax.errorbar(x, y, yerr=err, color=colour, alpha=0.8, capsize=2, lw=1.2,
                            label=method if j == 0 else None)
    axes[0].set_xlabel("environment steps (millions)")
    axes[1].set_xlabel("self-play and training CPU minutes (one core)")
    axes[0].set_ylabel("greedy score, 64 games (95% interval)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("2048: one line per seed", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--run", action="append", required=True, metavar="METHOD=PATH[@S]",
                   help="a run (its directory or JSON lines); @S reads its evaluations at "
                        "S simulations (--extra-eval-simulations) instead of its own")
    p.add_argument("--steps", type=int, default=2_048_000,
                   help="the environment steps the table reads")
    p.add_argument("--out", default=None, help="the plot (PNG)")
    p.add_argument("--json", default=None, help="every evaluation, by method and run")
    args = p.parse_args(argv)
    runs: dict[str, list[tuple[str, list[dict]]]] = collections.defaultdict(list)
    for spec in args.run:
        try:
            method, path, at = run_spec(spec)
        except ValueError as err:
            p.error(str(err))
        label = path if at is None else f"{path}@{at}"
        runs[method].append((label, evaluations(path, at)))
    print(table(runs, args.steps))
    if args.out:
        plot(runs, args.out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({m: {path: evals for path, evals in seeds} for m, seeds in runs.items()},
                      f, indent=1)


if __name__ == "__main__":
    main()

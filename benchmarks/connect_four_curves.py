"""Score against OpenSpiel's MCTSBot over training time, for several connect-four
runs of ``examples/selfplay.py``: one plot and a markdown table.

Each run contributes the MCTSBot evaluations its training logged
(``mcts_score`` in ``metrics.jsonl``, with ``--mcts-simulations``) and any match
of ``examples/arena.py --json`` saved as ``RUN/arena/step_<iteration>.json``
(a checkpoint evaluated after the run). The x axis is ``train_seconds``, the time
the run spent in self-play and training up to that iteration (evaluations
excluded); runs made before that field existed fall back to ``seconds``.

    python -m benchmarks.connect_four_curves --run old=runs/c4_old --run new=runs/c4 \\
        --out docs/connect_four_mcts.png
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re


def _records(run_dir: str) -> dict[int, dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return {r["iteration"]: r for r in map(json.loads, filter(str.strip, f))}


def points(run_dir: str) -> list[dict]:
    """``[{iteration, minutes, score, low, high, games, agent_sims, bot_sims, source}]``
    sorted by iteration."""
    records = _records(run_dir)
    out = []
    for it, r in records.items():
        if r.get("mcts_score") is None:
            continue
        games = sum(v for k, v in r.items() if k.startswith("eval_mcts_"))
        out.append(dict(iteration=it, score=r["mcts_score"], low=r["mcts_score_low"],
                        high=r["mcts_score_high"], games=games,
                        agent_sims=r.get("mcts_agent_simulations"),
                        bot_sims=r["mcts_simulations"], source="training"))
    for path in glob.glob(os.path.join(run_dir, "arena", "step_*.json")):
        it = int(re.search(r"step_(\d+)\.json$", path).group(1))
        with open(path) as f:
            match = json.load(f)
        total = match["total"]
        sims = re.search(r"(\d+) simulations, greedy", match["player"])
        bot = re.search(r"\((\d+) simulations", match["opponent"])
        out.append(dict(iteration=it, score=total["score"], low=total["score_low"],
                        high=total["score_high"], games=match["games"],
                        agent_sims=int(sims.group(1)) if sims else None,
                        bot_sims=int(bot.group(1)) if bot else None, source="arena"))
    for p in out:
        r = records[p["iteration"]]
        p["minutes"] = r.get("train_seconds", r["seconds"]) / 60.0
    return sorted(out, key=lambda p: (p["iteration"], p["source"]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True,
                        help="LABEL=RUN_DIR (repeatable)")
    parser.add_argument("--bot-simulations", type=int, default=1000,
                        help="only matches against MCTSBot with this many simulations")
    parser.add_argument("--out", help="the plot (png)")
    args = parser.parse_args(argv)
    runs = [tuple(spec.split("=", 1)) for spec in args.run]
    curves = {label: [p for p in points(run_dir) if p["bot_sims"] == args.bot_simulations]
              for label, run_dir in runs}
    print(f"| run | iteration | training minutes | agent simulations | games | score vs "
          f"MCTSBot({args.bot_simulations}), 95% |")
    print("|---|---|---|---|---|---|")
    for label, pts in curves.items():
        for p in pts:
            print(f"| {label} | {p['iteration']} | {p['minutes']:.1f} | {p['agent_sims']} | "
                  f"{p['games']} | {p['score']:.3f} [{p['low']:.3f}, {p['high']:.3f}] |")
    if args.out:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for label, pts in curves.items():
            if not pts:
                continue
            x = [p["minutes"] for p in pts]
            y = [p["score"] for p in pts]
            err = [[p["score"] - p["low"] for p in pts], [p["high"] - p["score"] for p in pts]]
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
        ax.axhline(0.5, color="grey", lw=0.5)
        ax.axhline(0.6, color="grey", lw=0.5, ls="--")
        ax.set_ylim(0, 1)
        ax.set_xlabel("minutes of self-play and training (one core)")
        ax.set_ylabel("score (win + draw/2)")
        ax.set_title(f"connect_four: the agent of each run vs OpenSpiel MCTSBot "
                     f"({args.bot_simulations} simulations)\n64 games per point, 95% "
                     f"intervals", fontsize=10)
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.out, dpi=80)
        print(f"plot: {args.out}")


if __name__ == "__main__":
    main()

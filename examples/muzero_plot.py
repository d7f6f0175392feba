"""A MuZero run's ``metrics.png``: its loss terms and its evaluations against
iterations, from the ``metrics.jsonl`` that ``examples/muzero.py --run-dir R``
writes (the example redraws it after every evaluation).

    python -m examples.muzero_plot runs/muzero-2048 [more run dirs]

Left: every loss term the run logged (``loss``, ``policy_loss``, ``value_loss``,
``reward_loss``, and Stochastic MuZero's or the consistency terms when present).
Right, by game: 2048's greedy evaluation score with its 95% t interval over the
64 games (and the self-play score of the games that ended in each iteration);
connect four's score against OpenSpiel's MCTSBot with its Wilson interval;
tic-tac-toe's share of optimal greedy moves (search and prior) and the lines
lost against minimax.
"""

from __future__ import annotations

import argparse
import os
import sys

from jaxpuct.alphazero.rundir import read_json_lines

# The 95% t quantile for 63 degrees of freedom (64 evaluation games).
T_63 = 1.998
LOSS_PREFIXES = ("loss", "policy_loss", "value_loss", "reward_loss", "afterstate_value_loss",
                 "code_loss", "commitment_loss", "consistency_loss")


def read_metrics(run_dir: str) -> list[dict]:
    """The rows of ``run_dir/metrics.jsonl`` (a torn last line is skipped)."""
    return read_json_lines(os.path.join(run_dir, "metrics.jsonl"))


def plot(run_dir: str, rows: list[dict] | None = None) -> str:
    """Draws ``run_dir/metrics.png`` from ``rows`` (default: the run's
    ``metrics.jsonl``); returns its path."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    rows = read_metrics(run_dir) if rows is None else rows
    fig = Figure(figsize=(12, 4))
    losses, evals = fig.subplots(1, 2)
    names = [n for n in LOSS_PREFIXES if any(r.get(n) is not None for r in rows)]
    for name in names:
        have = [r for r in rows if r.get(name) is not None]
        losses.plot([r["iteration"] for r in have], [r[name] for r in have], label=name)
    losses.set_xlabel("iteration")
    losses.set_title("training losses (means over each iteration's steps)")
    if names:
        losses.legend(fontsize="small")
    _evaluations(evals, rows)
    fig.tight_layout()
    path = os.path.join(run_dir, "metrics.png")
    fig.savefig(path, dpi=80)
    return path


def _evaluations(ax, rows: list[dict]) -> None:
    ax.set_xlabel("iteration")
    scored = [r for r in rows if r.get("eval_score") is not None]
    mcts = [r for r in rows if r.get("mcts_score") is not None]
    optimal = [r for r in rows if r.get("search_optimal") is not None]
    if scored:  # 2048
        played = [r for r in rows if r.get("selfplay_score") is not None]
        ax.plot([r["iteration"] for r in played], [r["selfplay_score"] for r in played],
                color="grey", lw=0.8, label="self-play (games ended)")
        ax.errorbar([r["iteration"] for r in scored], [r["eval_score"] for r in scored],
                    yerr=[T_63 * r["eval_score_se"] for r in scored], marker="o",
                    capsize=3, label="greedy evaluation, 64 games, 95%")
        ax.set_title("2048 score")
        ax.legend(fontsize="small")
    elif mcts:  # connect four
        y = [r["mcts_score"] for r in mcts]
        err = [[v - r["mcts_score_low"] for v, r in zip(y, mcts, strict=True)],
               [r["mcts_score_high"] - v for v, r in zip(y, mcts, strict=True)]]
        ax.errorbar([r["iteration"] for r in mcts], y, yerr=err, marker="o", capsize=3)
        ax.axhline(0.5, color="grey", lw=0.5)
        ax.set_ylim(0, 1)
        ax.set_title(f"score vs MCTSBot({mcts[-1]['mcts_simulations']}), 95% Wilson")
    elif optimal:  # tic-tac-toe
        x = [r["iteration"] for r in optimal]
        ax.plot(x, [r["search_optimal"] for r in optimal], marker="o", label="search optimal")
        ax.plot(x, [r["prior_optimal"] for r in optimal], marker="o", label="prior optimal")
        ax.set_ylim(0, 1.02)
        lost = ax.twinx()
        lost.plot(x, [r["lines_lost_as_x"] + r["lines_lost_as_o"] for r in optimal],
                  color="red", marker="x", label="lines lost vs minimax")
        lost.set_ylabel("lines lost vs minimax (both colours)", color="red")
        ax.set_title("tic-tac-toe: optimal greedy moves")
        ax.legend(fontsize="small", loc="lower left")
    else:
        ax.set_title("no evaluation yet")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m examples.muzero_plot",
                                description=(__doc__ or "").splitlines()[0])
    p.add_argument("run_dirs", nargs="+")
    for run_dir in p.parse_args(argv).run_dirs:
        print(plot(run_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())

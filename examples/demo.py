"""``make demo``: learn tic-tac-toe by batch self-play, then check it never loses.

Runs :mod:`examples.selfplay` with tic-tac-toe defaults (MLP network, 128 games
in lockstep, 32 simulations per move, self-play moves sampled with temperature 1
throughout the game -- ``--temperature-moves 9``: with a greedy phase the
agent rarely sees the replies to unusual openings and, in our runs, still lost
1-4 lines as O after 300 iterations), writing to ``runs/demo`` (checkpoints,
``metrics.jsonl``/``metrics.csv``, ``metrics.png``), and ends with the full
evaluation of the greedy agent as X and as O against

* minimax over **every** optimal reply (each leaf of that game tree is a game),
* every legal reply (any opponent at all),
* a uniform random player and a pure search (uniform prior, zero value).

Extra arguments are passed to :mod:`examples.selfplay` (e.g. ``--iterations``).

    python -m examples.demo
"""

from __future__ import annotations

import sys

from examples import selfplay

# Only what differs from SelfPlayConfig / RunOptions. The cosine decay spans the
# 500 iterations x 8 optimiser steps of the demo (the schedule it was tuned with).
DEFAULTS = dict(iterations=500, temperature_moves=9, lr_decay_steps=4000, eval_every=100,
                checkpoint_every=100, run_dir="runs/demo")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--resume" not in argv and "--overwrite" not in argv:
        argv.append("--overwrite")
    result = selfplay.main(argv, defaults=DEFAULTS)
    final = result["final_eval"]
    print(f"\nFinal evaluation at iteration {result['iteration']} "
          f"({result['seconds']:.0f} s), greedy agent (search at the trained network, "
          f"no noise, temperature 0):")
    rows = [("minimax, every optimal reply", "minimax"), ("any opponent, every legal reply",
                                                          "any"),
            ("uniform random", "random"), ("pure search (uniform prior, zero value)",
                                           "pure_search")]
    total_minimax_losses = 0
    for label, key in rows:
        if f"eval_{key}_first_win" not in final:
            continue
        parts = []
        for colour, name in (("first", "as X"), ("second", "as O")):
            w, d, lo = (final[f"eval_{key}_{colour}_{r}"] for r in ("win", "draw", "loss"))
            parts.append(f"{name}: {w} W / {d} D / {lo} L")
        print(f"  vs {label:42s} " + "; ".join(parts))
        if key == "minimax":
            total_minimax_losses = (final["eval_minimax_first_loss"]
                                    + final["eval_minimax_second_loss"])
    if result["config"].game == "tic_tac_toe":
        print(f"\nLosses against minimax (both colours, every optimal line): "
              f"{total_minimax_losses}")
        return 0 if total_minimax_losses == 0 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Do Gumbel's improved-policy targets collapse? Measured on a run's replay buffer.

For the newest checkpoint of each tic-tac-toe run directory given, reads the
replay buffer (the positions and policy targets of the last few iterations of
self-play) and the trained network, and prints per run, over the buffer's
positions:

* the mean entropy (nats) of the stored targets and of the network's prior
  (softmax of its logits over the legal moves) at the same positions;
* the share of positions whose target puts more than 0.99 on one move, and the
  share of those whose move is minimax-optimal
  (:func:`jaxpuct.testing.tictactoe.optimal_move_table`);
* the share of all positions where the target's / the prior's most likely move
  is optimal, and the target's probability mass on optimal moves.

    python -m benchmarks.gumbel_targets /tmp/gumlow/grid/*_s4_seed*

Positions are decoded from pgx's observation ``[3, 3, 2]`` (plane 0: the stones
of the player to move, plane 1: the opponent's); X moves when the stone count
is even.
"""

from __future__ import annotations

import argparse
import json

import jax
import numpy as np

from jaxpuct.testing import tictactoe


def entropy(p: np.ndarray) -> np.ndarray:
    """``[N, A]`` -> ``[N]`` entropy in nats (0 log 0 = 0)."""
    logp = np.log(np.where(p > 0, p, 1.0))
    return -(p * logp).sum(-1)


def codes(obs: np.ndarray) -> np.ndarray:
    """``[N, 3, 3, 2]`` observations -> ``[N]`` position codes of
    :func:`jaxpuct.testing.tictactoe.code` (digit 1: X, 2: O)."""
    mine = obs[..., 0].reshape(-1, 9).astype(np.int64)
    theirs = obs[..., 1].reshape(-1, 9).astype(np.int64)
    x_to_move = (mine.sum(-1) + theirs.sum(-1)) % 2 == 0
    x = np.where(x_to_move[:, None], mine, theirs)
    o = np.where(x_to_move[:, None], theirs, mine)
    return ((x + 2 * o) * 3 ** np.arange(9)).sum(-1)


def measure(run_dir: str) -> dict:
    """The statistics above for the newest checkpoint of ``run_dir``."""
    from jaxpuct import alphazero as az
    from jaxpuct.alphazero import checkpoints
    from jaxpuct.alphazero.buffer import filled_rows
    config = checkpoints.load_config(run_dir)
    trainer = az.Trainer(config)
    ts = checkpoints.restore_checkpoint(run_dir, trainer.init(), config)
    rows = int(filled_rows(ts.buffer))
    obs = np.asarray(jax.device_get(ts.buffer.obs))
    target = np.asarray(jax.device_get(ts.buffer.policy), np.float64)
    keep = np.abs(target.sum(-1) - 1.0) < 1e-3          # written rows only
    keep[rows:] = False
    obs, target = obs[keep], target[keep]
    logits, _ = jax.jit(trainer.apply_fn)(ts.params, obs)
    legal = ~(obs[..., 0] | obs[..., 1]).reshape(-1, 9).astype(bool)
    z = np.where(legal, np.asarray(logits, np.float64), -np.inf)
    prior = np.exp(z - z.max(-1, keepdims=True))
    prior /= prior.sum(-1, keepdims=True)
    optimal = tictactoe.optimal_move_table()[codes(obs)]
    peaked = target.max(-1) > 0.99
    t_best = np.take_along_axis(optimal, target.argmax(-1)[:, None], 1)[:, 0]
    p_best = np.take_along_axis(optimal, prior.argmax(-1)[:, None], 1)[:, 0]
    return {"run_dir": run_dir, "policy": config.policy, "sims": config.num_simulations,
            "iteration": int(ts.iteration), "positions": int(keep.sum()),
            "target_entropy": float(entropy(target).mean()),
            "prior_entropy": float(entropy(prior).mean()),
            "peaked": float(peaked.mean()),
            "peaked_optimal": float(t_best[peaked].mean()) if peaked.any() else float("nan"),
            "target_argmax_optimal": float(t_best.mean()),
            "prior_argmax_optimal": float(p_best.mean()),
            "target_mass_optimal": float((target * optimal).sum(-1).mean()),
            "prior_mass_optimal": float((prior * optimal).sum(-1).mean())}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--out", default=None, help="append one JSON line per run here")
    args = p.parse_args(argv)
    print("| run | it. | positions | H(target) | H(prior) | target > 0.99 | of those optimal "
          "| argmax target optimal | argmax prior optimal | target mass on optimal |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for run_dir in args.run_dirs:
        m = measure(run_dir)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(m) + "\n")
        print(f"| {run_dir.rstrip('/').split('/')[-1]} | {m['iteration']} | {m['positions']} "
              f"| {m['target_entropy']:.3f} | {m['prior_entropy']:.3f} | {m['peaked']:.3f} "
              f"| {m['peaked_optimal']:.3f} | {m['target_argmax_optimal']:.3f} "
              f"| {m['prior_argmax_optimal']:.3f} | {m['target_mass_optimal']:.3f} |",
              flush=True)


if __name__ == "__main__":
    main()

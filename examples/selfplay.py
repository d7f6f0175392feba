"""AlphaZero-style batch self-play training with jaxpuct (pgx games).

    python -m examples.selfplay --game tic_tac_toe --iterations 200 --run-dir runs/ttt
    python -m examples.selfplay --game tic_tac_toe --iterations 300 --run-dir runs/ttt --resume

Each iteration plays ``--selfplay-steps`` moves of ``--batch-size`` games in
lockstep (search, network and rules in one ``jax.jit``; finished games are
written to the replay buffer and restarted in place), then takes
``--train-steps`` optimiser steps on minibatches of the buffer; the newest
network plays. Every ``--eval-every`` iterations the greedy agent plays, as both
colours, a uniform random player, a pure search (uniform prior, zero value, same
simulations) and, in tic-tac-toe, minimax over every optimal reply (see
``examples/ttt_minimax.py``). Every ``--checkpoint-every`` iterations the whole
training state (network, optimiser, buffer, games in progress, iteration, RNG)
is saved with orbax under ``--run-dir``; ``--resume`` continues from the newest
checkpoint exactly. Metrics go to ``metrics.jsonl`` and ``metrics.csv``, and
``metrics.png`` plots them. The games are sharded over all local devices (see
``jaxpuct/selfplay.py`` for multi-device and multi-host use).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import time

import jax

from jaxpuct.alphazero import selfplay
from jaxpuct.envs.pgx_games import PGX_GAMES


def _int_at_least(minimum: int, what: str):
    """An argparse type: an integer ``>= minimum``, with a message naming ``what``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1, "a positive integer")
_non_negative_int = _int_at_least(0, "an integer >= 0")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


def _widths(text: str) -> tuple[int, ...]:
    try:
        widths = tuple(int(w) for w in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive integers like 128,128, got {text!r}") from None
    if not widths or min(widths) < 1:
        raise argparse.ArgumentTypeError(f"widths must be positive, got {text!r}")
    return widths


def build_parser(defaults: dict | None = None) -> argparse.ArgumentParser:
    d = dict(game="tic_tac_toe", iterations=100, batch_size=128, simulations=32,
             selfplay_steps=9, train_steps=8, train_batch_size=256, buffer_size=8192,
             learning_rate=2e-3, lr_schedule="cosine", optimizer="adam", weight_decay=1e-4,
             network="mlp",
             hidden=(128, 128), temperature_moves=3, dirichlet_alpha=1.0,
             eval_every=25, checkpoint_every=25, run_dir="runs/selfplay", seed=0)
    d.update(defaults or {})
    p = argparse.ArgumentParser(prog="python -m examples.selfplay",
                                description=__doc__.splitlines()[0])
    p.add_argument("--game", choices=PGX_GAMES, default=d["game"])
    p.add_argument("--iterations", type=_positive_int, default=d["iterations"],
                   help="total iterations (a resumed run continues up to this number)")
    p.add_argument("--batch-size", type=_positive_int, default=d["batch_size"],
                   help="games played in lockstep (a multiple of the device count)")
    p.add_argument("--simulations", type=_positive_int, default=d["simulations"])
    p.add_argument("--selfplay-steps", type=_positive_int, default=d["selfplay_steps"],
                   help="moves of every game per iteration")
    p.add_argument("--train-steps", type=_non_negative_int, default=d["train_steps"],
                   help="optimiser steps per iteration")
    p.add_argument("--train-batch-size", type=_positive_int, default=d["train_batch_size"])
    p.add_argument("--buffer-size", type=_positive_int, default=d["buffer_size"])
    p.add_argument("--learning-rate", type=_positive_float, default=d["learning_rate"])
    p.add_argument("--lr-schedule", choices=("constant", "cosine"), default=d["lr_schedule"],
                   help="cosine: decay to 5%% over --iterations x --train-steps steps "
                        "(so --iterations is part of the saved configuration)")
    p.add_argument("--optimizer", choices=selfplay.OPTIMIZERS, default=d["optimizer"])
    p.add_argument("--weight-decay", type=float, default=d["weight_decay"])
    p.add_argument("--network", choices=selfplay.NETWORKS, default=d["network"])
    p.add_argument("--hidden", type=_widths, default=d["hidden"],
                   help="MLP widths, e.g. 128,128")
    p.add_argument("--temperature-moves", type=_non_negative_int,
                   default=d["temperature_moves"],
                   help="plies of each game sampled with temperature 1 (then greedy)")
    p.add_argument("--dirichlet-alpha", type=_positive_float, default=d["dirichlet_alpha"])
    p.add_argument("--eval-every", type=_non_negative_int, default=d["eval_every"],
                   help="evaluate every this many iterations (0: only at the end)")
    p.add_argument("--checkpoint-every", type=_non_negative_int,
                   default=d["checkpoint_every"],
                   help="checkpoint every this many iterations (0: only at the end)")
    p.add_argument("--run-dir", default=d["run_dir"])
    p.add_argument("--resume", action="store_true",
                   help="continue from the newest checkpoint in --run-dir")
    p.add_argument("--overwrite", action="store_true",
                   help="delete the checkpoints already in --run-dir and start afresh")
    p.add_argument("--reuse-tree", action="store_true",
                   help="start each search from the subtree of the previous one")
    p.add_argument("--graph", action="store_true",
                   help="Monte-Carlo graph search (transpositions share one node)")
    p.add_argument("--max-nodes", type=_non_negative_int, default=0,
                   help="tree capacity (0: simulations + 1, or 2x with --reuse-tree)")
    p.add_argument("--seed", type=int, default=d["seed"])
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plot", action="store_true", help="do not write metrics.png")
    return p


def config_from_args(args: argparse.Namespace) -> selfplay.SelfPlayConfig:
    return selfplay.SelfPlayConfig(
        game=args.game, batch_size=args.batch_size, num_simulations=args.simulations,
        temperature_moves=args.temperature_moves, dirichlet_alpha=args.dirichlet_alpha,
        buffer_size=args.buffer_size, train_batch_size=args.train_batch_size,
        optimizer=args.optimizer, learning_rate=args.learning_rate,
        lr_decay_steps=(args.iterations * args.train_steps
                        if args.lr_schedule == "cosine" else 0),
        weight_decay=args.weight_decay, network=args.network, hidden=tuple(args.hidden),
        reuse_tree=args.reuse_tree, graph_search=args.graph, max_nodes=args.max_nodes,
        seed=args.seed)


def evaluate(trainer: selfplay.Trainer, params, iteration: int, seed: int) -> dict:
    """All evaluations of the greedy agent at ``params``; flat metric names."""
    rng = jax.random.fold_in(jax.random.PRNGKey(seed + 1), iteration)
    out = {}
    opponents = [("random", lambda: trainer.play_vs(params, "random", rng)),
                 ("pure_search", lambda: trainer.play_vs(params, "pure_search", rng))]
    if trainer.config.game == "tic_tac_toe":
        from examples import ttt_minimax
        opponents.append(("minimax", lambda: ttt_minimax.evaluate_tree(trainer, params,
                                                                       "optimal")))
        opponents.append(("any", lambda: ttt_minimax.evaluate_tree(trainer, params, "all")))
    for name, run in opponents:
        counts = run()
        for colour, c in counts.items():
            for result, n in c.items():
                out[f"eval_{name}_{colour}_{result}"] = n
    return out


def write_csv(run_dir: str, records: list[dict]) -> None:
    keys = sorted({k for r in records for k in r}, key=lambda k: (k != "iteration", k))
    with open(os.path.join(run_dir, "metrics.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(records)


def plot(run_dir: str, records: list[dict]) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    train = [r for r in records if "loss" in r]
    for name in ("loss", "policy_loss", "value_loss"):
        ax1.plot([r["iteration"] for r in train], [r[name] for r in train], label=name)
    ax1.set_xlabel("iteration")
    ax1.set_title("training loss")
    ax1.legend()
    evals = [r for r in records if any(k.startswith("eval_") for k in r)]
    for opp in ("random", "pure_search", "minimax", "any"):
        rows = [r for r in evals if f"eval_{opp}_first_loss" in r]
        if not rows:
            continue
        losses = [r[f"eval_{opp}_first_loss"] + r[f"eval_{opp}_second_loss"] for r in rows]
        totals = [sum(v for k, v in r.items() if k.startswith(f"eval_{opp}_")) for r in rows]
        ax2.plot([r["iteration"] for r in rows],
                 [loss / max(t, 1) for loss, t in zip(losses, totals, strict=True)],
                 marker="o", label=f"vs {opp}")
    ax2.set_xlabel("iteration")
    ax2.set_title("fraction of evaluation games lost (both colours)")
    ax2.legend()
    fig.tight_layout()
    path = os.path.join(run_dir, "metrics.png")
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def _read_records(path: str, up_to: int) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [r for r in records if r["iteration"] <= up_to]


def main(argv: list[str] | None = None, defaults: dict | None = None) -> dict:
    """Runs training; returns ``{"config", "iteration", "final_eval", "seconds"}``."""
    args = build_parser(defaults).parse_args(argv)
    start = time.time()
    try:
        config = config_from_args(args)
        trainer = selfplay.Trainer(config)
    except ValueError as err:
        sys.exit(f"error: {err}")
    if args.resume and args.overwrite:
        sys.exit("error: --resume and --overwrite exclude each other")
    ckpt_dir = os.path.join(args.run_dir, "checkpoints")
    if not args.resume and os.path.isdir(ckpt_dir) and os.listdir(ckpt_dir):
        if not args.overwrite:
            sys.exit(f"error: {ckpt_dir} already holds checkpoints; pass --resume to "
                     f"continue that run, --overwrite to start afresh, or another --run-dir")
        shutil.rmtree(ckpt_dir)
    os.makedirs(args.run_dir, exist_ok=True)
    ts = trainer.init()
    if args.resume:
        try:
            ts = selfplay.restore_checkpoint(args.run_dir, ts, config)
        except selfplay.CheckpointError as err:
            sys.exit(f"error: {err}")
    first = int(jax.device_get(ts.iteration))
    metrics_path = os.path.join(args.run_dir, "metrics.jsonl")
    records = _read_records(metrics_path, first) if args.resume else []
    with open(metrics_path, "w") as f:  # drop lines past the checkpoint we resumed from
        f.writelines(json.dumps(r) + "\n" for r in records)
    print(f"jaxpuct self-play: {config.game}, {config.batch_size} games x "
          f"{config.num_simulations} simulations on {len(jax.devices())} "
          f"{jax.devices()[0].platform} device(s); iterations {first} -> {args.iterations}; "
          f"run dir {args.run_dir}", flush=True)

    bar = None
    if not args.no_progress:
        from tqdm import tqdm
        bar = tqdm(total=args.iterations, initial=first, desc="self-play", unit="it",
                   dynamic_ncols=True)
    last_eval = None
    it = first
    while it < args.iterations:
        ts, metrics = trainer.iterate(ts, args.selfplay_steps, args.train_steps)
        it = int(jax.device_get(ts.iteration))
        record = {"iteration": it, "seconds": round(time.time() - start, 2), **metrics}
        final = it == args.iterations
        if final or (args.eval_every and it % args.eval_every == 0):
            last_eval = evaluate(trainer, ts.params, it, config.seed)
            record.update(last_eval)
            lost = {k: v for k, v in last_eval.items() if k.endswith("_loss")}
            msg = ", ".join(f"{k[5:]}={v}" for k, v in lost.items())
            (bar.write if bar else print)(f"[{it}] loss {metrics['loss']:.3f}; "
                                          f"eval losses: {msg}")
        if final or (args.checkpoint_every and it % args.checkpoint_every == 0):
            selfplay.save_checkpoint(args.run_dir, ts, config)
        records.append(record)
        with open(metrics_path, "a") as f:
            f.write(json.dumps(record) + "\n")
        if bar:
            bar.update(1)
            bar.set_postfix(loss=f"{metrics['loss']:.3f}", games=metrics["games_finished"])
    if bar:
        bar.close()
    if records:
        write_csv(args.run_dir, records)
        if not args.no_plot:
            print(f"plot: {plot(args.run_dir, records)}")
    if last_eval is None:
        last_eval = evaluate(trainer, ts.params, it, config.seed)
    return {"config": config, "iteration": it, "final_eval": last_eval,
            "seconds": time.time() - start, "state": ts, "trainer": trainer}


if __name__ == "__main__":
    main()

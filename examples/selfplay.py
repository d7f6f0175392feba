"""AlphaZero-style batch self-play training with jaxpuct (pgx games).

    python -m examples.selfplay --game tic_tac_toe --iterations 200 --run-dir runs/ttt
    python -m examples.selfplay --game tic_tac_toe --iterations 300 --run-dir runs/ttt --resume
    python -m examples.selfplay --game connect_four     # 60 minutes; docs/connect_four.md

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
``jaxpuct/alphazero/trainer.py`` for multi-device and multi-host use). One process
at a time uses a run directory (a second one stops at once, see
``jaxpuct/alphazero/rundir.py``); Ctrl-C and SIGTERM stop between steps, never
inside a checkpoint save (``docs/reliability.md``).

Every flag is a field of ``SelfPlayConfig`` (fixed for a run; checked on
``--resume``) or ``RunOptions`` (may change on resume), in
``jaxpuct/alphazero/config.py``; ``--help`` lists them with their defaults.
Some games have their own defaults (``GAME_DEFAULTS``): ``--game connect_four``
alone trains the recipe of ``docs/connect_four.md`` for 60 minutes and plays
OpenSpiel's MCTSBot every 50 iterations (``--help --game connect_four`` shows them).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import importlib.util
import json
import math
import os
import shutil
import sys
import time

import jax

import jaxpuct.alphazero as az
from jaxpuct.alphazero import checkpoints, interrupts, rundir
from jaxpuct.alphazero import config as config_lib


def build_parser(defaults: dict | None = None) -> argparse.ArgumentParser:
    """The command line: one flag per field of ``SelfPlayConfig`` and ``RunOptions``
    (``defaults`` overrides field defaults by field name)."""
    p = argparse.ArgumentParser(prog="python -m examples.selfplay",
                                description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    config_lib.add_arguments(p, az.SelfPlayConfig, defaults)
    config_lib.add_arguments(p, az.RunOptions, defaults)
    return p


# Defaults per game, over the fields' own (a flag on the command line, or a
# caller's ``defaults``, still wins). connect_four: the recipe of
# docs/connect_four.md, which beat OpenSpiel's MCTSBot (1000 simulations) after
# 60 minutes of self-play and training on one CPU core; since 2026-12-07 with half
# its games opened by random moves, the recipe whose two 80-minute runs (one per
# core, ``--max-minutes 80``) met the perfect-play targets as one agent.
GAME_DEFAULTS: dict[str, dict] = {
    "connect_four": dict(network="resnet", num_simulations=32, train_steps=20,
                         temperature_moves=10, policy_target="visits",
                         buffer_size=65536, symmetry_augment=True,
                         opening_random_moves=20, opening_share=0.5,
                         value_target_mix=0.5, lr_decay_steps=10000, lr_final_fraction=0.1,
                         max_minutes=60.0, iterations=10000, eval_every=0,
                         checkpoint_every=25, mcts_simulations=1000,
                         mcts_agent_simulations=256, mcts_every=50,
                         run_dir="runs/connect_four"),
}


def game_defaults(argv: list[str] | None, defaults: dict | None = None) -> dict:
    """``defaults`` over the per-game defaults of the game the command line (or
    ``defaults``) names. A per-game ``policy_target`` is dropped where the policy
    is gumbel, whose target is its improved policy (the field's refusal is for a
    user who asks for both)."""
    defaults = dict(defaults or {})
    probe = argparse.ArgumentParser(add_help=False)
    probe.add_argument("--game", default=defaults.get("game", az.SelfPlayConfig.game))
    probe.add_argument("--policy", default=defaults.get("policy"))
    known = probe.parse_known_args(argv)[0]
    tuned = dict(GAME_DEFAULTS.get(known.game, {}))
    if (known.policy or tuned.get("policy", az.SelfPlayConfig.policy)) == "gumbel":
        tuned.pop("policy_target", None)
    return {**tuned, **defaults}


def parse(argv: list[str] | None, defaults: dict | None = None
          ) -> tuple[az.SelfPlayConfig, az.RunOptions]:
    """The config and options of a command line (exits with ``error: ...``)."""
    args = build_parser(game_defaults(argv, defaults)).parse_args(argv)
    try:
        return (config_lib.from_namespace(az.SelfPlayConfig, args),
                config_lib.from_namespace(az.RunOptions, args))
    except ValueError as err:
        sys.exit(f"error: {err}")


# Evaluation games draw from their own stream (seed + 1), apart from the run's
# RNG, so that evaluating (or not) never changes the training run.
EVAL_SEED_OFFSET = 1


def evaluate(trainer: az.Trainer, params, iteration: int, seed: int) -> dict:
    """All evaluations of the greedy agent at ``params``; flat metric names."""
    rng = jax.random.fold_in(jax.random.PRNGKey(seed + EVAL_SEED_OFFSET), iteration)
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


def mcts_due(options: az.RunOptions, iteration: int, evaluating: bool,
             final: bool = False) -> bool:
    """Whether this iteration plays OpenSpiel's MCTSBot (``--mcts-simulations``):
    every ``--mcts-every`` iterations (else at every evaluation), and at the end."""
    if not options.mcts_simulations:
        return False
    if final:
        return True
    return evaluating if not options.mcts_every else iteration % options.mcts_every == 0


def mcts_agent(trainer: az.Trainer, options: az.RunOptions):
    """``(params, keys, state) -> actions`` of the greedy agent with
    ``--mcts-agent-simulations`` per move (the run's own search when equal)."""
    n = options.mcts_agent_simulations or trainer.config.num_simulations
    return trainer.act if n == trainer.config.num_simulations else _greedy_act(trainer, n)


@functools.lru_cache(maxsize=4)
def _greedy_act(trainer: az.Trainer, num_simulations: int):
    """The trainer's network searched with ``num_simulations`` (compiled once)."""
    from jaxpuct.alphazero import arena, selfplay
    config = dataclasses.replace(trainer.config, num_simulations=num_simulations,
                                 max_nodes=0)
    return arena.greedy_search(selfplay.make_search_fns(
        config, trainer.env, trainer.apply_fn, trainer.game.num_actions))


def evaluate_mcts(trainer: az.Trainer, params, iteration: int, seed: int,
                  options: az.RunOptions) -> dict:
    """The greedy agent against OpenSpiel's MCTSBot (``jaxpuct.alphazero.arena``):
    W/D/L by colour as ``eval_mcts_*`` counts, and the score with its Wilson 95%
    interval and the Elo difference as ``mcts_*`` (infinite Elo bounds become null
    in ``metrics.jsonl``)."""
    from jaxpuct.alphazero import arena
    bot = arena.BotSpec(kind="mcts", simulations=options.mcts_simulations)
    # Its own seeds: (run seed + 1) with the iteration, apart from training's.
    match_seed = (seed + EVAL_SEED_OFFSET) * 1_000_003 + iteration * 10_007
    act = mcts_agent(trainer, options)
    result = arena.play_match(lambda keys, state: act(params, keys, state),
                              trainer.config.game, bot, options.mcts_games, seed=match_seed)
    out = {}
    for colour, score in (("first", result.first), ("second", result.second)):
        out.update({f"eval_mcts_{colour}_win": score.wins,
                    f"eval_mcts_{colour}_draw": score.draws,
                    f"eval_mcts_{colour}_loss": score.losses})
    total = result.total
    out.update({"mcts_simulations": options.mcts_simulations,
                "mcts_agent_simulations": (options.mcts_agent_simulations
                                           or trainer.config.num_simulations),
                "mcts_score": total.score,
                "mcts_score_low": total.score_low, "mcts_score_high": total.score_high,
                "mcts_elo": total.elo, "mcts_elo_low": total.elo_low,
                "mcts_elo_high": total.elo_high})
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

    mcts = [r for r in records if r.get("mcts_score") is not None]
    fig, axes = plt.subplots(1, 3 if mcts else 2, figsize=(16 if mcts else 11, 4))
    ax1, ax2 = axes[0], axes[1]
    train = [r for r in records if r.get("loss") is not None]
    for name in ("loss", "policy_loss", "value_loss"):
        ax1.plot([r["iteration"] for r in train], [r[name] for r in train], label=name)
    ax1.set_xlabel("iteration")
    ax1.set_title("training loss")
    ax1.legend()
    evals = [r for r in records if any(k.startswith("eval_") for k in r)]
    for opp in ("random", "pure_search", "minimax", "any", "mcts"):
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
    if mcts:
        x = [r["iteration"] for r in mcts]
        y = [r["mcts_score"] for r in mcts]
        err = [[v - r["mcts_score_low"] for v, r in zip(y, mcts, strict=True)],
               [r["mcts_score_high"] - v for v, r in zip(y, mcts, strict=True)]]
        axes[2].errorbar(x, y, yerr=err, marker="o", capsize=3)
        axes[2].axhline(0.5, color="grey", lw=0.5)
        axes[2].set_ylim(0, 1)
        axes[2].set_xlabel("iteration")
        axes[2].set_title(f"score vs OpenSpiel MCTSBot ({mcts[-1]['mcts_simulations']} "
                          f"simulations), 95% interval")
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


def _json_line(record: dict) -> str:
    """One strict-JSON line: a NaN or infinite float becomes null."""
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
             for k, v in record.items()}
    return json.dumps(clean, allow_nan=False) + "\n"


def prepare_run_dir(options: az.RunOptions) -> rundir.RunDirLock:
    """Checks ``--run-dir`` before any work and takes its lock (exits with
    ``error: ...``): it must exist with ``--resume`` (and is not created then), be
    writable, be used by no other process, and hold no checkpoints unless resuming
    or overwriting. Nothing in it is touched before the lock is held; then the
    temporary folders of saves that never finished are removed."""
    run_dir = options.run_dir
    if options.resume and not os.path.isdir(run_dir):
        sys.exit(f"error: --resume: run directory {run_dir!r} does not exist")
    try:
        os.makedirs(run_dir, exist_ok=True)
        lock = rundir.acquire(run_dir)
    except rundir.RunDirInUse as err:
        sys.exit(f"error: {err}")
    except OSError as err:
        sys.exit(_unwritable(run_dir, err.strerror or str(err)))
    try:
        problem = rundir.unwritable(run_dir)
        if problem:
            sys.exit(_unwritable(run_dir, problem))
        ckpt_dir = os.path.join(run_dir, "checkpoints")
        if not options.resume and os.path.isdir(ckpt_dir) and os.listdir(ckpt_dir):
            if not options.overwrite:
                sys.exit(f"error: {ckpt_dir} already holds checkpoints; pass --resume to "
                         f"continue that run, --overwrite to start afresh, or another "
                         f"--run-dir")
            shutil.rmtree(ckpt_dir)
        checkpoints.remove_partial_saves(run_dir)
    except BaseException:
        lock.release()
        raise
    return lock


def _unwritable(run_dir: str, why: str) -> str:
    return (f"error: run directory {run_dir!r} is not writable: {why} (pass a writable "
            f"--run-dir)")


def _start(config: az.SelfPlayConfig, options: az.RunOptions, guard: interrupts.SignalGuard
           ) -> tuple[az.Trainer, az.TrainState]:
    """The trainer and the state to continue from (fresh, or restored)."""
    try:
        trainer = az.Trainer(config)
    except ValueError as err:
        sys.exit(f"error: {err}")
    ts = trainer.init()
    if options.resume:
        try:
            with guard.protected():  # orbax's reader threads are not abandoned midway
                ts = az.restore_checkpoint(options.run_dir, ts, config,
                                           step=options.resume_step)
        except az.CheckpointError as err:
            sys.exit(f"error: {err}")
        first = int(jax.device_get(ts.iteration))
        if first > options.iterations:
            sys.exit(f"error: the checkpoint in {options.run_dir!r} is at iteration {first}, "
                     f"past --iterations {options.iterations}; pass a larger --iterations "
                     f"to continue the run")
        if first == options.iterations:
            print(f"nothing to do: the checkpoint in {options.run_dir!r} is already at "
                  f"--iterations {first}; pass a larger --iterations to continue the run")
            sys.exit(0)
    return trainer, ts


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


@dataclasses.dataclass(frozen=True)
class Progress:
    """What the progress bar shows: how far the run is towards the limit that will
    end it, ``--iterations`` (unit ``"it"``) or ``--max-minutes`` of self-play and
    training (unit ``"min"``), and the self-play and training seconds left until
    then (None before the speed is known). A bar of 10,000 iterations in a run
    that a 60-minute budget ends after 300 would show 3% and a 17-hour ETA."""

    done: float
    total: float
    unit: str
    eta_seconds: float | None


def progress(iteration: int, iterations: int, train_seconds: float, budget_seconds: float,
             seconds_per_iteration: float | None) -> Progress:
    """The :class:`Progress` of a run at ``iteration`` after ``train_seconds`` of
    self-play and training, with ``budget_seconds`` of it allowed (0: no limit) and
    each iteration taking ``seconds_per_iteration`` (measured; None before the
    first). The budget is taken to end the run first while no speed is known."""
    rate = seconds_per_iteration
    by_iterations = Progress(float(iteration), float(iterations), "it",
                             None if rate is None else (iterations - iteration) * rate)
    if not budget_seconds:
        return by_iterations
    left = max(budget_seconds - train_seconds, 0.0)
    by_time = Progress(min(train_seconds, budget_seconds) / 60.0, budget_seconds / 60.0,
                       "min", left)
    if rate is None or left < (iterations - iteration) * rate:
        return by_time
    return by_iterations


def _bar_format(unit: str) -> str:
    counts = "{n:.0f}/{total:.0f} it" if unit == "it" else "{n:.1f}/{total:.1f} min"
    return "{desc}: {percentage:3.0f}%|{bar}| " + counts + " [{elapsed}{postfix}]"


def _open_bar(state: Progress):
    from tqdm import tqdm
    return tqdm(total=state.total, initial=state.done, desc="self-play",
                bar_format=_bar_format(state.unit), dynamic_ncols=True)


def _show(bar, state: Progress, metrics: dict) -> None:
    """Moves ``bar`` to ``state`` (its unit changes when the other limit turns
    out to end the run first)."""
    bar.bar_format = _bar_format(state.unit)
    bar.total, bar.n = state.total, state.done
    postfix = {} if state.eta_seconds is None else {"eta": bar.format_interval(
        state.eta_seconds)}
    postfix.update(loss=_fmt(metrics["loss"]), games=metrics["games_finished"])
    bar.set_postfix(postfix)


def interrupted_message(iteration: int, newest_checkpoint: int | None) -> str:
    """The one line printed when a signal ends the run."""
    if newest_checkpoint is None:
        return (f"interrupted at iteration {iteration}; no checkpoint yet; start again "
                f"(without --resume)")
    return (f"interrupted at iteration {iteration}; newest intact checkpoint "
            f"{newest_checkpoint}; resume with --resume")


def main(argv: list[str] | None = None, defaults: dict | None = None) -> dict:
    """Runs training; returns ``{"config", "iteration", "final_eval", "seconds", ...}``.

    Exits with ``error: ...`` (status 1) on a bad command line, an unusable or busy
    run directory or checkpoint, a failed save, or a NaN / infinite loss or
    parameter (then nothing of that iteration is saved). SIGINT (Ctrl-C) and
    SIGTERM end the run between steps (a write that has begun, a checkpoint
    save included, completes first) with one line saying where it stopped, and
    exit status 130 and 143."""
    config, options = parse(argv, defaults)
    from jaxpuct.alphazero.arena import ARENA_GAMES  # no OpenSpiel import
    if options.mcts_simulations and config.game not in ARENA_GAMES:
        sys.exit(f"error: --mcts-simulations: OpenSpiel's MCTSBot plays "
                 f"{', '.join(ARENA_GAMES)}, not {config.game}")
    if options.mcts_simulations and importlib.util.find_spec("pyspiel") is None:
        sys.exit("error: --mcts-simulations needs OpenSpiel (pip install "
                 "'jaxpuct[openspiel]'), or pass --mcts-simulations 0")
    start = time.time()
    with prepare_run_dir(options), interrupts.SignalGuard() as guard:
        try:
            return _train(config, options, guard, start)
        except interrupts.Interrupted as stop:
            newest = checkpoints.newest_intact_step(options.run_dir)
            # Stopped before the run knew its first iteration: none was computed.
            reached = stop.iteration if stop.iteration is not None else newest or 0
            print(interrupted_message(reached, newest), file=sys.stderr, flush=True)
            raise SystemExit(stop.exit_status) from None


def _train(config: az.SelfPlayConfig, options: az.RunOptions, guard: interrupts.SignalGuard,
           start: float) -> dict:
    """The run itself (see :func:`main`); an :class:`interrupts.Interrupted` leaves
    it carrying the iteration reached."""
    it = None
    bar = None
    try:
        trainer, ts = _start(config, options, guard)
        first = it = int(jax.device_get(ts.iteration))
        metrics_path = os.path.join(options.run_dir, "metrics.jsonl")
        records = _read_records(metrics_path, first) if options.resume else []
        with guard.protected(), open(metrics_path, "w") as f:
            # Drops the lines past the checkpoint we resumed from.
            f.writelines(_json_line(r) for r in records)
        print(f"jaxpuct self-play: {config.game}, {config.batch_size} games x "
              f"{config.num_simulations} simulations on {len(jax.devices())} "
              f"{jax.devices()[0].platform} device(s); iterations {first} -> "
              f"{options.iterations}; run dir {options.run_dir}", flush=True)
        # Seconds spent in self-play and training alone (what --max-minutes limits),
        # carried over a resume by the metrics lines.
        train_seconds = records[-1].get("train_seconds", 0.0) if records else 0.0
        session_start_seconds = train_seconds
        budget = options.max_minutes * 60.0
        if options.progress:
            bar = _open_bar(progress(first, options.iterations, train_seconds, budget, None))
        say = bar.write if bar else print
        last_eval = None
        while it < options.iterations:
            tick = time.time()
            try:
                ts, metrics = trainer.iterate(ts)
            except az.NonFiniteError as err:
                sys.exit(f"error: {err}; the last checkpoint in {options.run_dir!r} is "
                         f"intact (resume with --resume, or --resume-step N for an older one)")
            train_seconds += time.time() - tick
            it = int(jax.device_get(ts.iteration))
            record = {"iteration": it, "seconds": round(time.time() - start, 4),
                      "train_seconds": round(train_seconds, 4), **metrics}
            out_of_time = bool(budget) and train_seconds >= budget
            if out_of_time:
                say(f"[{it}] --max-minutes {options.max_minutes:g} reached after "
                    f"{train_seconds / 60:.1f} minutes of self-play and training")
            final = it == options.iterations or out_of_time
            evaluating = final or bool(options.eval_every and it % options.eval_every == 0)
            if evaluating:
                last_eval = evaluate(trainer, ts.params, it, config.seed)
                record.update(last_eval)
                lost = ", ".join(f"{k[5:]}={v}" for k, v in last_eval.items()
                                 if k.endswith("_loss"))
                say(f"[{it}] loss {_fmt(metrics['loss'])}; eval losses: {lost}")
            if mcts_due(options, it, evaluating, final):
                mcts = evaluate_mcts(trainer, ts.params, it, config.seed, options)
                record.update(mcts)
                say(f"[{it}] vs MCTSBot ({options.mcts_simulations} simulations): score "
                    f"{mcts['mcts_score']:.3f} [{mcts['mcts_score_low']:.3f}, "
                    f"{mcts['mcts_score_high']:.3f}]")
            records.append(record)
            # The metrics line and its checkpoint are one step for a signal: one
            # that arrives in either stops the run after both.
            with guard.protected():
                # The metrics line goes first: a crash during the save then loses no
                # line (a resume drops lines past the checkpoint it restores and
                # recomputes them).
                with open(metrics_path, "a") as f:
                    f.write(_json_line(record))
                if final or (options.checkpoint_every and it % options.checkpoint_every == 0):
                    try:
                        az.save_checkpoint(options.run_dir, ts, config,
                                           keep=options.keep_checkpoints)
                    except az.CheckpointError as err:
                        sys.exit(f"error: {err}")
            if bar:
                _show(bar, progress(it, options.iterations, train_seconds, budget,
                                    (train_seconds - session_start_seconds) / (it - first)),
                      metrics)
            if out_of_time:
                break
    except interrupts.Interrupted as stop:
        stop.iteration = it
        raise
    finally:
        if bar:
            bar.close()
    with guard.protected():
        if records:
            write_csv(options.run_dir, records)
            if options.plot:
                print(f"plot: {plot(options.run_dir, records)}")
    return {"config": config, "options": options, "iteration": it, "final_eval": last_eval,
            "seconds": time.time() - start, "state": ts, "trainer": trainer}


if __name__ == "__main__":
    main()

"""Gumbel against PUCT self-play at low simulation counts on connect four.

The connect-four half of Danihelka et al. (2022, "Policy improvement by planning
with Gumbel")'s low-simulation claim, tested as :mod:`benchmarks.gumbel_low_sims`
tests it on tic-tac-toe: one ``examples.selfplay`` run per (policy, S, seed) with
the recipe of ``docs/connect_four.md`` except the policy and the simulations, each
pinned to one core and stopped by ``--max-minutes`` (wall seconds in self-play and
training, compile included; one run per core, so wall is close to CPU and the
child's CPU seconds are recorded too), checkpointed every ``--checkpoint-every``
iterations. Then every checkpoint is measured against perfect play: the share of
value-keeping moves (:mod:`benchmarks.connect_four_sets`) of the prior and of the
run's own search (its policy at its own S, no noise) on the first ``--positions``
positions of each set, on the time axis of the run's own training seconds; and
the last checkpoint plays OpenSpiel's ``MCTSBot`` in ``examples.arena``.

    python -m benchmarks.gumbel_low_sims_c4 train --core 0 --shard 0/2 --out OUT &
    python -m benchmarks.gumbel_low_sims_c4 train --core 1 --shard 1/2 --out OUT
    python -m benchmarks.gumbel_low_sims_c4 evaluate --out OUT
    python -m benchmarks.gumbel_low_sims_c4 arena --core 0 --shard 0/2 --out OUT &
    python -m benchmarks.gumbel_low_sims_c4 arena --core 1 --shard 1/2 --out OUT
    python -m benchmarks.gumbel_low_sims_c4 table --out OUT [--plot FIG.png]

Every step writes its result into the run's directory (``row.json``,
``perfect.json``, ``arena.json``) and skips runs that already have it, so an
interrupted grid continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from typing import Any

import numpy as np

from benchmarks import gumbel_low_sims, gumbel_targets

SETS = ("end_easy", "middle_easy", "middle_medium")


def grid(policies: list[str], sims: list[int], seeds: list[int], shard: str
         ) -> list[tuple[str, int, int]]:
    """The (policy, S, seed) cells of one shard ``"i/n"``; seeds outermost, so a
    grid cut short holds whole seeds."""
    index, count = (int(x) for x in shard.split("/"))
    cells = [(p, s, seed) for seed in seeds for s in sims for p in policies]
    return cells[index::count]


def run_dir(out: str, policy: str, sims: int, seed: int, label: str = "") -> str:
    return os.path.join(out, f"{label + '_' if label else ''}{policy}_s{sims}_seed{seed}")


def train_one(policy: str, sims: int, seed: int, rd: str, minutes: float, core: int,
              checkpoint_every: int, extra: str) -> dict[str, Any]:
    """One training run in a child process pinned to ``core``."""
    cmd = ["taskset", "-c", str(core), sys.executable, "-m", "examples.selfplay",
           "--game", "connect_four", "--policy", policy, "--num-simulations", str(sims),
           "--seed", str(seed), "--max-minutes", str(minutes),
           "--checkpoint-every", str(checkpoint_every), "--keep-checkpoints", "1000",
           "--mcts-simulations", "0", "--run-dir", rd, "--overwrite", "--no-progress",
           "--no-plot", *shlex.split(extra)]
    start = time.time()
    cpu_seconds = gumbel_low_sims.run_child(cmd)
    records = _metrics(rd)
    return {"policy": policy, "sims": sims, "seed": seed, "extra": extra, "minutes": minutes,
            "iterations": records[-1]["iteration"],
            "train_seconds": records[-1]["train_seconds"],
            "wall_seconds": time.time() - start,
            "cpu_seconds": cpu_seconds, "loss": records[-1]["loss"]}


def _metrics(rd: str) -> list[dict[str, Any]]:
    with open(os.path.join(rd, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _runs(out: str) -> list[str]:
    return sorted(os.path.join(out, d) for d in os.listdir(out)
                  if os.path.exists(os.path.join(out, d, "row.json")))


def _load(path: str) -> Any:
    with open(path) as f:
        return json.load(f)


def _save(path: str, obj: Any) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def evaluate_group(rds: list[str], sets: dict[str, Any], batch: int) -> None:
    """``perfect.json`` for every checkpoint of runs that share a config but the
    seed (one compile for all of them); ``sets``: name -> ``(state, legal,
    scores)``."""
    from benchmarks import connect_four_sets as cs
    from benchmarks.connect_four_perfect import agent_actions
    from benchmarks.connect_four_probe import Probe
    from jaxpuct.alphazero import checkpoints
    sims = _load(os.path.join(rds[0], "row.json"))["sims"]
    probe = Probe(rds[0], [sims], batch)
    template = probe.trainer.init()  # the seeds' runs share its structure
    for rd in rds:
        if os.path.exists(os.path.join(rd, "perfect.json")):
            continue
        config = checkpoints.load_config(rd)
        seconds = {r["iteration"]: r["train_seconds"] for r in _metrics(rd)}
        points = []
        for step in sorted(checkpoints.available_steps(rd)):
            params = checkpoints.restore_checkpoint(rd, template, config, step).params
            point: dict[str, Any] = {"step": step, "train_seconds": seconds.get(step)}
            for name, (state, legal, scores) in sets.items():
                acts = agent_actions(probe, params, state, legal, [0, sims])
                crit = cs.critical(scores)
                keeps_prior = cs.judge(scores, acts[0][0])[0]
                keeps_search, optimal_search = cs.judge(scores, acts[sims][0])
                point[name] = {"prior": float(keeps_prior.mean()),
                               "search": float(keeps_search.mean()),
                               "prior_critical": float(keeps_prior[crit].mean()),
                               "search_critical": float(keeps_search[crit].mean()),
                               "search_optimal": float(optimal_search.mean()),
                               "n": len(legal), "n_critical": int(crit.sum())}
            points.append(point)
            print(f"{os.path.basename(rd)} step {step}: " + ", ".join(
                f"{k} {point[k]['search']:.3f}" for k in sets), flush=True)
        _save(os.path.join(rd, "perfect.json"), points)


def targets_one(rd: str, max_empty: int, count: int) -> dict[str, Any]:
    """The replay buffer of the run's last checkpoint: entropy of the stored
    policy targets and of the network's prior at the same positions, the share of
    targets above 0.99 on one move, and, on up to ``count`` of its positions with
    at most ``max_empty`` empty cells (solved exactly by
    :mod:`jaxpuct.testing.connect_four`), whether the target's and the prior's
    most likely move keeps the value and the target's mass on such moves."""
    import jax

    from benchmarks import connect_four_sets as cs
    from jaxpuct import alphazero as az
    from jaxpuct.alphazero import checkpoints
    from jaxpuct.alphazero.buffer import filled_rows
    from jaxpuct.testing import connect_four as c4
    config = checkpoints.load_config(rd)
    trainer = az.Trainer(config, devices=jax.devices()[:1])
    ts = checkpoints.restore_checkpoint(rd, trainer.init(), config)
    rows = int(filled_rows(ts.buffer))
    obs = np.asarray(jax.device_get(ts.buffer.obs))
    target = np.asarray(jax.device_get(ts.buffer.policy), np.float64)
    written = np.abs(target.sum(-1) - 1.0) < 1e-3
    written[rows:] = False
    obs, target = obs[written], target[written]
    apply = jax.jit(trainer.apply_fn)
    logits = np.concatenate([np.asarray(apply(ts.params, obs[i:i + 1024])[0])
                             for i in range(0, len(obs), 1024)]).astype(np.float64)
    legal = ~(obs[:, 0, :, 0] | obs[:, 0, :, 1]).astype(bool)   # row 0 is the top
    z = np.where(legal, logits, -np.inf)
    prior = np.exp(z - z.max(-1, keepdims=True))
    prior /= prior.sum(-1, keepdims=True)
    empty = 42 - obs.reshape(len(obs), -1).sum(-1)
    late = np.flatnonzero(empty <= max_empty)
    late = np.random.default_rng(0).permutation(late)[:count]
    solver = c4.Solver()
    values = np.array([c4.move_values(c4.board_from_pgx_obs(obs[i]), solver) for i in late])
    out: dict[str, Any] = {
        "iteration": int(ts.iteration), "positions": int(len(obs)),
        "target_entropy": float(gumbel_targets.entropy(target).mean()),
        "prior_entropy": float(gumbel_targets.entropy(prior).mean()),
        "peaked": float((target.max(-1) > 0.99).mean()), "late": int(len(late))}
    if len(late):
        # [late, 7]: whether each column keeps the value (False where it is full).
        keeps = np.stack([cs.judge(values, np.full(len(late), a))[0] for a in range(7)], 1)
        t, pr = target[late], prior[late]
        crit = cs.critical(values)
        t_keep = cs.judge(values, t.argmax(-1))[0]
        p_keep = cs.judge(values, pr.argmax(-1))[0]
        out.update({"late_critical": int(crit.sum()),
                    "target_argmax_keeps": float(t_keep.mean()),
                    "prior_argmax_keeps": float(p_keep.mean()),
                    "target_mass_keeps": float((t * keeps).sum(-1).mean()),
                    "target_argmax_keeps_critical": float(t_keep[crit].mean()),
                    "prior_argmax_keeps_critical": float(p_keep[crit].mean()),
                    "target_mass_keeps_critical": float((t * keeps).sum(-1)[crit].mean()),
                    "peaked_late": float((t.max(-1) > 0.99).mean()),
                    "peaked_keeps": float(t_keep[t.max(-1) > 0.99].mean())
                    if (t.max(-1) > 0.99).any() else None})
    return out


def arena_one(rd: str, core: int, games: int, opponent_simulations: int) -> None:
    path = os.path.join(rd, "arena.json")
    cmd = ["taskset", "-c", str(core), sys.executable, "-m", "examples.arena",
           "--run-dir", rd, "--opponent-simulations", str(opponent_simulations),
           "--games", str(games), "--seed", "0", "--json", path]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def _cell(values: list[float], digits: int = 3) -> str:
    a = np.asarray([v for v in values if v is not None], dtype=float)
    if a.size == 0:
        return "-"
    f = f"{{:.{digits}f}}"
    return f"{f.format(a.mean())} [{f.format(a.min())}, {f.format(a.max())}]"


def collect(out: str) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    """Every run's row, final perfect-play point and arena result, per (label,
    policy, S)."""
    cells: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for rd in _runs(out):
        row = _load(os.path.join(rd, "row.json"))
        row["run_dir"] = rd
        p = os.path.join(rd, "perfect.json")
        row["perfect"] = _load(p) if os.path.exists(p) else []
        a = os.path.join(rd, "arena.json")
        row["arena"] = _load(a) if os.path.exists(a) else None
        cells.setdefault((row.get("label", ""), row["policy"], row["sims"]), []).append(row)
    return cells


def table(out: str) -> str:
    """Mean [min, max] over seeds per (label, policy, S) at each run's last
    checkpoint."""
    from jaxpuct.alphazero import scores
    lines = ["| run | policy | S | seeds | iterations | CPU s | "
             + " | ".join(f"{s} search" for s in SETS)
             + " | mean, prior | mean, search | vs MCTSBot: W/D/L | score [95%] |",
             "|" + "---|" * (10 + len(SETS))]
    for (label, policy, sims), rs in sorted(collect(out).items(),
                                           key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        last = [r["perfect"][-1] for r in rs if r["perfect"]]
        per_set = [_cell([p[s]["search"] for p in last]) for s in SETS]
        prior = _cell([float(np.mean([p[s]["prior"] for s in SETS])) for p in last])
        search = _cell([float(np.mean([p[s]["search"] for s in SETS])) for p in last])
        arenas = [r["arena"] for r in rs if r["arena"]]
        w = sum(a["total"]["wins"] for a in arenas)
        d = sum(a["total"]["draws"] for a in arenas)
        n = sum(a["games"] for a in arenas)
        if n:
            lo, hi = scores.wilson_interval((w + d / 2) / n, n)
            arena = f"{w}/{d}/{n - w - d} | {(w + d / 2) / n:.3f} [{lo:.3f}, {hi:.3f}]"
        else:
            arena = "- | -"
        lines.append(f"| {label or 'grid'} | {policy} | {sims} | {len(rs)} "
                     f"| {_cell([r['iterations'] for r in rs], 0)} "
                     f"| {_cell([r['cpu_seconds'] for r in rs], 0)} | "
                     + " | ".join(per_set) + f" | {prior} | {search} | {arena} |")
    return "\n".join(lines)


def targets_table(out: str) -> str:
    """The replay-buffer statistics of :func:`targets_one`, mean [min, max] over
    seeds per (label, policy, S)."""
    keys = (("target_entropy", "H(target)"), ("prior_entropy", "H(prior)"),
            ("peaked", "target > 0.99"), ("target_argmax_keeps", "argmax target keeps"),
            ("prior_argmax_keeps", "argmax prior keeps"),
            ("target_mass_keeps", "target mass keeping"),
            ("target_argmax_keeps_critical", "argmax target keeps, critical"),
            ("target_mass_keeps_critical", "target mass keeping, critical"))
    lines = ["| run | policy | S | seeds | late positions (critical) | "
             + " | ".join(k[1] for k in keys) + " |", "|" + "---|" * (5 + len(keys))]
    for (label, policy, sims), rs in sorted(collect(out).items(),
                                           key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        ts = [_load(os.path.join(r["run_dir"], "targets.json")) for r in rs
              if os.path.exists(os.path.join(r["run_dir"], "targets.json"))]
        if not ts:
            continue
        late = f"{sum(t['late'] for t in ts)} ({sum(t.get('late_critical', 0) for t in ts)})"
        lines.append(f"| {label or 'grid'} | {policy} | {sims} | {len(ts)} | {late} | "
                     + " | ".join(_cell([t.get(k) for t in ts]) for k, _ in keys) + " |")
    return "\n".join(lines)


def plot(out: str, path: str) -> None:
    """Value-keeping share of the search (mean over the sets; all positions, then
    the critical ones) against training seconds, one column per S, the seeds'
    mean with their range."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cells = collect(out)
    sims = sorted({s for (_, _, s) in cells})
    rows = (("search", "value-keeping, all"), ("search_critical", "value-keeping, critical"))
    fig, axes = plt.subplots(len(rows), len(sims), figsize=(3.2 * len(sims), 2.8 * len(rows)),
                             sharey="row", squeeze=False)
    for j, s in enumerate(sims):
        for i, (key, ylabel) in enumerate(rows):
            ax = axes[i][j]
            for (label, policy, cs), rs in sorted(cells.items()):
                if cs != s:
                    continue
                curves = [[(p["train_seconds"], np.mean([p[k][key] for k in SETS]))
                           for p in r["perfect"] if p["train_seconds"] is not None]
                          for r in rs]
                curves = [c for c in curves if c]
                if not curves:
                    continue
                # From the seeds' latest first checkpoint: no curve before any data.
                t = np.linspace(max(c[0][0] for c in curves), min(c[-1][0] for c in curves), 30)
                ys = np.array([np.interp(t, *np.asarray(c).T) for c in curves])
                ax.plot(t / 60, ys.mean(0), label=f"{label + ' ' if label else ''}{policy}")
                ax.fill_between(t / 60, ys.min(0), ys.max(0), alpha=0.2)
            ax.set_title(f"S = {s}")
            if i == len(rows) - 1:
                ax.set_xlabel("training minutes (one core)")
            if j == 0:
                ax.set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("step", choices=("train", "evaluate", "arena", "targets", "table"))
    p.add_argument("--policies", default="gumbel,alphazero")
    p.add_argument("--sims", default="2,4,8,16")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--minutes", type=float, default=4.0, help="--max-minutes of every run")
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--extra", default="", help="flags passed to every training run")
    p.add_argument("--label", default="", help="name of this set of runs in the table")
    p.add_argument("--core", type=int, default=0)
    p.add_argument("--shard", default="0/1", help="i/n: this process's share of the grid")
    p.add_argument("--positions", type=int, default=300, help="positions of each set")
    p.add_argument("--batch", type=int, default=300)
    p.add_argument("--games", type=int, default=64)
    p.add_argument("--opponent-simulations", type=int, default=100)
    p.add_argument("--max-empty", type=int, default=16,
                   help="targets: buffer positions with at most this many empty cells are solved")
    p.add_argument("--late-positions", type=int, default=400)
    p.add_argument("--out", default="/tmp/gumbel_low_sims_c4")
    p.add_argument("--plot", default=None, help="table: also write this figure")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    cells = grid(a.policies.split(","), [int(s) for s in a.sims.split(",")],
                 [int(s) for s in a.seeds.split(",")], a.shard)
    if a.step == "train":
        for policy, sims, seed in cells:
            rd = run_dir(a.out, policy, sims, seed, a.label)
            if os.path.exists(os.path.join(rd, "row.json")):
                continue
            row = train_one(policy, sims, seed, rd, a.minutes, a.core, a.checkpoint_every,
                            a.extra)
            row["label"] = a.label
            _save(os.path.join(rd, "row.json"), row)
            print(f"{os.path.basename(rd)}: {row['iterations']} it., "
                  f"{row['cpu_seconds']:.0f} CPU s, loss {row['loss']:.3f}", flush=True)
    elif a.step == "evaluate":
        from benchmarks import connect_four_sets as cs
        from benchmarks.connect_four_perfect import set_states
        sets = {}
        for name in SETS:
            position_set = cs.load(name)
            sets[name] = (*set_states(position_set, a.positions),
                          position_set.scores[:a.positions])
        groups: dict[tuple[str, str, int], list[str]] = {}
        for rd in _runs(a.out):
            row = _load(os.path.join(rd, "row.json"))
            groups.setdefault((row.get("label", ""), row["policy"], row["sims"]), []).append(rd)
        index, count = (int(x) for x in a.shard.split("/"))
        for rds in list(groups.values())[index::count]:
            evaluate_group(rds, sets, a.batch)
    elif a.step == "arena":
        for policy, sims, seed in cells:
            rd = run_dir(a.out, policy, sims, seed, a.label)
            if os.path.exists(os.path.join(rd, "row.json")) and not os.path.exists(
                    os.path.join(rd, "arena.json")):
                arena_one(rd, a.core, a.games, a.opponent_simulations)
                print(f"{os.path.basename(rd)}: arena done", flush=True)
    elif a.step == "targets":
        for policy, sims, seed in cells:
            rd = run_dir(a.out, policy, sims, seed, a.label)
            path = os.path.join(rd, "targets.json")
            if os.path.exists(os.path.join(rd, "row.json")) and not os.path.exists(path):
                _save(path, targets_one(rd, a.max_empty, a.late_positions))
                print(f"{os.path.basename(rd)}: targets done", flush=True)
    print(table(a.out))
    print()
    print(targets_table(a.out))
    if a.plot:
        plot(a.out, a.plot)


if __name__ == "__main__":
    main()

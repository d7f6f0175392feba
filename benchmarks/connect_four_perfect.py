"""A connect-four agent against perfect play: on each position set of
:mod:`benchmarks.connect_four_sets`, the share of its moves that keep the
game-theoretic value and the share that are strong-optimal (fastest win, slowest
loss), with 95% Wilson intervals.

Players: the prior's argmax over legal moves (``S = 0``; with ``--search-symmetry
average``, the averaged network's) and the run's search (its policy, graph and
symmetry settings, no root noise, the most visited move; Gumbel: its greedy
choice) at each ``--simulations``, for the newest checkpoint of ``--run-dir`` (or
``--step``); and OpenSpiel's ``MCTSBot`` (UCT ``c = 2``, one random rollout per
leaf, ``solve=True``) at each ``--mcts`` simulation count, on the first
``--mcts-positions`` positions of each set (it is slow).

    python -m benchmarks.connect_four_perfect --run-dir runs/c4 \\
        [--simulations 0,32,256,1024] [--mcts 1000,10000] [--mcts-positions 200] \\
        [--sets end_easy,...] [--solver] [--graph-search] [--search-symmetry average] \\
        [--ensemble runs/c4_seed1,...] [--json out.json]
    python -m benchmarks.connect_four_perfect --run-dir runs/c4 --steps all \\
        --positions 300 --simulations 0,256 --mcts '' --json curve.json   # a curve

``critical`` columns: the same shares over the positions where some legal move
does not keep the value (elsewhere every move keeps it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from benchmarks import connect_four_sets as cs
from jaxpuct.alphazero import arena, scores
from jaxpuct.alphazero.config import SEARCH_SYMMETRIES


def wilson(successes: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of ``successes`` out of ``n`` (NaN when ``n = 0``)."""
    if n == 0:
        return (math.nan, math.nan)
    return scores.wilson_interval(successes / n, n)


def summarise(scores: np.ndarray, actions: np.ndarray) -> dict[str, Any]:
    """Shares (with intervals) of value-keeping and strong-optimal moves, overall
    and over the critical positions."""
    keeps, optimal = cs.judge(scores, actions)
    crit = cs.critical(scores)
    out: dict[str, Any] = {"n": int(len(actions)), "n_critical": int(crit.sum())}
    for label, good, mask in (("keeps", keeps, slice(None)), ("optimal", optimal, slice(None)),
                              ("keeps_critical", keeps, crit),
                              ("optimal_critical", optimal, crit)):
        g = good[mask]
        out[label] = float(g.mean()) if g.size else math.nan
        out[label + "_ci"] = wilson(int(g.sum()), int(g.size))
    return out


def set_states(position_set: cs.PositionSet, count: int | None = None) -> tuple[Any, np.ndarray]:
    """pgx states of the first ``count`` positions of a set (all: ``None``) and
    their legal masks ``[N, 7]``, checked against the file's."""
    from jaxpuct.testing import connect_four as c4
    columns = position_set.column_lists()[:count]
    width = max(1, max(len(c) for c in columns))
    moves = np.full((len(columns), width), -1, np.int32)
    for i, c in enumerate(columns):
        moves[i, :len(c)] = c
    state = c4.pgx_states(moves)
    legal = ~np.isnan(position_set.scores[:len(columns)])
    if not np.array_equal(np.asarray(state.legal_action_mask), legal):
        raise RuntimeError(f"{position_set.name}: pgx's legal moves differ from the file's")
    return state, legal


def agent_actions(probe: Any, params: Any, state: Any, legal: np.ndarray,
                  simulations: Sequence[int]) -> dict[int, tuple[np.ndarray, float]]:
    """The agent's move ``[N]`` on every position of ``state`` (from
    :func:`set_states`) and the seconds it took (the first call's include
    compilation), for each simulation count (0: the prior's argmax)."""
    n = len(legal)
    out = {}
    if 0 in simulations:
        start = time.perf_counter()
        logits = np.concatenate([np.asarray(probe.apply(params, state.observation[sl])[0])
                                 for sl in probe._chunks(n)])
        out[0] = (np.argmax(np.where(legal, logits, -np.inf), axis=1),
                  time.perf_counter() - start)
    keys = jax.random.split(jax.random.key(0), n)
    for s in simulations:
        if s == 0:
            continue
        start = time.perf_counter()
        actions = np.concatenate([
            np.asarray(probe.search[s](params, keys[sl],
                                       jax.tree.map(lambda x, sl=sl: x[sl], state)))
            for sl in probe._chunks(n)])
        out[s] = (actions, time.perf_counter() - start)
    return out


def mcts_actions(position_set: cs.PositionSet, simulations: int, count: int,
                 seed: int) -> np.ndarray:
    """OpenSpiel ``MCTSBot``'s move ``[count]`` on the first ``count`` positions."""
    import pyspiel

    from jaxpuct.alphazero import arena
    game = pyspiel.load_game("connect_four")
    spec = arena.BotSpec(kind="mcts", simulations=simulations)
    out = []
    for i, columns in enumerate(position_set.column_lists()[:count]):
        state = game.new_initial_state()
        for c in columns:
            state.apply_action(c)
        bot = arena.make_bot(spec, game, state.current_player(), seed + i)
        out.append(bot.step(state))
    return np.array(out)


def _row(name: str, player: str, r: dict[str, Any], seconds: float) -> str:
    def cell(key):
        lo, hi = r[key + "_ci"]
        return f"{r[key]:.3f} [{lo:.3f}, {hi:.3f}]"
    return (f"| {name} | {player} | {r['n']} | {cell('keeps')} | {cell('optimal')} | "
            f"{r['n_critical']} | {cell('keeps_critical')} | {cell('optimal_critical')} | "
            f"{seconds:.0f} |")


def checkpoint_steps(text: str, available: Sequence[int]) -> list[int]:
    """``--steps``: ``"all"`` (every checkpoint), or steps separated by commas,
    each one of ``available`` (else ``SystemExit`` naming the missing ones)."""
    if text.strip() == "all":
        return sorted(available)
    steps = [int(x) for x in text.split(",") if x.strip()]
    missing = sorted(set(steps) - set(available))
    if missing:
        raise SystemExit(f"--steps: no checkpoint at {missing}; the run has "
                         f"{sorted(available)}")
    return steps


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--run-dir", required=True)
    p.add_argument("--step", type=int, default=None, help="checkpoint step (default: newest)")
    p.add_argument("--steps", default=None,
                   help="several checkpoints, 'all' or steps separated by commas (a curve: "
                   "--json then holds one entry per checkpoint with its training seconds)")
    p.add_argument("--positions", type=int, default=0,
                   help="the first this many positions of each set (0: all)")
    p.add_argument("--simulations", default="0,32,256,1024")
    p.add_argument("--mcts", default="1000,10000", help="MCTSBot simulation counts ('' none)")
    p.add_argument("--mcts-positions", type=int, default=200)
    p.add_argument("--sets", default=",".join(cs.SET_NAMES))
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--solver", action=argparse.BooleanOptionalAction, default=None,
                   help="the agent's search with the MCTS-solver (default: as the run trained)")
    p.add_argument("--graph-search", action=argparse.BooleanOptionalAction, default=None,
                   help="the agent's search as a graph, transpositions sharing a node "
                   "(default: as the run trained)")
    p.add_argument("--search-symmetry", choices=SEARCH_SYMMETRIES, default=None,
                   help="the agent's network under the board's symmetries: one at random "
                   "per node, or the average of the board and its mirror (default: as "
                   "the run trained)")
    p.add_argument("--ensemble", default="",
                   help="other runs of the same network, separated by commas: their newest "
                   "checkpoints join --run-dir's in one averaged network (probabilities "
                   "and values; jaxpuct.envs.ensemble); RUN@STEP for checkpoint STEP")
    p.add_argument("--data-dir", default=cs.DATA_DIR,
                   help="the set files (default: the shipped ones; another seed's from "
                   "python -m benchmarks.connect_four_sets --generate --data-dir)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    sims = [int(x) for x in a.simulations.split(",") if x.strip()]
    mcts = [int(x) for x in a.mcts.split(",") if x.strip()]
    names = [n for n in a.sets.split(",") if n in cs.available(a.data_dir)]
    from benchmarks.connect_four_probe import Probe
    from jaxpuct.alphazero.rundir import read_json_lines
    probe = Probe(a.run_dir, [s for s in sims if s > 0], a.batch, solver=a.solver,
                  graph_search=a.graph_search, search_symmetry=a.search_symmetry,
                  ensemble=arena.split_run_dirs(a.ensemble))
    if a.steps is not None:
        steps = checkpoint_steps(a.steps, probe.steps())
    else:
        steps = [a.step if a.step is not None else probe.steps()[-1]]
    solve = probe.solver
    count = a.positions or None
    sets = {}
    for name in names:
        s = cs.load(name, a.data_dir)
        if s.moves:
            sets[name] = (s, *set_states(s, count))
        else:
            print(f"{name}: no positions")
    train_seconds = {}
    metrics_path = os.path.join(a.run_dir, "metrics.jsonl")
    if os.path.exists(metrics_path):
        train_seconds = {r["iteration"]: r.get("train_seconds")
                         for r in read_json_lines(metrics_path)}
    sym = probe.search_symmetry
    print(f"run {a.run_dir}, checkpoints {steps}; policy {probe.config.policy}"
          f"{', MCTS-solver' if solve else ''}{', graph search' if probe.graph_search else ''}"
          f"{'' if sym == 'none' else f', symmetries: {sym}'}"
          + "".join(f", with {d} (checkpoint {step})" for d, step, _ in probe.members))
    curve = []
    for step in steps:
        params = probe.params(step)
        print(f"checkpoint {step} (training seconds {train_seconds.get(step)})")
        print("| set | player | positions | keeps value | strong-optimal | critical | "
              "keeps (critical) | optimal (critical) | seconds |")
        print("|---|---|---|---|---|---|---|---|---|")
        results = []
        for name, (s, state, legal) in sets.items():
            scores_ = s.scores[:len(legal)]
            for k, (act, seconds) in agent_actions(probe, params, state, legal, sims).items():
                r = summarise(scores_, act)
                player = "prior" if k == 0 else f"search S={k}"
                print(_row(name, player, r, seconds), flush=True)
                results.append({"set": name, "player": player, **r})
            for m in mcts if step == steps[-1] else ():
                start = time.perf_counter()
                act = mcts_actions(s, m, a.mcts_positions, a.seed)
                r = summarise(s.scores[:len(act)], act)
                player = f"MCTSBot({m})"
                print(_row(name, player, r, time.perf_counter() - start), flush=True)
                results.append({"set": name, "player": player, **r})
        curve.append({"step": step, "train_seconds": train_seconds.get(step),
                      "results": results})
    if a.json:
        # One checkpoint: the record as before; several: one entry per checkpoint.
        settings = {"solver": solve, "graph_search": probe.graph_search,
                    "search_symmetry": sym, "data_dir": os.path.relpath(a.data_dir),
                    "ensemble": [{"run_dir": d, "step": step} for d, step, _ in probe.members]}
        record = ({"run_dir": a.run_dir, "step": steps[0], **settings,
                   "results": curve[0]["results"]}
                  if a.steps is None
                  else {"run_dir": a.run_dir, **settings, "checkpoints": curve})
        with open(a.json, "w") as f:
            json.dump(record, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

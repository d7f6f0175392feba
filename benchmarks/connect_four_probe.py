"""How well each checkpoint of a connect-four run judges end-game positions, against
exact game-theoretic values.

The positions: ``--positions`` random non-terminal end-games with
``--min-empty .. --max-empty`` empty cells, half from games where both sides take
an immediate win or block an immediate loss, half from uniformly random games
(:func:`jaxpuct.testing.connect_four.endgame_positions`), solved exactly by the
alpha-beta solver of :mod:`jaxpuct.testing.connect_four` and cached in an ``.npz``
(``--cache``; default ``RUN/probe/``). No OpenSpiel needed.

For every checkpoint in ``RUN/checkpoints/`` (oldest first), with the network
``apply_fn(params, obs) -> (logits [B, 7], value [B])`` the run trains:

* ``value_mse``: mean of ``(v - v*)^2``, ``v`` the raw network value and ``v*``
  the exact value (+1/0/-1) for the player to move (also per exact class,
  ``mse_win`` ..., and the correlation ``value_corr``; printed once for scale:
  the MSE of a constant 0 and of the best constant);
* ``sign_acc``: share where ``v`` classified as won (``v > 1/3``), drawn or lost
  (``v < -1/3``) matches ``v*``; also per exact class (``recall_win`` ...);
* ``prior_opt``: share where the prior's argmax (over legal moves) is optimal, a
  move whose exact value equals the position's; ``prior_opt_critical``: the same
  over the positions where some legal move is not optimal (printed after ``|``);
* ``search_opt[S]`` for each ``--simulations S > 0``: share where the run's search
  (its policy, PUCT or Gumbel, and its graph setting) with ``S`` simulations, no
  root noise and temperature 0 (the most visited move; Gumbel: its greedy choice)
  picks an optimal move, as in ``Trainer.act`` (and ``search_opt_critical``).

Context printed once: the exact values' class shares, the share a uniform legal
move would score (``uniform_opt``), the share of critical positions, and of
positions with a win in one for the mover.

    python -m benchmarks.connect_four_probe --run-dir RUN [--positions 512]
        [--min-empty 8 --max-empty 14] [--simulations 0,32,256] [--json out.json]
        [--cache PATH] [--steps 20,40]
    python -m benchmarks.connect_four_probe --solver-speed   # the solver's speed
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.testing import connect_four as c4

# Network values within (-1/3, 1/3) count as a predicted draw.
_DRAW_BAND = 1.0 / 3.0


def _parse_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def default_cache(run_dir: str, n: int, min_empty: int, max_empty: int, seed: int) -> str:
    return os.path.join(run_dir, "probe",
                        f"c4_endgames_n{n}_e{min_empty}-{max_empty}_s{seed}.npz")


def check_states(state: Any, data: dict[str, np.ndarray]) -> None:
    """The replayed pgx states must match the set (observation, legal moves, not
    over): a cross-check of the solver's board layout against pgx's rules."""
    obs = np.asarray(state.observation)
    if not np.array_equal(obs, data["obs"]):
        bad = int(np.sum(np.any(obs != data["obs"], axis=(1, 2, 3))))
        raise RuntimeError(f"pgx observations differ from the set's on {bad} positions")
    if np.any(np.asarray(state.terminated)):
        raise RuntimeError("a position of the set is terminal in pgx")
    if not np.array_equal(np.asarray(state.legal_action_mask), data["legal"]):
        raise RuntimeError("pgx legal moves differ from the set's")


def position_summary(data: dict[str, np.ndarray]) -> dict[str, float]:
    value, mv = data["value"], data["move_values"]
    optimal = mv == value[:, None]
    return {"positions": int(value.size),
            "win": float(np.mean(value == 1)), "draw": float(np.mean(value == 0)),
            "loss": float(np.mean(value == -1)),
            "uniform_opt": float(np.mean(optimal.sum(1) / data["legal"].sum(1))),
            "critical": float(np.mean(critical(data))),
            "immediate_win": float(np.mean([
                any(board.wins(col) for col in np.flatnonzero(board.legal()))
                for board in map(c4.board_from_pgx_obs, data["obs"])])),
            "mean_optimal_moves": float(np.mean(optimal.sum(1))),
            "mean_legal_moves": float(np.mean(data["legal"].sum(1))),
            # Value MSE of constant predictions: 0, and the best constant (the mean).
            "mse_zero": float(np.mean(value.astype(np.float64) ** 2)),
            "mse_mean": float(np.var(value.astype(np.float64)))}


def value_metrics(value: np.ndarray, exact: np.ndarray) -> dict[str, float]:
    """``value [n]`` network values against ``exact [n]`` (+1/0/-1)."""
    predicted = np.where(value > _DRAW_BAND, 1, np.where(value < -_DRAW_BAND, -1, 0))
    out = {"value_mse": float(np.mean((value - exact) ** 2)),
           "sign_acc": float(np.mean(predicted == exact)),
           "mean_value": float(np.mean(value)),
           "value_corr": (float(np.corrcoef(value, exact)[0, 1])
                          if np.std(value) > 0 and np.std(exact) > 0 else None)}
    for name, cls in (("win", 1), ("draw", 0), ("loss", -1)):
        sel = exact == cls
        out[f"recall_{name}"] = float(np.mean(predicted[sel] == cls)) if sel.any() else None
        out[f"mse_{name}"] = float(np.mean((value[sel] - cls) ** 2)) if sel.any() else None
    return out


def critical(data: dict[str, np.ndarray]) -> np.ndarray:
    """``[n]`` bool: positions where some legal move is not optimal (elsewhere every
    move is right, and a move choice says nothing)."""
    optimal = data["move_values"] == data["value"][:, None]
    return np.any(data["legal"] & ~optimal, axis=1)


def optimal_share(actions: np.ndarray, data: dict[str, np.ndarray]) -> tuple[float, float]:
    """Share of positions where ``actions [n]`` is an optimal move: over all, and
    over the :func:`critical` ones."""
    good = data["move_values"][np.arange(actions.size), actions] == data["value"]
    crit = critical(data)
    return float(np.mean(good)), float(np.mean(good[crit])) if crit.any() else None


class Probe:
    """The run's network and searches, compiled once for all checkpoints."""

    def __init__(self, run_dir: str, simulations: list[int], batch: int,
                 solver: bool | None = None, graph_search: bool | None = None,
                 search_symmetry: str | None = None, ensemble: Sequence[str] = ()):
        """``ensemble``: other runs of the same network whose newest checkpoints
        join this run's in an averaged network (:mod:`jaxpuct.envs.ensemble`);
        :meth:`params` then gives the stacked parameters, this run's first."""
        from jaxpuct.alphazero import arena, checkpoints, selfplay
        from jaxpuct.alphazero.trainer import Trainer
        from jaxpuct.envs import ensemble as ensembles
        self.run_dir = run_dir
        self.config = checkpoints.load_config(run_dir)
        if self.config.game != "connect_four":
            raise SystemExit(f"{run_dir} is a {self.config.game} run, not connect_four")
        self.trainer = Trainer(self.config, devices=jax.devices()[:1])
        self.batch = batch
        try:
            self.members = arena.ensemble_members(ensemble, self.config)
        except ValueError as err:
            raise SystemExit(f"--ensemble: {err}") from err
        apply_fn = self.trainer.apply_fn
        if self.members:
            apply_fn = ensembles.ensemble_apply(apply_fn)
        # The network every search of this probe evaluates (the ensemble's mean when
        # there are members), before any board symmetry: (params, obs) -> (logits, value).
        self.network_fn = apply_fn
        self.apply = jax.jit(apply_fn)
        # None: as the run trained.
        self.solver = self.config.solver if solver is None else solver
        self.graph_search = self.config.graph_search if graph_search is None else graph_search
        self.search_symmetry = (self.config.search_symmetry if search_symmetry is None
                                else search_symmetry)
        if self.search_symmetry == "average":  # the prior the search sees
            from jaxpuct.envs import symmetries
            from jaxpuct.envs.pgx_games import symmetries as game_symmetries
            self.apply = jax.jit(symmetries.symmetric_apply(
                apply_fn, game_symmetries("connect_four")))
        self.search = {}
        for s in simulations:
            # Automatic capacity (S + 1 nodes) and no reuse: one fresh search.
            config = dataclasses.replace(self.config, num_simulations=s, max_nodes=0,
                                         reuse_tree=False, solver=self.solver,
                                         graph_search=self.graph_search,
                                         search_symmetry=self.search_symmetry)
            fns = selfplay.make_search_fns(config, self.trainer.env, apply_fn,
                                           self.trainer.game.num_actions)
            self.search[s] = jax.jit(
                lambda params, keys, state, fns=fns: selfplay.search(
                    fns, params, keys, state, dirichlet_fraction=0.0,
                    temperature=jnp.zeros((keys.shape[0],), jnp.float32)).action)

    def params(self, step: int) -> Any:
        """This run's network at ``step``, stacked with the ensemble's members when
        there are any (leaves ``[M, ...]``, this run's first)."""
        params = self.network(step)[1]
        if not self.members:
            return params
        from jaxpuct.envs import ensemble as ensembles
        return ensembles.stack_params([params] + [p for _, _, p in self.members])

    def steps(self) -> list[int]:
        """The run's checkpoints; an exported network's one iteration."""
        from jaxpuct.alphazero import arena, checkpoints
        if checkpoints.is_network_dir(self.run_dir):
            return [arena.restore_network(self.run_dir, self.trainer)[0]]
        return sorted(checkpoints.available_steps(self.run_dir))

    def network(self, step: int) -> tuple[int, Any]:
        """``(iteration, params)`` of checkpoint ``step`` (or of the exported network,
        :func:`jaxpuct.alphazero.arena.restore_network`)."""
        from jaxpuct.alphazero import arena
        return arena.restore_network(self.run_dir, self.trainer, step)

    def _chunks(self, n: int):
        for start in range(0, n, self.batch):
            yield slice(start, min(n, start + self.batch))

    def evaluate(self, params: Any, state: Any, data: dict[str, np.ndarray]) -> dict[str, Any]:
        n = data["value"].size
        obs = state.observation
        logits, value = [], []
        for sl in self._chunks(n):
            lg, v = self.apply(params, obs[sl])
            logits.append(np.asarray(lg)), value.append(np.asarray(v))
        logits, value = np.concatenate(logits), np.concatenate(value).astype(np.float64)
        prior_action = np.argmax(np.where(data["legal"], logits, -np.inf), axis=1)
        out = value_metrics(value, data["value"].astype(np.float64))
        out["prior_opt"], out["prior_opt_critical"] = optimal_share(prior_action, data)
        out["search_opt"], out["search_opt_critical"] = {}, {}
        out["search_seconds"] = {}
        keys = jax.random.split(jax.random.key(0), n)
        for s, act in self.search.items():
            start = time.perf_counter()
            actions = np.concatenate([
                np.asarray(act(params, keys[sl], jax.tree.map(lambda x, sl=sl: x[sl], state)))
                for sl in self._chunks(n)])
            out["search_seconds"][str(s)] = time.perf_counter() - start
            if not np.all(data["legal"][np.arange(n), actions]):
                raise RuntimeError(f"the search with S = {s} played an illegal move")
            out["search_opt"][str(s)], out["search_opt_critical"][str(s)] = optimal_share(
                actions, data)
        return out


def _fmt(x: float | None) -> str:
    return "   -  " if x is None else f"{x:6.3f}"


def print_head(sims: list[int]) -> None:
    print(f"{'step':>6} {'iter':>6} {'v_mse':>6} {'sign':>6} {'r_win':>6} {'r_draw':>6} "
          f"{'r_loss':>6} {'prior':>6}" + "".join(f" {'S=' + str(s):>6}" for s in sims)
          + f" | {'prior':>6}" + "".join(f" {'S=' + str(s):>6}" for s in sims))


def print_row(r: dict[str, Any], sims: list[int]) -> None:
    print(f"{r['step']:6d} {r['iteration']:6d} {_fmt(r['value_mse'])} {_fmt(r['sign_acc'])} "
          f"{_fmt(r['recall_win'])} {_fmt(r['recall_draw'])} {_fmt(r['recall_loss'])} "
          f"{_fmt(r['prior_opt'])}" + "".join(f" {_fmt(r['search_opt'][str(s)])}" for s in sims)
          + f" | {_fmt(r['prior_opt_critical'])}"
          + "".join(f" {_fmt(r['search_opt_critical'][str(s)])}" for s in sims), flush=True)


def solver_speed(empties: list[int], count: int, seed: int) -> list[dict[str, float]]:
    """Solver timing at each number of empty cells: ``count`` positions each (half
    heuristic, half uniform play), a fresh table per position, ``move_values``
    (all seven moves) and ``solve`` (the value only)."""
    rng = np.random.default_rng(seed)
    out = []
    for e in empties:
        row: dict[str, float] = {"empty": e, "positions": count}
        boards = [c4.board_from_moves(c4._random_position(e, i % 2 == 0, rng))
                  for i in range(count)]
        for name in ("solve", "move_values"):
            times, nodes = [], []
            for board in boards:
                solver = c4.Solver()
                start = time.perf_counter()
                getattr(solver, name)(board)
                times.append(time.perf_counter() - start)
                nodes.append(solver.nodes)
            t = np.array(times)
            row.update({f"{name}_median_ms": 1e3 * float(np.median(t)),
                        f"{name}_mean_ms": 1e3 * float(t.mean()),
                        f"{name}_max_ms": 1e3 * float(t.max()),
                        f"{name}_nodes_per_s": float(np.sum(nodes) / t.sum())})
        out.append(row)
        print(f"  {e:2d} empty: solve median {row['solve_median_ms']:.2f} ms, mean "
              f"{row['solve_mean_ms']:.2f} ms, max {row['solve_max_ms']:.1f} ms; move_values "
              f"median {row['move_values_median_ms']:.2f} ms, mean "
              f"{row['move_values_mean_ms']:.2f} ms, max {row['move_values_max_ms']:.1f} ms; "
              f"{row['move_values_nodes_per_s']:.0f} nodes/s", flush=True)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", help="a connect_four run of examples.selfplay")
    parser.add_argument("--positions", type=int, default=512)
    parser.add_argument("--min-empty", type=int, default=8)
    parser.add_argument("--max-empty", type=int, default=14)
    parser.add_argument("--heuristic-fraction", type=float, default=0.5,
                        help="share of positions from win/block heuristic play (the rest "
                             "from uniform play)")
    parser.add_argument("--seed", type=int, default=0, help="of the position set")
    parser.add_argument("--simulations", type=_parse_ints, default=[0, 32, 256],
                        help="comma-separated; 0 = the raw prior only")
    parser.add_argument("--steps", type=_parse_ints, default=None,
                        help="only these checkpoint steps (default: all)")
    parser.add_argument("--batch", type=int, default=256, help="positions per network call "
                        "and per search")
    parser.add_argument("--cache", help="the position set's .npz (default: "
                        "RUN/probe/c4_endgames_n<N>_e<MIN>-<MAX>_s<SEED>.npz)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--solver-speed", action="store_true",
                        help="time the solver at 8, 10, 12, 14 empty cells and stop")
    parser.add_argument("--speed-positions", type=int, default=100)
    args = parser.parse_args(argv)

    if args.solver_speed:
        print(f"exact solver, {args.speed_positions} positions per row, fresh table each:")
        rows = solver_speed([8, 10, 12, 14], args.speed_positions, args.seed)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"solver_speed": rows}, f, indent=1)
        return {"solver_speed": rows}
    if not args.run_dir:
        parser.error("--run-dir is required (or --solver-speed)")
    sims = sorted(set(s for s in args.simulations if s > 0))
    if any(s < 0 for s in args.simulations):
        parser.error("--simulations must be >= 0")

    cache = args.cache or default_cache(args.run_dir, args.positions, args.min_empty,
                                        args.max_empty, args.seed)
    start = time.perf_counter()
    data = c4.load_or_make_endgame_set(cache, args.positions, args.min_empty, args.max_empty,
                                       args.seed, args.heuristic_fraction)
    summary = position_summary(data)
    print(f"{summary['positions']} positions with {args.min_empty}-{args.max_empty} empty "
          f"cells ({cache}, {time.perf_counter() - start:.1f} s): exact values win "
          f"{summary['win']:.3f} / draw {summary['draw']:.3f} / loss {summary['loss']:.3f} for "
          f"the player to move; {summary['mean_optimal_moves']:.2f} optimal of "
          f"{summary['mean_legal_moves']:.2f} legal moves on average (a uniform move is "
          f"optimal {summary['uniform_opt']:.3f}); critical (some legal move not optimal) "
          f"{summary['critical']:.3f}; an immediate win for the mover in "
          f"{summary['immediate_win']:.3f}; value MSE of a constant 0: "
          f"{summary['mse_zero']:.3f}, of the best constant: {summary['mse_mean']:.3f}",
          flush=True)

    probe = Probe(args.run_dir, sims, args.batch)
    state = c4.pgx_states(data["moves"], probe.trainer.game.env)
    check_states(state, data)
    steps = probe.steps()
    if args.steps is not None:
        steps = [s for s in steps if s in set(args.steps)]
    if not steps:
        raise SystemExit(f"no checkpoint in {args.run_dir}/checkpoints"
                         + (f" among steps {args.steps}" if args.steps else ""))
    c = probe.config
    print(f"run {args.run_dir}: {c.network} network, {c.policy} search, checkpoints "
          f"{', '.join(map(str, steps))}.\nColumns: value MSE, sign accuracy and its "
          f"recall per exact class; share of optimal moves of the prior's argmax and of "
          f"the greedy search (no noise) at each S, over all positions | over the critical "
          f"ones", flush=True)
    from jaxpuct.alphazero.checkpoints import CheckpointError
    print_head(sims)
    rows = []
    for step in steps:
        try:
            iteration, params = probe.network(step)
        except CheckpointError as err:
            print(f"warning: skipping checkpoint {step}: {err}", file=sys.stderr)
            continue
        row = {"step": step, "iteration": iteration}
        row.update(probe.evaluate(params, state, data))
        rows.append(row)
        print_row(row, sims)
    result = {"run_dir": os.path.abspath(args.run_dir), "cache": os.path.abspath(cache),
              "min_empty": args.min_empty, "max_empty": args.max_empty, "seed": args.seed,
              "heuristic_fraction": args.heuristic_fraction, "simulations": sims,
              "positions": summary, "checkpoints": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()

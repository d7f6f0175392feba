"""Play-time settings of one trained connect-four network's search, against perfect
play: the same checkpoint searched with each setting below on a position set of
:mod:`benchmarks.connect_four_sets`, scored as :mod:`benchmarks.connect_four_perfect`
scores it (the share of moves that keep the game-theoretic value, the share that are
strong-optimal, 95% Wilson intervals).

The searches are ``jaxpuct.alphazero_policy`` with the run's network, no root noise,
temperature 0 and the run's other settings, changed one keyword at a time:

* ``base``: the defaults (``PUCTConfig()``, the most visited move);
* ``lcb``: the move of the highest lower confidence bound (``final_move="lcb"``;
  KataGo's LCB move selection);
* ``solver``: the MCTS-solver (Winands et al. 2008); ``graph``: Monte-Carlo graph
  search (Czech et al. 2021), transpositions sharing a node; ``graph_solver``: both;
  ``graph_solver_nostop``: both, walks continuing through transpositions;
* ``c_init_2``, ``c_init_0.8``: the exploration constant; ``fpu_0``, ``fpu_0.4``:
  the first-play-urgency reduction inside the tree; ``value_weighted``: the
  value-weighted move; ``stdev``: KataGo's variance-scaled exploration
  (``utility_stdev_scale=0.85``);
* ``mirror_average``: the network evaluated as the average over the board and its
  left-right mirror at every node (``SelfPlayConfig.search_symmetry="average"``;
  twice the network's work, so ``base`` at twice the simulations is its equal-cost
  comparison); ``mirror_random``: one of the two drawn per node (AlphaGo's random
  symmetry; the network's work of ``base``); ``mirror_average_graph_solver``: the
  average with graph search and the solver.

    python -m benchmarks.connect_four_play_settings --run-dir runs/c4 \\
        [--settings base,graph_solver] [--simulations 256] [--set middle_medium] \\
        [--ensemble runs/c4_seed1,...] [--json out.json]

Only the search changes: a gain here is free for a user of the trained network, a
loss says which default to keep. ``--ensemble`` averages other runs of the same
network with the run's (``jaxpuct.envs.ensemble``), the network every setting then
searches with.
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
import numpy as np

from benchmarks import connect_four_perfect as cp
from benchmarks import connect_four_sets as cs


@dataclasses.dataclass(frozen=True)
class Setting:
    """One play-time setting.

    Attributes:
      keywords: to ``jaxpuct.alphazero_policy``.
      symmetry: how the search's network sees the board
        (``SelfPlayConfig.search_symmetry``).
    """

    keywords: dict[str, Any] = dataclasses.field(default_factory=dict)
    symmetry: str = "none"


def settings() -> dict[str, Setting]:
    """Each setting by name (module docstring)."""
    from jaxpuct import PUCTConfig
    from jaxpuct.graph import GraphConfig
    graph_solver = {"graph": GraphConfig(), "solver": True}
    return {
        "base": Setting(),
        "lcb": Setting({"final_move": "lcb"}),
        "solver": Setting({"solver": True}),
        "graph": Setting({"graph": GraphConfig()}),
        "graph_solver": Setting(graph_solver),
        "graph_solver_nostop": Setting({"graph": GraphConfig(stop_at_transposition=False),
                                        "solver": True}),
        "solver_lcb": Setting({"solver": True, "final_move": "lcb"}),
        "c_init_2": Setting({"selection": PUCTConfig(c_init=2.0)}),
        "c_init_0.8": Setting({"selection": PUCTConfig(c_init=0.8)}),
        "fpu_0": Setting({"selection": PUCTConfig(fpu_reduction=0.0)}),
        "fpu_0.4": Setting({"selection": PUCTConfig(fpu_reduction=0.4)}),
        "value_weighted": Setting({"value_weighted": True}),
        "stdev": Setting({"selection": PUCTConfig(utility_stdev_scale=0.85)}),
        "mirror_average": Setting(symmetry="average"),
        "mirror_random": Setting(symmetry="random"),
        "mirror_average_graph_solver": Setting(graph_solver, symmetry="average"),
    }


def setting_search(probe: Any, simulations: int, setting: Setting) -> Any:
    """The run's search with ``setting``, jitted: ``search(params, keys [N], state
    [N]) -> PolicyOutput`` (``action [N]``; ``search_tree``, whose summary has the
    root's visit counts ``[N, 7]``). With the probe's ensemble, ``params`` are
    ``probe.params(step)``, the members' stacked."""
    import jaxpuct
    from jaxpuct.alphazero import selfplay

    config = dataclasses.replace(probe.config, num_simulations=simulations, max_nodes=0,
                                 reuse_tree=False, solver=False, graph_search=False,
                                 search_symmetry=setting.symmetry)
    fns = selfplay.make_search_fns(config, probe.trainer.env, probe.network_fn,
                                   probe.trainer.game.num_actions)

    @jax.jit
    def search(params, keys, st):
        root = fns.root_fn(params, keys[0], st)
        return jaxpuct.alphazero_policy(
            params, keys, root, fns.recurrent_fn, simulations, dirichlet_fraction=0.0,
            temperature=0.0, max_nodes=config.capacity, **setting.keywords)

    return search


def setting_actions(probe: Any, params: Any, state: Any, count: int, simulations: int,
                    setting: Setting) -> np.ndarray:
    """``[count]`` moves of the run's search with ``setting`` on ``state``
    (``count`` positions), in chunks of the probe's batch."""
    search = setting_search(probe, simulations, setting)
    keys = jax.random.split(jax.random.key(0), count)
    return np.concatenate([
        np.asarray(search(params, keys[sl], jax.tree.map(lambda x, sl=sl: x[sl], state)).action)
        for sl in probe._chunks(count)])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--run-dir", required=True)
    p.add_argument("--step", type=int, default=None, help="checkpoint step (default: newest)")
    p.add_argument("--settings", default=",".join(settings()),
                   help="names separated by commas (module docstring)")
    p.add_argument("--simulations", type=int, default=256)
    p.add_argument("--set", default="middle_medium", choices=cs.SET_NAMES)
    p.add_argument("--positions", type=int, default=0, help="the first this many (0: all)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--data-dir", default=cs.DATA_DIR,
                   help="the set files (default: the shipped ones)")
    p.add_argument("--ensemble", default="",
                   help="other runs of the same network, separated by commas: their newest "
                   "checkpoints join --run-dir's in one averaged network "
                   "(jaxpuct.envs.ensemble); RUN@STEP for checkpoint STEP")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    known = settings()
    names = [n.strip() for n in a.settings.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        p.error(f"--settings: unknown {unknown}; expected names from {sorted(known)}")
    if a.simulations < 1:
        p.error(f"--simulations must be >= 1, got {a.simulations}")
    from benchmarks.connect_four_probe import Probe
    from jaxpuct.alphazero import arena
    probe = Probe(a.run_dir, [], a.batch, ensemble=arena.split_run_dirs(a.ensemble))
    if probe.config.policy != "alphazero":
        raise SystemExit(f"{a.run_dir} trained policy {probe.config.policy!r}; these "
                         f"settings are alphazero_policy's")
    step = a.step if a.step is not None else probe.steps()[-1]
    params = probe.params(step)
    position_set = cs.load(a.set, a.data_dir)
    state, legal = cp.set_states(position_set, a.positions or None)
    scores = position_set.scores[:len(legal)]
    print(f"run {a.run_dir}, checkpoint {step}; {a.set}, {len(legal)} positions, "
          f"S = {a.simulations}")
    print("| setting | keeps value | strong-optimal | keeps (critical) | seconds |")
    print("|---|---|---|---|---|")
    rows = []
    for name in names:
        start = time.perf_counter()
        actions = setting_actions(probe, params, state, len(legal), a.simulations, known[name])
        seconds = time.perf_counter() - start
        if not np.all(legal[np.arange(len(legal)), actions]):
            raise RuntimeError(f"setting {name} played an illegal move")
        r = cp.summarise(scores, actions)
        print(f"| {name} | {r['keeps']:.3f} [{r['keeps_ci'][0]:.3f}, {r['keeps_ci'][1]:.3f}] | "
              f"{r['optimal']:.3f} | {r['keeps_critical']:.3f} | {seconds:.0f} |", flush=True)
        rows.append({"setting": name, "seconds": seconds, **r, "actions": actions.tolist()})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"run_dir": a.run_dir, "step": step, "set": a.set,
                       "ensemble": [{"run_dir": d, "step": st} for d, st, _ in probe.members],
                       "data_dir": os.path.relpath(a.data_dir),
                       "simulations": a.simulations, "results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

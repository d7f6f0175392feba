"""Network evaluations per move at equal decision quality.

Where a real network is most of a self-play step's time, the figure that matters
is how many positions the network must evaluate for a move of a given quality.
This benchmark counts them **from the tree** -- the new nodes a search stored
that are not terminal (a terminal's value comes from the rules), the root
included when the search starts from a fresh root -- rather than from ``S``:
graph search stores a transposed state once, the solver stops walking into
proven subtrees and stops a search whose root is proven, tree reuse starts from
the nodes it kept, and a walk that ends on a terminal already stored evaluates
nothing. (jaxpuct's lockstep engine still makes one batched call per step of
``K`` walks; the count is what a search needs, which is what an evaluation cache
or an engine that skips the rows it does not need would pay.)

Tic-tac-toe (:mod:`jaxpuct.testing.tictactoe`, exact minimax), the decision is
the move at temperature 0 (most visits; with the solver its proven move), no
root noise, the default PUCT rule:

* on every non-terminal position (4,520): ``tree`` search, ``graph`` search
  (``GraphConfig()``, the exact state hash), the ``solver``, both together
  (``graph+solver``: proofs shared through transpositions), and ``K = 4`` and
  ``K = 16`` leaves per step (virtual loss), each at every ``S`` of ``--sims``:
  the share of minimax-optimal moves against the mean evaluations per move;
* ``reuse`` along games: ``--games`` games from the empty board, each ply
  searched twice on the same position, from a fresh root (``fresh``) and from
  the subtree the previous ply's reused search kept (``reuse``,
  :func:`jaxpuct.subtree_or_init`, capacity ``2 S + 1``); the move played is
  drawn from the reused search's visit counts (temperature 1, as in self-play),
  seeded; every non-terminal position of every game counts.

Two fixed evaluators (``--evaluators``): ``uniform`` (uniform prior, value 0:
everything comes from the exact terminals) and ``heuristic``, a small
deterministic one (:func:`heuristic`): prior logits 0.5 per line through the cell
still open for either player, value ``tanh(0.25 (s_me - s_opp))`` with ``s`` the
stones a player has in the lines still open for them.

Then, per feature, the evaluations per move at which the share of optimal moves
first reaches each of ``--levels`` (linear in ``log(evaluations)`` between the
two measured budgets around it; ``>`` the largest measured when never reached).

``--c4 N``: connect four (pgx rules, uniform prior and zero value, so only
terminals inform the search) on ``N`` seeded middle-game positions
(:func:`jaxpuct.testing.connect_four.endgame_positions` with ``--c4-empty``
empty cells, solved exactly; of ``2 N`` made, the first ``N`` where some legal
move gives the value away): the share of value-keeping moves (a move whose exact
value equals the position's) against evaluations per move, for tree, graph,
solver and ``K`` leaves.

    taskset -c 1 python -m benchmarks.network_calls [--sims 8,16,32,64,128,256,512]
        [--features tree,graph,solver,graph+solver,K=4,K=16,reuse] [--evaluators uniform,heuristic]
        [--games 512] [--levels 0.97,0.99] [--c4 64] [--c4-sims 64,256,1024]
    python -m benchmarks.network_calls --levels-from out1.md out2.md [--sims ...]
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct
from jaxpuct.testing import tictactoe as ttt

# ``[9, 8]``: cell i lies on line l.
_INCIDENCE = np.zeros((ttt.NUM_ACTIONS, len(ttt.LINES)), np.float32)
for _line, _cells in enumerate(ttt.LINES):
    _INCIDENCE[_cells, _line] = 1.0


def heuristic(state: ttt.State) -> tuple[jax.Array, jax.Array]:
    """``(prior logits [B, 9], value [B])`` of the fixed heuristic evaluator
    (module docstring), from the view of the player to move (the relative board);
    the value is 0 at a terminal state."""
    lines = state.board.astype(jnp.int32)[:, ttt.LINES]  # [B, 8, 3]
    mine = jnp.sum(lines == 1, axis=-1)
    theirs = jnp.sum(lines == -1, axis=-1)
    open_mine, open_theirs = theirs == 0, mine == 0
    score = (jnp.sum(jnp.where(open_mine, mine, 0), axis=-1)
             - jnp.sum(jnp.where(open_theirs, theirs, 0), axis=-1))
    value = jnp.where(state.terminal, 0.0, jnp.tanh(0.25 * score.astype(jnp.float32)))
    logits = 0.5 * (open_mine | open_theirs).astype(jnp.float32) @ jnp.asarray(_INCIDENCE).T
    return logits, value


def search_fns(evaluator: str, with_hash: bool):
    """``(root_fn(state), recurrent_fn)`` on tic-tac-toe with ``evaluator``."""
    base = ttt.make_recurrent_fn(with_hash=with_hash)
    if evaluator == "uniform":
        return functools.partial(ttt.root, with_hash=with_hash), base
    if evaluator != "heuristic":
        raise ValueError(f"evaluator must be 'uniform' or 'heuristic', got {evaluator!r}")

    def root_fn(state):
        logits, value = heuristic(state)
        return ttt.root(state, with_hash=with_hash).replace(prior_logits=logits, value=value)

    def recurrent_fn(params, key, action, state):
        out, new_state = base(params, key, action, state)
        logits, value = heuristic(new_state)
        return out.replace(prior_logits=logits, value=value), new_state

    return root_fn, recurrent_fn


def evaluated_nodes(tree) -> jax.Array:
    """``[B]`` int32: the tree's used nodes that are not terminal (each one a
    position the network evaluated; the root included)."""
    used = jnp.arange(tree.max_nodes)[None, :] < tree.num_nodes[:, None]
    return jnp.sum(used & ~tree.node_terminal, axis=-1, dtype=jnp.int32)


def _options(feature: str) -> dict:
    """``alphazero_policy`` keywords of a feature (``a+b``: both)."""
    options: dict = {}
    for part in feature.split("+"):
        if part == "graph":
            options["graph"] = jaxpuct.GraphConfig()
        elif part == "solver":
            options["solver"] = True
        elif part.startswith("K="):
            options["leaves_per_step"] = int(part[2:])
        elif part != "tree":
            raise ValueError(f"unknown feature {feature!r}")
    return options


def search(state: ttt.State, *, feature: str, evaluator: str, sims: int):
    """One greedy search per position of ``state [B]`` with ``feature``'s options:
    the ``PolicyOutput``."""
    options = _options(feature)
    root_fn, recurrent_fn = search_fns(evaluator, "graph" in options)
    return jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), root_fn(state), recurrent_fn,
                                    sims, dirichlet_fraction=0.0, temperature=0.0, **options)


@functools.partial(jax.jit, static_argnames=("feature", "evaluator", "sims"))
def decide(state: ttt.State, *, feature: str, evaluator: str, sims: int):
    """:func:`search`'s ``(action [B], evaluations [B])``."""
    out = search(state, feature=feature, evaluator=evaluator, sims=sims)
    return out.action, evaluated_nodes(out.search_tree)


def oracle_curve(feature: str, evaluator: str, budgets: list[int]) -> list[dict]:
    """Share of optimal moves and evaluations per move over every non-terminal
    tic-tac-toe position, at each budget ``S`` the feature can run."""
    positions = ttt.all_positions()
    state = ttt.batch(positions)
    codes = np.array([ttt.code(p) for p in positions])
    optimal = ttt.optimal_move_table()
    k = _options(feature).get("leaves_per_step", 1)
    rows = []
    for sims in budgets:
        if sims % k:
            continue
        start = time.process_time()
        action, evals = jax.device_get(decide(state, feature=feature, evaluator=evaluator,
                                              sims=sims))
        rows.append(dict(feature=feature, evaluator=evaluator, sims=sims, steps=sims // k,
                         optimal=float(np.mean(optimal[codes, action])),
                         evals=float(np.mean(evals)), positions=len(positions),
                         cpu_s=time.process_time() - start))
    return rows


@functools.partial(jax.jit, static_argnames=("evaluator", "sims"))
def _game_ply(state, tree, move, key, *, evaluator: str, sims: int):
    """One ply of the reuse games: the fresh and the reused search of ``state``
    (``tree``: the previous reused tree and the ``move [B]`` played, or ``None``
    at the first ply), and the move drawn from the reused search's visits."""
    root_fn, recurrent_fn = search_fns(evaluator, False)
    root = root_fn(state)
    kept = jnp.zeros(state.player.shape, jnp.int32)
    if tree is not None:
        tree, reused = jaxpuct.subtree_or_init(tree, move, root)
        kept = jnp.where(reused, evaluated_nodes(tree), 0)
    common = dict(dirichlet_fraction=0.0, temperature=0.0)
    fresh = jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), root, recurrent_fn, sims,
                                     **common)
    again = jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), root, recurrent_fn, sims,
                                     tree=tree, max_nodes=2 * sims + 1, **common)
    visits = again.search_tree.summary().visit_counts
    played = jax.random.categorical(key, jnp.where(visits > 0, jnp.log(visits), -jnp.inf))
    played = jnp.where(state.terminal, -1, played)
    return (fresh.action, evaluated_nodes(fresh.search_tree), again.action,
            evaluated_nodes(again.search_tree) - kept, again.search_tree, played)


def reuse_curve(evaluator: str, budgets: list[int], games: int, seed: int = 0) -> list[dict]:
    """Fresh and reused searches along ``games`` seeded self-play games (module
    docstring): per budget, the share of optimal moves and evaluations per move
    of each, over the same positions."""
    optimal = ttt.optimal_move_table()
    rows = []
    for sims in budgets:
        start = time.process_time()
        state, tree, move = ttt.initial(games), None, jnp.zeros((games,), jnp.int32)
        key = jax.random.PRNGKey(seed)
        stats = {"fresh": ([], []), "reuse": ([], [])}
        for _ in range(ttt.NUM_ACTIONS):
            live = ~np.asarray(state.terminal)
            if not live.any():
                break
            key, sub = jax.random.split(key)
            a_fresh, e_fresh, a_reuse, e_reuse, tree, move = _game_ply(
                state, tree, move, sub, evaluator=evaluator, sims=sims)
            codes = np.asarray(ttt.codes(state))[live]
            for name, a, e in (("fresh", a_fresh, e_fresh), ("reuse", a_reuse, e_reuse)):
                stats[name][0].append(optimal[codes, np.asarray(a)[live]])
                stats[name][1].append(np.asarray(e)[live])
            state = ttt.step(state, jnp.maximum(move, 0))[0]
        cpu_s = time.process_time() - start
        for name, (opt, evals) in stats.items():
            rows.append(dict(feature=name, evaluator=evaluator, sims=sims, steps=sims,
                             optimal=float(np.mean(np.concatenate(opt))),
                             evals=float(np.mean(np.concatenate(evals))),
                             positions=int(sum(len(o) for o in opt)), cpu_s=cpu_s))
    return rows


def evaluations_to_reach(rows: list[dict], level: float) -> str:
    """The evaluations per move where a feature's curve (rows sorted by budget)
    first reaches ``level``: linear in ``log(evaluations)`` between the two budgets
    around the crossing; ``> max`` when no budget reaches it."""
    prev = None
    for r in sorted(rows, key=lambda r: r["sims"]):
        if r["optimal"] >= level:
            if prev is None or prev["optimal"] >= level:
                return f"<= {r['evals']:.0f}"
            t = (level - prev["optimal"]) / (r["optimal"] - prev["optimal"])
            log_e = math.log(prev["evals"]) + t * (math.log(r["evals"]) - math.log(prev["evals"]))
            return f"{math.exp(log_e):.0f}"
        prev = r
    return f"> {max(r['evals'] for r in rows):.0f}" if rows else "-"


# ----------------------------------------------------------------- connect four


@functools.partial(jax.jit, static_argnames=("feature", "sims"))
def _c4_decide(state, *, feature: str, sims: int):
    from jaxpuct.envs import adapter
    from jaxpuct.envs.pgx_games import make_pgx_game
    from jaxpuct.testing.pure_search import zero_apply
    options = _options(feature)
    game = make_pgx_game("connect_four")  # its environment hashes every state
    apply_fn = zero_apply(game.num_actions)
    root = adapter.make_root_fn(apply_fn, game.environment)(None, jax.random.PRNGKey(0), state)
    recurrent_fn = adapter.make_recurrent_fn(apply_fn, game.environment)
    out = jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), root, recurrent_fn, sims,
                                   dirichlet_fraction=0.0, temperature=0.0, **options)
    return out.action, evaluated_nodes(out.search_tree)


def c4_curves(n: int, empty: tuple[int, int], features: list[str], budgets: list[int],
              seed: int = 0) -> list[dict]:
    """Share of value-keeping moves against evaluations per move on ``n`` seeded
    connect-four positions with ``empty`` empty cells (solved exactly)."""
    from jaxpuct.testing import connect_four as c4
    start = time.process_time()
    data = c4.endgame_positions(2 * n, min_empty=empty[0], max_empty=empty[1], seed=seed)
    solve_s = time.process_time() - start
    move_values = np.nan_to_num(data["move_values"], nan=np.inf)  # a full column: never
    # Only positions where some legal move gives the value away tell searches apart.
    keep = np.flatnonzero(np.any(move_values < data["value"][:, None], axis=-1))[:n]
    print(f"connect four: {2 * n} positions with {empty[0]}-{empty[1]} empty cells solved "
          f"in {solve_s:.0f} CPU s; {len(keep)} kept (some move loses value): values "
          f"+1/0/-1 {np.mean(data['value'][keep] == 1):.2f}/"
          f"{np.mean(data['value'][keep] == 0):.2f}/{np.mean(data['value'][keep] == -1):.2f}",
          flush=True)
    n = len(keep)
    value, move_values = data["value"][keep], move_values[keep]
    state = c4.pgx_states(data["moves"][keep])
    print_header()
    rows = []
    for feature in features:
        k = _options(feature).get("leaves_per_step", 1)
        for sims in budgets:
            if sims % k:
                continue
            start = time.process_time()
            action, evals = jax.device_get(_c4_decide(state, feature=feature, sims=sims))
            keeps = move_values[np.arange(n), action] == value
            rows.append(dict(feature=feature, evaluator="uniform", sims=sims, steps=sims // k,
                             optimal=float(np.mean(keeps)), evals=float(np.mean(evals)),
                             positions=n, cpu_s=time.process_time() - start))
            print_row(rows[-1])
    return rows


# ----------------------------------------------------------------- output


def print_header() -> None:
    print("| evaluator | feature | S | steps | positions | optimal share | evaluations / move "
          "| CPU s |")
    print("|---|---|---|---|---|---|---|---|", flush=True)


def print_row(r: dict) -> None:
    print(f"| {r['evaluator']} | {r['feature']} | {r['sims']} | {r['steps']} | "
          f"{r['positions']} | {r['optimal']:.4f} | {r['evals']:.1f} | {r['cpu_s']:.0f} |",
          flush=True)


def print_levels(rows: list[dict], levels: list[float]) -> None:
    print("\n| evaluator | feature | " + " | ".join(f"evaluations to {x:.1%}" for x in levels)
          + " |")
    print("|---|---|" + "---|" * len(levels))
    keys = list(dict.fromkeys((r["evaluator"], r["feature"]) for r in rows))
    for evaluator, feature in keys:
        curve = [r for r in rows if (r["evaluator"], r["feature"]) == (evaluator, feature)]
        print(f"| {evaluator} | {feature} | "
              + " | ".join(evaluations_to_reach(curve, x) for x in levels) + " |", flush=True)


def read_rows(paths: list[str], budgets: set[int] | None = None) -> list[dict]:
    """The result rows this benchmark printed into the files ``paths`` (its
    Markdown rows), those at ``budgets`` only if given; of rows repeated for one
    (evaluator, feature, S), the last."""
    rows: dict[tuple, dict] = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) != 8 or not cells[2].isdigit():
                    continue
                r = dict(evaluator=cells[0], feature=cells[1], sims=int(cells[2]),
                         steps=int(cells[3]), positions=int(cells[4]),
                         optimal=float(cells[5]), evals=float(cells[6]),
                         cpu_s=float(cells[7]))
                if budgets is None or r["sims"] in budgets:
                    rows[r["evaluator"], r["feature"], r["sims"]] = r
    return list(rows.values())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", default="8,16,32,64,128,256,512")
    parser.add_argument("--features", default="tree,graph,solver,graph+solver,K=4,K=16,reuse")
    parser.add_argument("--evaluators", default="uniform,heuristic")
    parser.add_argument("--games", type=int, default=512, help="reuse: games in lockstep")
    parser.add_argument("--levels", default="0.97,0.99")
    parser.add_argument("--c4", type=int, default=0, help="connect-four positions (0: none)")
    parser.add_argument("--c4-empty", default="20,24", help="min,max empty cells")
    parser.add_argument("--c4-sims", default="64,256,1024")
    parser.add_argument("--c4-features", default="tree,graph,solver,K=4,K=16")
    parser.add_argument("--levels-from", nargs="+", metavar="FILE",
                        help="print the levels table of the rows in these saved outputs "
                             "(at the --sims budgets) instead of searching")
    args = parser.parse_args(argv)
    budgets = [int(x) for x in args.sims.split(",")]
    levels = [float(x) for x in args.levels.split(",")]
    if args.levels_from:
        rows = read_rows(args.levels_from, set(budgets))
        print_header()
        for r in rows:
            print_row(r)
        print_levels(rows, levels)
        return
    print(f"cores {sorted(os.sched_getaffinity(0))}; load average {os.getloadavg()[0]:.1f}; "
          f"jax {jax.__version__}, jaxpuct {jaxpuct.__version__}")
    rows: list[dict] = []
    if args.features:
        print_header()
        for evaluator in args.evaluators.split(","):
            for feature in args.features.split(","):
                new = (reuse_curve(evaluator, budgets, args.games) if feature == "reuse"
                       else oracle_curve(feature, evaluator, budgets))
                for r in new:
                    print_row(r)
                rows += new
        print_levels(rows, levels)
    if args.c4:
        lo, hi = (int(x) for x in args.c4_empty.split(","))
        print()
        c4_rows = c4_curves(args.c4, (lo, hi), args.c4_features.split(","),
                            [int(x) for x in args.c4_sims.split(",")])
        print_levels(c4_rows, levels)


if __name__ == "__main__":
    main()

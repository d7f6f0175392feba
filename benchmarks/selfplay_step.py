"""One pgx self-play step, jaxpuct against mctx, in one process.

A step is one jitted call: the network on the roots, the search, the move it
chooses, and ``env.step``. Four steps per game, on the same roots (B games after
four random moves) and the same ResNet (``jaxpuct.alphazero.networks``, random
weights, LayerNorm):

* ``jaxpuct/puct``: ``jaxpuct.alphazero_policy(selection=PUCTConfig.mctx_muzero())``,
  mctx's rule, root noise on (the defaults);
* ``mctx/puct``: ``mctx.muzero_policy`` with the same defaults;
* ``jaxpuct/gumbel``: ``jaxpuct.gumbel_policy(max_num_considered_actions=16)``;
* ``mctx/gumbel``: ``mctx.gumbel_muzero_policy`` with the same setting;

and ``network alone``: the network on the B root observations, ``S + 1`` chained
calls in one ``fori_loop``, the network's part of a step's cost. Reported:
moves per second (``B / median``), ``x vs mctx`` (mctx's median over jaxpuct's,
same algorithm) and the network's share (``network alone / step``). Timing is
``benchmarks.compare_mctx.compare``: compiled ahead of time, warmed up, called
in turn. The network alone's rate in GFLOP/s (XLA's cost analysis of one call, times
``S + 1``, over its median) is printed beside a dense float32 matmul's on the same
device: how close the network runs to what the device can do.

    python -m benchmarks.selfplay_step [--quick] [--games connect_four,go_9x9]
        [--batch 1024] [--simulations 64] [--rows-json rows.jsonl]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import jaxpuct
from benchmarks.compare_mctx import (
    Config,
    Impl,
    Table,
    compare,
    mctx,
    mctx_recurrent_fn,
    mctx_root,
)

JAXPUCT_PUCT = "jaxpuct/puct"
MCTX_PUCT = "mctx/puct"
JAXPUCT_GUMBEL = "jaxpuct/gumbel"
MCTX_GUMBEL = "mctx/gumbel"
NETWORK = "network alone"
BASELINE = {JAXPUCT_PUCT: MCTX_PUCT, MCTX_PUCT: MCTX_PUCT,
            JAXPUCT_GUMBEL: MCTX_GUMBEL, MCTX_GUMBEL: MCTX_GUMBEL}


@dataclasses.dataclass(frozen=True)
class Net:
    """ResNet size of one game."""

    num_blocks: int
    channels: int
    value_hidden: int


NETS: dict[str, Net] = {"connect_four": Net(2, 32, 32), "go_9x9": Net(6, 64, 64)}
QUICK_NET = Net(0, 4, 4)


@dataclasses.dataclass(frozen=True)
class StepConfig:
    """Settings of a run.

    Attributes:
      games: pgx game ids (keys of :data:`NETS`).
      batch: games per step, B.
      sims: simulations per search, S.
      considered: Gumbel's ``max_num_considered_actions``.
      quick: a near-free network (tiny run on CPU).
      steps: which steps, from ``jaxpuct/puct``, ``mctx/puct``, ``jaxpuct/gumbel`` and
        ``mctx/gumbel`` (the network alone always runs).
      trace_only: trace each step (``jax.eval_shape``) instead of timing it: checks
        the code against the installed libraries at no compile cost.
      timing: :class:`benchmarks.compare_mctx.Config` of the timing.
    """

    games: tuple[str, ...] = ("connect_four", "go_9x9")
    batch: int = 1024
    sims: int = 64
    considered: int = 16
    quick: bool = False
    steps: tuple[str, ...] = (JAXPUCT_PUCT, MCTX_PUCT, JAXPUCT_GUMBEL, MCTX_GUMBEL)
    trace_only: bool = False
    timing: Config = Config(reps=5, budget=20.0, min_reps=2)


@dataclasses.dataclass(frozen=True)
class GameParts:
    """What a self-play step of one pgx game is built from.

    Attributes:
      params: the ResNet's parameters (``networks.split``).
      key: the step's key.
      state: ``[B]`` pgx states after four random legal moves (shapes only with
        ``trace_only``).
      env: the pgx environment (``env.step``).
      root_fn: ``(params, key, state) -> jaxpuct.RootFnOutput`` (the network on the roots).
      recurrent_fn: jaxpuct's ``recurrent_fn`` (pgx step + network).
      mctx_recurrent_fn: the same, returning an ``mctx.RecurrentFnOutput``.
      apply_fn: ``(params, obs) -> (logits, value)``, the network.
    """

    params: Any
    key: jax.Array
    state: Any
    env: Any
    root_fn: Callable
    recurrent_fn: Callable
    mctx_recurrent_fn: Callable
    apply_fn: Callable


def game_parts(game_name: str, cfg: StepConfig) -> GameParts:
    """The network, roots and model functions of one game (see :class:`GameParts`)."""
    from flax import nnx

    from jaxpuct.alphazero import networks
    from jaxpuct.envs import adapter
    from jaxpuct.envs.pgx_games import make_pgx_game

    game = make_pgx_game(game_name)
    net = QUICK_NET if cfg.quick else NETS[game_name]

    def build():
        return networks.ResNetPolicyValue(game.num_actions, game.observation_shape,
                                          num_blocks=net.num_blocks, channels=net.channels,
                                          value_hidden=net.value_hidden, rngs=nnx.Rngs(0))

    # One jitted initialisation (op by op, every initialiser compiles on its own), or
    # only its shapes when the steps are traced, not run.
    graphdef, _ = networks.split(nnx.eval_shape(build))
    def init():
        return networks.split(build())[1]

    params = jax.eval_shape(init) if cfg.trace_only else jax.jit(init)()
    apply_fn = functools.partial(networks.apply, graphdef)
    env = game.environment
    recurrent_fn = adapter.make_recurrent_fn(apply_fn, env)

    @jax.jit
    def start(key):
        keys = jax.random.split(key, 5)
        state = game.init(keys[0], cfg.batch)
        for k in keys[1:]:  # four random legal moves, so the roots differ
            logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
            state = env.step(state, jax.random.categorical(k, logits).astype(jnp.int32))
        return state

    state = start(jax.random.PRNGKey(1)) if not cfg.trace_only else jax.eval_shape(
        start, jax.random.PRNGKey(1))
    return GameParts(params=params, key=jax.random.PRNGKey(0), state=state, env=env,
                     root_fn=adapter.make_root_fn(apply_fn, env), recurrent_fn=recurrent_fn,
                     mctx_recurrent_fn=mctx_recurrent_fn(recurrent_fn), apply_fn=apply_fn)


def make_step(parts: GameParts, search: Callable[[Any, jax.Array, Any], jax.Array]
              ) -> Callable:
    """``step(params, key, state)``: the network on the roots, ``search(params, key,
    root) -> action [B]``, then ``env.step``."""
    def step(params, rng_key, state):
        root = parts.root_fn(params, rng_key, state)
        action = search(params, rng_key, root)
        return parts.env.step(state, action)
    return step


def searches(parts: GameParts, cfg: StepConfig) -> dict[str, Callable]:
    """The four searches of a step, ``name -> (params, key, root) -> action [B]``."""
    sims, considered = cfg.sims, cfg.considered
    recurrent_fn, mctx_recurrent_fn = parts.recurrent_fn, parts.mctx_recurrent_fn
    return {
        JAXPUCT_PUCT: lambda p, k, root: jaxpuct.alphazero_policy(
            p, k, root, recurrent_fn, sims,
            selection=jaxpuct.PUCTConfig.mctx_muzero()).action,
        MCTX_PUCT: lambda p, k, root: mctx.muzero_policy(
            p, k, mctx_root(root), mctx_recurrent_fn, sims,
            invalid_actions=~root.legal_action_mask).action,
        JAXPUCT_GUMBEL: lambda p, k, root: jaxpuct.gumbel_policy(
            p, k, root, recurrent_fn, sims, max_num_considered_actions=considered).action,
        MCTX_GUMBEL: lambda p, k, root: mctx.gumbel_muzero_policy(
            p, k, mctx_root(root), mctx_recurrent_fn, sims,
            invalid_actions=~root.legal_action_mask,
            max_num_considered_actions=considered).action,
    }


def step_impls(game_name: str, cfg: StepConfig) -> tuple[list[Impl], GameParts]:
    """The four self-play steps of one game and the network alone, as :class:`Impl`,
    and the parts they are built from."""
    parts = game_parts(game_name, cfg)
    args = (parts.params, parts.key, parts.state)
    impls = [Impl(name, make_step(parts, search), args)
             for name, search in searches(parts, cfg).items() if name in cfg.steps]
    sims, apply_fn = cfg.sims, parts.apply_fn

    def network_alone(params, obs):
        obs = obs.astype(jnp.float32)

        def body(i, carry):  # chained through ``carry``: nothing can be hoisted
            logits, value = apply_fn(params, obs + 1e-30 * carry)
            return carry + jnp.mean(value) + jnp.mean(logits)

        return jax.lax.fori_loop(0, sims + 1, body, jnp.float32(0.0))

    impls.append(Impl(NETWORK, network_alone, (parts.params, parts.state.observation)))
    return impls, parts


def network_flops(apply_fn: Callable, params: Any, obs: jax.Array) -> float | None:
    """Floating-point operations of one network call on ``obs [B, ...]``, as XLA's
    cost analysis counts them in the compiled call; ``None`` where it gives none."""
    analysis = jax.jit(apply_fn).lower(params, obs).compile().cost_analysis()
    if isinstance(analysis, (list, tuple)):  # older jax: one dict per program
        analysis = analysis[0] if analysis else None
    flops = (analysis or {}).get("flops")
    return float(flops) if flops else None


def matmul_gflops(size: int, reps: int = 5) -> float:
    """The device's rate on one ``[size, size] @ [size, size]`` float32 matmul, in
    GFLOP/s (median of ``reps`` calls after a warm-up): the dense rate a network's
    is read against."""
    a = jnp.ones((size, size), jnp.float32)
    matmul = jax.jit(lambda x: x @ x).lower(a).compile()
    jax.block_until_ready(matmul(a))
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        jax.block_until_ready(matmul(a))
        times.append(time.perf_counter() - start)
    return 2.0 * size ** 3 / statistics.median(times) / 1e9


def run_game(game_name: str, cfg: StepConfig) -> list[dict[str, Any]]:
    """Rows (dicts) of one game: one per step implementation and the network alone."""
    net = QUICK_NET if cfg.quick else NETS[game_name]
    case = dict(game=game_name, B=cfg.batch, S=cfg.sims,
                net=f"{net.num_blocks}x{net.channels}")
    print(f"  case {game_name} B={cfg.batch} S={cfg.sims} net {case['net']}", flush=True)
    impls, parts = step_impls(game_name, cfg)
    if cfg.trace_only:
        rows = []
        for impl in impls:
            jax.eval_shape(impl.fn, *impl.args)
            rows.append(dict(case, impl=impl.name, traced=True))
        return rows
    timings = compare(impls, cfg.timing, keep_output=False)
    network = timings[NETWORK].median
    # The network alone makes S + 1 calls on the B root observations.
    flops = network_flops(parts.apply_fn, parts.params,
                          parts.state.observation.astype(jnp.float32))
    rows = []
    for name, timing in timings.items():
        row = dict(case, impl=name, n=timing.n, median_s=timing.median,
                   compile_s=timing.compile_s)
        if name == NETWORK and flops is not None:
            row.update(network_flops=flops,
                       network_gflops=(cfg.sims + 1) * flops / timing.median / 1e9)
        if name in BASELINE:
            base = timings.get(BASELINE[name])
            row.update(moves_per_s=cfg.batch / timing.median,
                       vs_mctx=base.median / timing.median if base else None,
                       network_share=network / timing.median)
        rows.append(row)
        print(f"    {name:<15} n={timing.n:<2} median {timing.median:8.4f} s  "
              + (f"{row['moves_per_s']:>10,.0f} moves/s  x{row['vs_mctx'] or 0:.2f} vs mctx  "
                 f"network {row['network_share']:.0%}  " if name in BASELINE else "")
              + (f"{row['network_gflops']:,.1f} GFLOP/s  " if "network_gflops" in row else "")
              + f"compile {timing.compile_s:.1f} s", flush=True)
    return rows


HEADERS = ["game", "B", "S", "net", "step", "n", "median s", "moves/s", "x vs mctx",
           "network share", "network GFLOP/s (a matmul's)", "compile s"]


def table(rows: list[dict[str, Any]]) -> Table:
    """The Markdown table of :func:`run_game` rows."""
    def cell(row, key, fmt="{}"):
        value = row.get(key)
        return "-" if value is None else fmt.format(value)

    def rate(row):
        if row.get("network_gflops") is None:
            return "-"
        matmul = row.get("matmul_gflops")
        return f"{row['network_gflops']:,.1f}" + (f" ({matmul:,.0f})" if matmul else "")

    return Table("Self-play steps per second (moves/s = B / median step time)", HEADERS,
                 [[r["game"], r["B"], r["S"], r["net"], r["impl"],
                   "traced only" if r.get("traced") else cell(r, "n"),
                   cell(r, "median_s", "{:.4g}"), cell(r, "moves_per_s", "{:,.0f}"),
                   cell(r, "vs_mctx", "{:.2f}"), cell(r, "network_share", "{:.0%}"),
                   rate(r), cell(r, "compile_s", "{:.1f}")] for r in rows])


def run(cfg: StepConfig, rows_json: str | None = None) -> list[dict[str, Any]]:
    """Runs every game of ``cfg``; appends each game's rows to ``rows_json`` as it ends.

    Timed runs first measure a dense float32 matmul (:func:`matmul_gflops`, size 256
    in quick runs, 2,048 on a CPU, 8,192 on an accelerator) on the device, kept in
    every row beside the network's own rate."""
    rows = []
    matmul = None
    if not cfg.trace_only:
        on_cpu = jax.devices()[0].platform == "cpu"
        matmul = matmul_gflops(256 if cfg.quick else 2048 if on_cpu else 8192)
        print(f"  a float32 matmul: {matmul:,.1f} GFLOP/s", flush=True)
    for game_name in cfg.games:
        game_rows = [dict(row, matmul_gflops=matmul) if matmul else row
                     for row in run_game(game_name, cfg)]
        rows += game_rows
        if rows_json:
            with open(rows_json, "a") as f:
                for row in game_rows:
                    f.write(json.dumps(dict(row, workload="selfplay")) + "\n")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and a near-free network, for a CPU smoke run")
    parser.add_argument("--games", default=None,
                        help=f"comma-separated, from {', '.join(NETS)} (default: all; "
                        "quick: connect_four)")
    parser.add_argument("--batch", type=int, default=None, help="B (default 1024; quick 4)")
    parser.add_argument("--simulations", type=int, default=None,
                        help="S (default 64; quick 8)")
    parser.add_argument("--reps", type=int, default=None, help="timed calls (default 5)")
    parser.add_argument("--budget", type=float, default=20.0,
                        help="seconds of timed calls per step and game (default 20)")
    parser.add_argument("--steps", default=",".join(BASELINE),
                        help=f"comma-separated, from {', '.join(BASELINE)} (default: all)")
    parser.add_argument("--trace-only", action="store_true",
                        help="trace the steps instead of timing them")
    parser.add_argument("--rows-json", default=None,
                        help="append every row as a JSON line to this file")
    args = parser.parse_args(argv)
    games = tuple(g for g in (args.games or ("connect_four" if args.quick else ",".join(NETS)))
                  .split(",") if g)
    unknown = [g for g in games if g not in NETS]
    if unknown:
        parser.error(f"unknown games {unknown}; known: {', '.join(NETS)}")
    cfg = StepConfig(
        games=games, batch=args.batch or (4 if args.quick else 1024),
        sims=args.simulations or (8 if args.quick else 64), quick=args.quick,
        steps=tuple(s for s in args.steps.split(",") if s),
        trace_only=args.trace_only,
        timing=Config(quick=args.quick, reps=args.reps or (1 if args.quick else 5),
                      budget=args.budget, min_reps=1 if args.quick else 2))
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; {cfg}", flush=True)
    start = time.perf_counter()
    rows = run(cfg, args.rows_json)
    print("\n" + table(rows).markdown(), flush=True)
    print(f"total {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()

"""Cold compile time of a self-play step for every policy, jaxpuct against mctx.

Each measurement is a fresh Python process (``python -m benchmarks.compile_time
--child NAME``), pinned to one core with ``taskset``, with no persistent
compilation cache and the default XLA flags (``XLA_FLAGS`` removed from its
environment). It builds the step's arguments, then times
``jax.jit(step).lower(*args)`` and ``.compile()`` and sums JAX's own duration
events over that window (``jax.monitoring``):

* ``trace``: ``/jax/core/compile/jaxpr_trace_duration`` (Python tracing to a jaxpr);
* ``lower``: ``/jax/core/compile/jaxpr_to_mlir_module_duration`` (jaxpr to StableHLO);
* ``xla``: ``/jax/core/compile/backend_compile_duration`` (XLA's optimisation and
  code generation).

The steps (one jitted call: network on the roots, search, chosen move, ``env.step``):

* pgx ``connect_four`` with the 2 x 32 ResNet of :mod:`benchmarks.selfplay_step`:
  ``jaxpuct/puct`` (``alphazero_policy``, mctx's rule) and ``mctx/puct``
  (``mctx.muzero_policy``); ``jaxpuct/gumbel`` (``gumbel_policy``) and
  ``mctx/gumbel`` (``mctx.gumbel_muzero_policy``), both with 16 considered
  actions; ``jaxpuct/sampled`` (``sampled_policy``, 4 of the 7 actions sampled;
  mctx has no sampled search, so it has no mctx row of its own);
* pgx ``2048`` (connect four has no chance), whose search functions are
  :func:`jaxpuct.envs.pgx_2048.make_search_fns` with a 2 x 32 ResNet as the value
  of states and afterstates: ``jaxpuct/stochastic`` (``stochastic_policy``) and
  ``mctx/stochastic`` (``mctx.stochastic_muzero_policy``) on the same functions.

Rounds: every policy once per round, the order rotating between rounds, so that
the shared machine's load hits all alike; medians over the rounds. With
``--warm N``, the first round compiles with the persistent cache a user would set
(:func:`enable_cache`) in a fresh, empty directory per policy: still a cold
compile (no cache hit; the rows say ``fill`` and count the cache hits), plus
writing the cache; then ``N`` more processes per policy compile from that cache,
and the warm column is their median.

    python -m benchmarks.compile_time [--repeats 3] [--warm 2] [--core 0]
        [--policies jaxpuct/puct,mctx/puct,...] [--batch 256] [--simulations 64]
        [--rows-json rows.jsonl]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

EVENTS = {
    "trace": "/jax/core/compile/jaxpr_trace_duration",
    "lower": "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "xla": "/jax/core/compile/backend_compile_duration",
}
CACHE_ENV = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
             "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "XLA_FLAGS")
SAMPLES = 4  # sampled_policy: actions sampled per node, of connect four's 7

POLICIES = ("jaxpuct/puct", "mctx/puct", "jaxpuct/gumbel", "mctx/gumbel",
            "jaxpuct/sampled", "jaxpuct/stochastic", "mctx/stochastic")
# the mctx step each jaxpuct step is compared with (none: mctx has no such search)
BASELINE = {"jaxpuct/puct": "mctx/puct", "jaxpuct/gumbel": "mctx/gumbel",
            "jaxpuct/stochastic": "mctx/stochastic"}


def enable_cache(directory: str) -> None:
    """The persistent-cache setting for users: compiled programs go to ``directory``
    and a later process with the same program, jax version and flags loads them
    instead of running XLA again (tracing and lowering still run). The threshold
    0 caches every program; JAX's default (1 s) skips quick ones."""
    import jax

    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# --------------------------------------------------------------------------- steps


def connect_four_step(name: str, batch: int, sims: int) -> tuple[Callable, tuple]:
    """``(step, args)`` of a connect-four step (:mod:`benchmarks.selfplay_step`)."""
    import jaxpuct
    from benchmarks import selfplay_step

    cfg = selfplay_step.StepConfig(games=("connect_four",), batch=batch, sims=sims)
    parts = selfplay_step.game_parts("connect_four", cfg)
    searches = selfplay_step.searches(parts, cfg)
    if name == "jaxpuct/sampled":
        def search(p, k, root):
            return jaxpuct.sampled_policy(p, k, root, parts.recurrent_fn, sims,
                                          num_samples=SAMPLES).action
    else:
        search = searches[name]
    return selfplay_step.make_step(parts, search), (parts.params, parts.key, parts.state)


def game2048_step(name: str, batch: int, sims: int) -> tuple[Callable, tuple]:
    """``(step, args)`` of a 2048 step: a 2 x 32 ResNet on the one-hot board as the
    value, :func:`jaxpuct.envs.pgx_2048.make_search_fns` as the model, ``env.step``."""
    import jax
    import mctx
    import pgx
    from flax import nnx

    import jaxpuct
    from benchmarks.compare_mctx import mctx_stochastic_fns
    from benchmarks.selfplay_step import NETS
    from jaxpuct.alphazero import networks
    from jaxpuct.envs import pgx_2048

    env = pgx.make("2048")
    planes = 18  # exponents 0 (empty) .. 17
    net = NETS["connect_four"]
    model = networks.ResNetPolicyValue(pgx_2048.NUM_ACTIONS, (4, 4, planes),
                                       num_blocks=net.num_blocks, channels=net.channels,
                                       value_hidden=net.value_hidden, rngs=nnx.Rngs(0))
    graphdef, params = networks.split(model)

    def fns(params):
        def value_fn(board):  # board [B, 16] exponents -> [B]
            obs = jax.nn.one_hot(board.reshape(-1, 4, 4), planes)
            return networks.apply(graphdef, params, obs)[1]
        return pgx_2048.make_search_fns(value_fn)


    def step(params, rng_key, state):
        root_fn, decision_fn, chance_fn = fns(params)
        root = root_fn(state)
        if name == "jaxpuct/stochastic":
            action = jaxpuct.stochastic_policy(params, rng_key, root, decision_fn, chance_fn,
                                               sims).action
        else:
            d, c = mctx_stochastic_fns(decision_fn, chance_fn, mask_illegal=True)
            action = mctx.stochastic_muzero_policy(
                params, rng_key, mctx.RootFnOutput(prior_logits=root.prior_logits,
                                                   value=root.value, embedding=root.embedding),
                d, c, sims, invalid_actions=~root.legal_action_mask).action
        return jax.vmap(env.step)(state, action, jax.random.split(rng_key, action.shape[0]))

    keys = jax.random.split(jax.random.PRNGKey(1), batch)
    state = jax.jit(jax.vmap(env.init))(keys)
    return step, (params, jax.random.PRNGKey(0), state)


def build(name: str, batch: int, sims: int) -> tuple[Callable, tuple]:
    """``(step, args)`` of policy ``name`` (one of :data:`POLICIES`)."""
    if name not in POLICIES:
        raise ValueError(f"policy: expected one of {POLICIES}, got {name!r}")
    if name.endswith("stochastic"):
        return game2048_step(name, batch, sims)
    return connect_four_step(name, batch, sims)


# --------------------------------------------------------------------------- one process


def measure(name: str, batch: int, sims: int, cache_dir: str | None) -> dict[str, Any]:
    """Builds the step of ``name``, then times its lowering and compilation
    (one fresh process: this is the child's whole job)."""
    import jax

    if cache_dir:
        enable_cache(cache_dir)
    step, args = build(name, batch, sims)
    jax.block_until_ready(args)
    durations = {key: 0.0 for key in EVENTS}
    by_event = {event: key for key, event in EVENTS.items()}
    hits = []

    def on_duration(event: str, secs: float, **kwargs) -> None:
        if event in by_event:
            durations[by_event[event]] += secs

    def on_event(event: str, **kwargs) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            hits.append(event)

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    start, start_cpu = time.perf_counter(), time.process_time()
    lowered = jax.jit(step).lower(*args)
    lowered_at, lowered_cpu = time.perf_counter(), time.process_time()
    lowered.compile()
    end, end_cpu = time.perf_counter(), time.process_time()
    return dict(policy=name, B=batch, S=sims, cache=bool(cache_dir), cache_hits=len(hits),
                total_s=end - start, lower_call_s=lowered_at - start,
                compile_call_s=end - lowered_at, cpu_s=end_cpu - start_cpu,
                lower_cpu_s=lowered_cpu - start_cpu, compile_cpu_s=end_cpu - lowered_cpu,
                **{f"{k}_s": v for k, v in durations.items()}, jax=jax.__version__)


def child_row(module: str, arguments: list[str], env: dict[str, str], core: int | None,
              name: str) -> dict[str, Any]:
    """Runs ``python -m module *arguments`` on the CPU (pinned to ``core``) with
    ``env``; the JSON row its last line prints. A failure raises, naming ``name``."""
    command = [sys.executable, "-m", module, *arguments]
    if core is not None:
        command = ["taskset", "-c", str(core)] + command
    out = subprocess.run(command, env=dict(env, JAX_PLATFORMS="cpu"), capture_output=True,
                         text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"{name}: child failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_child(name: str, batch: int, sims: int, core: int | None,
              cache_dir: str | None) -> dict[str, Any]:
    """One measurement in a fresh process (pinned to ``core``); its row."""
    env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    arguments = ["--child", name, "--batch", str(batch), "--simulations", str(sims)]
    if cache_dir:
        arguments += ["--cache-dir", cache_dir]
    return child_row("benchmarks.compile_time", arguments, env, core, name)


# --------------------------------------------------------------------------- report


@dataclasses.dataclass(frozen=True)
class Summary:
    """Medians (seconds) of one policy's cold rows, and of its warm-cache rows:
    process CPU seconds (all threads) of ``lower()`` (trace + lowering) and of
    ``compile()`` (XLA), wall seconds, and JAX's trace and lowering events (wall)."""

    policy: str
    n: int
    cpu: float
    lower_cpu: float
    xla_cpu: float
    wall: float
    trace: float
    lower: float
    warm_n: int
    warm_cpu: float | None
    warm_wall: float | None


def summarise(rows: list[dict[str, Any]]) -> list[Summary]:
    """One :class:`Summary` per policy, in :data:`POLICIES` order."""
    out = []
    for name in POLICIES:
        cold = [r for r in rows if r["policy"] == name and r["phase"] in ("cold", "fill")]
        warm = [r for r in rows if r["policy"] == name and r["phase"] == "warm"]
        if not cold:
            continue

        def med(rs, key):
            return statistics.median(r[key] for r in rs) if rs else None

        out.append(Summary(name, len(cold), med(cold, "cpu_s"), med(cold, "lower_cpu_s"),
                           med(cold, "compile_cpu_s"), med(cold, "total_s"),
                           med(cold, "trace_s"), med(cold, "lower_s"), len(warm),
                           med(warm, "cpu_s"), med(warm, "total_s")))
    return out


def markdown(summaries: list[Summary]) -> str:
    """The table: medians, the ratio to mctx's step, what dominates, warm cache."""
    by_name = {s.policy: s for s in summaries}
    lines = ["| step | n | cold CPU s | lower() CPU s (trace + lowering) | compile() CPU s "
             "(XLA) | XLA share | x mctx's CPU s | cold wall s | trace / lowering wall s | "
             "warm-cache CPU s (n) | warm wall s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        base = by_name.get(BASELINE.get(s.policy, ""))
        ratio = f"{s.cpu / base.cpu:.2f}" if base else "-"
        warm = f"{s.warm_cpu:.1f} ({s.warm_n})" if s.warm_cpu is not None else "-"
        warm_wall = f"{s.warm_wall:.1f}" if s.warm_wall is not None else "-"
        lines.append(f"| {s.policy} | {s.n} | {s.cpu:.1f} | {s.lower_cpu:.1f} | "
                     f"{s.xla_cpu:.1f} | {s.xla_cpu / s.cpu:.0%} | {ratio} | {s.wall:.0f} | "
                     f"{s.trace:.1f} / {s.lower:.1f} | {warm} | {warm_wall} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help=f"comma-separated, from {', '.join(POLICIES)} (default: all)")
    parser.add_argument("--repeats", type=int, default=3, help="cold processes per policy")
    parser.add_argument("--warm", type=int, default=2,
                        help="warm-cache processes per policy after one that fills the cache "
                        "(0: none)")
    parser.add_argument("--batch", type=int, default=256, help="B (default 256)")
    parser.add_argument("--simulations", type=int, default=64, help="S (default 64)")
    parser.add_argument("--cores", default="0",
                        help="comma-separated CPU cores; child i is pinned to one of them "
                        "(round robin; empty: no pinning)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="children at once (default 1; more only where the machine is "
                        "shared anyway: then read the CPU seconds, not the wall times)")
    parser.add_argument("--rows-json", default=None, help="append each row as a JSON line")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--from-rows", default=None,
                        help="print the table of a --rows-json file (measure nothing)")
    args = parser.parse_args(argv)
    if args.from_rows:
        with open(args.from_rows) as f:
            print(markdown(summarise([json.loads(line) for line in f if line.strip()])))
        return
    if args.child:
        print(json.dumps(measure(args.child, args.batch, args.simulations, args.cache_dir)))
        return
    policies = [p for p in args.policies.split(",") if p]
    for p in policies:
        if p not in POLICIES:
            parser.error(f"unknown policy {p!r}; known: {', '.join(POLICIES)}")
    rows: list[dict[str, Any]] = []

    def record(row: dict[str, Any], phase: str) -> None:
        row = dict(row, phase=phase)
        rows.append(row)
        print(f"  {phase:<5} {row['policy']:<19} total {row['total_s']:6.1f} s  CPU "
              f"{row['cpu_s']:6.1f} s (lower {row['lower_cpu_s']:5.1f}, XLA "
              f"{row['compile_cpu_s']:5.1f})  wall: trace "
              f"{row['trace_s']:5.1f}  lower {row['lower_s']:5.1f}  xla {row['xla_s']:5.1f}"
              f"  cache hits {row['cache_hits']}", flush=True)
        if args.rows_json:
            with open(args.rows_json, "a") as f:
                f.write(json.dumps(row) + "\n")

    start = time.perf_counter()
    cold = []  # (name, cache directory or None), round after round, the order rotating
    caches = {}
    for r in range(args.repeats):
        shift = r % len(policies)
        for name in policies[shift:] + policies[:shift]:
            if args.warm and r == 0:
                # the first round compiles with an empty cache, which it fills (so that
                # the warm runs can start early); still cold: no cache hit
                caches[name] = tempfile.mkdtemp(prefix="jaxpuct_cache_")
            cold.append((name, caches.get(name) if r == 0 else None))
    cores = [int(c) for c in args.cores.split(",")] if args.cores else [None]

    def submit(pool, i, name, directory, after=None):
        def job():
            if after is not None:
                after.result()  # the warm run reads the cache its fill run wrote
            return run_child(name, args.batch, args.simulations, cores[i % len(cores)],
                             directory)
        return pool.submit(job)

    try:
        with (concurrent.futures.ThreadPoolExecutor(args.jobs) as pool,
              concurrent.futures.ThreadPoolExecutor(max(1, args.jobs // 4)) as warm_pool):
            tagged, fills = {}, {}
            for i, (name, directory) in enumerate(cold):
                future = submit(pool, i, name, directory)
                tagged[future] = "cold" if directory is None else "fill"
                if directory is not None:
                    fills[name] = future
            for k, name in enumerate(n for n in policies for _ in range(args.warm)):
                tagged[submit(warm_pool, k, name, caches[name], fills[name])] = "warm"
            for future in concurrent.futures.as_completed(tagged):
                record(future.result(), tagged[future])
    finally:
        for directory in caches.values():
            shutil.rmtree(directory, ignore_errors=True)
    print(f"B={args.batch} S={args.simulations}, cores {args.cores}, jobs {args.jobs}, "
          f"{time.perf_counter() - start:.0f} s in all\n", flush=True)
    print(markdown(summarise(rows)), flush=True)


if __name__ == "__main__":
    main()

"""jaxpuct and mctx side by side, in one process, on identical workloads.

Run ``python -m benchmarks.compare_mctx`` (full run, writes ``docs/benchmarks.md``
and ``docs/benchmarks.png``) or ``python -m benchmarks.compare_mctx --quick`` (a
smoke run with tiny sizes that writes nothing unless ``--out`` is given).

Three searches run on every case, with root noise off:

* ``jaxpuct/mctx-rule``: ``jaxpuct.alphazero_policy(..., dirichlet_fraction=0.0,
  selection=PUCTConfig.mctx_muzero())``, the same selection rule as mctx;
* ``jaxpuct/default``: ``jaxpuct.alphazero_policy(..., dirichlet_fraction=0.0)``
  (AlphaZero schedule with FPU);
* ``mctx``: ``mctx.muzero_policy(..., dirichlet_fraction=0.0)``.

How it measures. Every search is one ``jax.jit`` ted call, compiled ahead of time
(``lower().compile()``, the compile time reported) and warmed up by one call.
Then the implementations of a case are called in turn, round after round (the
order rotates each round), so that a slow phase of the shared machine hits all of
them alike; each call ends with ``block_until_ready``. Reported: the median over
the calls, and simulations per second ``B * S / median``. An implementation whose
warm-up call takes longer than ``--slow-call`` seconds counts that call as a
sample (its warm-up cost is negligible next to its run time), and gets only as
many calls as fit in ``--budget`` seconds (at least ``--min-reps``): the ``n``
column says how many calls a median is over.

Adding a workload: write ``def my_workload(cfg: Config) -> WorkloadResult`` and
decorate it with ``@workload("name")``; it then runs with ``--workloads name``.
:func:`compare` does the timing, :func:`tree_memory` and :func:`tree_depths` the
tree statistics.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxpuct
from jaxpuct.testing import synthetic

try:
    import mctx
except ImportError:  # pragma: no cover - depends on the environment
    sys.exit("benchmarks.compare_mctx needs mctx: pip install 'jaxpuct[bench]'")

JAXPUCT_MCTX_RULE = "jaxpuct/mctx-rule"
JAXPUCT_DEFAULT = "jaxpuct/default"
MCTX = "mctx"
SEARCHES = (JAXPUCT_MCTX_RULE, JAXPUCT_DEFAULT, MCTX)
JAXPUCT_GUMBEL = "jaxpuct/gumbel"
MCTX_GUMBEL = "mctx/gumbel"


# --------------------------------------------------------------------------- config


@dataclasses.dataclass(frozen=True)
class Config:
    """Command-line settings every workload receives.

    Attributes:
      quick: tiny sizes, for a smoke run.
      reps: timed calls per implementation (fast ones; see ``budget``).
      budget: seconds of timed calls allowed per implementation and case.
      min_reps: calls per implementation and case however slow.
      slow_call: a warm-up call longer than this counts as a sample.
      max_mctx_sims: mctx is skipped for cases with more simulations (0: never).
      cases: ``(B, S, A)`` triples for the ``grid`` workload (empty: its default).
      rows_json: a file that result rows are appended to as JSON lines (``grid``:
        after each case, so that a run cut short keeps its finished cases; other
        workloads: as each ends).
    """

    quick: bool = False
    reps: int = 5
    budget: float = 90.0
    min_reps: int = 2
    slow_call: float = 3.0
    max_mctx_sims: int = 0
    cases: tuple[tuple[int, int, int], ...] = ()
    rows_json: str | None = None


# --------------------------------------------------------------------------- timing


@dataclasses.dataclass
class Impl:
    """One jit-able function and its arguments, timed by :func:`compare`."""

    name: str
    fn: Callable[..., Any]
    args: tuple


@dataclasses.dataclass
class Timing:
    """Compile time and call times (seconds) of one :class:`Impl`."""

    compile_s: float
    times: list[float]
    cpu_times: list[float] = dataclasses.field(default_factory=list)
    output: Any = None

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def cpu_median(self) -> float:
        """Median CPU time of this process per call (all threads), seconds."""
        return statistics.median(self.cpu_times)

    @property
    def n(self) -> int:
        return len(self.times)


def _call(compiled, args) -> tuple[float, float, Any]:
    """``(wall seconds, process CPU seconds, output)`` of one call."""
    start, start_cpu = time.perf_counter(), time.process_time()
    out = compiled(*args)
    jax.block_until_ready(out)
    return time.perf_counter() - start, time.process_time() - start_cpu, out


def compare(impls: list[Impl], cfg: Config, keep_output: bool = True) -> dict[str, Timing]:
    """Compiles, warms up and times ``impls`` alternately; see the module docstring."""
    compiled, timings = {}, {}
    for impl in impls:
        start = time.perf_counter()
        compiled[impl.name] = jax.jit(impl.fn).lower(*impl.args).compile()
        timings[impl.name] = Timing(compile_s=time.perf_counter() - start, times=[])
    wanted = {}
    for impl in impls:
        elapsed, cpu, out = _call(compiled[impl.name], impl.args)
        timing = timings[impl.name]
        if elapsed > cfg.slow_call:
            timing.times.append(elapsed)
            timing.cpu_times.append(cpu)
        wanted[impl.name] = max(min(cfg.min_reps, cfg.reps),
                                min(cfg.reps, int(cfg.budget // max(elapsed, 1e-9))))
        if keep_output:
            timing.output = out
        del out
    rounds = max(wanted.values())
    for r in range(rounds):
        order = impls[r % len(impls):] + impls[:r % len(impls)]
        for impl in order:
            timing = timings[impl.name]
            if timing.n < wanted[impl.name]:
                elapsed, cpu, out = _call(compiled[impl.name], impl.args)
                timing.times.append(elapsed)
                timing.cpu_times.append(cpu)
                if keep_output:
                    timing.output = out
                del out
    return timings


# --------------------------------------------------------------------------- trees


def tree_memory(tree: Any) -> tuple[dict[str, float], dict[str, float]]:
    """Bytes per node slot (per tree) of each array of a batched search tree.

    A ``jaxpuct.Tree`` reports its own per-node cost (``Tree.bytes_per_node()``,
    the transposition table amortised over the node slots). For other trees
    (mctx's), arrays whose two leading axes are ``[B, N]`` cost
    ``prod(shape[2:]) * itemsize`` per node (pytree fields such as the embedding
    are summed). The remaining arrays (``[B, A]`` root arrays, ``[B]`` counters)
    are a fixed cost per tree, returned apart.

    Returns:
      ``(per_node, per_tree)``: dicts ``field name -> bytes``.
    """
    batch, nodes = tree.children_index.shape[:2]
    per_node: dict[str, float] = {}
    if isinstance(tree, jaxpuct.Tree):
        per_node = {name: float(size) for name, size in tree.bytes_per_node().items()}
    per_tree: dict[str, float] = {}
    measured = set(per_node)
    for field in dataclasses.fields(tree):
        if field.name in measured:
            continue
        value = getattr(tree, field.name)
        for leaf in jax.tree.leaves(value):
            shape = tuple(leaf.shape)
            itemsize = np.dtype(leaf.dtype).itemsize
            if shape[:2] == (batch, nodes):
                per_node[field.name] = per_node.get(field.name, 0) + (
                    math.prod(shape[2:]) * itemsize)
            else:
                per_tree[field.name] = per_tree.get(field.name, 0) + (
                    math.prod(shape) * itemsize / batch)
    return per_node, per_tree


def tree_depths(tree: Any) -> tuple[int, float]:
    """``(max depth, mean depth)`` over the used nodes of all trees (root: 0).

    Works for jaxpuct's and mctx's trees: both link a node to its children in
    ``children_index [B, N, A]`` (negative: no child), and both give a child a
    higher index than its parent.
    """
    children = np.asarray(tree.children_index)
    batch, nodes, _ = children.shape
    parent = np.full((batch, nodes), -1, np.int64)
    b, n, a = np.nonzero(children >= 0)
    parent[b, children[b, n, a]] = n
    depth = np.zeros((batch, nodes), np.int64)
    used = np.zeros((batch, nodes), bool)
    used[:, 0] = True
    for j in range(1, nodes):
        p = parent[:, j]
        ok = p >= 0
        depth[ok, j] = depth[ok, p[ok]] + 1
        used[ok, j] = True
    return int(depth[used].max()), float(depth[used].mean())


# --------------------------------------------------------------------------- searches


def mctx_root(root: Any) -> mctx.RootFnOutput:
    """``root`` (a ``jaxpuct.RootFnOutput``) as an ``mctx.RootFnOutput``."""
    return mctx.RootFnOutput(prior_logits=root.prior_logits, value=root.value,
                             embedding=root.embedding)


def mctx_recurrent_fn(recurrent_fn: Callable) -> Callable:
    """A jaxpuct ``recurrent_fn`` as one that returns an ``mctx.RecurrentFnOutput``."""

    def wrapped(params, rng_key, action, state):
        out, new_state = recurrent_fn(params, rng_key, action, state)
        return mctx.RecurrentFnOutput(reward=out.reward, discount=out.discount,
                                      prior_logits=out.prior_logits, value=out.value), new_state

    return wrapped


def mctx_stochastic_fns(decision_fn: Callable, chance_fn: Callable,
                        mask_illegal: bool = False) -> tuple[Callable, Callable]:
    """jaxpuct's decision / chance recurrent functions as mctx's pair (their outputs as
    ``mctx.DecisionRecurrentFnOutput`` / ``mctx.ChanceRecurrentFnOutput``).

    ``mask_illegal``: the chance function's ``legal_action_mask`` goes into the logits
    (mctx has no mask field); leave it off where every action is legal.
    """

    def mctx_decision_fn(params, rng_key, action, state):
        out, after = decision_fn(params, rng_key, action, state)
        return mctx.DecisionRecurrentFnOutput(
            chance_logits=out.chance_logits, afterstate_value=out.afterstate_value), after

    def mctx_chance_fn(params, rng_key, outcome, after):
        out, state = chance_fn(params, rng_key, outcome, after)
        logits = out.action_logits
        if mask_illegal:
            logits = jnp.where(out.legal_action_mask, logits, jnp.finfo(jnp.float32).min)
        return mctx.ChanceRecurrentFnOutput(action_logits=logits, value=out.value,
                                            reward=out.reward, discount=out.discount), state

    return mctx_decision_fn, mctx_chance_fn


def search_impls(recurrent_fn: Callable, root: Any, params: Any, num_simulations: int,
                 cfg: Config, invalid_actions: jax.Array | None = None,
                 mctx_recurrent_fn: Callable | None = None,
                 max_depth: int | None = None) -> list[Impl]:
    """The three searches of one case, as :class:`Impl` s taking ``(params, key, root)``.

    ``root`` is a ``jaxpuct.RootFnOutput``; mctx gets the same fields in its own
    type (and ``invalid_actions``, as jaxpuct reads the root's legal mask).
    """
    key = jax.random.PRNGKey(0)

    def jaxpuct_search(selection):
        def run(params, rng_key, root):
            return jaxpuct.alphazero_policy(
                params, rng_key, root, recurrent_fn, num_simulations,
                max_depth=max_depth, dirichlet_fraction=0.0, selection=selection)
        return run

    def mctx_search(params, rng_key, root, invalid_actions):
        return mctx.muzero_policy(
            params, rng_key, root, mctx_recurrent_fn or recurrent_fn, num_simulations,
            invalid_actions=invalid_actions, max_depth=max_depth, dirichlet_fraction=0.0)

    impls = [
        Impl(JAXPUCT_MCTX_RULE, jaxpuct_search(jaxpuct.PUCTConfig.mctx_muzero()),
             (params, key, root)),
        Impl(JAXPUCT_DEFAULT, jaxpuct_search(jaxpuct.PUCTConfig()), (params, key, root)),
    ]
    if not cfg.max_mctx_sims or num_simulations <= cfg.max_mctx_sims:
        impls.append(Impl(MCTX, mctx_search, (params, key, mctx_root(root),
                                              invalid_actions)))
    return impls


# --------------------------------------------------------------------------- synthetic env


def synthetic_game(batch_size: int, num_actions: int, logit_scale: float,
                   value_scale: float) -> tuple[jaxpuct.RootFnOutput, Callable]:
    """:func:`jaxpuct.testing.synthetic.synthetic_game`, its recurrent function
    returning an ``mctx.RecurrentFnOutput`` so that it is handed to both libraries
    unchanged.

    A cheap deterministic two-player game without a network: a state is a
    ``uint32`` id; action ``a`` leads to ``hash(id * k + a + 1)``, so no two paths
    meet (a tree). Logits and value are sin/cos of the id (scaled by
    ``logit_scale`` and ``value_scale``), rewards are 0 and discounts -1.

    Returns:
      ``(root, recurrent_fn)``.
    """
    root, game_fn = synthetic.synthetic_game(batch_size, num_actions, logit_scale, value_scale)
    return root, mctx_recurrent_fn(game_fn)


# --------------------------------------------------------------------------- results


@dataclasses.dataclass
class Table:
    caption: str
    headers: list[str]
    rows: list[list[Any]]

    def markdown(self) -> str:
        def fmt(x):
            if isinstance(x, float):
                return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"
            return str(x)
        lines = [f"**{self.caption}**", "",
                 "| " + " | ".join(self.headers) + " |",
                 "|" + "|".join("---" for _ in self.headers) + "|"]
        lines += ["| " + " | ".join(fmt(x) for x in row) + " |" for row in self.rows]
        return "\n".join(lines)


@dataclasses.dataclass
class WorkloadResult:
    """What a workload reports: prose, tables, and data for targets and plots."""

    name: str
    title: str
    description: str
    tables: list[Table] = dataclasses.field(default_factory=list)
    data: dict[str, Any] = dataclasses.field(default_factory=dict)

    def markdown(self) -> str:
        parts = [f"## {self.title}", "", self.description, ""]
        for table in self.tables:
            parts += [table.markdown(), ""]
        return "\n".join(parts)


WORKLOADS: dict[str, Callable[[Config], WorkloadResult]] = {}


def workload(name: str):
    """Registers ``fn(cfg) -> WorkloadResult`` under ``name``."""
    def register(fn):
        WORKLOADS[name] = fn
        return fn
    return register


def _search_rows(case: dict[str, Any], timings: dict[str, Timing], batch: int,
                 sims: int, base_name: str = MCTX) -> list[dict[str, Any]]:
    rows = []
    base = timings.get(base_name)
    for name, timing in timings.items():
        sps = batch * sims / timing.median
        row = dict(case, impl=name, n=timing.n, median_s=timing.median,
                   sims_per_s=sps, us_per_sim=1e6 * timing.median / sims,
                   compile_s=timing.compile_s,
                   vs_mctx=(base.median / timing.median) if base else float("nan"))
        if timing.output is not None:
            row["max_depth"], row["mean_depth"] = tree_depths(timing.output.search_tree)
        rows.append(row)
    return rows


def _print_case(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        print(f"    {row['impl']:<18} n={row['n']:<2} median {row['median_s']:8.4f} s  "
              f"{row['sims_per_s']:>12,.0f} sims/s  x{row['vs_mctx']:.2f} vs mctx  "
              f"compile {row['compile_s']:.1f} s  depth max {row.get('max_depth', '-')} "
              f"mean {row.get('mean_depth', float('nan')):.2f}", flush=True)


SEARCH_HEADERS = ["B", "S", "A", "search", "n", "median s", "sims/s", "x vs mctx",
                  "us/sim (per batch)", "compile s", "max depth", "mean depth"]


def _search_table_row(row: dict[str, Any]) -> list[Any]:
    return [row["B"], row["S"], row["A"], row["impl"], row["n"], row["median_s"],
            row["sims_per_s"], row["vs_mctx"], row["us_per_sim"], row["compile_s"],
            row.get("max_depth", "-"), row.get("mean_depth", "-")]


def _memory_table(caption: str, trees: dict[str, Any]) -> tuple[Table, dict[str, float]]:
    """Per-array bytes per node of each library's tree, side by side."""
    per_node = {name: tree_memory(tree) for name, tree in trees.items()}
    names = list(trees)
    fields = []
    for name in names:
        for field in per_node[name][0]:
            if field not in fields:
                fields.append(field)
    rows = []
    for field in fields:
        rows.append([f"`{field}`"] + [per_node[n][0].get(field, "") for n in names])
    totals = {n: float(sum(per_node[n][0].values())) for n in names}
    no_emb = {n: totals[n] - per_node[n][0].get("embeddings", 0) for n in names}
    rows.append(["**total per node**"] + [totals[n] for n in names])
    rows.append(["total without the embedding"] + [no_emb[n] for n in names])
    rows.append(["per tree, fixed ([B, A] and [B] arrays)"]
                + [float(sum(per_node[n][1].values())) for n in names])
    table = Table(caption, ["array (bytes per node)"] + names, rows)
    return table, {"totals": totals, "no_embedding": no_emb}


# --------------------------------------------------------------------------- workloads


@workload("deep")
def deep_trees(cfg: Config) -> WorkloadResult:
    """W1: the synthetic game with a peaked prior and varied values: deep trees."""
    num_actions = 82
    cases = ([(8, 32)] if cfg.quick else [(64, 256), (256, 128), (1024, 64)])
    logit_scale, value_scale = 3.0, 1.0
    result = WorkloadResult(
        "deep", "W1: deep trees, cheap recurrent function",
        f"Synthetic two-player game (`synthetic_game`): a state is a uint32 id, action "
        f"`a` leads to `hash(id * k + a + 1)`, logits `{logit_scale} * sin(u1 + a * u2)` "
        f"and value `{value_scale} * cos(3 u1 + u2)` from the id's two 16-bit halves, "
        f"reward 0, discount -1, A = {num_actions}, no network: the time is the "
        "search's own. The peaked prior and varied values make the search dig deep "
        "(see the depth columns; `jaxpuct/mctx-rule` builds the same trees as mctx). "
        "`us/sim`: time per simulation step of the whole batch. "
        "Target: jaxpuct >= 10x mctx at B=64, S=256 and "
        "B=256, S=128 (same selection rule, `jaxpuct/mctx-rule`).")
    rows, memory_trees = [], {}
    for batch, sims in cases:
        print(f"  case B={batch} S={sims} A={num_actions} logit_scale={logit_scale} "
              f"value_scale={value_scale}", flush=True)
        root, recurrent_fn = synthetic_game(batch, num_actions, logit_scale, value_scale)
        timings = compare(search_impls(recurrent_fn, root, None, sims, cfg), cfg)
        case_rows = _search_rows(dict(B=batch, S=sims, A=num_actions), timings, batch, sims)
        _print_case(case_rows)
        rows += case_rows
        if not memory_trees:
            memory_trees = {n: jax.device_get(t.output.search_tree)
                            for n, t in timings.items() if n != JAXPUCT_DEFAULT}
        del timings
    result.tables.append(Table("Simulations per second (B * S / median call time)",
                               SEARCH_HEADERS, [_search_table_row(r) for r in rows]))
    mem_table, mem = _memory_table(
        f"Tree memory, A = {num_actions}, uint32 embedding (bytes per node slot, per tree)",
        memory_trees)
    result.tables.append(mem_table)
    result.data = {"rows": rows, "memory": mem}
    return result


@workload("scaling")
def scaling_in_s(cfg: Config) -> WorkloadResult:
    """W2: shallow trees of fixed depth, S from 64 to 1024 at B=64."""
    num_actions = 82
    batch = 8 if cfg.quick else 64
    sims_list = [16, 64] if cfg.quick else [64, 128, 256, 512, 1024]
    root_legal = 4 if cfg.quick else 16
    result = WorkloadResult(
        "scaling", "W2: cost per simulation as the search grows",
        f"The synthetic game with a uniform prior and zero values (logit and value "
        f"scales 0), A = {num_actions}, B = {batch}; the root has {root_legal} legal "
        "actions (the others masked: jaxpuct through the root's legal mask, mctx "
        f"through `invalid_actions`), every other node all {num_actions}. Every rule "
        "then searches breadth-first, so the walks stay at depth <= 2 for every S up "
        f"to {root_legal} + {root_legal} * {num_actions} = "
        f"{root_legal * (1 + num_actions)} while the tree grows 16-fold: the walk "
        "length, which a simulation's tree work should depend on, is held fixed. (With "
        "all 82 actions legal at the root the walks are 1 edge long up to S = 82 and "
        "2 beyond, which doubles the work per simulation between S = 64 and S = 1024 "
        "for a reason that has nothing to do with the tree's size.) Target: jaxpuct's "
        f"time per simulation at S = {sims_list[-1]} within 1.5x of S = {sims_list[0]}.")
    rows = []
    for sims in sims_list:
        print(f"  case B={batch} S={sims} A={num_actions} uniform prior, value 0, "
              f"{root_legal} legal root actions", flush=True)
        root, recurrent_fn = synthetic_game(batch, num_actions, 0.0, 0.0)
        legal = jnp.broadcast_to(jnp.arange(num_actions) < root_legal, (batch, num_actions))
        root = root.replace(legal_action_mask=legal)
        timings = compare(search_impls(recurrent_fn, root, None, sims, cfg,
                                       invalid_actions=~legal), cfg)
        case_rows = _search_rows(dict(B=batch, S=sims, A=num_actions), timings, batch, sims)
        _print_case(case_rows)
        rows += case_rows
        del timings
    flat = []
    for name in SEARCHES:
        mine = {r["S"]: r for r in rows if r["impl"] == name}
        if sims_list[0] in mine:
            first = mine[sims_list[0]]["us_per_sim"]
            flat.append([name] + [mine[s]["us_per_sim"] / first if s in mine else "-"
                                  for s in sims_list])
    result.tables.append(Table(f"B = {batch}: simulations per second",
                               SEARCH_HEADERS, [_search_table_row(r) for r in rows]))
    result.tables.append(Table(
        f"Time per simulation relative to S = {sims_list[0]} (1.0 = flat)",
        ["search"] + [f"S={s}" for s in sims_list], flat))
    result.data = {"rows": rows, "sims": sims_list, "batch": batch}
    return result


NETWORK_ONLY = "network only"
ENV_NETWORK = "env + network"


def _network_case(game: Any, batch: int, sims: int, net_kwargs: dict[str, int],
                  cfg: Config) -> dict[str, Timing]:
    """Times the three searches on ``game`` with a ResNet, and the ResNet alone."""
    from flax import nnx

    from jaxpuct.alphazero import networks
    from jaxpuct.envs import adapter as adapters

    model = networks.ResNetPolicyValue(game.num_actions, game.observation_shape,
                                       rngs=nnx.Rngs(0), **net_kwargs)
    graphdef, params = networks.split(model)
    apply_fn = functools.partial(networks.apply, graphdef)
    env = game.environment
    root_fn = adapters.make_root_fn(apply_fn, env)
    recurrent_fn = adapters.make_recurrent_fn(apply_fn, env)

    @jax.jit
    def roots(params, key):
        keys = jax.random.split(key, 5)
        state = game.init(keys[0], batch)
        for k in keys[1:]:  # four random legal moves, so the roots differ
            logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
            action = jax.random.categorical(k, logits).astype(jnp.int32)
            state = env.step(state, action)
        return root_fn(params, None, state)

    root = roots(params, jax.random.PRNGKey(1))

    def network_only(params, obs):
        obs = obs.astype(jnp.float32)

        def body(i, carry):  # chained through ``carry``: nothing can be hoisted
            logits, value = apply_fn(params, obs + 1e-30 * carry)
            return carry + jnp.mean(value) + jnp.mean(logits)

        return jax.lax.fori_loop(0, sims, body, jnp.float32(0.0))

    def recurrent_only(params, state):
        def body(i, action):
            out, _ = recurrent_fn(params, None, action, state)
            return jnp.argmax(out.prior_logits, axis=-1).astype(jnp.int32)

        return jax.lax.fori_loop(0, sims, body, jnp.zeros((batch,), jnp.int32))

    print(f"  case connect_four B={batch} S={sims} A={game.num_actions} net={net_kwargs}",
          flush=True)
    impls = search_impls(recurrent_fn, root, params, sims, cfg,
                         invalid_actions=~root.legal_action_mask,
                         mctx_recurrent_fn=mctx_recurrent_fn(recurrent_fn))
    impls += [Impl(NETWORK_ONLY, network_only, (params, root.embedding.observation)),
              Impl(ENV_NETWORK, recurrent_only, (params, root.embedding))]
    timings = compare(impls, cfg)
    for name, timing in timings.items():
        depth = ("max {} mean {:.2f}".format(*tree_depths(timing.output.search_tree))
                 if name in SEARCHES else "-")
        print(f"    {name:<18} n={timing.n:<2} median {timing.median:8.4f} s wall  "
              f"{timing.cpu_median:8.4f} s CPU  {batch * sims / timing.median:>10,.0f} "
              f"evals/s  compile {timing.compile_s:.1f} s  depth {depth}", flush=True)
    return timings


@workload("network")
def network_inline(cfg: Config) -> WorkloadResult:
    """W3: a Flax ResNet inline on pgx connect_four; share of time outside the net."""
    from jaxpuct.envs.pgx_games import make_pgx_game

    batch, sims = (16, 8) if cfg.quick else (256, 64)
    resnet = (dict(num_blocks=1, channels=16, value_hidden=16) if cfg.quick
              else dict(num_blocks=6, channels=64, value_hidden=64))
    tiny = dict(num_blocks=0, channels=4, value_hidden=4)
    game = make_pgx_game("connect_four")
    real = _network_case(game, batch, sims, resnet, cfg)
    free = _network_case(game, batch, sims, tiny, cfg)

    description = (
        f"pgx `connect_four` (A = {game.num_actions}), B = {batch}, S = {sims}, "
        f"`jaxpuct.alphazero.networks.ResNetPolicyValue` ({resnet}, LayerNorm) called inline "
        "through `jaxpuct.envs.adapter`; roots after four random moves. "
        f"`{NETWORK_ONLY}`: the network on [B] observations, {sims} chained calls in "
        f"one `fori_loop`; `{ENV_NETWORK}`: the recurrent function (pgx step + "
        f"network) alone, {sims} chained calls.\n\n"
        "The network is nearly all of the time: with it the three searches take the "
        "same time within the noise of a shared machine (runs differ by +-10%, in "
        "either library's favour), and `1 - network/search`, from wall or CPU "
        "times, is noise (it can come out negative). The verdict uses a direct "
        "measure instead: the same searches with a near-free "
        f"network ({tiny}) cost `search - network` seconds outside the network (tree "
        "work, pgx steps, glue), and that cost over the ResNet search's time is the "
        "share outside the network. Target: <= 10%.")
    base = real.get(MCTX)
    rows, table_rows, free_rows = [], [], []
    net, net_cpu = real[NETWORK_ONLY].median, real[NETWORK_ONLY].cpu_median
    free_net = free[NETWORK_ONLY].median
    nan = float("nan")
    for name, timing in real.items():
        is_search = name in SEARCHES
        row = dict(impl=name, n=timing.n, median_s=timing.median,
                   cpu_s=timing.cpu_median, sims_per_s=batch * sims / timing.median,
                   compile_s=timing.compile_s,
                   vs_mctx=base.median / timing.median if base and is_search else nan)
        if is_search:
            row["outside_wall"] = 1 - net / timing.median
            row["outside_cpu"] = 1 - net_cpu / timing.cpu_median
            row["overhead_s"] = free[name].median - free_net
            row["outside_net"] = row["overhead_s"] / timing.median
            row["max_depth"], row["mean_depth"] = tree_depths(timing.output.search_tree)
            free_depth = tree_depths(free[name].output.search_tree)
            free_rows.append([name, free[name].median, free_net, row["overhead_s"],
                              1e3 * row["overhead_s"] / sims, f"{row['outside_net']:.1%}",
                              f"{free_depth[0]} / {free_depth[1]:.2f}"])
        rows.append(row)

        def pct(key, row=row):
            return f"{row[key]:.1%}" if key in row else "-"

        table_rows.append([name, timing.n, timing.median, timing.cpu_median,
                           row["sims_per_s"], row["vs_mctx"] if is_search else "-",
                           pct("outside_wall"), pct("outside_cpu"), timing.compile_s,
                           f"{row['max_depth']} / {row['mean_depth']:.2f}" if is_search
                           else "-"])
    free_rows.append([NETWORK_ONLY, free_net, free_net, 0.0, 0.0, "-", "-"])
    free_rows.append([ENV_NETWORK, free[ENV_NETWORK].median, free_net,
                      free[ENV_NETWORK].median - free_net,
                      1e3 * (free[ENV_NETWORK].median - free_net) / sims, "-", "-"])
    for row in rows:
        if row["impl"] in SEARCHES:
            print(f"    {row['impl']:<18} outside the network: {row['outside_net']:.1%} "
                  f"(wall {row['outside_wall']:.1%}, CPU {row['outside_cpu']:.1%})",
                  flush=True)
    trees = {n: jax.device_get(t.output.search_tree) for n, t in real.items()
             if n in (JAXPUCT_MCTX_RULE, MCTX)}
    result = WorkloadResult("network", "W3: Flax ResNet inline on pgx connect_four",
                            description)
    result.tables.append(Table(
        "ResNet: whole search vs its parts (evaluations per second = B * S / median)",
        ["what", "n", "median s", "CPU s", "evals/s", "x vs mctx",
         "1 - network/search (wall)", "1 - network/search (CPU)", "compile s",
         "max / mean depth"], table_rows))
    result.tables.append(Table(
        f"Cost outside the network, measured with a near-free network ({tiny})",
        ["what", "median s", "network only s", "outside the network s",
         "ms per simulation", "share of the ResNet search", "max / mean depth"],
        free_rows))
    mem_table, mem = _memory_table(
        f"Tree memory, A = {game.num_actions}, pgx state as embedding (bytes per node)",
        trees)
    result.tables.append(mem_table)
    result.data = {"rows": rows, "memory": mem}
    return result


@workload("gumbel")
def gumbel_deep_trees(cfg: Config) -> WorkloadResult:
    """W4: Gumbel MuZero on W1's deep-tree game, jaxpuct vs mctx."""
    num_actions = 82
    cases = [(8, 32)] if cfg.quick else [(64, 256), (256, 128)]
    logit_scale, value_scale, considered = 3.0, 1.0, 16
    result = WorkloadResult(
        "gumbel", "W4: Gumbel MuZero, deep trees",
        f"W1's synthetic game (A = {num_actions}, logit scale {logit_scale}, value scale "
        f"{value_scale}) searched by `jaxpuct.gumbel_policy` and "
        f"`mctx.gumbel_muzero_policy`, both with `max_num_considered_actions="
        f"{considered}`, `gumbel_scale=1` and the default completed-Q transform; jaxpuct "
        "is given mctx's Gumbel draw, so the two build the same trees (see the depth "
        "columns; `tests/test_gumbel.py` checks the equality). `x vs mctx` is mctx's "
        "median time over jaxpuct's. Target: jaxpuct >= 3x mctx at B=64, S=256 and "
        "B=256, S=128.")
    rows = []
    key = jax.random.PRNGKey(0)
    for batch, sims in cases:
        print(f"  case B={batch} S={sims} A={num_actions} gumbel, m={considered}", flush=True)
        root, recurrent_fn = synthetic_game(batch, num_actions, logit_scale, value_scale)
        mroot = mctx_root(root)
        gumbel = jax.random.gumbel(jax.random.split(key)[1], (batch, num_actions))

        def ours(params, rng_key, root, gumbel, sims=sims, recurrent_fn=recurrent_fn):
            return jaxpuct.gumbel_policy(params, rng_key, root, recurrent_fn, sims,
                                         max_num_considered_actions=considered,
                                         gumbel=gumbel)

        def theirs(params, rng_key, root, sims=sims, recurrent_fn=recurrent_fn):
            return mctx.gumbel_muzero_policy(params, rng_key, root, recurrent_fn, sims,
                                             max_num_considered_actions=considered)

        impls = [Impl(JAXPUCT_GUMBEL, ours, (None, key, mroot, gumbel))]
        if not cfg.max_mctx_sims or sims <= cfg.max_mctx_sims:
            impls.append(Impl(MCTX_GUMBEL, theirs, (None, key, mroot)))
        timings = compare(impls, cfg)
        case_rows = _search_rows(dict(B=batch, S=sims, A=num_actions), timings, batch, sims,
                                 base_name=MCTX_GUMBEL)
        _print_case(case_rows)
        rows += case_rows
        del timings
    result.tables.append(Table("Simulations per second (B * S / median call time)",
                               SEARCH_HEADERS, [_search_table_row(r) for r in rows]))
    result.data = {"rows": rows}
    return result


@workload("stochastic")
def stochastic_chance_nodes(cfg: Config) -> WorkloadResult:
    """W5: chance nodes, ``jaxpuct.stochastic_policy`` vs ``mctx.stochastic_muzero_policy``."""
    from jaxpuct import stochastic
    from jaxpuct.testing import stochastic_games

    num_actions, num_outcomes = 4, 32
    cases = [(1, 16), (4, 16)] if cfg.quick else [(1, 256), (64, 128), (256, 64)]
    result = WorkloadResult(
        "stochastic", "W5: chance nodes (Stochastic MuZero)",
        f"`jaxpuct.testing.stochastic_games.hashed_game` (A = {num_actions} actions, C = "
        f"{num_outcomes} chance outcomes: 2048's shapes; hashed ids, no network) searched "
        "by `jaxpuct.stochastic_policy(selection=PUCTConfig.mctx_muzero())` and "
        "`mctx.stochastic_muzero_policy`, root noise off; both build the same trees "
        "(`tests/test_stochastic.py` checks the equality). `calls/sim` counts the "
        "batched model calls per simulation (decision + chance): mctx makes 2 at every "
        "simulation; jaxpuct skips a function no element of the batch needs. `x vs "
        "mctx` is mctx's median time over jaxpuct's.")
    rows = []
    key = jax.random.PRNGKey(0)
    selection = jaxpuct.PUCTConfig.mctx_muzero()
    for batch, sims in cases:
        print(f"  case B={batch} S={sims} A={num_actions} C={num_outcomes} stochastic",
              flush=True)
        root, decision_fn, chance_fn = stochastic_games.hashed_game(
            batch, num_actions, num_outcomes)

        mctx_decision_fn, mctx_chance_fn = mctx_stochastic_fns(decision_fn, chance_fn)

        def ours(params, rng_key, root, sims=sims, decision_fn=mctx_decision_fn,
                 chance_fn=mctx_chance_fn):
            return jaxpuct.stochastic_policy(params, rng_key, root, decision_fn, chance_fn,
                                             sims, selection=selection, dirichlet_fraction=0.0)

        def theirs(params, rng_key, root, sims=sims, decision_fn=mctx_decision_fn,
                   chance_fn=mctx_chance_fn):
            return mctx.stochastic_muzero_policy(params, rng_key, root, decision_fn,
                                                 chance_fn, sims, dirichlet_fraction=0.0)

        mroot = mctx_root(root)
        timings = compare([Impl("jaxpuct/stochastic", ours, (None, key, mroot)),
                           Impl("mctx/stochastic", theirs, (None, key, mroot))], cfg,
                          keep_output=False)
        _, calls = jax.jit(lambda root, sims=sims, d=mctx_decision_fn, c=mctx_chance_fn:
                           stochastic.stochastic_search(None, key, root, d, c, sims,
                                                        selection=selection))(mroot)
        per_sim = {"jaxpuct/stochastic": (int(calls.decision) + int(calls.chance)) / sims,
                   "mctx/stochastic": 2.0}
        case_rows = _search_rows(dict(B=batch, S=sims, A=num_actions), timings, batch, sims,
                                 base_name="mctx/stochastic")
        for row in case_rows:
            row["calls_per_sim"] = per_sim[row["impl"]]
        _print_case(case_rows)
        rows += case_rows
    headers = ["B", "S", "A", "C", "search", "n", "median s", "sims/s", "x vs mctx",
               "calls/sim", "compile s"]
    result.tables.append(Table(
        "Simulations per second (B * S / median call time) and model calls per simulation",
        headers, [[r["B"], r["S"], r["A"], num_outcomes, r["impl"], r["n"], r["median_s"],
                   r["sims_per_s"], r["vs_mctx"], r["calls_per_sim"], r["compile_s"]]
                  for r in rows]))
    result.data = {"rows": rows}
    return result


GRID_DEFAULT = ((1024, 64, 82), (256, 256, 82), (256, 64, 362))
GRID_QUICK = ((4, 8, 82), (4, 8, 362))


@workload("grid")
def grid(cfg: Config) -> WorkloadResult:
    """W1's deep-tree game on chosen ``(B, S, A)`` cases (``--cases``), e.g. GPU sizes."""
    cases = cfg.cases or (GRID_QUICK if cfg.quick else GRID_DEFAULT)
    logit_scale, value_scale = 3.0, 1.0
    result = WorkloadResult(
        "grid", "Deep trees on chosen batch sizes, simulations and action counts",
        f"W1's synthetic game (logit scale {logit_scale}, value scale {value_scale}, no "
        "network: the time is the search's own) on the cases given with `--cases "
        "B:S:A,...`. `x vs mctx` is mctx's median time over this search's.")
    rows = []
    for batch, sims, num_actions in cases:
        print(f"  case B={batch} S={sims} A={num_actions} grid", flush=True)
        root, recurrent_fn = synthetic_game(batch, num_actions, logit_scale, value_scale)
        timings = compare(search_impls(recurrent_fn, root, None, sims, cfg), cfg,
                          keep_output=False)
        case_rows = _search_rows(dict(B=batch, S=sims, A=num_actions), timings, batch, sims)
        _print_case(case_rows)
        rows += case_rows
        if cfg.rows_json:
            append_rows(cfg.rows_json, "grid", case_rows)
        del timings, root
    result.tables.append(Table("Simulations per second (B * S / median call time)",
                               SEARCH_HEADERS, [_search_table_row(r) for r in rows]))
    result.data = {"rows": rows}
    return result


def parse_cases(text: str) -> tuple[tuple[int, int, int], ...]:
    """``"B:S:A,B:S:A"`` -> ``((B, S, A), ...)``; raises ``ValueError`` if malformed."""
    cases = []
    for item in text.split(","):
        if not item.strip():
            continue
        parts = item.strip().split(":")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"a case is B:S:A with positive ints, got {item!r}")
        cases.append(tuple(int(p) for p in parts))
    return tuple(cases)


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def append_rows(path: str, workload_name: str, rows: list[dict[str, Any]]) -> None:
    """Appends one JSON line per row (with ``workload``) to ``path``."""
    import json
    with open(path, "a") as f:
        for row in rows:
            f.write(json.dumps(_json_safe(dict(row, workload=workload_name))) + "\n")


# --------------------------------------------------------------------------- targets


def targets(results: dict[str, WorkloadResult], quick: bool = False) -> Table:
    """Pass/fail of the speed and memory targets, from whatever workloads ran."""
    rows = []

    def verdict(ok):
        return "**pass**" if ok else "**FAIL**"

    if "deep" in results:
        data = results["deep"].data["rows"]
        for batch, sims in ((64, 256), (256, 128)):
            row = {r["impl"]: r for r in data if (r["B"], r["S"]) == (batch, sims)}
            if JAXPUCT_MCTX_RULE in row and MCTX in row:
                ratio = row[JAXPUCT_MCTX_RULE]["vs_mctx"]
                rows.append([f"W1 B={batch}, S={sims}: jaxpuct >= 10x mctx",
                             f"x{ratio:.1f} (default rule x{row[JAXPUCT_DEFAULT]['vs_mctx']:.1f})",
                             verdict(ratio >= 10)])
        mem = results["deep"].data["memory"]["totals"]
        if MCTX in mem:
            share = mem[JAXPUCT_MCTX_RULE] / mem[MCTX]
            rows.append(["Tree memory per node <= 60% of mctx's (A=82)",
                         f"{mem[JAXPUCT_MCTX_RULE]:.0f} / {mem[MCTX]:.0f} bytes = {share:.0%}",
                         verdict(share <= 0.6)])
    if "scaling" in results:
        data = results["scaling"].data
        first, last = data["sims"][0], data["sims"][-1]
        for name in (JAXPUCT_MCTX_RULE, JAXPUCT_DEFAULT):
            mine = {r["S"]: r["us_per_sim"] for r in data["rows"] if r["impl"] == name}
            ratio = mine[last] / mine[first]
            rows.append([f"W2 {name}: time/sim at S={last} within 1.5x of S={first}",
                         f"x{ratio:.2f}", verdict(ratio <= 1.5)])
    if "gumbel" in results:
        data = results["gumbel"].data["rows"]
        for batch, sims in ((64, 256), (256, 128)):
            row = {r["impl"]: r for r in data if (r["B"], r["S"]) == (batch, sims)}
            if JAXPUCT_GUMBEL in row and MCTX_GUMBEL in row:
                ratio = row[JAXPUCT_GUMBEL]["vs_mctx"]
                rows.append([f"W4 B={batch}, S={sims}: gumbel >= 3x mctx",
                             f"x{ratio:.1f}", verdict(ratio >= 3)])
    if "network" in results:
        for row in results["network"].data["rows"]:
            if row["impl"] in (JAXPUCT_MCTX_RULE, JAXPUCT_DEFAULT):
                rows.append([f"W3 {row['impl']}: time outside the network <= 10%",
                             f"{row['outside_net']:.1%} ({1e3 * row['overhead_s']:.0f} ms "
                             f"of {row['median_s']:.2f} s; 1 - network/search: wall "
                             f"{row['outside_wall']:.1%}, CPU {row['outside_cpu']:.1%})",
                             verdict(row["outside_net"] <= 0.10)])
    caption = ("Targets (--quick: sizes too small for the verdicts to mean anything)"
               if quick else "Targets")
    return Table(caption, ["target", "measured", "verdict"], rows)


# --------------------------------------------------------------------------- report


def machine_info() -> dict[str, str]:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count()
    import jaxlib
    versions = {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
                "mctx": mctx.__version__, "jaxpuct": jaxpuct.__version__}
    for module in ("flax", "pgx"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:
            pass
    device = jax.devices()[0]
    if device.platform == "cpu":
        label = f"CPU ({cpu}, {usable} cores)"
    else:
        label = f"{device.platform.upper()}: {device.device_kind} (x{len(jax.devices())})"
    return {
        "device": label,
        "cpu": f"{cpu}, {os.cpu_count()} cores ({usable} usable by this process)",
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "python": platform.python_version(),
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
    }


def plot(results: dict[str, WorkloadResult], info: dict[str, str], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [name for name in ("scaling", "deep") if name in results]
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.8), squeeze=False)
    styles = {JAXPUCT_MCTX_RULE: ("o-", "C0"), JAXPUCT_DEFAULT: ("s--", "C2"),
              MCTX: ("^-", "C3")}
    for ax, name in zip(axes[0], panels, strict=True):
        rows = results[name].data["rows"]
        for impl in SEARCHES:
            mine = [r for r in rows if r["impl"] == impl]
            if not mine:
                continue
            style, color = styles[impl]
            ax.plot([r["S"] for r in mine], [r["sims_per_s"] for r in mine], style,
                    color=color, label=impl)
            if name == "deep":
                for r in mine:
                    ax.annotate(f"B={r['B']}", (r["S"], r["sims_per_s"]), fontsize=7,
                                textcoords="offset points", xytext=(4, 4))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("simulations per search S")
        ax.set_ylabel("simulations per second (B * S / time)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        if name == "scaling":
            ax.set_title(f"W2: shallow trees, B={results[name].data['batch']}, A=82\n"
                         f"{info['device']}", fontsize=10)
        else:
            ax.set_title(f"W1: deep trees, A=82 (B varies)\n{info['device']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_markdown(results: dict[str, WorkloadResult], target_table: Table,
                   info: dict[str, str], cfg: Config, path: str, png_name: str | None,
                   elapsed: float) -> None:
    lines = [
        "# Benchmarks: jaxpuct side by side with mctx",
        "",
        "Generated by `python -m benchmarks.compare_mctx` "
        f"(`{' '.join(sys.argv[1:]) or 'no options'}`, {elapsed / 60:.1f} min); "
        "see that file's docstring for the method.",
        "",
        f"* Device: **{info['device']}**",
        f"* Machine: {info['cpu']}; Python {info['python']}",
        f"* Versions: {info['versions']}",
        f"* Date: {info['date']}",
        f"* Settings: reps {cfg.reps}, budget {cfg.budget:.0f} s per implementation and "
        f"case (at least {cfg.min_reps} calls), warm-ups longer than "
        f"{cfg.slow_call:.0f} s counted as samples.",
        "",
        "All three searches run in one process, compiled ahead of time, warmed up, and "
        "called in turn (rotating order) so that the shared machine's load hits them "
        "alike; medians over `n` calls. `x vs mctx` is mctx's median time over this "
        "search's (higher is faster). `jaxpuct/mctx-rule` uses "
        "`PUCTConfig.mctx_muzero()`, the selection rule of `mctx.muzero_policy`; "
        "`jaxpuct/default` uses jaxpuct's default rule (AlphaZero schedule, FPU). Root "
        "noise is off everywhere. Where mctx's `n` is small its calls were too slow "
        "for more within the time budget.",
        "",
        target_table.markdown(),
        "",
    ]
    if png_name:
        lines += [f"![simulations per second vs S]({png_name})", ""]
    for result in results.values():
        lines.append(result.markdown())
    with open(path, "w") as f:
        f.write("\n".join(lines))


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes for a smoke run; writes nothing unless --out")
    default = [n for n in WORKLOADS if n != "grid"]
    parser.add_argument("--workloads", default=",".join(default),
                        help=f"comma-separated, from: {', '.join(WORKLOADS)} (default: all "
                        "but grid)")
    parser.add_argument("--reps", type=int, default=None,
                        help="timed calls per implementation and case (default 5; quick 2)")
    parser.add_argument("--budget", type=float, default=90.0,
                        help="seconds of timed calls per implementation and case; slower "
                        "implementations get fewer calls, at least --min-reps (default 90)")
    parser.add_argument("--min-reps", type=int, default=2,
                        help="calls per implementation and case however slow (default 2)")
    parser.add_argument("--slow-call", type=float, default=3.0,
                        help="a warm-up call longer than this counts as a sample (default 3)")
    parser.add_argument("--max-mctx-sims", type=int, default=0,
                        help="skip mctx in cases with more simulations (default 0: never)")
    parser.add_argument("--cases", default="",
                        help="(B, S, A) cases of the grid workload, as B:S:A,B:S:A (default "
                        f"{','.join(':'.join(map(str, c)) for c in GRID_DEFAULT)})")
    parser.add_argument("--rows-json", default=None,
                        help="append every result row as a JSON line to this file, as each "
                        "workload ends")
    parser.add_argument("--out", default=None,
                        help="output prefix: writes PREFIX.md and PREFIX.png (default "
                        "docs/benchmarks; with --quick, nothing)")
    args = parser.parse_args(argv)

    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    reps = args.reps if args.reps is not None else (2 if args.quick else 5)
    if reps < 1:
        parser.error("--reps must be >= 1")
    try:
        cases = parse_cases(args.cases)
    except ValueError as err:
        parser.error(str(err))
    cfg = Config(quick=args.quick, reps=reps, budget=args.budget, min_reps=args.min_reps,
                 slow_call=args.slow_call,
                 max_mctx_sims=args.max_mctx_sims, cases=cases, rows_json=args.rows_json)
    out = args.out if args.out is not None else (None if args.quick else "docs/benchmarks")

    info = machine_info()
    print(f"device: {info['device']}\nmachine: {info['cpu']}\nversions: {info['versions']}\n"
          f"date: {info['date']}\nsettings: {cfg}", flush=True)
    start = time.perf_counter()
    results = {}
    for name in names:
        print(f"\n== workload {name}", flush=True)
        results[name] = WORKLOADS[name](cfg)
        if args.rows_json and name != "grid":  # grid appends after each case
            append_rows(args.rows_json, name, results[name].data.get("rows", []))
        for table in results[name].tables:
            print("\n" + table.markdown(), flush=True)
    target_table = targets(results, cfg.quick)
    print("\n" + target_table.markdown(), flush=True)
    elapsed = time.perf_counter() - start
    if out:
        directory = os.path.dirname(out)
        if directory:
            os.makedirs(directory, exist_ok=True)
        png = out + ".png"
        plot(results, info, png)
        has_png = os.path.exists(png) and any(n in results for n in ("scaling", "deep"))
        write_markdown(results, target_table, info, cfg, out + ".md",
                       os.path.basename(png) if has_png else None, elapsed)
        print(f"\nwrote {out}.md" + (f" and {png}" if has_png else ""), flush=True)
    print(f"total {elapsed / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()

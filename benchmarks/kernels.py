"""Kernels and bytes per simulation from the compiled HLO: a launch-cost model.

A search on a GPU runs as a sequence of kernels; when each is small (a tree
search's are: ``[B]`` and ``[B, A]`` arrays), its time is the launch latency, not
the work. This tool reads the optimised HLO that XLA compiled
(``jax.jit(f).lower(...).compile().as_text()``) and counts, statically, the
kernels each while-loop body runs and the bytes each kernel moves, then
multiplies by the trip counts:

* a **kernel** is a top-level instruction that does work: a fusion, a custom
  call, or any other op but the free ones (``parameter``, ``constant``,
  ``get-tuple-element``, ``tuple``, ``bitcast``, ...). Control flow is followed:
  ``while`` bodies and conditions, ``conditional`` branches (the costliest
  branch counts: an upper bound), ``call`` s. A ``while`` / ``conditional`` also
  costs a **host round trip** per iteration on a GPU (the predicate is copied to
  the host, which decides whether to launch the next iteration).
* the **bytes** of a kernel are its operands plus its result, except where the
  fused computation reads a slice (``dynamic-slice``, ``gather``, ``slice``) of
  an operand or updates one in place (``dynamic-update-slice``, ``scatter``):
  then only the slice or the update counts, as XLA updates loop carries in place.
* **trip counts**: XLA records the trip count of a ``fori_loop``
  (``known_trip_count``); the simulation loop is the loop whose known trip count
  is the number of simulation steps (``S``, or ``S / K`` with ``K`` leaves per
  step). Loops inside it whose trip count XLA cannot know are the **depth
  loops** (the walk down, the backup up: ``while`` loops that end when every
  tree of the batch is done); each runs ``D`` times per simulation, ``D`` the
  longest path of the batch in that simulation. Loops with a known count inside
  the simulation loop run that many times.

The CPU backend differs from the GPU backend in ways that matter here: it wraps
single ops (a scalar add, a scatter) as one-op fusions, lowers threefry random
bits as a rolled loop of 5 iterations (on GPU one fused kernel; this tool counts
such a loop as one kernel), and has neither the GPU's horizontal fusion (which
merges independent small kernels into one launch) nor its multi-output sibling
fusion, nor CUDA-graph command buffers (which replay a recorded sequence of
kernels without per-kernel launch cost). So CPU counts overstate a GPU's launches;
read the ratio between two searches compiled the same way, not the absolute
number (``docs/scaling.md``, "Kernels per simulation").

    python -m benchmarks.kernels [--batch 1024] [--cases 82:64,362:64,82:800:64]
        [--policies puct,gumbel,stochastic] [--json rows.jsonl]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
               "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8,
               "c128": 16, "s4": 1, "u4": 1, "f8e4m3fn": 1, "f8e5m2": 1, "token": 0}
# ops that launch nothing: they name, bundle or reinterpret buffers
FREE_OPS = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast",
                      "after-all", "opt-barrier", "partition-id", "replica-id", "add-dependency"})
CONTROL_OPS = frozenset({"while", "conditional", "call"})
SLICE_OPS = frozenset({"dynamic-slice", "gather", "slice"})
UPDATE_OPS = frozenset({"dynamic-update-slice", "scatter"})
VIEW_OPS = frozenset({"bitcast", "reshape", "copy"})

# The model's device figures (assumptions, see docs/scaling.md).
LAUNCH_S = 5e-6  # per kernel launch
ROUND_TRIP_S = 10e-6  # per while iteration / conditional: predicate to the host
BANDWIDTH = 3.0e12  # bytes per second (H100 SXM HBM3: 3.35 TB/s nominal)

_SHAPE = re.compile(r"\b(" + "|".join(sorted(DTYPE_BYTES, key=len, reverse=True))
                    + r")\[([0-9,]*)\]")
_HEADER = re.compile(r"^(ENTRY )?%(\S+) \(.*\) -> .* \{$")


# --------------------------------------------------------------------------- parsing


def type_bytes(text: str) -> int:
    """Bytes of an HLO type (an array or a tuple of arrays), e.g. ``f32[2,9]{1,0}``."""
    total = 0
    for dtype, dims in _SHAPE.findall(text):
        total += DTYPE_BYTES[dtype] * math.prod(int(d) for d in dims.split(",") if d)
    return total


@dataclasses.dataclass
class Instr:
    """One HLO instruction: its name, result type, opcode, operand names and the
    rest of the line (attributes)."""

    name: str
    type: str
    opcode: str
    operands: list[str]
    attrs: str

    @property
    def bytes(self) -> int:
        return type_bytes(self.type)

    def called(self, key: str) -> list[str]:
        """Computation names after ``key=`` (``calls``, ``body``, ``condition``,
        ``to_apply``, ``branch_computations``, ``true_computation``...)."""
        m = re.search(r"\b" + key + r"=(\{[^}]*\}|%[^\s,]+)", self.attrs)
        return re.findall(r"%([^\s,{}]+)", m.group(1)) if m else []

    @property
    def op_name(self) -> str:
        m = re.search(r'op_name="([^"]*)"', self.attrs)
        return m.group(1) if m else ""

    @property
    def known_trip_count(self) -> int | None:
        m = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', self.attrs)
        return int(m.group(1)) if m else None


def _balanced(text: str, start: int) -> int:
    """Index just past the parenthesis group opening at ``text[start]``."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    raise ValueError(f"unbalanced parentheses in {text[:200]!r}")


def parse_instr(line: str) -> Instr | None:
    """An :class:`Instr` from one line of a computation (``None`` if not one)."""
    m = re.match(r"\s*(?:ROOT )?%(\S+) = ", line)
    if not m:
        return None
    rest = line[m.end():]
    if rest.startswith("("):
        end = _balanced(rest, 0)
        type_text, rest = rest[:end], rest[end:].lstrip()
    else:
        type_text, _, rest = rest.partition(" ")
    op = re.match(r"([\w\-]+)\(", rest)
    if not op:
        return None
    end = _balanced(rest, op.end() - 1)
    operands = re.findall(r"%([^\s,()]+)", rest[op.end():end - 1])
    return Instr(m.group(1), type_text, op.group(1), operands, rest[end:])


def parse_hlo(text: str) -> tuple[dict[str, list[Instr]], str]:
    """``({computation name: instructions}, entry name)`` of an HLO module's text."""
    comps: dict[str, list[Instr]] = {}
    entry, current = "", None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            current = header.group(2)
            comps[current] = []
            if header.group(1):
                entry = current
        elif line.startswith("}"):
            current = None
        elif current is not None:
            instr = parse_instr(line)
            if instr is not None:
                comps[current].append(instr)
    if not entry:
        raise ValueError("no ENTRY computation in the HLO text")
    return comps, entry


# --------------------------------------------------------------------------- bytes


def _through_views(instrs: dict[str, Instr], users: dict[str, list[Instr]], name: str
                   ) -> list[tuple[Instr, int]]:
    """The users of ``name`` seen through bitcasts/reshapes: ``(user, operand index)``."""
    out = []
    for user in users.get(name, []):
        if user.opcode in VIEW_OPS and user.opcode != "copy":
            out += _through_views(instrs, users, user.name)
        else:
            out += [(user, i) for i, o in enumerate(user.operands) if o == name]
    return out


def _update_operand(instr: Instr) -> str:
    """The operand holding the new values of a ``dynamic-update-slice`` (operand 1)
    or a ``scatter`` (its last: ``scatter(operand, indices, updates)``)."""
    return instr.operands[1] if instr.opcode == "dynamic-update-slice" else instr.operands[-1]


def fusion_bytes(comp: list[Instr]) -> int:
    """Bytes a fusion moves: each parameter in full unless only sliced or updated in
    place, the result in full unless it is an in-place update (then its updates)."""
    instrs = {i.name: i for i in comp}
    users: dict[str, list[Instr]] = {}
    for i in comp:
        for o in set(i.operands):
            users.setdefault(o, []).append(i)
    params = [i for i in comp if i.opcode == "parameter"]
    total = 0
    for p in params:
        uses = _through_views(instrs, users, p.name)
        if uses and all(u.opcode in SLICE_OPS and k == 0 for u, k in uses):
            total += sum(u.bytes for u, _ in uses)
        elif not (uses and all(u.opcode in UPDATE_OPS and k == 0 for u, k in uses)):
            total += p.bytes  # (a buffer updated in place is neither read nor rewritten)
    root = comp[-1] if comp else None
    roots = [instrs[o] for o in root.operands] if root and root.opcode == "tuple" else [root]
    for r in roots:
        if r is None:
            continue
        if r.opcode in UPDATE_OPS:  # written: the update only
            update = _update_operand(r)
            total += instrs[update].bytes if update in instrs else 0
        else:
            total += r.bytes
    return total


def op_bytes(instr: Instr, defs: dict[str, Instr]) -> int:
    """Bytes of an unfused op: operands plus result, slices and updates as in
    :func:`fusion_bytes`."""
    sizes = [defs[o].bytes if o in defs else 0 for o in instr.operands]
    if instr.opcode in SLICE_OPS:
        return 2 * instr.bytes + sum(sizes[1:])
    if instr.opcode in UPDATE_OPS:
        update = instr.operands.index(_update_operand(instr))
        return 2 * sizes[update] + sum(sizes[1:]) - sizes[update]
    return sum(sizes) + instr.bytes


# --------------------------------------------------------------------------- counting


@dataclasses.dataclass
class Cost:
    """Kernels, host round trips and bytes of one execution of a computation, and
    the unknown-trip loops directly inside it (counted once, not multiplied)."""

    kernels: float = 0.0
    round_trips: float = 0.0
    bytes: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.kernels + other.kernels, self.round_trips + other.round_trips,
                    self.bytes + other.bytes)

    def __mul__(self, n: float) -> Cost:
        return Cost(self.kernels * n, self.round_trips * n, self.bytes * n)


@dataclasses.dataclass
class Loop:
    """A while loop: its trip count (``None``: unknown), the cost of one iteration
    (body + condition, without nested loops) and the loops inside it."""

    name: str
    op_name: str
    trip_count: int | None
    per_iteration: Cost
    inner: list[Loop]


def _is_threefry(instr: Instr) -> bool:
    """JAX's CPU lowering of threefry random bits: a rolled loop of 5 rounds whose
    carry holds the two ``u32[4]`` rotation tables (its op name says ``threefry``
    or a random function's name; the carry's shape is the sure sign)."""
    return ("threefry" in instr.op_name
            or (instr.opcode == "while" and instr.known_trip_count == 5
                and instr.type.count("u32[4]") == 2))


class Program:
    """The kernel structure of a compiled HLO module (see the module docstring)."""

    def __init__(self, text: str):
        self.comps, self.entry = parse_hlo(text)
        self.defs = {c: {i.name: i for i in instrs} for c, instrs in self.comps.items()}
        self.top, self.loops = self._walk(self.entry)

    def _walk(self, comp: str) -> tuple[Cost, list[Loop]]:
        """Cost of one run of ``comp`` outside its while loops, and those loops."""
        cost, loops = Cost(), []
        defs = self.defs[comp]
        for instr in self.comps[comp]:
            if instr.opcode in FREE_OPS:
                continue
            if instr.opcode == "while":
                if _is_threefry(instr):  # a rolled loop on CPU, one kernel on GPU
                    cost += Cost(1, 0, type_bytes(instr.type) * 2)
                    continue
                body, cond = self._walk(instr.called("body")[0]), self._walk(
                    instr.called("condition")[0])
                per_iter = body[0] + cond[0] + Cost(0, 1, 0)
                loops.append(Loop(instr.name, instr.op_name, instr.known_trip_count,
                                  per_iter, body[1] + cond[1]))
            elif instr.opcode == "conditional":
                branches = [self._walk(b) for b in
                            instr.called("branch_computations")
                            or instr.called("true_computation")
                            + instr.called("false_computation")]
                worst = max(branches, key=lambda b: b[0].kernels)
                cost += worst[0] + Cost(0, 1, 0)
                loops += worst[1]
            elif instr.opcode == "call":
                if _is_threefry(instr):
                    cost += Cost(1, 0, type_bytes(instr.type) * 2)
                    continue
                inner = self._walk(instr.called("to_apply")[0])
                cost += inner[0]
                loops += inner[1]
            elif instr.opcode == "fusion":
                fused = self.comps[instr.called("calls")[0]]
                cost += Cost(1, 0, fusion_bytes(fused))
            else:
                cost += Cost(1, 0, op_bytes(instr, defs))
        return cost, loops

    def simulation_loop(self, num_steps: int) -> Loop:
        """The outermost loop whose known trip count is ``num_steps``."""
        todo = list(self.loops)
        while todo:
            loop = todo.pop(0)
            if loop.trip_count == num_steps:
                return loop
            todo += loop.inner
        raise ValueError(f"num_steps: no while loop with known trip count {num_steps} "
                         "in the HLO")


@dataclasses.dataclass(frozen=True)
class PerSimulation:
    """What one simulation costs: ``fixed`` once, ``depth`` per depth step (all
    depth loops together), and the number of depth loops."""

    fixed: Cost
    depth: Cost
    depth_loops: int
    outside: Cost  # once per search, outside the simulation loop


def _expand(loop: Loop) -> tuple[Cost, Cost, int]:
    """``(fixed, per depth step, depth loops)`` of one iteration of ``loop``; its
    known-trip inner loops multiplied in, unknown ones per depth step."""
    fixed, depth, n = loop.per_iteration, Cost(), 0
    for inner in loop.inner:
        f, d, k = _expand(inner)
        if inner.trip_count is None:  # a depth loop: its iteration is a depth step
            depth, n = depth + f, n + 1 + k
            if inner.inner and any(i.trip_count is None for i in inner.inner):
                raise ValueError(f"nested depth loops in {inner.name}: not modelled")
        else:
            fixed, depth, n = fixed + f * inner.trip_count, depth + d * inner.trip_count, n + k
    return fixed, depth, n


def per_simulation(program: Program, num_steps: int) -> PerSimulation:
    """:class:`PerSimulation` of the simulation loop (trip count ``num_steps``)."""
    sim = program.simulation_loop(num_steps)
    fixed, depth, n = _expand(sim)
    outside = program.top
    for loop in program.loops:
        if loop is not sim:
            f, d, _ = _expand(loop)
            outside = outside + (f + d) * (loop.trip_count or 1)
    return PerSimulation(fixed, depth, n, outside)


def model_seconds(cost: Cost) -> tuple[float, float, float]:
    """``(launch s, round-trip s, memory s)`` of ``cost`` at the assumed figures."""
    return (cost.kernels * LAUNCH_S, cost.round_trips * ROUND_TRIP_S,
            cost.bytes / BANDWIDTH)


# --------------------------------------------------------------------------- searches


def searches(batch: int, num_actions: int, sims: int) -> dict[str, tuple[Callable, tuple]]:
    """``name -> (fn, args)`` of the six searches: jaxpuct and mctx, PUCT (same rule),
    Gumbel (16 considered actions), chance nodes; synthetic games, root noise off."""
    import mctx

    import jaxpuct
    from benchmarks.compare_mctx import mctx_recurrent_fn, mctx_root, mctx_stochastic_fns
    from jaxpuct.testing import stochastic_games, synthetic

    root, game_fn = synthetic.synthetic_game(batch, num_actions)
    recurrent_fn = mctx_recurrent_fn(game_fn)
    mroot = mctx_root(root)
    sroot, decision_fn, chance_fn = stochastic_games.hashed_game(batch, num_actions, 32)

    mctx_decision_fn, mctx_chance_fn = mctx_stochastic_fns(decision_fn, chance_fn)

    msroot = mctx.RootFnOutput(prior_logits=sroot.prior_logits, value=sroot.value,
                               embedding=sroot.embedding)
    key = jax.random.PRNGKey(0)
    gumbel = jax.random.gumbel(jax.random.PRNGKey(1), (batch, num_actions))
    rule = jaxpuct.PUCTConfig.mctx_muzero()
    return {
        "jaxpuct/puct": (lambda k, r: jaxpuct.alphazero_policy(
            None, k, r, recurrent_fn, sims, dirichlet_fraction=0.0, selection=rule),
            (key, mroot)),
        "mctx/puct": (lambda k, r: mctx.muzero_policy(
            None, k, r, recurrent_fn, sims, dirichlet_fraction=0.0), (key, mroot)),
        "jaxpuct/gumbel": (lambda k, r, g: jaxpuct.gumbel_policy(
            None, k, r, recurrent_fn, sims, max_num_considered_actions=16, gumbel=g),
            (key, mroot, gumbel)),
        "mctx/gumbel": (lambda k, r: mctx.gumbel_muzero_policy(
            None, k, r, recurrent_fn, sims, max_num_considered_actions=16), (key, mroot)),
        "jaxpuct/stochastic": (lambda k, r: jaxpuct.stochastic_policy(
            None, k, r, mctx_decision_fn, mctx_chance_fn, sims, dirichlet_fraction=0.0,
            selection=rule), (key, msroot)),
        "mctx/stochastic": (lambda k, r: mctx.stochastic_muzero_policy(
            None, k, r, mctx_decision_fn, mctx_chance_fn, sims, dirichlet_fraction=0.0),
            (key, msroot)),
    }


def compiled_text(fn: Callable, args: tuple) -> str:
    """The optimised HLO of ``jax.jit(fn)`` on ``args`` (compiled, not run)."""
    return jax.jit(fn).lower(*args).compile().as_text()


def path_depths(tree: Any, sims: int, nodes_per_sim: int = 1) -> np.ndarray:
    """``[S]`` the longest path (edges) over the batch at each simulation, from
    a searched tree: node ``1 + nodes_per_sim * s`` (+ the others of that step) is
    the one simulation ``s`` added, at its path's end (every path of the synthetic
    games ends at a new node: no terminals)."""
    children = np.asarray(tree.children_index)  # [B, N, A]
    batch, nodes = children.shape[:2]
    depth = np.zeros((batch, nodes), np.int64)
    for n in range(nodes):  # a child is stored after its parent
        b, a = np.nonzero(children[:, n, :] >= 0)
        depth[b, children[b, n, a]] = depth[b, n] + 1
    per_sim = depth[:, 1:1 + nodes_per_sim * sims].reshape(batch, sims, nodes_per_sim)
    return per_sim.max(axis=(0, 2))


# --------------------------------------------------------------------------- report


def _hlo_path(hlo_dir: str, name: str, batch: int, num_actions: int, sims: int) -> str:
    return f"{hlo_dir}/{name.replace('/', '_')}_B{batch}_A{num_actions}_S{sims}.hlo"


def cost_row(text: str, sims: int) -> dict[str, Any]:
    """The :class:`PerSimulation` figures of a compiled HLO text, as a flat dict."""
    cost = per_simulation(Program(text), sims)
    return dict(fixed_kernels=cost.fixed.kernels, fixed_trips=cost.fixed.round_trips,
                fixed_bytes=cost.fixed.bytes, depth_kernels=cost.depth.kernels,
                depth_trips=cost.depth.round_trips, depth_bytes=cost.depth.bytes,
                depth_loops=cost.depth_loops, outside_kernels=cost.outside.kernels,
                outside_bytes=cost.outside.bytes)


def analyse(name: str, batch: int, num_actions: int, sims: int,
            run: bool = False, hlo_dir: str | None = None) -> dict[str, Any]:
    """The per-simulation costs of search ``name`` (compiled; with ``run``, also
    called once, and ``D``: the mean over simulations of the batch's longest path,
    the depth loops' trip count, from its tree)."""
    fn, args = searches(batch, num_actions, sims)[name]
    path = _hlo_path(hlo_dir, name, batch, num_actions, sims) if hlo_dir else None
    if path and not run and os.path.exists(path):  # compiled by an earlier run
        with open(path) as f:
            text, compile_s = f.read(), float("nan")
    else:
        start = time.perf_counter()
        compiled = jax.jit(fn).lower(*args).compile()
        compile_s = time.perf_counter() - start
        text = compiled.as_text()
        if path:
            os.makedirs(hlo_dir, exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
    row = dict(cost_row(text, sims), search=name, B=batch, S=sims, A=num_actions,
               compile_s=compile_s)
    if run:
        tree = compiled(*args).search_tree
        nodes = int(np.max(np.asarray(tree.num_nodes)))
        per = max(1, round((nodes - 1) / sims))  # nodes added per simulation
        row["D"] = float(np.mean(path_depths(tree, (nodes - 1) // per, per)))
        row["nodes_per_sim"] = per
        del tree
    return row


def modelled(row: dict[str, Any], depth: float) -> dict[str, float]:
    """The model's seconds for one search of ``row`` with depth-loop trip count ``depth``."""
    per_sim = Cost(row["fixed_kernels"], row["fixed_trips"], row["fixed_bytes"]) + Cost(
        row["depth_kernels"], row["depth_trips"], row["depth_bytes"]) * depth
    total = per_sim * row["S"] + Cost(row["outside_kernels"], 0, row["outside_bytes"])
    launch, trips, memory = model_seconds(total)
    return dict(kernels=total.kernels, round_trips=total.round_trips, bytes=total.bytes,
                launch_s=launch, trips_s=trips, memory_s=memory,
                model_s=launch + trips + memory)


def _fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table of :func:`analyse` rows with their model (``row['D']`` set)."""
    lines = ["| A | S | D | search | kernels/sim fixed | kernels/depth step | depth loops | "
             "bytes/sim fixed | bytes/depth step | kernels/search | GB/search | "
             "model ms: launch + host + memory = total | x mctx (model) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by_key = {(r["A"], r["S"], r["search"]): r for r in rows}
    for r in rows:
        m = modelled(r, r["D"])
        base = by_key.get((r["A"], r["S"], "mctx/" + r["search"].split("/")[1]))
        ratio = modelled(base, base["D"])["model_s"] / m["model_s"] if base else float("nan")
        lines.append(
            f"| {r['A']} | {r['S']} | {r['D']:.1f} | {r['search']} | {r['fixed_kernels']:.0f} | "
            f"{r['depth_kernels']:.0f} | {r['depth_loops']} | {_fmt_bytes(r['fixed_bytes'])} | "
            f"{_fmt_bytes(r['depth_bytes'])} | {m['kernels']:,.0f} | {m['bytes'] / 1e9:.3g} | "
            f"{m['launch_s'] * 1e3:,.0f} + {m['trips_s'] * 1e3:,.0f} + "
            f"{m['memory_s'] * 1e3:,.0f} = {m['model_s'] * 1e3:,.0f} | {ratio:.2f} |")
    return "\n".join(lines)


def time_searches(args: argparse.Namespace) -> None:
    """Medians of the searches of ``--cases`` (``A:S``) at ``--batch``, each pair of
    jaxpuct and mctx timed in turn by ``benchmarks.compare_mctx.compare``, and
    mctx's median over jaxpuct's: the measured ratio to set beside the model's."""
    from benchmarks.compare_mctx import Config, Impl, append_rows, compare

    policies = args.policies.split(",")
    for case in args.cases.split(","):
        num_actions, sims = (int(x) for x in case.split(":")[:2])
        found = searches(args.batch, num_actions, sims)
        for policy in policies:
            pair = [Impl(name, *found[name]) for name in (f"jaxpuct/{policy}",
                                                           f"mctx/{policy}")]
            timings = compare(pair, Config(reps=5, budget=5.0), keep_output=False)
            ours, theirs = (timings[impl.name] for impl in pair)
            row = dict(B=args.batch, A=num_actions, S=sims, policy=policy,
                       jaxpuct_ms=1e3 * ours.median, mctx_ms=1e3 * theirs.median,
                       x_mctx=theirs.median / ours.median, n=min(ours.n, theirs.n),
                       device=jax.devices()[0].device_kind, jax=jax.__version__)
            print(json.dumps(row), flush=True)
            if args.json:
                append_rows(args.json, "kernels_time", [row])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=1024, help="B (default 1024)")
    parser.add_argument("--cases", default="82:64,362:64,82:800:64",
                        help="comma-separated A:S or A:S:B_D cases: B_D is the batch of the "
                        "search run to measure D (default: --batch)")
    parser.add_argument("--policies", default="puct,gumbel,stochastic")
    parser.add_argument("--hlo-dir", default=None, help="write each compiled HLO here")
    parser.add_argument("--reanalyse", default=None,
                        help="rows (JSON lines) of an earlier run with --hlo-dir: count "
                        "again from its HLO texts, compile nothing")
    parser.add_argument("--json", default=None, help="append rows as JSON lines")
    parser.add_argument("--time", action="store_true",
                        help="time the searches of --cases at --batch instead of counting "
                        "(to set the model beside a device's clock)")
    args = parser.parse_args(argv)
    if args.time:
        time_searches(args)
        return
    if args.reanalyse:  # the same rows, counted again from the saved HLO texts
        with open(args.reanalyse) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        for row in rows:
            with open(_hlo_path(args.hlo_dir, row["search"], row["B"], row["A"],
                                row["S"])) as f:
                row.update(cost_row(f.read(), row["S"]))
        print(markdown(rows))
        return
    rows = []
    cases = [tuple(int(x) for x in c.split(":")) for c in args.cases.split(",")]
    for a, s, *depth_batch in cases:
        depth_batch = depth_batch[0] if depth_batch else args.batch
        for policy in args.policies.split(","):
            name = f"jaxpuct/{policy}"
            ours = analyse(name, args.batch, a, s, run=depth_batch == args.batch,
                           hlo_dir=args.hlo_dir)
            if depth_batch != args.batch:  # D from a smaller batch's search
                ours["D"] = analyse(name, depth_batch, a, s, run=True)["D"]
            ours["depth_B"] = depth_batch
            theirs = analyse(f"mctx/{policy}", args.batch, a, s, hlo_dir=args.hlo_dir)
            # the same trees for PUCT and chance nodes (tested); Gumbel: alike (its own draw)
            theirs["D"], theirs["depth_B"] = ours["D"], depth_batch
            for row in (ours, theirs):
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.json:
                    with open(args.json, "a") as f:
                        f.write(json.dumps(row) + "\n")
    print(f"\njax {jax.__version__}; launch {LAUNCH_S * 1e6:g} us, host round trip "
          f"{ROUND_TRIP_S * 1e6:g} us, {BANDWIDTH / 1e12:g} TB/s\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()

"""Where a compiled step's code comes from: XLA's kernels and their LLVM IR, by the
Python function that wrote them, jaxpuct's step beside mctx's.

XLA's CPU compile time follows the number of kernels it emits (one LLVM module
each) and their size (``docs/benchmarks.md``, "Compile time"). This tool compiles
one step of :mod:`benchmarks.compile_time` per policy in a fresh process with
``XLA_FLAGS=--xla_dump_to=DIR`` (XLA's default flags otherwise, no persistent
cache), then reads the dump:

* the **kernels**: the step module's ``*.ir-with-opt.ll`` files, one per kernel,
  their size the optimised LLVM IR's bytes;
* each kernel's **source**: the ``stack_frame_id`` of its instruction in the
  optimised HLO (``*.cpu_after_optimizations.txt``), followed up the module's
  ``StackFrames`` table to the innermost frame in a file of one of ``--packages``
  (jaxpuct, mctx, pgx, flax by default); ``file:function``.

Inner jitted functions (``jax.random``'s threefry among them) keep the source of
the call that first traced them, so the child clears JAX's caches after building
the step's arguments: every frame is then one of the step's own calls.

    python -m benchmarks.compile_sources [--policies jaxpuct/gumbel,mctx/gumbel]
        [--batch 256] [--simulations 64] [--top 25] [--core 0] [--json rows.json]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import glob
import json
import os
import re
import tempfile
import time
from collections.abc import Sequence
from typing import Any

PACKAGES = ("jaxpuct", "mctx", "pgx", "flax")


@dataclasses.dataclass(frozen=True)
class Frame:
    """One row of an HLO module's ``StackFrames`` table, resolved."""

    file: str
    function: str
    line: int
    parent: int


def _section(text: str, name: str) -> str:
    found = re.search(rf"^{name}\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
    return found.group(1) if found else ""


def stack_frames(hlo_text: str) -> dict[int, Frame]:
    """``frame id -> Frame`` from the tables at the top of an HLO module's text
    (``FileNames``, ``FunctionNames``, ``FileLocations``, ``StackFrames``)."""
    files = {int(i): name for i, name in re.findall(r'^(\d+) "(.*)"$',
                                                    _section(hlo_text, "FileNames"), re.M)}
    functions = {int(i): name for i, name in re.findall(
        r'^(\d+) "(.*)"$', _section(hlo_text, "FunctionNames"), re.M)}
    locations = {int(i): (int(f), int(fn), int(line)) for i, f, fn, line in re.findall(
        r"^(\d+) \{file_name_id=(\d+) function_name_id=(\d+) line=(\d+)",
        _section(hlo_text, "FileLocations"), re.M)}
    frames = {}
    for i, loc, parent in re.findall(r"^(\d+) \{file_location_id=(\d+) parent_frame_id=(\d+)",
                                     _section(hlo_text, "StackFrames"), re.M):
        f, fn, line = locations[int(loc)]
        frames[int(i)] = Frame(files[f], functions[fn], line, int(parent))
    return frames


def source(frame_id: int, frames: dict[int, Frame], packages: Sequence[str]) -> str:
    """``file:function`` of the innermost frame of ``frame_id``'s stack whose file
    lies in one of ``packages`` (a path component), else of the innermost frame;
    ``"?"`` without a frame. A frame whose parent is itself or unknown ends the stack."""
    chain, seen = [], set()
    while frame_id in frames and frame_id not in seen:
        seen.add(frame_id)
        chain.append(frames[frame_id])
        frame_id = frames[frame_id].parent
    for frame in chain:
        parts = frame.file.replace("\\", "/").split("/")
        if any(package in parts for package in packages):
            return f"{os.path.basename(frame.file)}:{frame.function}"
    return f"{os.path.basename(chain[0].file)}:{chain[0].function}" if chain else "?"


def kernel_name(path: str, module: str) -> str:
    """The HLO instruction behind a dumped kernel file: ``module_0026.jit_step.
    add_fusion.2_kernel_module.ir-with-opt.ll`` -> ``add_fusion.2``."""
    name = os.path.basename(path)[len(module):].removesuffix(".ir-with-opt.ll").lstrip(".")
    return name.removesuffix("_kernel_module").removeprefix("__compute_module_")


def step_module(dump_dir: str, function: str = "step") -> str:
    """The dump's module of the jitted ``function``, the last one compiled where
    there are several (``module_0026.jit_step``): not the helpers compiled while
    the step's arguments were built (the network's initialisation is larger)."""
    texts = glob.glob(os.path.join(dump_dir, f"*.jit_{function}.cpu_after_optimizations.txt"))
    if not texts:
        raise FileNotFoundError(f"no optimised HLO of jit_{function} in {dump_dir!r}: was "
                                "XLA_FLAGS --xla_dump_to set before JAX started?")
    return max(os.path.basename(t).removesuffix(".cpu_after_optimizations.txt")
               for t in texts)


@dataclasses.dataclass(frozen=True)
class SourceRow:
    """Kernels of one source function: how many, and their optimised IR in bytes."""

    source: str
    kernels: int
    ir_bytes: int


def attribute(dump_dir: str, packages: Sequence[str] = PACKAGES, function: str = "step"
              ) -> list[SourceRow]:
    """:class:`SourceRow` per source function of the dump's module of the jitted
    ``function``, largest first (module docstring)."""
    module = step_module(dump_dir, function)
    with open(os.path.join(dump_dir, f"{module}.cpu_after_optimizations.txt")) as f:
        text = f.read()
    frames = stack_frames(text)
    frame_of = {name: int(fid) for name, fid in re.findall(
        r"^\s*(?:ROOT )?%?([\w.\-]+) = [^\n]*?stack_frame_id=(\d+)", text, re.M)}
    kernels: collections.Counter[str] = collections.Counter()
    sizes: collections.Counter[str] = collections.Counter()
    # ``?``: code XLA emitted for no named instruction (the program's own module,
    # ``part_NN``, which holds the loops and calls; or the whole program in one module
    # where the fusion emitters are off, as under the test suite's flags).
    paths = glob.glob(os.path.join(dump_dir, f"{module}.*.ir-with-opt.ll"))
    paths += glob.glob(os.path.join(dump_dir, f"{module}.ir-with-opt.ll"))
    for path in paths:
        name = kernel_name(path, module)
        where = source(frame_of[name], frames, packages) if name in frame_of else "?"
        kernels[where] += 1
        sizes[where] += os.path.getsize(path)
    return sorted((SourceRow(s, kernels[s], sizes[s]) for s in kernels),
                  key=lambda row: (-row.ir_bytes, row.source))


# --------------------------------------------------------------------------- child


def compile_step(name: str, batch: int, sims: int) -> dict[str, Any]:
    """Builds ``name``'s step, clears JAX's caches (module docstring) and compiles it;
    CPU seconds of ``lower()`` and ``compile()``."""
    import jax

    from benchmarks import compile_time

    step, args = compile_time.build(name, batch, sims)
    jax.block_until_ready(args)
    jax.clear_caches()
    start = time.process_time()
    lowered = jax.jit(step).lower(*args)
    lowered_at = time.process_time()
    lowered.compile()
    return dict(policy=name, lower_cpu_s=lowered_at - start,
                compile_cpu_s=time.process_time() - lowered_at)


def run_child(name: str, batch: int, sims: int, dump_dir: str, core: int | None
              ) -> dict[str, Any]:
    """:func:`compile_step` in a fresh process dumping into ``dump_dir``; its row."""
    from benchmarks.compile_time import child_row

    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={dump_dir} --xla_dump_hlo_as_text")
    return child_row("benchmarks.compile_sources",
                     ["--child", name, "--batch", str(batch), "--simulations", str(sims)],
                     env, core, name)


# --------------------------------------------------------------------------- report


def markdown(name: str, rows: list[SourceRow], top: int) -> str:
    """A table of ``rows``' first ``top`` sources, the rest summed, and the total."""
    total_k, total_b = sum(r.kernels for r in rows), sum(r.ir_bytes for r in rows)
    lines = [f"| {name}: source | kernels | optimised IR, kB | share |", "|---|---|---|---|"]
    shown = rows[:top]
    for r in shown:
        lines.append(f"| `{r.source}` | {r.kernels} | {r.ir_bytes / 1e3:,.1f} | "
                     f"{r.ir_bytes / max(total_b, 1):.1%} |")
    rest = rows[top:]
    if rest:
        rest_b = sum(r.ir_bytes for r in rest)
        lines.append(f"| {len(rest)} other sources | {sum(r.kernels for r in rest)} | "
                     f"{rest_b / 1e3:,.1f} | {rest_b / max(total_b, 1):.1%} |")
    lines.append(f"| **total** | **{total_k}** | **{total_b / 1e3:,.1f}** | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from benchmarks.compile_time import POLICIES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default="jaxpuct/gumbel,mctx/gumbel")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--core", type=int, default=None, help="pin the children to this core")
    parser.add_argument("--packages", default=",".join(PACKAGES),
                        help="where a kernel's source is looked for, innermost first")
    parser.add_argument("--json", default=None, help="write every row here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(compile_step(args.child, args.batch, args.simulations)))
        return
    names = [n for n in args.policies.split(",") if n]
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        parser.error(f"--policies: expected names from {POLICIES}, got {unknown}")
    packages = tuple(p for p in args.packages.split(",") if p)
    report: dict[str, Any] = {}
    for name in names:
        with tempfile.TemporaryDirectory(prefix="compile_sources_") as dump_dir:
            timing = run_child(name, args.batch, args.simulations, dump_dir, args.core)
            rows = attribute(dump_dir, packages)
        report[name] = dict(timing, sources=[dataclasses.asdict(r) for r in rows])
        print(f"\n{name}: B={args.batch} S={args.simulations}, lower {timing['lower_cpu_s']:.1f} "
              f"CPU-s, compile {timing['compile_cpu_s']:.1f} CPU-s (with the dump's writes)\n")
        print(markdown(name, rows, args.top), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(batch=args.batch, simulations=args.simulations,
                           packages=list(packages), policies=report), f, indent=1)


if __name__ == "__main__":
    main()

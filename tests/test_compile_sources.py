"""``benchmarks/compile_sources.py``: an HLO module's stack-frame tables read on a
hand-written module, and a real XLA dump attributed to the functions that wrote it."""

import os
import subprocess
import sys
import textwrap

from benchmarks import compile_sources as cs

# Frame 4 (inner, in the package) <- 3 (a library helper) <- 2 (the package's caller)
# <- 1 (the script, its own parent: the stack's end). Frame 5 is outside the package.
TABLES = """HloModule m

FileNames
1 "/home/u/run.py"
2 "/site/mypkg/search.py"
3 "/site/jax/_src/numpy/lax_numpy.py"

FunctionNames
1 "<module>"
2 "policy"
3 "where"
4 "walk.<locals>.step"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=0 end_column=9}
2 {file_name_id=2 function_name_id=2 line=40 end_line=40 column=4 end_column=20}
3 {file_name_id=3 function_name_id=3 line=900 end_line=900 column=4 end_column=20}
4 {file_name_id=2 function_name_id=4 line=77 end_line=77 column=8 end_column=30}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}
3 {file_location_id=3 parent_frame_id=2}
4 {file_location_id=4 parent_frame_id=3}
5 {file_location_id=3 parent_frame_id=1}

ENTRY %main () -> f32[] {
  ROOT %c = f32[] constant(0)
}
"""


def test_stack_frames_resolve_to_the_innermost_frame_in_a_package():
    frames = cs.stack_frames(TABLES)
    assert frames[4] == cs.Frame("/site/mypkg/search.py", "walk.<locals>.step", 77, 3)
    assert cs.source(4, frames, ("mypkg",)) == "search.py:walk.<locals>.step"
    # The library frame is skipped for the package's caller above it.
    assert cs.source(3, frames, ("mypkg",)) == "search.py:policy"
    # No frame in a package: the innermost frame; no frame at all: "?".
    assert cs.source(5, frames, ("mypkg",)) == "lax_numpy.py:where"
    assert cs.source(99, frames, ("mypkg",)) == "?"
    # A package is a path component, not a substring of one.
    assert cs.source(4, frames, ("pkg",)) == "search.py:walk.<locals>.step"
    assert cs.source(3, frames, ("pkg",)) == "lax_numpy.py:where"


def test_a_dump_is_attributed_to_the_functions_that_wrote_its_kernels(tmp_path):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp

        def scores(x):
            return jnp.sort(jnp.exp(x) * 3.0 + jnp.cumsum(x, axis=-1), axis=-1)

        def pick(x):
            return jnp.argmax(jnp.where(x > 0.5, x, -x), axis=-1)

        def step(x):
            def body(carry):
                i, y = carry
                return i + 1, scores(y) * 0.5
            done = lambda c: (c[0] < 3) & (c[1][0, 0] < 100.0)
            return pick(jax.lax.while_loop(done, body, (0, x))[1])

        jax.jit(step).lower(jnp.ones((4, 9))).compile()
        """))
    dump = tmp_path / "dump"
    # XLA's default flags, as the tool's children: the suite's turn the fusion
    # emitters off, and XLA then writes the whole program as one module.
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_dump_to={dump} --xla_dump_hlo_as_text",
               PYTHONPATH=str(tmp_path))
    subprocess.run([sys.executable, "-c", "import mypkg.ops"], env=env, check=True)
    rows = cs.attribute(str(dump), ("mypkg",))
    by_source = {row.source: row for row in rows}
    assert {"ops.py:scores", "ops.py:pick", "ops.py:step.<locals>.body"} <= set(by_source), \
        by_source
    assert all(row.kernels >= 1 and row.ir_bytes > 0 for row in rows)
    # Every kernel file of the module is counted once.
    module = cs.step_module(str(dump))
    files = list(dump.glob(f"{module}.*ir-with-opt.ll"))
    assert sum(row.kernels for row in rows) == len(files)
    assert sum(row.ir_bytes for row in rows) == sum(f.stat().st_size for f in files)
    assert [row.ir_bytes for row in rows] == sorted((row.ir_bytes for row in rows), reverse=True)
    table = cs.markdown("mypkg", rows, top=1)
    assert "| **total** |" in table and f"| `{rows[0].source}` |" in table

"""The launch-cost counter of ``benchmarks/kernels.py``: its HLO reading on a
hand-written module, and the recorded kernels per depth step of a search."""

import json

import jax
import pytest

import jaxpuct
from benchmarks import kernels
from jaxpuct.testing import synthetic

# Kernels one depth step (walk down + backup up, both loops' body and condition)
# of ``alphazero_policy`` (default rule, B = 2, A = 8) compiles to on CPU with
# jax/jaxlib 0.10.2 under the suite's XLA flags (``conftest.FAST_XLA_FLAGS``: no
# CPU fusion emitters, so more, smaller kernels; XLA's default flags give 43). A
# change that adds kernels fails here: look at ``python -m benchmarks.kernels``
# and, if the cost is worth it, record the new number and say so in the commit.
# Fewer is welcome: lower the number.
# 74 before tree reads and writes became single gathers, 67 before the walk's path
# columns were written unmasked.
RECORDED_DEPTH_KERNELS = 65
RECORDED_DEPTH_LOOPS = 2
# Kernels per simulation outside the depth loops, same setting (alphazero_policy as
# above; gumbel_policy with its defaults, B = 2, A = 8), and Gumbel's depth step. The
# root step inside the walk's loop took them to 162 and 173 (Gumbel's depth step to
# 82) but cost Gumbel 6-9% of its CPU run time; it was not kept (docs/benchmarks.md,
# "Compile time").
RECORDED_FIXED_KERNELS = {"alphazero": 172, "gumbel": 189}
RECORDED_GUMBEL_DEPTH_KERNELS = 76

# Two nested loops: a fori loop of 8 iterations around a while loop of unknown
# trip count; a fusion that slices a [4, 100] f32 parameter and one that updates
# it in place; a threefry-like rolled loop (5 rounds, two u32[4] tables).
MODULE = """HloModule m

%fused_slice (p0: f32[4,100], p1: s32[]) -> f32[4,1] {
  %p0 = f32[4,100]{1,0} parameter(0)
  %p1 = s32[] parameter(1)
  %c = s32[] constant(0)
  ROOT %ds = f32[4,1]{1,0} dynamic-slice(%p0, %c, %p1), dynamic_slice_sizes={4,1}
}

%fused_update (p0: f32[4,100], p1: f32[4,1], p2: s32[]) -> f32[4,100] {
  %p0 = f32[4,100]{1,0} parameter(0)
  %p1 = f32[4,1]{1,0} parameter(1)
  %p2 = s32[] parameter(2)
  %c = s32[] constant(0)
  ROOT %dus = f32[4,100]{1,0} dynamic-update-slice(%p0, %p1, %c, %p2)
}

%fused_add (p0: f32[4,100]) -> f32[4,100] {
  %p0 = f32[4,100]{1,0} parameter(0)
  ROOT %a = f32[4,100]{1,0} add(%p0, %p0)
}

%inner_body (t: (s32[], f32[4,100])) -> (s32[], f32[4,100]) {
  %t = (s32[], f32[4,100]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[4,100]{1,0} get-tuple-element(%t), index=1
  %s = f32[4,1]{1,0} fusion(%x, %i), kind=kLoop, calls=%fused_slice
  %u = f32[4,100]{1,0} fusion(%x, %s, %i), kind=kLoop, calls=%fused_update
  ROOT %r = (s32[], f32[4,100]{1,0}) tuple(%i, %u)
}

%inner_cond (t: (s32[], f32[4,100])) -> pred[] {
  %t = (s32[], f32[4,100]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %z = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %z), direction=LT
}

%outer_body (t: (s32[], f32[4,100])) -> (s32[], f32[4,100]) {
  %t = (s32[], f32[4,100]{1,0}) parameter(0)
  %x = f32[4,100]{1,0} get-tuple-element(%t), index=1
  %y = f32[4,100]{1,0} fusion(%x), kind=kLoop, calls=%fused_add
  %w = (s32[], f32[4,100]{1,0}) while(%t), condition=%inner_cond, body=%inner_body
  ROOT %r = (s32[], f32[4,100]{1,0}) tuple(%t, %y)
}

%outer_cond (t: (s32[], f32[4,100])) -> pred[] {
  %t = (s32[], f32[4,100]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %z = s32[] constant(8)
  ROOT %lt = pred[] compare(%i, %z), direction=LT
}

%rounds (t: (s32[], u32[4], u32[4])) -> (s32[], u32[4], u32[4]) {
  ROOT %t = (s32[], u32[4]{0}, u32[4]{0}) parameter(0)
}

ENTRY %main (a: f32[4,100]) -> f32[4,100] {
  %a = f32[4,100]{1,0} parameter(0)
  %k = (s32[], u32[4]{0}, u32[4]{0}) constant({0, {1, 2, 3, 4}, {1, 2, 3, 4}})
  %rolled = (s32[], u32[4]{0}, u32[4]{0}) while(%k), condition=%outer_cond, body=%rounds, TRIP(5)
  %zero = s32[] constant(0)
  %t = (s32[], f32[4,100]{1,0}) tuple(%zero, %a)
  %w = (s32[], f32[4,100]{1,0}) while(%t), condition=%outer_cond, body=%outer_body, TRIP(8)
  ROOT %o = f32[4,100]{1,0} get-tuple-element(%w), index=1
}
"""
for _n in (5, 8):  # XLA's record of a fori_loop's trip count
    MODULE = MODULE.replace(f"TRIP({_n})",
                            'backend_config={"known_trip_count":{"n":"' + str(_n) + '"}}')


def test_counts_a_hand_written_module():
    cost = kernels.per_simulation(kernels.Program(MODULE), 8)
    # per outer iteration: the add fusion (1600 B in, 1600 B out) and the condition's
    # compare (two s32 in, a pred out); one host round trip for the next iteration
    assert (cost.fixed.kernels, cost.fixed.round_trips, cost.fixed.bytes) == (2, 1, 3209)
    # per depth step: the slice (16 B read, the 4 B index, 16 B written), the
    # in-place update (the 16 B update and 4 B index read, 16 B written: the rest of
    # the [4, 100] buffer is untouched) and the compare; one round trip
    assert cost.depth_loops == 1
    assert (cost.depth.kernels, cost.depth.round_trips) == (3, 1)
    assert cost.depth.bytes == (16 + 4 + 16) + (16 + 4 + 16) + (4 + 4 + 1)
    # outside: the rolled 5-round loop is one kernel (GPU threefry is one fusion)
    assert (cost.outside.kernels, cost.outside.round_trips) == (1, 0)
    with pytest.raises(ValueError, match="num_steps: no while loop with known trip count 7"):
        kernels.per_simulation(kernels.Program(MODULE), 7)


def test_type_bytes():
    assert kernels.type_bytes("(s32[], f32[2,9]{1,0}, pred[3], u32[2,1,4])") == 4 + 72 + 3 + 32


def test_kernels_per_depth_step_do_not_grow():
    root, recurrent_fn = synthetic.synthetic_game(2, 8)

    def policy(key):
        return jaxpuct.alphazero_policy(None, key, root, recurrent_fn, 8,
                                        dirichlet_fraction=0.0).action

    text = jax.jit(policy).lower(jax.random.PRNGKey(0)).compile().as_text()
    cost = kernels.per_simulation(kernels.Program(text), 8)
    assert cost.depth_loops == RECORDED_DEPTH_LOOPS
    assert cost.depth.kernels <= RECORDED_DEPTH_KERNELS, (
        f"kernels per depth step grew: {cost.depth.kernels:.0f} > "
        f"{RECORDED_DEPTH_KERNELS} recorded (see this file's comment)")


def _compiled_policies() -> dict[str, str]:
    root, recurrent_fn = synthetic.synthetic_game(2, 8)
    policies = {
        "alphazero": lambda key: jaxpuct.alphazero_policy(
            None, key, root, recurrent_fn, 8, dirichlet_fraction=0.0).action,
        "gumbel": lambda key: jaxpuct.gumbel_policy(None, key, root, recurrent_fn, 8).action,
    }
    return {name: jax.jit(policy).lower(jax.random.PRNGKey(0)).compile().as_text()
            for name, policy in policies.items()}


def test_kernels_per_simulation_outside_the_depth_loops_do_not_grow():
    texts = _compiled_policies()
    for name, text in texts.items():
        cost = kernels.per_simulation(kernels.Program(text), 8)
        assert cost.fixed.kernels <= RECORDED_FIXED_KERNELS[name], (
            f"{name}: kernels per simulation outside the depth loops grew: "
            f"{cost.fixed.kernels:.0f} > {RECORDED_FIXED_KERNELS[name]} recorded")
        if name == "gumbel":
            assert cost.depth.kernels <= RECORDED_GUMBEL_DEPTH_KERNELS


def test_time_mode_writes_a_row_per_policy_with_mctx_over_jaxpuct(tmp_path):
    pytest.importorskip("mctx")
    rows_path = tmp_path / "kt.jsonl"
    kernels.main(["--time", "--batch", "2", "--cases", "8:2", "--policies", "puct",
                  "--json", str(rows_path)])
    (row,) = [json.loads(line) for line in rows_path.read_text().splitlines()]
    assert (row["B"], row["A"], row["S"], row["policy"]) == (2, 8, 2, "puct")
    assert row["n"] >= 1 and row["jaxpuct_ms"] > 0 and row["mctx_ms"] > 0
    assert row["x_mctx"] == pytest.approx(row["mctx_ms"] / row["jaxpuct_ms"])

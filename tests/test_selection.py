"""The selection rule against an independent NumPy transcription of its docstring.

``reference_scores`` below is written from the module docstring of
``jaxpuct/selection.py`` (one tree at a time, in float64, plain loops), not from
its code. Random node statistics come from hypothesis; values and parent values are
drawn on a grid of multiples of 1/8 (exact in float32) so that exact ties occur and
min-max normalisation never divides by a float32 rounding error.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxpuct
from jaxpuct import PUCTConfig

B, A = 6, 5
RTOL = ATOL = 2e-5  # float32 against float64


# ----------------------------------------------------------------- the reference


def reference_scores(cfg: PUCTConfig, stats: dict) -> np.ndarray:
    """``[B, A]`` float64 scores, ``-inf`` at illegal actions, from the docstring."""
    out = np.full((B, A), -np.inf)
    for b in range(B):
        prior = stats["prior"][b].astype(np.float64)
        n_edge = stats["edge_visits"][b].astype(np.float64)
        q_edge = stats["edge_q"][b].astype(np.float64)
        has_q = stats["has_q"][b]
        legal = stats["legal"][b]
        q_parent = float(stats["parent_value"][b])
        is_root = bool(np.broadcast_to(stats["is_root"], (B,))[b])

        # N(s): the sum of edge visits, or the node's own count.
        if cfg.parent_visits == "edge_sum":
            n_parent = float(n_edge.sum())
            n_for_growth = max(n_parent, 1.0)  # "uses max(N(s), 1)"
        else:
            n_parent = float(stats["node_visits"][b])
            n_for_growth = n_parent
        if cfg.c_base is None:
            c = cfg.c_init
        else:
            c = cfg.c_init + math.log((n_parent + cfg.c_base + 1.0) / cfg.c_base)

        visited_q = [q_edge[a] for a in range(A) if has_q[a]]
        lo = min([q_parent] + visited_q)
        hi = max([q_parent] + visited_q)
        if cfg.unvisited_q == "zero":
            fill = 0.0
        elif cfg.unvisited_q == "parent":
            fill = q_parent
        elif cfg.unvisited_q == "fpu":
            r = cfg.fpu_reduction_root if is_root else cfg.fpu_reduction
            mass = sum(prior[a] for a in range(A) if n_edge[a] > 0)
            fill = q_parent - r * math.sqrt(mass)
        elif cfg.unvisited_q == "fixed":
            fill = cfg.unvisited_value
        elif cfg.unvisited_q == "min":
            fill = lo
        else:
            raise AssertionError(cfg.unvisited_q)

        for a in range(A):
            if not legal[a]:
                continue
            if cfg.form == "puct":
                u = c * prior[a] * n_for_growth ** cfg.exponent / (1.0 + n_edge[a])
            elif cfg.form == "uct_log":
                u = c * prior[a] * math.sqrt(
                    math.log(1.0 + n_parent + cfg.log_offset) / (1.0 + n_edge[a]))
            else:  # ucb1: the prior plays no part
                u = c * math.sqrt(math.log(max(n_parent, 1.0) + cfg.log_offset)
                                  / max(n_edge[a], 1.0))
            q = q_edge[a] if has_q[a] else fill
            if cfg.q_normalization == "minmax":
                q = (q - lo) / max(hi - lo, 1e-8)
            score = q + u
            if cfg.tie_noise > 0:
                score += cfg.tie_noise * float(stats["uniform"][b, a])
            out[b, a] = score
    return out


# ----------------------------------------------------------------- jaxpuct, jitted


@functools.partial(jax.jit, static_argnums=0)
def _scores_jit(cfg, stats):
    return jaxpuct.selection.puct_scores(cfg, **stats)


def _jaxpuct_scores(cfg, stats, jit=True):
    args = {k: jnp.asarray(v) for k, v in stats.items()}
    if cfg.tie_noise == 0:
        args.pop("uniform")
    fn = _scores_jit if jit else jaxpuct.selection.puct_scores
    return np.asarray(fn(cfg, args) if jit else fn(cfg, **args))


# ----------------------------------------------------------------- strategies


GRID = np.arange(-12, 13) / 8.0  # values in [-1.5, 1.5], exact in float32


@st.composite
def node_statistics(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    legal = rng.random((B, A)) < draw(st.sampled_from([0.5, 0.8, 1.0]))
    legal[np.arange(B), rng.integers(0, A, B)] = True  # at least one legal action
    max_visits = draw(st.sampled_from([0, 1, 3, 50]))
    visits = rng.integers(0, max_visits + 1, (B, A)) * (rng.random((B, A)) < 0.7)
    visits = np.where(legal, visits, 0).astype(np.int32)
    # A visited edge normally has a child value; not after the tree filled up.
    has_q = (visits > 0) & (rng.random((B, A)) < 0.9)
    if draw(st.booleans()):
        logits = rng.normal(size=(B, A)) * 2.0
    else:
        logits = np.zeros((B, A))  # uniform: exact ties in U
    prior = np.where(legal, np.exp(logits), 0.0)
    prior = (prior / prior.sum(-1, keepdims=True)).astype(np.float32)
    edge_q = rng.choice(GRID, (B, A)).astype(np.float32)
    parent_value = rng.choice(GRID, B).astype(np.float32)
    node_visits = (visits.sum(-1) + draw(st.sampled_from([0, 1, 2]))).astype(np.int32)
    is_root = (rng.random(B) < 0.5) if draw(st.booleans()) else np.bool_(draw(st.booleans()))
    return dict(prior=prior, edge_visits=visits, edge_q=edge_q, has_q=has_q, legal=legal,
                parent_value=parent_value, node_visits=node_visits, is_root=is_root,
                uniform=rng.random((B, A)).astype(np.float32))


configs = st.builds(
    PUCTConfig,
    c_init=st.sampled_from([0.0, 1.25, 2.5]),
    c_base=st.sampled_from([None, 19652.0, 4.0]),
    exponent=st.sampled_from([0.5, 0.25, 1.0]),
    form=st.sampled_from(["puct", "uct_log", "ucb1"]),
    log_offset=st.sampled_from([0.0, 2.0]),
    parent_visits=st.sampled_from(["edge_sum", "node"]),
    unvisited_q=st.sampled_from(["zero", "parent", "fpu", "fixed", "min"]),
    fpu_reduction=st.sampled_from([0.0, 0.2, 0.5]),
    fpu_reduction_root=st.sampled_from([0.0, 0.3]),
    unvisited_value=st.sampled_from([-1.0, 0.25]),
    q_normalization=st.sampled_from(["none", "minmax"]),
    tie_noise=st.sampled_from([0.0, 0.0, 1e-3]),
)

# One configuration per variant: compiled once each, then shared by every example.
VARIANTS = [
    PUCTConfig(),
    PUCTConfig.mctx_muzero(),
    PUCTConfig.alphago(),
    PUCTConfig(c_base=None, c_init=2.0, unvisited_q="parent"),
    PUCTConfig(exponent=0.75, unvisited_q="zero"),
    PUCTConfig(exponent=1.0, parent_visits="node", unvisited_q="fixed", unvisited_value=-1.0),
    PUCTConfig(form="uct_log", log_offset=1.0, c_base=None, c_init=1.5),
    PUCTConfig(form="uct_log", parent_visits="node", q_normalization="minmax"),
    PUCTConfig(unvisited_q="fpu", fpu_reduction=0.5, fpu_reduction_root=0.25),
    PUCTConfig(unvisited_q="min", q_normalization="none", c_base=3.0),
    PUCTConfig(unvisited_q="fixed", unvisited_value=0.5, q_normalization="minmax"),
    PUCTConfig(tie_noise=0.01),
    PUCTConfig.uct(),
]


def _check_against_reference(cfg, stats, got):
    want = reference_scores(cfg, stats)
    legal = stats["legal"]
    assert np.all(np.isneginf(got[~legal])), "illegal actions must score -inf"
    np.testing.assert_allclose(got[legal], want[legal], rtol=RTOL, atol=ATOL,
                               err_msg=f"{cfg}")
    # The argmax is the reference's, unless the reference's top two are within
    # float32 error (then jaxpuct's choice must still be one of the best).
    chosen = np.argmax(got, axis=-1)
    for b in range(B):
        best = want[b].max()
        tol = ATOL + RTOL * abs(best)
        assert want[b, chosen[b]] >= best - tol, (cfg, b, got[b], want[b])
        runner_up = np.sort(want[b])[-2]
        if best - runner_up > 2 * tol:
            assert chosen[b] == np.argmax(want[b]), (cfg, b, got[b], want[b])


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cfg=configs, stats=node_statistics())
def test_scores_match_reference_any_config(cfg, stats):
    """Every combination of choices, un-jitted (no compile per configuration)."""
    _check_against_reference(cfg, stats, _jaxpuct_scores(cfg, stats, jit=False))


def _short(cfg: PUCTConfig) -> str:
    """The fields that differ from the defaults, e.g. ``unvisited_q=min,...``."""
    default = PUCTConfig()
    return ",".join(f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg)
                    if getattr(cfg, f.name) != getattr(default, f.name)) or "default"


@pytest.mark.parametrize("cfg", VARIANTS, ids=_short)
@settings(max_examples=25, deadline=None)
@given(stats=node_statistics())
def test_scores_match_reference_jitted(cfg, stats):
    _check_against_reference(cfg, stats, _jaxpuct_scores(cfg, stats, jit=True))


# ----------------------------------------------------------------- worked values


def _one_node(**overrides):
    """A single node (B rows, all equal) with 3 legal actions of 5."""
    stats = dict(
        prior=np.tile(np.array([0.5, 0.3, 0.2, 0.0, 0.0], np.float32), (B, 1)),
        edge_visits=np.zeros((B, A), np.int32),
        edge_q=np.zeros((B, A), np.float32),
        has_q=np.zeros((B, A), bool),
        legal=np.tile(np.array([True, True, True, False, False]), (B, 1)),
        parent_value=np.zeros(B, np.float32),
        node_visits=np.ones(B, np.int32),
        is_root=np.bool_(False),
        uniform=np.zeros((B, A), np.float32),
    )
    stats.update(overrides)
    return stats


def test_first_visit_follows_prior_with_edge_sum_floor():
    # A node with no edge visits: with edge_sum, N(s)=0 would make U vanish and the
    # lowest index win; the max(N, 1) floor makes the prior decide instead.
    stats = _one_node(prior=np.tile(np.array([0.2, 0.5, 0.3, 0, 0], np.float32), (B, 1)))
    cfg = PUCTConfig(c_base=None, c_init=1.0, unvisited_q="zero")
    got = _jaxpuct_scores(cfg, stats)
    np.testing.assert_allclose(got[0, :3], [0.2, 0.5, 0.3], rtol=1e-6)
    assert np.all(np.argmax(got, -1) == 1)
    # The node's own count of 0 gives U = 0 and all scores tie: the lowest index.
    cfg_node = dataclasses.replace(cfg, parent_visits="node")
    got = _jaxpuct_scores(cfg_node, dict(stats, node_visits=np.zeros(B, np.int32)))
    np.testing.assert_array_equal(got[0, :3], [0.0, 0.0, 0.0])
    assert np.all(np.argmax(got, -1) == 0)


def test_alphazero_schedule_worked_example():
    # N(s) = 10 edge visits (3, 7, 0); c = 1.25 + log((10 + 19652 + 1) / 19652).
    visits = np.tile(np.array([3, 7, 0, 0, 0], np.int32), (B, 1))
    q = np.tile(np.array([0.5, -0.25, 0, 0, 0], np.float32), (B, 1))
    stats = _one_node(edge_visits=visits, edge_q=q, has_q=visits > 0,
                      parent_value=np.full(B, 0.125, np.float32),
                      node_visits=np.full(B, 11, np.int32))
    c = 1.25 + math.log(19663 / 19652)
    fill = 0.125 - 0.2 * math.sqrt(0.8)  # FPU: visited prior mass 0.5 + 0.3
    want = [0.5 + c * 0.5 * math.sqrt(10) / 4, -0.25 + c * 0.3 * math.sqrt(10) / 8,
            fill + c * 0.2 * math.sqrt(10)]
    got = _jaxpuct_scores(PUCTConfig(), stats)
    np.testing.assert_allclose(got[0, :3], want, rtol=1e-6)
    # At the root the reduction is fpu_reduction_root = 0.
    got_root = _jaxpuct_scores(PUCTConfig(), dict(stats, is_root=np.bool_(True)))
    np.testing.assert_allclose(got_root[0, 2], 0.125 + c * 0.2 * math.sqrt(10), rtol=1e-6)


def test_ties_break_to_lowest_index_and_tie_noise_breaks_them():
    stats = _one_node(prior=np.tile(np.array([0.0, 0.25, 0.25, 0.25, 0.25], np.float32),
                                    (B, 1)),
                      legal=np.tile(np.array([False, True, True, True, True]), (B, 1)))
    got = _jaxpuct_scores(PUCTConfig(), stats)
    assert np.all(got[:, 1:] == got[:, 1:2])  # exact ties
    assert np.all(np.argmax(got, -1) == 1)
    # Tiny noise: the argmax follows the largest uniform draw among the tied actions.
    uniform = np.random.default_rng(0).random((B, A)).astype(np.float32)
    cfg = PUCTConfig(tie_noise=1e-6)
    got = _jaxpuct_scores(cfg, dict(stats, uniform=uniform))
    np.testing.assert_array_equal(np.argmax(got, -1), 1 + np.argmax(uniform[:, 1:], -1))


def test_illegal_action_never_wins():
    # An illegal action with a huge prior and Q stays -inf.
    stats = _one_node(prior=np.tile(np.array([0.01, 0.01, 0.01, 0.97, 0.0], np.float32),
                                    (B, 1)),
                      edge_q=np.tile(np.array([-1, -1, -1, 1, 1], np.float32), (B, 1)),
                      edge_visits=np.tile(np.array([1, 1, 1, 0, 0], np.int32), (B, 1)),
                      has_q=np.tile(np.array([1, 1, 1, 0, 0], bool), (B, 1)))
    for cfg in VARIANTS:
        got = _jaxpuct_scores(cfg, stats)
        assert np.all(np.isneginf(got[:, 3:])), cfg
        assert np.all(np.argmax(got, -1) < 3), cfg


def test_tie_noise_requires_uniform_draws():
    stats = {k: jnp.asarray(v) for k, v in _one_node().items() if k != "uniform"}
    with pytest.raises(ValueError, match="uniform"):
        jaxpuct.selection.puct_scores(PUCTConfig(tie_noise=1e-3), **stats)

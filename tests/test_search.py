"""The core search against exact oracles, its invariants, and its equalities.

* Tic-tac-toe (:mod:`jaxpuct.testing.tictactoe`): uniform prior, leaf value 0, exact terminal
  values. With ``PUCTConfig()`` and no root noise, the most visited move is
  minimax-optimal in every one of the 4520 reachable non-terminal positions, at a
  number of simulations that depends on how many stones are on the board.
* Random finite games: the root Q converges to the backward-induction value.
* Structural invariants of finished trees (``search_cases.check_tree``), by
  hypothesis over random games and several selection rules, depth limits and
  capacities.
* A batch equals its elements searched alone; the same key gives the same result;
  jit and eager agree.
"""

from __future__ import annotations

import functools
import re

import jax
import numpy as np
import pytest
import search_cases as sc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxpuct
from jaxpuct import PUCTConfig
from jaxpuct.testing import random_games, tictactoe

# ------------------------------------------------------------------ tic-tac-toe


@sc.jit_optimised(static_argnames=("sims",))
def _ttt_policy(state, *, sims):
    root = tictactoe.root(state)
    out = jaxpuct.alphazero_policy(None, jax.random.key(0), root, tictactoe.recurrent_fn,
                                   sims, selection=sc.DEFAULT, dirichlet_fraction=0.0,
                                   temperature=0.0)
    return out.action, out.search_tree.summary().visit_counts


_TTT_POSITIONS = tictactoe.all_positions()
_TTT_STONES = np.array([9 - p.count(0) for p in _TTT_POSITIONS])

# (stones on the board, simulations). Measured with PUCTConfig() (AlphaZero's c
# schedule, FPU 0.2 inside the tree, 0 at the root), the smallest numbers of
# simulations tried that give 100% were: 5-8 stones 64 (48: 3 misses of 3430),
# 4 stones 160 (128: 1 miss of 756), 3 stones 512 (400: 1 miss of 252), 2 stones
# 1024 (800: 1 miss of 72), 0-1 stones 1280 (1024: 3 misses of 10). The hard
# positions are the openings where only one reply draws (X in a corner: O must take
# the centre), which a uniform prior and zero leaf values discover only by deep
# search. One budget for all 4520 positions is costlier: at 200 simulations 35
# positions (all with 1-3 stones) are missed, 99.2%. The counts were measured with
# the compile options of search_cases.jit; near-ties can fall differently under
# other XLA options (37 misses at 200 with the default pipeline), so the test keeps
# some margin over each threshold. It compiles with search_cases.jit_optimised (its
# run time dominates), and passes there with the same budgets.
TTT_STRATA = [((5, 8), 96), ((4, 4), 256), ((3, 3), 640), ((2, 2), 1280), ((0, 1), 1600)]


def test_ttt_strata_cover_every_position():
    covered = sum(int(np.sum((_TTT_STONES >= lo) & (_TTT_STONES <= hi)))
                  for (lo, hi), _ in TTT_STRATA)
    assert covered == len(_TTT_POSITIONS) == 4520


@pytest.mark.parametrize("stones, sims", TTT_STRATA, ids=[f"{a}-{b}stones" for (a, b), _ in
                                                            TTT_STRATA])
def test_ttt_most_visited_move_is_minimax_optimal(stones, sims):
    lo, hi = stones
    index = np.flatnonzero((_TTT_STONES >= lo) & (_TTT_STONES <= hi))
    positions = [_TTT_POSITIONS[i] for i in index]
    action, counts = _ttt_policy(tictactoe.batch(positions), sims=sims)
    action, counts = np.asarray(action), np.asarray(counts)
    # Temperature 0: the action is the most visited move, lowest index on ties.
    np.testing.assert_array_equal(action, np.argmax(counts, axis=-1))
    assert np.all(counts.sum(-1) == sims)
    misses = [(tictactoe.format_position(p), int(a), sorted(tictactoe.optimal_moves(p)))
              for p, a in zip(positions, action, strict=True)
              if int(a) not in tictactoe.optimal_moves(p)]
    assert not misses, f"{len(misses)} of {len(positions)} non-optimal: {misses[:5]}"
    # Illegal moves (occupied cells) are never visited.
    occupied = np.asarray(positions) != 0
    assert np.all(counts[occupied] == 0)


# ------------------------------------------------------------------ convergence

_CONV_CAPACITY = 1025
_CONV_CHUNK = 32


@sc.jit(static_argnames=("max_nodes",))
def _init_tree(forest, roots, *, max_nodes):
    return jaxpuct.init_tree(random_games.root(forest, roots), max_nodes)


@sc.jit(static_argnames=("sims", "config"))
def _continue_search(forest, roots, tree, *, sims, config):
    root = random_games.root(forest, roots)
    return jaxpuct.search(forest, jax.random.key(0), root, random_games.recurrent_fn,
                          sims, selection=config, tree=tree)


def test_root_value_converges_to_backward_induction():
    """Leaf values 0 and dense rewards: only the search can find the value."""
    forest, roots, games = sc.game_forest(range(100, 116), reward_mode="dense")
    exact = np.array([random_games.game_values(g)[0] for g in games])
    tree = _init_tree(forest, roots, max_nodes=_CONV_CAPACITY)
    errors = {}
    for step in range(1, (_CONV_CAPACITY - 1) // _CONV_CHUNK + 1):
        tree = _continue_search(forest, roots, tree, sims=_CONV_CHUNK, config=sc.DEFAULT)
        sims = step * _CONV_CHUNK
        if sims in (32, 128, 1024):
            assert np.all(np.asarray(tree.node_visits[:, 0]) == sims + 1)
            errors[sims] = np.abs(np.asarray(tree.summary().value) - exact)
    # Measured: mean |Q - V*| 0.130, 0.049, 0.0146 at 32, 128, 1024 simulations;
    # largest 0.354, 0.097, 0.0295.
    mean = {s: float(e.mean()) for s, e in errors.items()}
    assert mean[32] > 2 * mean[128] > 4 * mean[1024], mean
    assert mean[1024] < 0.02, mean
    assert errors[1024].max() < 0.04, errors[1024]
    # The most visited root move is optimal.
    counts = np.asarray(tree.summary().visit_counts)
    for game, c in zip(games, counts, strict=True):
        assert int(np.argmax(c)) in random_games.optimal_actions(game)


# ------------------------------------------------------------------ invariants

_INVARIANT_CASES = {
    "alphazero": dict(config=sc.DEFAULT, sims=40),
    "uct_log-fixedq-tienoise-depth2": dict(
        config=PUCTConfig(form="uct_log", unvisited_q="fixed", tie_noise=1e-3, c_base=None),
        sims=40, max_depth=2),
    "mctx-full-tree": sc.FULL_SPEC,
    "poly-parent-node-depth3": dict(
        config=PUCTConfig(exponent=0.75, parent_visits="node", unvisited_q="parent",
                          q_normalization="minmax"),
        sims=40, max_depth=3),
}

_game_kwargs = st.fixed_dictionaries(dict(
    legal_prob=st.sampled_from([0.4, 0.7, 1.0]),
    terminal_prob=st.sampled_from([0.0, 0.2, 0.5]),
    reward_mode=st.sampled_from(["terminal", "dense"]),
    discount=st.sampled_from([-1.0, -1.0, 1.0, 0.9]),
    extra_turn_prob=st.sampled_from([0.0, 0.3]),
    value_noise=st.sampled_from([None, 0.0, 0.5]),
    prior_scale=st.sampled_from([0.0, 1.0]),
))


@pytest.mark.parametrize("case", list(_INVARIANT_CASES), ids=list(_INVARIANT_CASES))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds=st.lists(st.integers(0, 10**6), min_size=4, max_size=4),
       kwargs=_game_kwargs, invalid_seed=st.integers(0, 2**31 - 1),
       temperature=st.sampled_from([0.0, 1.0]))
def test_tree_invariants(case, seeds, kwargs, invalid_seed, temperature):
    spec = _INVARIANT_CASES[case]
    forest, roots, _ = sc.game_forest(seeds, **kwargs)
    rng = np.random.default_rng(invalid_seed)
    invalid = rng.random((4, sc.NUM_ACTIONS)) < 0.25
    invalid[rng.integers(4)] = rng.random() < 0.5  # sometimes a root with nothing legal
    spec = dict(spec, dirichlet_fraction=0.25)
    out = sc.game_policy(forest, roots, sc.element_keys(invalid_seed, 4), invalid,
                         np.full(4, temperature, np.float32), **spec)
    root_legal = (np.asarray(forest.children)[roots] >= 0) & ~invalid
    sc.check_tree(out.search_tree, forest, roots, spec["sims"],
                  max_depth=spec.get("max_depth"), root_legal=root_legal)
    if spec.get("max_nodes"):
        assert np.all(np.asarray(out.search_tree.num_nodes) <= spec["max_nodes"])
    # The action is legal (or -1 with nothing legal), and the weights live on legal moves.
    action = np.asarray(out.action)
    weights = np.asarray(out.action_weights)
    for b in range(4):
        if root_legal[b].any():
            assert root_legal[b, action[b]]
            assert weights[b].sum() == pytest.approx(1.0, abs=1e-6)
        else:
            assert action[b] == -1 and np.all(weights[b] == 0)
    assert np.all(weights[~root_legal] == 0)


# ------------------------------------------------------------------ equalities

_EQ_SPEC = sc.NOISY_SPEC
_eq_inputs = sc.noisy_inputs


def _assert_trees_equal(a, b, what=""):
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b),
                            strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y),
                                      err_msg=f"{what}{jax.tree_util.keystr(path)}")


def test_batch_equals_each_element_alone():
    """Noise, tie noise and temperature-1 sampling all come from the element's key."""
    forest, roots, invalid = _eq_inputs()
    keys = sc.element_keys(7, 4)
    temperature = np.array([1.0, 1.0, 0.0, 0.5], np.float32)
    batch = sc.game_policy(forest, roots, keys, invalid, temperature, **_EQ_SPEC)
    for b in range(4):
        alone = sc.game_policy(forest, roots[b:b + 1], keys[b:b + 1], invalid[b:b + 1],
                               temperature[b:b + 1], **_EQ_SPEC)
        _assert_trees_equal(jax.tree.map(lambda x, b=b: x[b:b + 1], batch), alone,
                            what=f"element {b}: ")
    # The elements really differ (the test would be vacuous otherwise).
    assert len({tuple(np.asarray(batch.search_tree.root_prior[b])) for b in range(4)}) == 4


def test_same_key_same_result_other_key_other_noise():
    forest, roots, invalid = _eq_inputs()
    ones = np.ones(4, np.float32)
    keys = sc.element_keys(3, 4)
    first = sc.game_policy(forest, roots, keys, invalid, ones, **_EQ_SPEC)
    again = sc.game_policy(forest, roots, keys, invalid, ones, **_EQ_SPEC)
    _assert_trees_equal(first, again)
    other = sc.game_policy(forest, roots, sc.element_keys(4, 4), invalid, ones, **_EQ_SPEC)
    assert not np.array_equal(np.asarray(first.search_tree.root_prior),
                              np.asarray(other.search_tree.root_prior))


@pytest.mark.slow
def test_jit_and_eager_agree():
    """The jitted search against the same call run op by op (``jax.disable_jit``).

    Four simulations: run op by op, each costs about two seconds of CPU."""
    forest, roots, invalid = _eq_inputs()
    keys = sc.element_keys(9, 4)
    ones = np.ones(4, np.float32)
    spec = dict(_EQ_SPEC, sims=4)
    jitted = sc.game_policy(forest, roots, keys, invalid, ones, **spec)
    with jax.disable_jit():
        eager = jaxpuct.alphazero_policy(
            forest, keys, random_games.root(forest, roots),
            random_games.recurrent_fn, spec.pop("sims"), invalid_actions=invalid,
            selection=spec.pop("config"), temperature=ones, **spec)
    t_jit, t_eager = jitted.search_tree, eager.search_tree
    for name in ("num_nodes", "node_visits", "edge_visits", "children_index", "embeddings",
                 "node_terminal"):
        np.testing.assert_array_equal(getattr(t_jit, name), getattr(t_eager, name), name)
    np.testing.assert_array_equal(jitted.action, eager.action)
    for name in ("node_values", "raw_values", "children_prior", "root_prior"):
        np.testing.assert_allclose(getattr(t_jit, name), getattr(t_eager, name),
                                   rtol=1e-6, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(jitted.action_weights, eager.action_weights, rtol=1e-6)


# ------------------------------------------------------------------ cost per simulation


def _copies_in_loops(hlo_text: str, marker: str) -> list[str]:
    """``copy`` instructions of an array whose shape contains ``marker`` outside the
    entry computation (i.e. inside loop bodies, executed on every iteration)."""
    found, in_entry = [], False
    for line in hlo_text.splitlines():
        if line.startswith("ENTRY"):
            in_entry = True
        elif line and not line[0].isspace() and "{" in line:
            in_entry = False
        elif not in_entry and re.search(r"= \w+\[[^\]]*" + marker + r"[^\]]*\]\S* copy\(",
                                        line):
            found.append(line.strip()[:160])
    return found


@functools.partial(jax.jit, static_argnames=("max_nodes",))  # default XLA pipeline
def _ttt_search(state, *, max_nodes):
    return jaxpuct.search(None, jax.random.key(0), tictactoe.root(state),
                          tictactoe.recurrent_fn, 8, max_nodes=max_nodes)


@pytest.mark.parametrize("trees", [3, 1])
def test_simulation_does_not_copy_tree_sized_arrays(trees):
    """A simulation's tree work is O(B * depth), never O(tree size).

    A capacity of 777 slots makes every tree-sized shape recognisable in the
    optimised HLO; no such array may be copied inside the simulation loop (a copy
    there costs O(B * N) per simulation or per depth step, so search time grows
    with the capacity instead of with the work done). One tree is its own case: XLA
    turns its writes into in-place dynamic-update-slices, and copies the whole array
    wherever a read of the old one is not ordered before the write (the backup's
    counts, the parents' embeddings re-gathered inside every fusion that reads them).
    """
    state = tictactoe.batch([tictactoe.EMPTY] * trees)
    hlo = _ttt_search.lower(state, max_nodes=777).compile().as_text()
    assert "777" in hlo
    copies = _copies_in_loops(hlo, "777")
    assert not copies, "tree-sized copies inside the search loop:\n" + "\n".join(copies)


def test_copy_detector_finds_copies_in_loop_bodies():
    # Keeps the HLO test honest: the pattern finds a loop copy and ignores the entry's.
    text = ("ENTRY %main {\n  %c = s32[3,777]{1,0} copy(%p)\n}\n"
            "%body (p: s32[3,777]) -> s32[3,777] {\n  %x = s32[3,777]{1,0} copy(%p)\n}\n")
    assert _copies_in_loops(text, "777") == ["%x = s32[3,777]{1,0} copy(%p)"]

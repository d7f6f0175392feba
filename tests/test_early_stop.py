"""Early stopping (``early_stop=``, :mod:`jaxpuct.early_stop`) against oracles.

Tic-tac-toe positions (uniform prior, zero value, exact terminals), ``S = 32``,
temperature 0, no noise, under ``jit``. Early stopping is traced as a ``[B]``
mask, so one compiled search serves both the stopped and the full search (with
the mask off every searchable root runs its whole budget; the search compiled
without ``early_stop`` is compared in ``test_composition.py``):

* the oracle: the most visited legal root action, and the move, are the full
  search's for every tree;
* the count: ``simulations_saved`` is what the root's visits did not use (one
  walk per step), it is 0 where the full search ends in a tie at the top (a stop
  would have kept a strict maximum), and a stopped tree's visits satisfy the
  rule and would not have one step earlier (NumPy, from the counts:
  ``1 <= gap - saved <= 2K``); the rule itself on hand-made counts;
* batch independence: a tree's search does not depend on which others stop,
  on their order, or on their being there at all (a batch of its copies);
* composition: a continued tree, four leaves per step, the solver.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc

import jaxpuct
from jaxpuct.testing import tictactoe as ttt

S = 32
_RF = ttt.make_recurrent_fn()


def _played(rng: np.random.Generator, stones: int, terminal: bool = False) -> tuple:
    """A position after ``stones`` random legal moves (the game not over, or over
    at that move with ``terminal``)."""
    while True:
        pos = (0,) * 9
        for _ in range(stones):
            if ttt.is_terminal(pos):
                break
            pos = ttt.play(pos, int(rng.choice(ttt.legal_moves(pos))))
        if ttt.is_terminal(pos) == terminal and sum(map(abs, pos)) == stones:
            return pos


def _positions() -> list:
    """32 positions: the empty board (symmetric moves: ties), two finished games, two
    with a single legal move (8 stones), and 27 random ones with 2 to 7 stones."""
    rng = np.random.default_rng(0)
    return ([(0,) * 9] + [_played(rng, 9, terminal=True) for _ in range(2)]
            + [_played(rng, 8) for _ in range(2)]
            + [_played(rng, int(rng.integers(2, 8))) for _ in range(27)])


_POSITIONS = _positions()
B = len(_POSITIONS)
_STATE = ttt.batch(_POSITIONS)
_KEYS = jax.random.split(jax.random.PRNGKey(3), B)


def _policy(state, keys, mask, **kw):
    return jaxpuct.alphazero_policy(None, keys, ttt.root(state), _RF, S,
                                    dirichlet_fraction=0.0, temperature=0.0,
                                    early_stop=mask, **kw)


@sc.jit
def _search(state, keys, mask):
    out = _policy(state, keys, mask)
    return out, out.search_tree.summary().simulations_saved


@sc.jit
def _continued(tree, keys, mask):
    """``tree`` searched ``S`` more simulations, four leaves per step, with the solver
    (tree reuse: the root starts with the visits it has)."""
    out = jaxpuct.alphazero_policy(None, keys, None, _RF, S, tree=tree,
                                   dirichlet_fraction=0.0, temperature=0.0,
                                   leaves_per_step=4, solver=True, early_stop=mask)
    return (out, out.search_tree.summary().simulations_saved,
            jaxpuct.solver.root_proven(out.search_tree))


def _root(out):
    tree = out.search_tree
    visits = np.asarray(tree.edge_visits)[:, 0]
    legal = np.asarray(tree.children_index)[:, 0] != jaxpuct.ILLEGAL
    return visits, legal


def _most_visited(visits, legal):
    return np.argmax(np.where(legal, visits, -1), axis=-1)


def _gap(visits, legal):
    """``[B]`` ``N(best) - max_{a != best} N(a)`` over legal actions (NumPy); ``None``
    entries (``-1``) where a root has fewer than two legal actions."""
    gaps = np.full(visits.shape[0], -1)
    for b in range(visits.shape[0]):
        counts = np.sort(visits[b][legal[b]])
        if counts.size >= 2:
            gaps[b] = counts[-1] - counts[-2]
    return gaps


_ALL = jnp.ones((B,), jnp.bool_)
_NONE = jnp.zeros((B,), jnp.bool_)


@functools.cache
def _full_and_stopped():
    """``((out, saved [B]) without stops, (out, saved) with them)``."""
    return _search(_STATE, _KEYS, _NONE), _search(_STATE, _KEYS, _ALL)


def _copies(b: int, perm=None):
    """The batch's state and keys, reordered by ``perm`` or made of ``B`` copies of
    element ``b`` (a tree alone, with no other tree beside it)."""
    index = np.full(B, b) if perm is None else perm
    return jax.tree.map(lambda x: x[index], _STATE), _KEYS[index]


def test_the_move_is_the_full_searchs():
    (full, full_saved), (stopped, _) = _full_and_stopped()
    visits, legal = _root(stopped)
    full_visits, _ = _root(full)
    np.testing.assert_array_equal(_most_visited(visits, legal),
                                  _most_visited(full_visits, legal))
    np.testing.assert_array_equal(np.asarray(stopped.action), np.asarray(full.action))
    # A stopped search is the full one cut short: it never has more visits.
    assert np.all(visits <= full_visits)
    # With the mask off every searchable root ran its whole budget (the same
    # keys and a deterministic game: the search without early stopping).
    searchable = legal.any(-1)
    np.testing.assert_array_equal(full_visits.sum(-1), np.where(searchable, S, 0))
    np.testing.assert_array_equal(np.asarray(full_saved), 0)


def test_simulations_saved_against_the_rule():
    (full, _), (stopped, saved) = _full_and_stopped()
    visits, legal = _root(stopped)
    saved = np.asarray(saved)
    terminal = ~legal.any(-1)
    # One walk per step: a tree skips what its root's visits did not use.
    np.testing.assert_array_equal(saved, np.where(terminal, 0, S - visits.sum(-1)))
    single = legal.sum(-1) == 1
    several = legal.sum(-1) >= 2
    assert terminal.any()  # searches nothing, and saves nothing by early stopping
    assert single.any() and np.all(saved[single] == S - 1)  # one visit decides
    gap = _gap(visits, legal)
    cut = several & (saved > 0)
    # The rule held when the tree stopped, and had not one simulation earlier.
    assert np.all(gap[cut] - saved[cut] >= 1) and np.all(gap[cut] - saved[cut] <= 2)
    # Where the full search ends tied at the top, no stop was possible.
    full_visits, _ = _root(full)
    tied = several & (_gap(full_visits, legal) == 0)
    assert tied.any() and np.all(saved[tied] == 0)
    assert cut.any() and (several & (saved == 0)).any()
    # A tree that never stopped searched exactly as the full search did.
    never = ~terminal & (saved == 0)
    np.testing.assert_array_equal(visits[never], full_visits[never])


def test_a_stopped_tree_does_not_change_the_others():
    (full, _), (stopped, saved) = _full_and_stopped()
    mask = np.arange(B) % 2 == 0
    mixed, _ = _search(_STATE, _KEYS, jnp.asarray(mask))
    for name in ("edge_visits", "node_values", "num_nodes"):
        got = np.asarray(getattr(mixed.search_tree, name))
        np.testing.assert_array_equal(
            got[mask], np.asarray(getattr(stopped.search_tree, name))[mask])
        np.testing.assert_array_equal(
            got[~mask], np.asarray(getattr(full.search_tree, name))[~mask])
    # Another order of the batch: every tree's search moves with it.
    perm = np.random.default_rng(1).permutation(B)
    shuffled, _ = _search(*_copies(0, perm), _ALL)
    np.testing.assert_array_equal(np.asarray(shuffled.search_tree.edge_visits),
                                  np.asarray(stopped.search_tree.edge_visits)[perm])
    # Alone: a tree that stops early and one that searches its whole budget.
    saved = np.asarray(saved)
    for b in (int(np.argmax(saved * (saved < S - 1))), int(np.argmin(saved))):
        alone, _ = _search(*_copies(b), _ALL)
        np.testing.assert_array_equal(np.asarray(alone.search_tree.edge_visits)[0],
                                      np.asarray(stopped.search_tree.edge_visits)[b])


def test_composes_with_leaves_per_step_solver_and_a_continued_tree():
    k = 4
    (first_full, _), (first_stopped, _) = _full_and_stopped()
    keys = jax.random.split(jax.random.PRNGKey(4), B)
    for start_tree in (first_full.search_tree, first_stopped.search_tree):
        full, _, _ = _continued(start_tree, keys, _NONE)
        stopped, saved, proven = _continued(start_tree, keys, _ALL)
        visits, legal = _root(stopped)
        full_visits, _ = _root(full)
        np.testing.assert_array_equal(_most_visited(visits, legal),
                                      _most_visited(full_visits, legal))
        assert np.all(visits <= full_visits)
        start = np.asarray(start_tree.edge_visits)[:, 0].sum(-1)
        saved, proven = np.asarray(saved), np.asarray(proven)
        # The budget counts only this search's walks; a stopped tree skips whole
        # steps (a walk that found every edge claimed adds no visit: <=).
        assert np.all(saved <= start + S - visits.sum(-1)) and np.all(saved % k == 0)
        cut = (legal.sum(-1) >= 2) & (saved > 0)
        gap = _gap(visits, legal)
        assert cut.any() and np.all(gap[cut] - saved[cut] >= 1)
        # Walks come k per step, so a tree stops between steps; one whose
        # inherited visits decide its move takes no simulation at all.
        at_once = saved == S
        assert np.all((gap[cut] - saved[cut] <= 2 * k) | at_once[cut])
        assert (cut & ~at_once).any()


def test_decided_by_hand():
    """The rule on hand-made counts: ``N(a) + R < N(b)`` (strict), ``N(b) >= 1``."""
    visits = np.array([[5, 2, 0], [5, 2, 0], [3, 3, 0], [0, 0, 0], [4, 0, 0], [1, 0, 7]])
    legal = np.array([[1, 1, 1], [1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]], bool)
    remaining = np.array([2, 3, 0, 5, 9, 1])
    # 2 + 2 < 5; 2 + 3 would tie; a tie now; no visit yet; a single legal move with a
    # visit; the illegal action's 7 visits do not count (but 0 + 1 would tie).
    expected = [True, False, False, False, True, False]
    got = jax.jit(jaxpuct.early_stop.decided)(visits, legal, remaining)
    np.testing.assert_array_equal(np.asarray(got), expected)


def _trace(fn):
    """Traces ``fn`` without compiling it (a refusal raises while tracing)."""
    return jax.eval_shape(fn)


@pytest.mark.parametrize("kw, words", [
    (dict(final_move="lcb"), ["early_stop", "final_move='lcb'", "most visited"]),
    (dict(value_weighted=True), ["early_stop", "value_weighted=True", "most visited"]),
])
def test_refuses_a_move_that_is_not_the_most_visited_action(kw, words):
    with pytest.raises(ValueError) as info:
        _trace(lambda: _policy(_STATE, _KEYS, True, **kw))
    for word in words:
        assert word in str(info.value)


def test_refuses_a_gumbel_root_and_a_bad_mask():
    with pytest.raises(ValueError, match="sequential halving"):
        _trace(lambda: jaxpuct.gumbel_policy(None, _KEYS, ttt.root(_STATE), _RF, S,
                                             early_stop=True))
    with pytest.raises(ValueError, match="early_stop must be a bool"):
        _trace(lambda: _policy(_STATE, _KEYS, 1))
    with pytest.raises(ValueError, match=r"early_stop must be a scalar or have shape \[B\]"):
        _trace(lambda: _policy(_STATE, _KEYS, jnp.ones((B + 1,), jnp.bool_)))

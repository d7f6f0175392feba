"""Bad values: the defined behaviour of a search given values it cannot use.

mctx-style ``-inf`` and pgx-style ``finfo(dtype).min`` masks, NaN logits, out-of-range
values given as traced arrays (caught under ``checkify``, or the documented
fallback), 64-bit mode, non-finite temperatures and noise parameters, a tree
capacity below the number of simulations (warnings, ``unstored_leaves``), the
summary of a vmapped tree, reverse-mode gradients; and, where one batch element's
trouble must not touch the others, a root with no legal action, NaN from the
network and a full tree.

Arguments that must be refused with a ``ValueError`` are in ``test_bad_input.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc
from jax.experimental import checkify

import jaxpuct
import jaxpuct.numerics
from jaxpuct.testing import random_games, tictactoe

B, A = 2, 3
_bandit_recurrent_fn, _root = sc.bandit_recurrent_fn, sc.bandit_root
ROOT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@jax.jit
def _minus_inf_policy(logits):
    return jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), _root(logits),
                                    _bandit_recurrent_fn, 16, dirichlet_fraction=0.0,
                                    temperature=0.0,
                                    selection=jaxpuct.PUCTConfig.mctx_muzero())


def test_minus_inf_logit_at_the_root_is_never_searched_nor_played():
    # The reward is on action 0, which the logits mask the mctx way.
    logits = jnp.array([[-jnp.inf, 0.0, 0.0], [-jnp.inf, 5.0, 0.0]])
    out = _minus_inf_policy(logits)
    visits = np.asarray(out.search_tree.summary().visit_counts)
    np.testing.assert_array_equal(visits[:, 0], [0, 0])
    assert np.all(np.asarray(out.action) != 0)
    np.testing.assert_array_equal(np.asarray(out.action_weights)[:, 0], [0.0, 0.0])
    assert visits.sum(axis=1).tolist() == [16, 16]
    # The second row's prior is peaked on action 1 and every value is 0: mctx's
    # rule spends all 16 visits there (as mctx.muzero_policy does).
    assert visits[1].tolist() == [0, 16, 0]


def test_minus_inf_logit_inside_the_tree_is_never_selected():
    def recurrent_fn(params, rng_key, action, depth):
        del params, rng_key
        batch = action.shape[0]
        # Below the root, action 2 is masked by a -inf logit and pays most.
        logits = jnp.tile(jnp.array([0.0, 0.0, -jnp.inf]), (batch, 1))
        out = jaxpuct.RecurrentFnOutput(
            reward=jnp.where(action == 2, 1.0, 0.0), discount=jnp.ones(batch),
            prior_logits=logits, value=jnp.zeros(batch))
        return out, depth + 1

    tree = jax.jit(lambda: jaxpuct.search(None, jax.random.PRNGKey(1), _root(), recurrent_fn,
                                          64, max_depth=4))()
    used = np.arange(tree.max_nodes)[None, :] < np.asarray(tree.num_nodes)[:, None]
    interior = used.copy()
    interior[:, 0] = False
    edge_visits = np.asarray(tree.edge_visits)
    assert edge_visits[interior][:, 2].sum() == 0
    assert np.all(np.asarray(tree.children_index)[interior][:, 2] == jaxpuct.ILLEGAL)


def test_nan_logits_still_give_a_uniform_prior_over_legal_actions():
    prior = np.asarray(jaxpuct.numerics.masked_softmax(jnp.array([[jnp.nan, 0.0, -jnp.inf]]),
                                              jnp.array([[True, True, True]])))
    np.testing.assert_allclose(prior, [[1 / 3, 1 / 3, 1 / 3]])
    every_legal_minus_inf = np.asarray(jaxpuct.numerics.masked_softmax(
        jnp.full((1, 3), -jnp.inf), jnp.array([[True, False, True]])))
    np.testing.assert_allclose(every_legal_minus_inf, [[0.5, 0.0, 0.5]])


def _policy(**kwargs):
    args = dict(dirichlet_fraction=0.0)
    args.update(kwargs)
    root = args.pop("root", _root())
    recurrent_fn = args.pop("recurrent_fn", _bandit_recurrent_fn)
    return jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), root, recurrent_fn, 4,
                                    **args)


def test_traced_out_of_range_values_are_caught_under_checkify():
    def run(temperature, fraction):
        return _policy(temperature=temperature, dirichlet_fraction=fraction).action

    checked = jax.jit(checkify.checkify(run))
    err, _ = checked(jnp.array([1.0, 1.0]), jnp.float32(0.25))
    err.throw()  # in range: no error
    err, _ = checked(jnp.array([-1.0, 1.0]), jnp.float32(0.25))
    with pytest.raises(checkify.JaxRuntimeError, match="temperature"):
        err.throw()
    err, _ = checked(jnp.array([1.0, 1.0]), jnp.float32(2.0))
    with pytest.raises(checkify.JaxRuntimeError, match="dirichlet_fraction"):
        err.throw()


def test_values_known_at_trace_time_leave_no_check_in_the_program():
    # A checkify check in a program is an effect, even where it cannot fire, and
    # an effect keeps jax.jit off its C++ dispatch path on every call. Concrete
    # values were checked at trace time, so the programs carry no effect.
    def alphazero(key):
        return _policy(temperature=1.0, dirichlet_fraction=0.25).action

    def gumbel(key):
        return jaxpuct.gumbel_policy(None, key, _root(), _bandit_recurrent_fn, 4,
                                     gumbel_scale=1.0).action

    for policy in (alphazero, gumbel):
        assert jax.make_jaxpr(policy)(jax.random.PRNGKey(0)).effects == set(), policy
    traced = jax.make_jaxpr(lambda t: _policy(temperature=t).action)(jnp.float32(1.0))
    assert traced.effects != set()  # the traced temperature keeps its check


def test_traced_negative_temperature_without_checkify_is_greedy_as_documented():
    out = jax.jit(lambda t: _policy(temperature=t))(jnp.array([-1.0, 0.0]))
    weights = np.asarray(out.action_weights)
    assert set(np.unique(weights)) <= {0.0, 1.0}
    np.testing.assert_array_equal(weights[0], weights[1])


def test_small_capacity_warns_at_trace_time():
    with pytest.warns(UserWarning, match="max_nodes=2 < num_simulations"):
        _policy(max_nodes=2)


def test_enough_capacity_does_not_warn(recwarn):
    _policy(max_nodes=5)
    assert not [w for w in recwarn if "max_nodes" in str(w.message)]


@pytest.mark.slow
def test_search_runs_without_warnings_with_x64_enabled():
    """Every dtype is explicit: with ``jax_enable_x64`` no int64 reaches an int32
    array (JAX warns, and a future JAX raises)."""
    code = textwrap.dedent("""
        import warnings
        import jax
        jax.config.update("jax_enable_x64", True)
        warnings.simplefilter("error")
        import jax.numpy as jnp
        import jaxpuct

        def recurrent_fn(params, key, action, state):
            new = state * 3 + action.astype(state.dtype) + 1
            out = jaxpuct.RecurrentFnOutput(
                reward=jnp.zeros(action.shape[0], jnp.float32),
                discount=-jnp.ones(action.shape[0], jnp.float32),
                prior_logits=jnp.zeros((action.shape[0], 3), jnp.float32),
                value=jnp.sin(new.astype(jnp.float32)),
                state_hash=jnp.stack([new % 7, new % 5], -1).astype(jnp.uint32))
            return out, new

        root = jaxpuct.RootFnOutput(
            prior_logits=jnp.zeros((2, 3), jnp.float32), value=jnp.zeros(2, jnp.float32),
            embedding=jnp.zeros(2, jnp.int32),
            state_hash=jnp.zeros((2, 2), jnp.uint32))
        for graph in (None, jaxpuct.GraphConfig()):
            out = jax.jit(lambda k: jaxpuct.alphazero_policy(
                None, k, root, recurrent_fn, 24, graph=graph, max_nodes=25))(
                jax.random.PRNGKey(0))
            # Jitted too: op by op, the reuse and the continued search compiled some
            # hundred small programs (the same Python runs, so the same warnings).
            jax.jit(lambda out: jaxpuct.alphazero_policy(
                None, jax.random.PRNGKey(1), None, recurrent_fn, 8,
                tree=jaxpuct.subtree(out.search_tree, out.action, graph=graph)[0],
                graph=graph))(out)
        # A float64 logit that is not masked in float64 but becomes -inf in the
        # search's float32: a row with no other usable logit takes the fallback.
        prior, legal = jax.jit(jaxpuct.numerics.prior_and_legal)(
            jnp.array([[-1e300, -jnp.inf, 0.0]], jnp.float64),
            jnp.array([[True, True, False]]))
        assert prior.tolist() == [[0.5, 0.5, 0.0]], prior
        assert legal.tolist() == [[True, True, False]], legal
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=ROOT_DIR)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=600, cwd=ROOT_DIR)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def _numpy_prior_and_legal(logits: np.ndarray, legal: np.ndarray):
    """Reference: -inf or finfo.min means probability 0 (and illegal); NaN/+inf of a legal action,
    or nothing finite left, means uniform over the legal actions."""
    prior = np.zeros(logits.shape, np.float64)
    new_legal = legal.copy()
    for b in range(logits.shape[0]):
        row, ok = logits[b], legal[b]
        diverged = np.any(ok & (np.isnan(row) | (row == np.inf)))
        possible = ok & (row > np.finfo(row.dtype).min)
        if diverged or not possible.any():
            if ok.any():
                prior[b, ok] = 1.0 / ok.sum()
            continue
        new_legal[b] = possible
        z = np.exp(row[possible] - row[possible].max())
        prior[b, possible] = z / z.sum()
    return prior, new_legal


_prior_and_legal = jax.jit(jaxpuct.numerics.prior_and_legal)


def test_prior_and_legal_matches_numpy_on_random_rows_with_special_values():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(400, 5)).astype(np.float32) * 3
    lowest = np.finfo(np.float32).min
    special = rng.choice([np.nan, np.inf, -np.inf, lowest, 0.0], size=logits.shape,
                         p=[0.05, 0.05, 0.15, 0.15, 0.6])
    logits = np.where(special != 0.0, special, logits).astype(np.float32)
    legal = rng.random(logits.shape) < 0.7
    prior, legal_out = (np.asarray(x) for x in _prior_and_legal(logits, legal))
    want_prior, want_legal = _numpy_prior_and_legal(logits, legal)
    np.testing.assert_allclose(prior, want_prior, atol=1e-6)
    np.testing.assert_array_equal(legal_out, want_legal)


# --------------------------------------------------------------------------------------
# finfo(dtype).min logits: the mask of mctx (``invalid_actions``) and of pgx's AlphaZero
# example (``jnp.where(state.legal_action_mask, logits, jnp.finfo(logits.dtype).min)``)
# --------------------------------------------------------------------------------------


def _pgx_masked(logits, legal):
    """pgx's AlphaZero example (examples/alphazero/train.py), verbatim."""
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)


def _pgx_style_recurrent_fn(params, rng_key, action, depth):
    """mctx's output type (no legal mask): action 2 is masked by pgx's code path at
    every node below the root and pays most; the other moves lose."""
    del params, rng_key
    batch = action.shape[0]
    legal = jnp.tile(jnp.array([True, True, False]), (batch, 1))
    out = jaxpuct.RecurrentFnOutput(
        reward=jnp.where(action == 2, 1.0, -0.5), discount=jnp.ones(batch),
        prior_logits=_pgx_masked(jnp.zeros((batch, A)), legal), value=jnp.full(batch, -0.5))
    return out, depth + 1


@jax.jit
def _pgx_style_search(root_logits):
    return jaxpuct.alphazero_policy(
        None, jax.random.PRNGKey(3), _root(root_logits), _pgx_style_recurrent_fn, 16,
        max_depth=3, dirichlet_fraction=0.0, temperature=1.0,
        selection=jaxpuct.PUCTConfig.mctx_muzero())


def test_finfo_min_logit_masks_like_minus_inf_at_the_root_and_below():
    # The root masks action 0 the pgx way; below the root action 2 is masked.
    legal = jnp.array([[False, True, True], [False, True, True]])
    out = _pgx_style_search(_pgx_masked(jnp.array([[0.0, 1.0, 0.0], [3.0, 0.0, 0.0]]), legal))
    tree = out.search_tree
    children = np.asarray(tree.children_index)
    np.testing.assert_array_equal(children[:, 0, 0], jaxpuct.ILLEGAL)
    np.testing.assert_array_equal(np.asarray(tree.summary().visit_counts)[:, 0], 0)
    np.testing.assert_array_equal(np.asarray(out.action_weights)[:, 0], 0.0)
    assert np.all(np.asarray(out.action) != 0)
    used = np.arange(tree.max_nodes)[None, :] < np.asarray(tree.num_nodes)[:, None]
    interior = used & (np.arange(tree.max_nodes)[None, :] > 0) & ~np.asarray(tree.node_terminal)
    assert interior.sum() > 2
    assert np.all(children[interior][:, 2] == jaxpuct.ILLEGAL)
    assert np.asarray(tree.edge_visits)[interior][:, 2].sum() == 0


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16])
def test_finfo_min_of_each_dtype_is_a_mask(dtype):
    lowest = jnp.finfo(dtype).min
    logits = jnp.array([[lowest, 0.0, 1.0], [lowest, lowest, lowest]], dtype)
    legal = jnp.ones((2, 3), bool)
    prior, legal_out = (np.asarray(x) for x in jaxpuct.numerics.prior_and_legal(logits, legal))
    np.testing.assert_array_equal(legal_out, [[False, True, True], [True, True, True]])
    assert prior[0, 0] == 0.0
    # Every legal logit masked: uniform over the legal actions, as for -inf.
    np.testing.assert_allclose(prior[1], [1 / 3] * 3)


# --------------------------------------------------------------------------------------
# jax.vmap over a policy: the tree has an extra leading axis
# --------------------------------------------------------------------------------------


@jax.jit
def _vmapped_policy(logits):
    """``logits [V, B, A]``: V batches of B roots, searched under ``jax.vmap``."""
    return jax.vmap(lambda row: jaxpuct.alphazero_policy(
        None, jax.random.PRNGKey(0), _root(row), _bandit_recurrent_fn, 8,
        dirichlet_fraction=0.0, temperature=0.0))(logits)


def test_summary_of_a_vmapped_tree_is_one_summary_per_batch():
    logits = jnp.array([[[0.0, 0.0, 0.0], [0.0, 3.0, 0.0]],
                        [[0.0, 0.0, 3.0], [1.0, 0.0, 0.0]]])
    tree = _vmapped_policy(logits).search_tree
    summary = tree.summary()
    assert summary.visit_counts.shape == (2, B, A) and summary.value.shape == (2, B)
    for v in range(2):
        one = jax.tree.map(lambda x, v=v: x[v], tree).summary()
        for got, want in zip(jax.tree.leaves(summary), jax.tree.leaves(one), strict=True):
            np.testing.assert_array_equal(np.asarray(got)[v], np.asarray(want))


# --------------------------------------------------------------------------------------
# Reverse-mode gradients: unsupported through the search, documented with what works
# --------------------------------------------------------------------------------------


def _weighted_fn(w, rng_key, action, embedding):
    out, new = _bandit_recurrent_fn(None, rng_key, action, embedding)
    return out.replace(value=jnp.tanh(w * new.astype(jnp.float32))), new


def _search_with(w):
    root = _root().replace(prior_logits=jnp.zeros((B, A)) + w)
    return root, jaxpuct.alphazero_policy(w, jax.random.PRNGKey(0), root, _weighted_fn, 4,
                                          dirichlet_fraction=0.0)


def test_reverse_mode_grad_through_a_search_fails_as_documented_and_the_pattern_works():
    import sys

    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.grad(lambda w: _search_with(w)[1].search_tree.summary().value.sum())(0.5)

    def loss(w):  # the documented pattern: train on the search's targets
        root, out = _search_with(w)
        target = jax.lax.stop_gradient(out.action_weights)
        return -(target * jax.nn.log_softmax(root.prior_logits * w)).sum()

    assert np.isfinite(float(jax.grad(loss)(0.5)))
    doc = sys.modules["jaxpuct.search"].__doc__
    assert "jax.grad" in doc and "stop_gradient" in doc and "unsupported" in doc
    guide = open(os.path.join(ROOT_DIR, "docs", "guide", "your_network.md")).read()
    assert "Reverse-mode differentiation through a search is not supported" in guide


# ------------------------------------------------------- values a user cannot see


@jax.jit
def _numbers_policy(temperature, fraction, alpha):
    return jaxpuct.alphazero_policy(None, jax.random.PRNGKey(3), _root(),
                                    _bandit_recurrent_fn, 8, temperature=temperature,
                                    dirichlet_fraction=fraction, dirichlet_alpha=alpha)


@pytest.mark.parametrize("temperature, fraction, alpha", [
    (np.nan, 0.25, 0.3), (np.inf, 0.25, 0.3), (1.0, np.nan, 0.3), (1.0, np.inf, 0.3),
    (1.0, 0.25, np.nan), (1.0, 0.25, np.inf), (np.nan, np.nan, np.nan)])
def test_traced_non_finite_numbers_still_give_a_legal_move(temperature, fraction, alpha):
    """A traced NaN or inf temperature, noise fraction or alpha never plays -1 at a
    root with legal moves, and the target stays a distribution: NaN τ acts as 0
    (greedy), inf τ spreads over the visited moves, a non-finite fraction means no
    noise, a non-finite alpha uniform noise."""
    out = _numbers_policy(jnp.float32(temperature), jnp.float32(fraction),
                          jnp.float32(alpha))
    action = np.asarray(out.action)
    weights = np.asarray(out.action_weights)
    assert np.all((action >= 0) & (action < A)), action
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-6)
    visits = np.asarray(out.search_tree.summary().visit_counts)
    assert visits.sum(axis=1).tolist() == [8, 8]
    if np.isnan(temperature):
        # Greedy: all mass on the most visited move.
        np.testing.assert_array_equal(weights.argmax(1), visits.argmax(1))
        assert np.all(weights.max(1) == 1.0)
    if np.isinf(temperature):
        # N^(1/inf) = 1 on every visited move, 0 elsewhere.
        expected = (visits > 0) / (visits > 0).sum(1, keepdims=True)
        np.testing.assert_allclose(weights, expected, rtol=1e-6)


_REUSE_S = 16


@jax.jit
def _reuse_twice(key):
    """Search, keep the subtree under the move, search again with the default
    capacity S + 1 (the subtree leaves little room)."""
    root = _ttt_like_root()
    out = jaxpuct.alphazero_policy(None, key, root, _deep_recurrent_fn, _REUSE_S,
                                   dirichlet_fraction=0.0, temperature=0.0)
    tree, _ = jaxpuct.subtree(out.search_tree, out.action)
    again = jaxpuct.alphazero_policy(None, key, None, _deep_recurrent_fn, _REUSE_S,
                                     tree=tree, dirichlet_fraction=0.0, temperature=0.0)
    return out.search_tree, tree, again.search_tree


def _ttt_like_root():
    return jaxpuct.RootFnOutput(prior_logits=jnp.zeros((B, A)), value=jnp.zeros(B),
                                embedding=jnp.zeros(B, jnp.int32))


def _deep_recurrent_fn(params, rng_key, action, embedding):
    """An endless game whose states never repeat: every leaf can be stored."""
    del params, rng_key
    batch = action.shape[0]
    new = embedding * A + action.astype(jnp.int32) + 1
    out = jaxpuct.RecurrentFnOutput(
        reward=jnp.zeros(batch), discount=-jnp.ones(batch),
        prior_logits=jnp.zeros((batch, A)), value=jnp.sin(new.astype(jnp.float32)))
    return out, new


def test_a_reused_tree_near_capacity_counts_the_leaves_it_could_not_store():
    first, kept, again = _reuse_twice(jax.random.PRNGKey(0))
    # A fresh tree of capacity S + 1 stores every leaf.
    np.testing.assert_array_equal(np.asarray(first.summary().unstored_leaves), [0, 0])
    free = _REUSE_S + 1 - np.asarray(kept.num_nodes)
    unstored = np.asarray(again.summary().unstored_leaves)
    # Each simulation stores one node while there is room and no more: the rest of
    # the 16 simulations are counted (the kept subtree had none of its own).
    np.testing.assert_array_equal(np.asarray(kept.summary().unstored_leaves), [0, 0])
    np.testing.assert_array_equal(unstored, _REUSE_S - free)
    assert np.all(unstored > 0)
    # Recomputed in NumPy from the edges: visited edges that still have no child.
    ci, ev = np.asarray(again.children_index), np.asarray(again.edge_visits)
    np.testing.assert_array_equal(unstored, np.where(ci == jaxpuct.UNEXPANDED, ev, 0)
                                  .sum(axis=(1, 2)))


def test_continuing_a_tree_smaller_than_the_search_warns():
    root = _ttt_like_root()
    tree = jaxpuct.init_tree(root, 5)
    with pytest.warns(UserWarning, match="unstored_leaves"):
        jax.eval_shape(lambda t: jaxpuct.search(None, jax.random.PRNGKey(0), None,
                                                _deep_recurrent_fn, 8, tree=t), tree)

# --------------------------------------------------------------------------------------
# One element's bad values stay in its tree: a root with no legal action, NaN from
# the network, a full tree
# --------------------------------------------------------------------------------------

_TAUS = np.array([0.0, 0.5, 1.0, 2.0], np.float32)


def _leaves_equal(a, b, rows_a=slice(None), rows_b=slice(None), what=""):
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b),
                            strict=True):
        np.testing.assert_array_equal(np.asarray(x)[rows_a], np.asarray(y)[rows_b],
                                      err_msg=f"{what}{jax.tree_util.keystr(path)}")


def test_root_without_legal_action():
    """Action -1, zero weights, the tree untouched; the other elements are exactly
    what a batch without that element gives."""
    forest, roots, invalid = sc.noisy_inputs()
    blocked = invalid.copy()
    blocked[2] = True
    keys = sc.element_keys(8, 4)
    out = sc.game_policy(forest, roots, keys, blocked, _TAUS, **sc.NOISY_SPEC)
    assert int(out.action[2]) == -1
    assert np.all(np.asarray(out.action_weights[2]) == 0)
    tree = jax.tree.map(lambda x: np.asarray(x)[2], out.search_tree)
    assert tree.num_nodes == 1 and tree.node_visits[0] == 1 and tree.node_terminal[0]
    assert np.all(tree.edge_visits == 0) and np.all(tree.children_index[0] == jaxpuct.ILLEGAL)
    assert np.all(tree.root_prior == 0) and np.all(tree.children_prior == 0)
    assert tree.node_values[0] == tree.raw_values[0] == np.float32(forest.value[roots[2]])
    assert np.all(tree.children_index[1:] == jaxpuct.UNEXPANDED)
    summary = jax.tree.map(lambda x: np.asarray(x)[2], out.search_tree.summary())
    assert np.all(summary.visit_counts == 0) and np.all(summary.visit_probs == 0)
    keep = np.array([0, 1, 3])
    without = sc.game_policy(forest, roots[keep], keys[keep], invalid[keep], _TAUS[keep],
                             **sc.NOISY_SPEC)
    _leaves_equal(out, without, rows_a=keep)


@sc.jit
def _ttt_policy(state):
    return jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), tictactoe.root(state),
                                    tictactoe.recurrent_fn, 6, dirichlet_fraction=0.0,
                                    temperature=0.0)


def test_terminal_root_is_not_searched():
    """A tic-tac-toe root that is already won: no legal move, action -1."""
    won = tictactoe.parse("XXX OO. ...")
    state = tictactoe.batch([won, tictactoe.EMPTY])
    out = _ttt_policy(state)
    assert int(out.action[0]) == -1 and int(out.action[1]) >= 0
    assert int(out.search_tree.num_nodes[0]) == 1
    assert np.all(np.asarray(out.action_weights[0]) == 0)
    assert int(out.search_tree.edge_visits[1, 0].sum()) == 6


@pytest.mark.parametrize("poison_root", [False, True], ids=["below-root", "root-too"])
def test_nan_from_the_network_stays_in_its_tree(poison_root):
    forest, roots, invalid = sc.noisy_inputs()
    keys = sc.element_keys(2, 4)
    clean = sc.game_policy(forest, roots, keys, invalid, _TAUS, **sc.NOISY_SPEC)
    k = 1
    poisoned_forest = forest
    if poison_root:
        value = np.array(forest.value)
        logits = np.array(forest.prior_logits)
        value[roots[k]] = np.nan
        logits[roots[k]] = np.nan
        poisoned_forest = forest.replace(value=value, prior_logits=logits)
    bad = sc.game_policy(poisoned_forest, roots, keys, invalid, _TAUS, k, **sc.NOISY_SPEC)
    others = np.array([b for b in range(4) if b != k])
    _leaves_equal(bad, clean, rows_a=others, rows_b=others)

    tree = jax.tree.map(lambda x: np.asarray(x)[k], bad.search_tree)
    for name in ("node_values", "raw_values", "children_prior", "root_prior"):
        assert np.all(np.isfinite(getattr(tree, name))), name
    assert np.all(np.isfinite(np.asarray(bad.action_weights[k])))
    assert np.asarray(bad.action_weights[k]).sum() == pytest.approx(1.0, abs=1e-6)
    assert tree.edge_visits[0].sum() == sc.NOISY_SPEC["sims"]
    assert tree.node_visits[0] == sc.NOISY_SPEC["sims"] + 1
    n = int(tree.num_nodes)
    assert n > 1
    # NaN values count as 0; NaN logits as a uniform prior over the legal actions.
    assert np.all(tree.raw_values[1:n] == 0)
    for i in range(1, n):
        legal = tree.children_index[i] != jaxpuct.ILLEGAL
        if legal.any():
            np.testing.assert_allclose(tree.children_prior[i][legal], 1 / legal.sum(),
                                       rtol=1e-6)
    if poison_root:
        assert tree.raw_values[0] == 0
        legal = ~invalid[k]
        np.testing.assert_allclose(tree.children_prior[0][legal], 1 / legal.sum(), rtol=1e-6)


def _full_tree_forest():
    """Elements 0, 2, 3 play games large enough to fill 16 slots; element 1 a game of
    one move (at most 4 nodes), whose tree never fills."""
    big = [g for g in (random_games.random_game(s, sc.NUM_ACTIONS, sc.GAME_DEPTH,
                                                legal_prob=0.9, terminal_prob=0.1)
                       for s in range(40, 80))
           if g.num_nodes >= 40][:3]
    tiny = random_games.random_game(44, sc.NUM_ACTIONS, 1, legal_prob=0.9)
    games = [big[0], tiny, big[1], big[2]]
    forest, roots = random_games.stack_games(
        [random_games.pad_game(g, sc.GAME_NODES) for g in games])
    return forest, roots, games


def test_full_tree():
    forest, roots, games = _full_tree_forest()
    keys = sc.element_keys(6, 4)
    sims, capacity = sc.FULL_SPEC["sims"], sc.FULL_SPEC["max_nodes"]
    invalid = sc.no_invalid(4)
    small = sc.game_policy(forest, roots, keys, invalid, _TAUS, **sc.FULL_SPEC)
    roomy = sc.game_policy(forest, roots, keys, invalid, _TAUS, **sc.ROOMY_SPEC)
    s, r = small.search_tree, roomy.search_tree
    filled = np.array([0, 2, 3])
    np.testing.assert_array_equal(np.asarray(s.num_nodes)[filled], capacity)
    assert int(r.num_nodes[0]) > capacity  # the roomy search did need more
    np.testing.assert_array_equal(np.asarray(s.edge_visits[:, 0]).sum(-1), sims)
    np.testing.assert_array_equal(np.asarray(s.node_visits[:, 0]), sims + 1)
    # The search went on after the tree filled: visited edges without a child.
    kids, visits = np.asarray(s.children_index), np.asarray(s.edge_visits)
    assert np.all(((kids == jaxpuct.UNEXPANDED) & (visits > 0)).any(axis=(1, 2))[filled])
    sc.check_tree(s, forest, roots, sims)

    # Nothing stored was overwritten: both searches agree until the small tree fills,
    # so its nodes are the first `capacity` nodes of the roomy tree, with the same
    # states, priors, rewards and links (links to later slots are missing).
    for name in ("embeddings", "children_prior", "raw_values", "node_rewards",
                 "node_discounts", "node_terminal"):
        np.testing.assert_array_equal(np.asarray(getattr(s, name))[filled],
                                      np.asarray(getattr(r, name))[filled, :capacity], name)
    roomy_links = np.asarray(r.children_index)[filled, :capacity]
    np.testing.assert_array_equal(
        kids[filled], np.where(roomy_links >= capacity, jaxpuct.UNEXPANDED, roomy_links))
    np.testing.assert_array_equal(np.asarray(s.root_prior), np.asarray(r.root_prior))

    # The element whose tree never filled is exactly the roomy search's.
    assert int(s.num_nodes[1]) == int(r.num_nodes[1]) <= 4
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(s), jax.tree.leaves(r),
                            strict=True):
        x, y = np.asarray(x)[1], np.asarray(y)[1]
        if x.shape != y.shape:  # node arrays: [capacity, ...] against [sims + 1, ...]
            assert np.all(y[capacity:] == (jaxpuct.UNEXPANDED if "children_index" in
                                           jax.tree_util.keystr(path) else 0))
            y = y[:capacity]
        np.testing.assert_array_equal(x, y, err_msg=jax.tree_util.keystr(path))
    np.testing.assert_array_equal(small.action[1], roomy.action[1])
    np.testing.assert_array_equal(small.action_weights[1], roomy.action_weights[1])

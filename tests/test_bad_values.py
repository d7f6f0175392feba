"""Faults a new user runs into: mctx-style ``-inf`` masking, wrong arguments that must
give a ``ValueError`` naming the argument, out-of-range values given as arrays, 64-bit
mode, and a tree capacity below the number of simulations."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxpuct
import jaxpuct.numerics

B, A = 2, 3
ROOT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bandit_recurrent_fn(params, rng_key, action, embedding):
    """Single-agent, one step deep: action 0 pays 1, the others 0; then terminal."""
    del params, rng_key
    batch = action.shape[0]
    out = jaxpuct.RecurrentFnOutput(
        reward=jnp.where(action == 0, 1.0, 0.0), discount=jnp.ones(batch),
        prior_logits=jnp.zeros((batch, A)), value=jnp.zeros(batch),
        terminal=jnp.ones(batch, bool))
    return out, embedding + 1


def _root(logits=None, batch=B, dtype=jnp.int32):
    logits = jnp.zeros((batch, A)) if logits is None else jnp.asarray(logits, jnp.float32)
    return jaxpuct.RootFnOutput(prior_logits=logits, value=jnp.zeros(batch),
                                embedding=jnp.zeros(batch, dtype))


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


def _only_output(params, rng_key, action, embedding):
    return _bandit_recurrent_fn(params, rng_key, action, embedding)[0]


def _float_embedding(params, rng_key, action, embedding):
    out, new = _bandit_recurrent_fn(params, rng_key, action, embedding)
    return out, new.astype(jnp.float32)


_SMALL_TREE = jaxpuct.init_tree(_root(), 5)
_OTHER_BATCH_TREE = jaxpuct.init_tree(_root(batch=B + 1), 5)
_OTHER_ACTIONS_TREE = jaxpuct.init_tree(
    jaxpuct.RootFnOutput(prior_logits=jnp.zeros((B, A + 1)), value=jnp.zeros(B),
                         embedding=jnp.zeros(B, jnp.int32)), 5)

BAD_CALLS = [
    ("graph as a dict", lambda: _policy(graph={"max_probes": 4}), ["graph", "GraphConfig",
                                                                    "dict"]),
    ("graph=True", lambda: _policy(graph=True), ["graph", "GraphConfig", "bool"]),
    ("search graph as a dict", lambda: jaxpuct.search(
        None, jax.random.PRNGKey(0), _root(), _bandit_recurrent_fn, 4, graph={}),
     ["graph", "GraphConfig"]),
    ("selection as a dict", lambda: _policy(selection={"c_init": 1.0}),
     ["selection", "PUCTConfig", "dict"]),
    ("temperature [B+1]", lambda: _policy(temperature=jnp.ones(B + 1)),
     ["temperature", "[B]", str(B), str(B + 1)]),
    ("temperature array < 0", lambda: _policy(temperature=jnp.array([-1.0, 1.0])),
     ["temperature", "-1.0"]),
    ("dirichlet_fraction array > 1", lambda: _policy(dirichlet_fraction=jnp.array(2.0)),
     ["dirichlet_fraction", "2.0"]),
    ("dirichlet_alpha array <= 0", lambda: _policy(dirichlet_fraction=0.25,
                                                   dirichlet_alpha=np.float32(0.0)),
     ["dirichlet_alpha", "> 0"]),
    ("subtree action [B+1]", lambda: jaxpuct.subtree(_SMALL_TREE, jnp.zeros(B + 1, int)),
     ["action", str([B]), str([B + 1])]),
    ("recurrent_fn returns only its output", lambda: _policy(recurrent_fn=_only_output),
     ["recurrent_fn", "pair", "RecurrentFnOutput"]),
    ("tree from another batch size", lambda: _policy(tree=_OTHER_BATCH_TREE),
     ["tree", "batch size 3", "B=2"]),
    ("search: tree with another action count than root", lambda: jaxpuct.search(
        None, jax.random.PRNGKey(0), _root(), _bandit_recurrent_fn, 4,
        tree=_OTHER_ACTIONS_TREE), ["tree", "4 actions", "num_actions=3"]),
    ("tree with another action count", lambda: jaxpuct.search(
        None, jax.random.PRNGKey(0), None, _bandit_recurrent_fn, 4, tree=_OTHER_ACTIONS_TREE,
        invalid_actions=jnp.zeros((B, A), bool)), ["invalid_actions", str([B, A + 1])]),
    ("tree and root disagree on actions", lambda: jaxpuct.subtree_or_init(
        _OTHER_ACTIONS_TREE, jnp.zeros(B, int), _root()), ["tree", "actions"]),
    ("embedding dtype changes", lambda: _policy(recurrent_fn=_float_embedding),
     ["embedding", "int32", "float32"]),
    ("batch size 0", lambda: _policy(root=_root(batch=0)), ["root.prior_logits", "B >= 1",
                                                             "B=0"]),
    ("gumbel: batch size 0", lambda: jaxpuct.gumbel_policy(
        None, jax.random.PRNGKey(0), _root(batch=0), _bandit_recurrent_fn, 4), ["B=0"]),
    ("init_tree: batch size 0", lambda: jaxpuct.init_tree(_root(batch=0), 4), ["B=0"]),
    ("int32 hash from GraphConfig.hash_fn", lambda: _policy(graph=jaxpuct.GraphConfig(
        hash_fn=lambda e: jnp.stack([e, e], -1))), ["GraphConfig.hash_fn", "uint32", "int32"]),
    ("int32 state_hash of the root", lambda: _policy(
        root=_root().replace(state_hash=jnp.zeros((B, 2), jnp.int32)),
        graph=jaxpuct.GraphConfig()), ["root.state_hash", "uint32", "int32"]),
]


@pytest.mark.parametrize("call,words", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_argument_raises_value_error_naming_it(call, words):
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, (word, message)


def test_batch_size_zero_is_rejected_alike_by_the_search_and_check_recurrent_fn():
    import jaxpuct.testing

    with pytest.raises(ValueError, match="B=0"):
        _policy(root=_root(batch=0))
    with pytest.raises(jaxpuct.testing.ConformanceError, match="B = 0"):
        jaxpuct.testing.check_recurrent_fn(_bandit_recurrent_fn, None, _root(batch=0))


def test_tree_from_another_batch_size_without_root_names_the_batch_size_of_the_tree():
    # No root to compare with: the per-element keys are checked against the tree.
    with pytest.raises(ValueError, match=r"rng_key must be one key or a batch of B=3 keys"):
        jaxpuct.alphazero_policy(None, jax.random.split(jax.random.PRNGKey(0), B), None,
                                 _bandit_recurrent_fn, 4, tree=_OTHER_BATCH_TREE)


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
            tree, reused = jaxpuct.subtree(out.search_tree, out.action, graph=graph)
            jaxpuct.alphazero_policy(None, jax.random.PRNGKey(1), None, recurrent_fn, 8,
                                     tree=tree, graph=graph)
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
# Wrong objects: a PolicyOutput, an mctx tree, a dict from recurrent_fn, a traced tree
# --------------------------------------------------------------------------------------


def _mctx_tree():
    """An mctx ``Tree`` of the jaxpuct tree's shapes (only its type matters here)."""
    mctx = pytest.importorskip("mctx")
    node, edge = jnp.zeros((B, 5)), jnp.zeros((B, 5, A))
    return mctx.Tree(node_visits=node, raw_values=node, node_values=node, parents=node,
                     action_from_parent=node, children_index=edge.astype(jnp.int32),
                     children_prior_logits=edge, children_visits=edge, children_rewards=edge,
                     children_discounts=edge, children_values=edge,
                     embeddings=jnp.zeros((B, 5)), root_invalid_actions=jnp.zeros((B, A)),
                     extra_data=None)


def _dict_output(params, rng_key, action, embedding):
    out, new = _bandit_recurrent_fn(params, rng_key, action, embedding)
    return {"reward": out.reward, "discount": out.discount, "prior_logits": out.prior_logits,
            "value": out.value}, new


_KEY = jax.random.PRNGKey(0)
_POLICY_OUTPUT = _policy()

WRONG_OBJECTS = [
    ("alphazero_policy(tree=mctx tree)", lambda: jaxpuct.alphazero_policy(
        None, _KEY, None, _bandit_recurrent_fn, 4, tree=_mctx_tree()),
     ["tree", "mctx.Tree", "jaxpuct continues only its own trees"]),
    ("alphazero_policy(root, tree=mctx tree)", lambda: _policy(tree=_mctx_tree()),
     ["mctx.Tree", "only its own trees"]),
    ("gumbel_policy(tree=mctx tree)", lambda: jaxpuct.gumbel_policy(
        None, _KEY, _root(), _bandit_recurrent_fn, 4, tree=_mctx_tree()), ["mctx.Tree"]),
    ("search(tree=mctx tree)", lambda: jaxpuct.search(
        None, _KEY, _root(), _bandit_recurrent_fn, 4, tree=_mctx_tree()), ["mctx.Tree"]),
    ("subtree(mctx tree)", lambda: jaxpuct.subtree(_mctx_tree(), jnp.zeros(B, jnp.int32)),
     ["mctx.Tree", "only its own trees"]),
    ("subtree_path(mctx tree)", lambda: jaxpuct.subtree_path(
        _mctx_tree(), jnp.zeros((B, 1), jnp.int32)), ["mctx.Tree"]),
    ("subtree_or_init(mctx tree)", lambda: jaxpuct.subtree_or_init(
        _mctx_tree(), jnp.zeros(B, jnp.int32), _root()), ["mctx.Tree"]),
    ("subtree(policy output)", lambda: jaxpuct.subtree(_POLICY_OUTPUT, jnp.zeros(B, jnp.int32)),
     ["PolicyOutput", ".search_tree"]),
    ("to_dot(policy output)", lambda: __import__("jaxpuct.visualize").visualize.to_dot(
        _POLICY_OUTPUT), ["tree", "PolicyOutput", ".search_tree"]),
    ("to_dot under jit", lambda: jax.jit(
        lambda t: len(__import__("jaxpuct.visualize").visualize.to_dot(t)))(
        _POLICY_OUTPUT.search_tree), ["tree", "concrete", "jax.jit"]),
    ("recurrent_fn returns a dict", lambda: _policy(recurrent_fn=_dict_output),
     ["recurrent_fn", "RecurrentFnOutput", "dict", "'reward'"]),
]


@pytest.mark.parametrize("call,words", [c[1:] for c in WRONG_OBJECTS],
                         ids=[c[0] for c in WRONG_OBJECTS])
def test_wrong_object_raises_value_error_saying_what_was_expected(call, words):
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, (word, message)


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


@pytest.mark.parametrize("name, call, words", [
    ("float action", lambda t: jaxpuct.subtree(t, jnp.full((B,), 1.7)),
     ["action", "integer", "float32"]),
    ("action out of range", lambda t: jaxpuct.subtree(t, jnp.full((B,), A, jnp.int32)),
     ["action", f"num_actions={A}", str(A)]),
    ("float path", lambda t: jaxpuct.subtree_path(t, jnp.zeros((B, 2))),
     ["actions", "integer"]),
    ("float mask", lambda t: jaxpuct.alphazero_policy(
        None, jax.random.PRNGKey(0), _root(), _bandit_recurrent_fn, 4,
        invalid_actions=jnp.full((B, A), 0.5)), ["invalid_actions", "bool", "float32"]),
    ("integer mask of 2s", lambda t: jaxpuct.alphazero_policy(
        None, jax.random.PRNGKey(0), _root(), _bandit_recurrent_fn, 4,
        invalid_actions=jnp.full((B, A), 2, jnp.int32)), ["invalid_actions", "0 or 1"]),
])
def test_non_integer_actions_and_non_boolean_masks_are_errors(name, call, words):
    tree = jaxpuct.init_tree(_root(), 4)
    with pytest.raises(ValueError) as info:
        call(tree)
    for word in words:
        assert word in str(info.value), (name, word, str(info.value))

"""Bad arguments: every trace-time ``ValueError`` that names the argument, as one
table (``CASES``), and the other argument errors: ``PUCTConfig`` choices, errors
raised while tracing (before anything is compiled), batch size zero, a tree from
another batch size.

What a search does with bad *values* (masks, NaN, full trees, non-finite numbers)
is in ``test_bad_values.py``."""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc

import jaxpuct
import jaxpuct.testing
from jaxpuct import PUCTConfig

B, A = 2, 3
_bandit_recurrent_fn, _bandit_root = sc.bandit_recurrent_fn, sc.bandit_root

# ------------------------------------------------------------------ helpers
# Two families of calls: a two-player game with well-shaped outputs whose fields a
# case replaces (``_root``, ``_recurrent``, ``_policy``, ``_search``), and a one-step
# single-agent bandit (``_bandit_*``).

def _root(**overrides):
    fields = dict(prior_logits=jnp.zeros((B, A)), value=jnp.zeros((B,)),
                  embedding=jnp.zeros((B,), jnp.int32))
    fields.update(overrides)
    return jaxpuct.RootFnOutput(**fields)


def _recurrent(new_embedding=None, **overrides):
    """A recurrent_fn returning the given fields (and embedding) in place of
    well-shaped ones."""

    def fn(params, key, action, embedding):
        del params, key
        fields = dict(reward=jnp.zeros((B,)), discount=-jnp.ones((B,)),
                      prior_logits=jnp.zeros((B, A)), value=jnp.zeros((B,)))
        fields.update(overrides)
        return (jaxpuct.RecurrentFnOutput(**fields),
                embedding if new_embedding is None else new_embedding)

    return fn


def _policy(root=None, recurrent=None, num_simulations=4, **kwargs):
    return jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0),
                                    _root() if root is None else root,
                                    _recurrent() if recurrent is None else recurrent,
                                    num_simulations, **kwargs)


def _search(**kwargs):
    return jaxpuct.search(None, jax.random.PRNGKey(0), _root(), _recurrent(), 4, **kwargs)


def _bandit_policy(**kwargs):
    args = dict(dirichlet_fraction=0.0)
    args.update(kwargs)
    root = args.pop("root", _bandit_root())
    recurrent_fn = args.pop("recurrent_fn", _bandit_recurrent_fn)
    return jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), root, recurrent_fn, 4,
                                    **args)


def _only_output(params, rng_key, action, embedding):
    return _bandit_recurrent_fn(params, rng_key, action, embedding)[0]


def _float_embedding(params, rng_key, action, embedding):
    out, new = _bandit_recurrent_fn(params, rng_key, action, embedding)
    return out, new.astype(jnp.float32)


def _dict_output(params, rng_key, action, embedding):
    out, new = _bandit_recurrent_fn(params, rng_key, action, embedding)
    return {"reward": out.reward, "discount": out.discount, "prior_logits": out.prior_logits,
            "value": out.value}, new


def _fresh_tree():
    return jaxpuct.init_tree(_bandit_root(), 4)


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


def _to_dot(tree):
    return __import__("jaxpuct.visualize").visualize.to_dot(tree)


_KEY = jax.random.PRNGKey(0)


# Built on first use, not at import: both pytest workers import every test module
# while collecting, and these took 5 s of the collection's CPU.
@functools.cache
def _small_tree():
    return jaxpuct.init_tree(_bandit_root(), 5)


@functools.cache
def _other_batch_tree():
    return jaxpuct.init_tree(_bandit_root(batch=B + 1), 5)


@functools.cache
def _other_actions_tree():
    return jaxpuct.init_tree(
        jaxpuct.RootFnOutput(prior_logits=jnp.zeros((B, A + 1)), value=jnp.zeros(B),
                             embedding=jnp.zeros(B, jnp.int32)), 5)


@functools.cache
def _policy_output():
    return _bandit_policy()


# ------------------------------------------------------------------ trace-time errors

# (description, thunk, words the message must contain: the argument's name and the
# expected and actual values, jit): jit=True cases run eagerly and under ``jax.jit``
# (where the error is raised while tracing); jit=False cases, value checks of
# concrete arrays that a traced array skips, run eagerly only, with the reason
# beside the case.
CASES = [
    ("logits rank 1", lambda: _policy(_root(prior_logits=jnp.zeros((A,)))),
     ["root.prior_logits", "[B, num_actions]", "[3]"], True),
    ("logits rank 3", lambda: _policy(_root(prior_logits=jnp.zeros((B, A, 1)))),
     ["root.prior_logits", "[B, num_actions]", "[2, 3, 1]"], True),
    ("no actions", lambda: _policy(_root(prior_logits=jnp.zeros((B, 0)))),
     ["root.prior_logits", "num_actions >= 1", "0"], True),
    ("value [B, 1]", lambda: _policy(_root(value=jnp.zeros((B, 1)))),
     ["root.value", "[2]", "[2, 1]"], True),
    ("value [B + 1]", lambda: _policy(_root(value=jnp.zeros((B + 1,)))),
     ["root.value", "[2]", "[3]"], True),
    ("value scalar", lambda: _policy(_root(value=jnp.zeros(()))),
     ["root.value", "[2]", "[]"], True),
    ("embedding batch", lambda: _policy(_root(embedding=jnp.zeros((B + 1, 4)))),
     ["root.embedding", "B=2", "[3, 4]"], True),
    ("embedding leaf batch", lambda: _policy(
        _root(embedding={"a": jnp.zeros((B,)), "b": jnp.zeros((1, B))})),
     ["root.embedding['b']", "B=2", "[1, 2]"], True),
    ("embedding empty", lambda: _policy(_root(embedding=None)),
     ["root.embedding", "at least one array leaf"], True),
    ("root legal mask", lambda: _policy(_root(legal_action_mask=jnp.ones((B, A + 1), bool))),
     ["root.legal_action_mask", "[2, 3]", "[2, 4]"], True),
    ("invalid_actions", lambda: _policy(invalid_actions=jnp.zeros((B, A - 1), bool)),
     ["invalid_actions", "[2, 3]", "[2, 2]"], True),
    ("invalid_actions rank", lambda: _policy(invalid_actions=jnp.zeros((A,), bool)),
     ["invalid_actions", "[2, 3]", "[3]"], True),
    ("root_prior", lambda: _search(root_prior=jnp.zeros((B, A + 2))),
     ["root_prior", "[2, 3]", "[2, 5]"], True),
    ("num_simulations 0", lambda: _policy(num_simulations=0),
     ["num_simulations", ">= 1", "0"], True),
    ("num_simulations float", lambda: _policy(num_simulations=2.0),
     ["num_simulations", "Python int", "2.0", "float"], True),
    ("num_simulations bool", lambda: _policy(num_simulations=True),
     ["num_simulations", "Python int", "bool"], True),
    ("num_simulations array", lambda: _policy(num_simulations=jnp.int32(4)),
     ["num_simulations", "Python int"], True),
    ("max_nodes 0", lambda: _policy(max_nodes=0), ["max_nodes", ">= 1", "0"], True),
    ("max_nodes float", lambda: _search(max_nodes=8.5), ["max_nodes", "Python int", "8.5"], True),
    ("max_depth 0", lambda: _policy(max_depth=0), ["max_depth", ">= 1", "0"], True),
    ("max_depth negative", lambda: _search(max_depth=-3), ["max_depth", ">= 1", "-3"], True),
    ("selection type", lambda: _policy(selection={"c_init": 1.0}),
     ["selection", "PUCTConfig", "dict"], True),
    ("dirichlet_fraction < 0", lambda: _policy(dirichlet_fraction=-0.1),
     ["dirichlet_fraction", "[0.0, 1.0]", "-0.1"], True),
    ("dirichlet_fraction > 1", lambda: _policy(dirichlet_fraction=1.5),
     ["dirichlet_fraction", "[0.0, 1.0]", "1.5"], True),
    ("dirichlet_alpha", lambda: _policy(dirichlet_alpha=0.0),
     ["dirichlet_alpha", "> 0", "0.0"], True),
    ("temperature", lambda: _policy(temperature=-1.0), ["temperature", "0.0", "-1.0"], True),
    ("rng_key batch", lambda: jaxpuct.alphazero_policy(
        None, jax.random.split(jax.random.PRNGKey(0), B + 1), _root(), _recurrent(), 4),
     ["rng_key", "B=2", "[3, 2]"], True),
    ("rng_key rank", lambda: jaxpuct.search(
        None, jnp.zeros((B, 2, 2), jnp.uint32), _root(), _recurrent(), 4),
     ["rng_key", "B=2", "[2, 2, 2]"], True),
    ("recurrent reward", lambda: _policy(recurrent=_recurrent(reward=jnp.zeros((B, 1)))),
     ["recurrent_fn output .reward", "[2]", "[2, 1]"], True),
    ("recurrent discount", lambda: _policy(recurrent=_recurrent(discount=jnp.zeros((B + 1,)))),
     ["recurrent_fn output .discount", "[2]", "[3]"], True),
    ("recurrent value", lambda: _policy(recurrent=_recurrent(value=jnp.zeros(()))),
     ["recurrent_fn output .value", "[2]", "[]"], True),
    ("recurrent logits", lambda: _policy(recurrent=_recurrent(prior_logits=jnp.zeros((B, 4)))),
     ["recurrent_fn output .prior_logits", "[2, 3]", "[2, 4]"], True),
    ("recurrent legal mask", lambda: _policy(
        recurrent=_recurrent(legal_action_mask=jnp.ones((B,), bool))),
     ["recurrent_fn output .legal_action_mask", "[2, 3]", "[2]"], True),
    ("recurrent terminal", lambda: _policy(
        recurrent=_recurrent(terminal=jnp.zeros((B, 1), bool))),
     ["recurrent_fn output .terminal", "[2]", "[2, 1]"], True),
    ("recurrent embedding shape", lambda: _policy(
        recurrent=_recurrent(new_embedding=jnp.zeros((B, 5), jnp.int32))),
     ["recurrent_fn embedding", "[2]", "[2, 5]"], True),
    ("recurrent embedding structure", lambda: _policy(
        recurrent=_recurrent(new_embedding=(jnp.zeros((B,), jnp.int32),))),
     ["recurrent_fn", "same structure as root.embedding"], True),
    ("recurrent missing field", lambda: _policy(
        recurrent=lambda p, k, a, e: (object(), e)),
     ["recurrent_fn output .reward", "[2]"], True),
    # Configuration objects, recurrent_fn outputs, trees and hashes.
    ("graph as a dict", lambda: _bandit_policy(graph={"max_probes": 4}),
     ["graph", "GraphConfig", "dict"], True),
    ("graph=True", lambda: _bandit_policy(graph=True), ["graph", "GraphConfig", "bool"], True),
    ("search graph as a dict", lambda: jaxpuct.search(
        None, jax.random.PRNGKey(0), _bandit_root(), _bandit_recurrent_fn, 4, graph={}),
     ["graph", "GraphConfig"], True),
    ("temperature [B+1]", lambda: _bandit_policy(temperature=jnp.ones(B + 1)),
     ["temperature", "[B]", str(B), str(B + 1)], True),
    ("temperature array < 0", lambda: _bandit_policy(temperature=jnp.array([-1.0, 1.0])),
     ["temperature", "-1.0"], False),  # a value check: traced, it needs checkify
    ("dirichlet_fraction array > 1", lambda: _bandit_policy(
        dirichlet_fraction=jnp.array(2.0)), ["dirichlet_fraction", "2.0"], False),  # same
    ("dirichlet_alpha array <= 0", lambda: _bandit_policy(dirichlet_fraction=0.25,
                                                          dirichlet_alpha=np.float32(0.0)),
     ["dirichlet_alpha", "> 0"], True),
    ("subtree action [B+1]", lambda: jaxpuct.subtree(_small_tree(), jnp.zeros(B + 1, int)),
     ["action", str([B]), str([B + 1])], True),
    ("recurrent_fn returns only its output", lambda: _bandit_policy(recurrent_fn=_only_output),
     ["recurrent_fn", "pair", "RecurrentFnOutput"], True),
    ("tree from another batch size", lambda: _bandit_policy(tree=_other_batch_tree()),
     ["tree", "batch size 3", "B=2"], True),
    ("search: tree with another action count than root", lambda: jaxpuct.search(
        None, jax.random.PRNGKey(0), _bandit_root(), _bandit_recurrent_fn, 4,
        tree=_other_actions_tree()), ["tree", "4 actions", "num_actions=3"], True),
    ("tree with another action count", lambda: jaxpuct.search(
        None, jax.random.PRNGKey(0), None, _bandit_recurrent_fn, 4, tree=_other_actions_tree(),
        invalid_actions=jnp.zeros((B, A), bool)), ["invalid_actions", str([B, A + 1])], True),
    ("tree and root disagree on actions", lambda: jaxpuct.subtree_or_init(
        _other_actions_tree(), jnp.zeros(B, int), _bandit_root()), ["tree", "actions"], True),
    ("embedding dtype changes", lambda: _bandit_policy(recurrent_fn=_float_embedding),
     ["embedding", "int32", "float32"], True),
    ("batch size 0", lambda: _bandit_policy(root=_bandit_root(batch=0)),
     ["root.prior_logits", "B >= 1", "B=0"], True),
    ("gumbel: batch size 0", lambda: jaxpuct.gumbel_policy(
        None, jax.random.PRNGKey(0), _bandit_root(batch=0), _bandit_recurrent_fn, 4),
     ["B=0"], True),
    ("init_tree: batch size 0", lambda: jaxpuct.init_tree(_bandit_root(batch=0), 4),
     ["B=0"], True),
    ("int32 hash from GraphConfig.hash_fn", lambda: _bandit_policy(graph=jaxpuct.GraphConfig(
        hash_fn=lambda e: jnp.stack([e, e], -1))),
     ["GraphConfig.hash_fn", "uint32", "int32"], True),
    ("int32 state_hash of the root", lambda: _bandit_policy(
        root=_bandit_root().replace(state_hash=jnp.zeros((B, 2), jnp.int32)),
        graph=jaxpuct.GraphConfig()), ["root.state_hash", "uint32", "int32"], True),
    # Actions and masks of the wrong kind.
    ("float action", lambda: jaxpuct.subtree(_fresh_tree(), jnp.full((B,), 1.7)),
     ["action", "integer", "float32"], True),
    ("action out of range", lambda: jaxpuct.subtree(
        _fresh_tree(), jnp.full((B,), A, jnp.int32)), ["action", f"num_actions={A}", str(A)],
     False),  # checks concrete actions only
    ("float path", lambda: jaxpuct.subtree_path(_fresh_tree(), jnp.zeros((B, 2))),
     ["actions", "integer"], True),
    ("float mask", lambda: jaxpuct.alphazero_policy(
        None, jax.random.PRNGKey(0), _bandit_root(), _bandit_recurrent_fn, 4,
        invalid_actions=jnp.full((B, A), 0.5)), ["invalid_actions", "bool", "float32"], True),
    ("integer mask of 2s", lambda: jaxpuct.alphazero_policy(
        None, jax.random.PRNGKey(0), _bandit_root(), _bandit_recurrent_fn, 4,
        invalid_actions=jnp.full((B, A), 2, jnp.int32)), ["invalid_actions", "0 or 1"],
     False),  # checks a concrete integer mask's values only
    # Wrong objects: an mctx tree, a PolicyOutput, a dict from recurrent_fn, a traced tree.
    ("alphazero_policy(tree=mctx tree)", lambda: jaxpuct.alphazero_policy(
        None, _KEY, None, _bandit_recurrent_fn, 4, tree=_mctx_tree()),
     ["tree", "mctx.Tree", "jaxpuct continues only its own trees"], True),
    ("alphazero_policy(root, tree=mctx tree)", lambda: _bandit_policy(tree=_mctx_tree()),
     ["mctx.Tree", "only its own trees"], True),
    ("gumbel_policy(tree=mctx tree)", lambda: jaxpuct.gumbel_policy(
        None, _KEY, _bandit_root(), _bandit_recurrent_fn, 4, tree=_mctx_tree()),
     ["mctx.Tree"], True),
    ("search(tree=mctx tree)", lambda: jaxpuct.search(
        None, _KEY, _bandit_root(), _bandit_recurrent_fn, 4, tree=_mctx_tree()),
     ["mctx.Tree"], True),
    ("subtree(mctx tree)", lambda: jaxpuct.subtree(_mctx_tree(), jnp.zeros(B, jnp.int32)),
     ["mctx.Tree", "only its own trees"], True),
    ("subtree_path(mctx tree)", lambda: jaxpuct.subtree_path(
        _mctx_tree(), jnp.zeros((B, 1), jnp.int32)), ["mctx.Tree"], True),
    ("subtree_or_init(mctx tree)", lambda: jaxpuct.subtree_or_init(
        _mctx_tree(), jnp.zeros(B, jnp.int32), _bandit_root()), ["mctx.Tree"], True),
    ("subtree(policy output)", lambda: jaxpuct.subtree(_policy_output(), jnp.zeros(B, jnp.int32)),
     ["PolicyOutput", ".search_tree"], True),
    ("to_dot(policy output)", lambda: _to_dot(_policy_output()),
     ["tree", "PolicyOutput", ".search_tree"], True),
    ("to_dot under jit", lambda: jax.jit(lambda t: len(_to_dot(t)))(_policy_output().search_tree),
     ["tree", "concrete", "jax.jit"], True),
    ("recurrent_fn returns a dict", lambda: _bandit_policy(recurrent_fn=_dict_output),
     ["recurrent_fn", "RecurrentFnOutput", "dict", "'reward'"], True),
]

_RUNS = [(name, thunk, words, False) for name, thunk, words, _ in CASES] + [
    (name, thunk, words, True) for name, thunk, words, jit in CASES if jit]


@pytest.mark.parametrize("name, thunk, words, jit", _RUNS,
                         ids=[f"{c[0]}-{'jit' if c[3] else 'eager'}" for c in _RUNS])
def test_bad_input_raises_value_error_naming_it(name, thunk, words, jit):
    call = jax.jit(thunk) if jit else thunk  # under jit: raised while tracing
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, f"{name}: {word!r} not in {message!r}"


@pytest.mark.parametrize("kwargs, field", [
    (dict(form="ucb"), "form"),
    (dict(parent_visits="edges"), "parent_visits"),
    (dict(unvisited_q="loss"), "unvisited_q"),
    (dict(q_normalization="zscore"), "q_normalization"),
    (dict(c_init=-0.1), "c_init"),
    (dict(c_base=0.0), "c_base"),
    (dict(exponent=0.0), "exponent"),
    (dict(log_offset=-1.0), "log_offset"),
    (dict(tie_noise=-1e-3), "tie_noise"),
    (dict(fpu_reduction=-0.1), "fpu_reduction"),
    (dict(fpu_reduction_root=-0.1), "fpu_reduction_root"),
])
def test_config_rejects_bad_choices(kwargs, field):
    with pytest.raises(ValueError, match=re.escape(field)) as info:
        PUCTConfig(**kwargs)
    assert str(info.value).startswith("PUCTConfig.")
    (value,) = kwargs.values()
    assert str(value) in str(info.value) or repr(value) in str(info.value)


def test_errors_happen_before_anything_is_compiled():
    """A bad recurrent_fn fails while tracing: the function is never run."""
    calls = []

    def recurrent(params, key, action, embedding):
        calls.append(type(action))  # runs only while tracing
        return _recurrent(value=jnp.zeros((B, 1)))(params, key, action, embedding)

    with pytest.raises(ValueError, match="recurrent_fn output .value"):
        jax.jit(lambda: _policy(recurrent=recurrent))()
    assert calls and all(issubclass(c, jax.core.Tracer) for c in calls)


def test_batch_size_zero_is_rejected_alike_by_the_search_and_check_recurrent_fn():
    with pytest.raises(ValueError, match="B=0"):
        _bandit_policy(root=_bandit_root(batch=0))
    with pytest.raises(jaxpuct.testing.ConformanceError, match="B = 0"):
        jaxpuct.testing.check_recurrent_fn(_bandit_recurrent_fn, None, _bandit_root(batch=0))


def test_tree_from_another_batch_size_without_root_names_the_batch_size_of_the_tree():
    # No root to compare with: the per-element keys are checked against the tree.
    with pytest.raises(ValueError, match=r"rng_key must be one key or a batch of B=3 keys"):
        jaxpuct.alphazero_policy(None, jax.random.split(jax.random.PRNGKey(0), B), None,
                                 _bandit_recurrent_fn, 4, tree=_other_batch_tree())

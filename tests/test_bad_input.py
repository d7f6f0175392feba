"""Bad input: trace-time ``ValueError`` s that name the argument, and the defined
behaviour for bad *values* (a root with no legal action, NaN from the network, a
full tree), where one batch element's trouble must not touch the others."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import oracles
import pytest
import search_cases as sc

import jaxpuct
from jaxpuct import PUCTConfig

B, A = 2, 3

# ------------------------------------------------------------------ trace-time errors


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


# (description, thunk, words the message must contain: the argument's name and the
# expected and actual values).
CASES = [
    ("logits rank 1", lambda: _policy(_root(prior_logits=jnp.zeros((A,)))),
     ["root.prior_logits", "[B, num_actions]", "[3]"]),
    ("logits rank 3", lambda: _policy(_root(prior_logits=jnp.zeros((B, A, 1)))),
     ["root.prior_logits", "[B, num_actions]", "[2, 3, 1]"]),
    ("no actions", lambda: _policy(_root(prior_logits=jnp.zeros((B, 0)))),
     ["root.prior_logits", "num_actions >= 1", "0"]),
    ("value [B, 1]", lambda: _policy(_root(value=jnp.zeros((B, 1)))),
     ["root.value", "[2]", "[2, 1]"]),
    ("value [B + 1]", lambda: _policy(_root(value=jnp.zeros((B + 1,)))),
     ["root.value", "[2]", "[3]"]),
    ("value scalar", lambda: _policy(_root(value=jnp.zeros(()))),
     ["root.value", "[2]", "[]"]),
    ("embedding batch", lambda: _policy(_root(embedding=jnp.zeros((B + 1, 4)))),
     ["root.embedding", "B=2", "[3, 4]"]),
    ("embedding leaf batch", lambda: _policy(
        _root(embedding={"a": jnp.zeros((B,)), "b": jnp.zeros((1, B))})),
     ["root.embedding['b']", "B=2", "[1, 2]"]),
    ("embedding empty", lambda: _policy(_root(embedding=None)),
     ["root.embedding", "at least one array leaf"]),
    ("root legal mask", lambda: _policy(_root(legal_action_mask=jnp.ones((B, A + 1), bool))),
     ["root.legal_action_mask", "[2, 3]", "[2, 4]"]),
    ("invalid_actions", lambda: _policy(invalid_actions=jnp.zeros((B, A - 1), bool)),
     ["invalid_actions", "[2, 3]", "[2, 2]"]),
    ("invalid_actions rank", lambda: _policy(invalid_actions=jnp.zeros((A,), bool)),
     ["invalid_actions", "[2, 3]", "[3]"]),
    ("root_prior", lambda: _search(root_prior=jnp.zeros((B, A + 2))),
     ["root_prior", "[2, 3]", "[2, 5]"]),
    ("num_simulations 0", lambda: _policy(num_simulations=0),
     ["num_simulations", ">= 1", "0"]),
    ("num_simulations float", lambda: _policy(num_simulations=2.0),
     ["num_simulations", "Python int", "2.0", "float"]),
    ("num_simulations bool", lambda: _policy(num_simulations=True),
     ["num_simulations", "Python int", "bool"]),
    ("num_simulations array", lambda: _policy(num_simulations=jnp.int32(4)),
     ["num_simulations", "Python int"]),
    ("max_nodes 0", lambda: _policy(max_nodes=0), ["max_nodes", ">= 1", "0"]),
    ("max_nodes float", lambda: _search(max_nodes=8.5), ["max_nodes", "Python int", "8.5"]),
    ("max_depth 0", lambda: _policy(max_depth=0), ["max_depth", ">= 1", "0"]),
    ("max_depth negative", lambda: _search(max_depth=-3), ["max_depth", ">= 1", "-3"]),
    ("selection type", lambda: _policy(selection={"c_init": 1.0}),
     ["selection", "PUCTConfig", "dict"]),
    ("dirichlet_fraction < 0", lambda: _policy(dirichlet_fraction=-0.1),
     ["dirichlet_fraction", "[0.0, 1.0]", "-0.1"]),
    ("dirichlet_fraction > 1", lambda: _policy(dirichlet_fraction=1.5),
     ["dirichlet_fraction", "[0.0, 1.0]", "1.5"]),
    ("dirichlet_alpha", lambda: _policy(dirichlet_alpha=0.0),
     ["dirichlet_alpha", "> 0", "0.0"]),
    ("temperature", lambda: _policy(temperature=-1.0), ["temperature", "0.0", "-1.0"]),
    ("rng_key batch", lambda: jaxpuct.alphazero_policy(
        None, jax.random.split(jax.random.PRNGKey(0), B + 1), _root(), _recurrent(), 4),
     ["rng_key", "B=2", "[3, 2]"]),
    ("rng_key rank", lambda: jaxpuct.search(
        None, jnp.zeros((B, 2, 2), jnp.uint32), _root(), _recurrent(), 4),
     ["rng_key", "B=2", "[2, 2, 2]"]),
    ("recurrent reward", lambda: _policy(recurrent=_recurrent(reward=jnp.zeros((B, 1)))),
     ["recurrent_fn output .reward", "[2]", "[2, 1]"]),
    ("recurrent discount", lambda: _policy(recurrent=_recurrent(discount=jnp.zeros((B + 1,)))),
     ["recurrent_fn output .discount", "[2]", "[3]"]),
    ("recurrent value", lambda: _policy(recurrent=_recurrent(value=jnp.zeros(()))),
     ["recurrent_fn output .value", "[2]", "[]"]),
    ("recurrent logits", lambda: _policy(recurrent=_recurrent(prior_logits=jnp.zeros((B, 4)))),
     ["recurrent_fn output .prior_logits", "[2, 3]", "[2, 4]"]),
    ("recurrent legal mask", lambda: _policy(
        recurrent=_recurrent(legal_action_mask=jnp.ones((B,), bool))),
     ["recurrent_fn output .legal_action_mask", "[2, 3]", "[2]"]),
    ("recurrent terminal", lambda: _policy(
        recurrent=_recurrent(terminal=jnp.zeros((B, 1), bool))),
     ["recurrent_fn output .terminal", "[2]", "[2, 1]"]),
    ("recurrent embedding shape", lambda: _policy(
        recurrent=_recurrent(new_embedding=jnp.zeros((B, 5), jnp.int32))),
     ["recurrent_fn embedding", "[2]", "[2, 5]"]),
    ("recurrent embedding structure", lambda: _policy(
        recurrent=_recurrent(new_embedding=(jnp.zeros((B,), jnp.int32),))),
     ["recurrent_fn", "same structure as root.embedding"]),
    ("recurrent missing field", lambda: _policy(
        recurrent=lambda p, k, a, e: (object(), e)),
     ["recurrent_fn output .reward", "[2]"]),
]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name, thunk, words", CASES, ids=[c[0] for c in CASES])
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


# ------------------------------------------------------------------ bad values

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
    return jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), oracles.ttt_root(state),
                                    oracles.ttt_recurrent_fn, 6, dirichlet_fraction=0.0,
                                    temperature=0.0)


def test_terminal_root_is_not_searched():
    """A tic-tac-toe root that is already won: no legal move, action -1."""
    won = oracles.ttt_parse("XXX OO. ...")
    state = oracles.ttt_batch([won, oracles.TTT_EMPTY])
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
    big = [g for g in (oracles.random_game(s, sc.NUM_ACTIONS, sc.GAME_DEPTH, legal_prob=0.9,
                                           terminal_prob=0.1) for s in range(40, 80))
           if g.num_nodes >= 40][:3]
    tiny = oracles.random_game(44, sc.NUM_ACTIONS, 1, legal_prob=0.9)
    games = [big[0], tiny, big[1], big[2]]
    forest, roots = oracles.stack_games([oracles.pad_game(g, sc.GAME_NODES) for g in games])
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

"""``jaxpuct.gumbel_policy``: Gumbel MuZero (Danihelka et al., ICLR 2022).

* the sequential-halving schedule, by hand and against mctx's for every
  ``m <= 16``, ``S <= 1024``;
* equality with ``mctx.gumbel_muzero_policy`` given the same Gumbel draw, on deep
  synthetic trees and on tic-tac-toe (mctx's gumbel path has no 1e-7 tie-break
  noise: both its root and interior rules ignore their key, so nothing is patched);
* a bandit computed by hand, the policy-improvement property, no NaN anywhere;
* jaxpuct's extensions: legal masks at every depth, NaN isolation, capacity,
  graph search, tree reuse.

Every search is a module-level jitted function with small fixed shapes.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc
from jax.experimental import checkify

import jaxpuct
from jaxpuct import gumbel as gumbel_lib
from jaxpuct.testing import mask_illegal_logits, synthetic, tictactoe

mctx = pytest.importorskip("mctx")
from mctx._src import seq_halving as mctx_seq_halving  # noqa: E402

# ----------------------------------------------------------------------- helpers


def _mctx_recurrent(recurrent_fn):
    """A jaxpuct ``recurrent_fn`` as mctx sees it: no legal mask, no terminal flag,
    illegal logits masked with a finite ``MASKED_LOGIT``."""

    def fn(params, key, action, embedding):
        out, new = recurrent_fn(params, key, action, embedding)
        logits = out.prior_logits
        if getattr(out, "legal_action_mask", None) is not None:
            logits = jaxpuct.testing.masked_logits(logits, out.legal_action_mask)
        return mctx.RecurrentFnOutput(reward=out.reward, discount=out.discount,
                                      prior_logits=logits, value=out.value), new

    return fn


def _mctx_root(root):
    return mctx.RootFnOutput(prior_logits=root.prior_logits, value=root.value,
                             embedding=root.embedding)


def mctx_gumbel(key, batch, num_actions):
    """The standard Gumbel draw ``mctx.gumbel_muzero_policy`` makes from ``key``."""
    return jax.random.gumbel(jax.random.split(key)[1], (batch, num_actions))


def expected_new_visits(num_considered: int, num_simulations: int, m: int) -> list[int]:
    """Sorted visit counts sequential halving gives the considered actions: at each
    simulation some action whose count equals the scheduled one gets a visit, so
    the multiset of counts follows from the schedule alone."""
    counts = [0] * max(num_considered, 1)
    for c in gumbel_lib.considered_visits_table(m, num_simulations)[num_considered]:
        counts[counts.index(int(c))] += 1
    return sorted(counts)


def _root_visits(out) -> np.ndarray:
    return np.asarray(out.search_tree.edge_visits[:, jaxpuct.Tree.ROOT_INDEX])


# ---------------------------------------------------------------------- schedule


@pytest.mark.parametrize("m, s, expected", [
    (8, 24, [0] * 8 + [1] * 4 + [2] * 4 + [3, 3, 4, 4, 5, 5, 6, 6]),
    (16, 32, [0] * 16 + [1] * 8 + [2] * 4 + [3] * 4),
    (8, 2, [0, 0]),
    (1, 5, [0, 1, 2, 3, 4]),
    (0, 3, [0, 1, 2]),
    (2, 5, [0, 0, 1, 1, 2]),
])
def test_schedule_by_hand(m, s, expected):
    assert list(gumbel_lib.considered_visits_sequence(m, s)) == expected


def test_schedule_equals_mctx_everywhere():
    for m in range(17):
        for s in range(1, 1025):
            ours = gumbel_lib.considered_visits_sequence(m, s)
            assert ours == mctx_seq_halving.get_sequence_of_considered_visits(m, s), (m, s)
    table = gumbel_lib.considered_visits_table(16, 200)
    assert table.shape == (17, 200) and table.dtype == np.int32
    np.testing.assert_array_equal(
        table, np.asarray(mctx_seq_halving.get_table_of_considered_visits(16, 200)))


# -------------------------------------------------------- equality with mctx

SYN_B, SYN_A, SYN_S, SYN_M = 8, 6, 64, 4


@sc.jit
def _synthetic_pair(key, scale, m=SYN_M):
    root, recurrent_fn = synthetic.synthetic_game(SYN_B, SYN_A, logit_scale=2.0)
    mroot, mrf = _mctx_root(root), _mctx_recurrent(recurrent_fn)
    theirs = mctx.gumbel_muzero_policy(None, key, mroot, mrf, SYN_S,
                                       max_num_considered_actions=m, gumbel_scale=scale)
    ours = jaxpuct.gumbel_policy(None, key, mroot, mrf, SYN_S, max_num_considered_actions=m,
                                 gumbel_scale=scale, gumbel=mctx_gumbel(key, SYN_B, SYN_A))
    return ours, theirs


def _assert_equal_to_mctx(ours, theirs):
    t, m = ours.search_tree, theirs.search_tree
    np.testing.assert_array_equal(_root_visits(ours), np.asarray(m.summary().visit_counts))
    np.testing.assert_array_equal(ours.action, theirs.action)
    np.testing.assert_allclose(ours.action_weights, theirs.action_weights, atol=1e-5)
    # Each simulation stores one node in both, in the same order: whole trees agree.
    np.testing.assert_array_equal(t.edge_visits, m.children_visits)
    # jaxpuct marks the masked root actions ILLEGAL, mctx leaves them unvisited (-1).
    children = np.where(np.asarray(t.children_index) == jaxpuct.ILLEGAL, -1, t.children_index)
    np.testing.assert_array_equal(children, m.children_index)
    np.testing.assert_array_equal(t.node_visits, m.node_visits)
    np.testing.assert_allclose(t.node_values, m.node_values, rtol=1e-5, atol=1e-6)


def _max_depth(tree) -> int:
    """Deepest node of any tree of the batch (children are stored after parents)."""
    children = np.asarray(tree.children_index)
    deepest = 0
    for b in range(children.shape[0]):
        depth = np.zeros(children.shape[1], int)
        for node in range(int(tree.num_nodes[b])):
            kids = children[b, node][children[b, node] > 0]
            depth[kids] = depth[node] + 1
        deepest = max(deepest, int(depth.max()))
    return deepest


@pytest.mark.parametrize("scale, seed", [(1.0, 0), (0.0, 3), (0.5, 2)])
def test_equal_to_mctx_on_deep_synthetic_trees(scale, seed):
    # m = 4 of 6 actions: Gumbel-Top-k samples; tic-tac-toe below has m >= legal.
    ours, theirs = _synthetic_pair(jax.random.PRNGKey(seed), np.float32(scale))
    _assert_equal_to_mctx(ours, theirs)
    # Deep trees, and different searches per element: not a vacuous comparison.
    assert _max_depth(ours.search_tree) >= 6
    assert len({tuple(v) for v in _root_visits(ours)}) > SYN_B // 2
    jaxpuct.testing.check_tree(ours.search_tree, SYN_S)


@sc.jit
def _deterministic_pair(key):
    """Both at a ``gumbel_scale`` of 0 known at trace time, jaxpuct without the
    ``gumbel`` argument: it then draws nothing (zeros), mctx multiplies its draw by
    0."""
    root, recurrent_fn = synthetic.synthetic_game(SYN_B, SYN_A, logit_scale=2.0)
    mroot, mrf = _mctx_root(root), _mctx_recurrent(recurrent_fn)
    theirs = mctx.gumbel_muzero_policy(None, key, mroot, mrf, SYN_S,
                                       max_num_considered_actions=SYN_M, gumbel_scale=0.0)
    ours = jaxpuct.gumbel_policy(None, key, mroot, mrf, SYN_S,
                                 max_num_considered_actions=SYN_M, gumbel_scale=0.0)
    return ours, theirs


def test_deterministic_search_draws_nothing_and_equals_mctx():
    ours, theirs = _deterministic_pair(jax.random.PRNGKey(5))
    _assert_equal_to_mctx(ours, theirs)
    assert len({tuple(v) for v in _root_visits(ours)}) > SYN_B // 2


TTT_S = 48
TTT_POSITIONS = [p for p in tictactoe.all_positions() if 1 <= 9 - p.count(0) <= 3][::37][:8]


@functools.partial(sc.jit, static_argnames=("m", "exact"))
def _tictactoe_pair(key, state, *, m, exact):
    root = tictactoe.root(state, exact_value=exact)
    recurrent_fn = tictactoe.make_recurrent_fn(exact_value=exact)
    invalid = ~root.legal_action_mask
    mroot = _mctx_root(root)
    mrf = _mctx_recurrent(recurrent_fn)
    gumbel = mctx_gumbel(key, len(TTT_POSITIONS), tictactoe.NUM_ACTIONS)
    theirs = mctx.gumbel_muzero_policy(None, key, mroot, mrf, TTT_S, invalid,
                                       max_num_considered_actions=m)
    ours = jaxpuct.gumbel_policy(None, key, mroot, mrf, TTT_S, invalid,
                                 max_num_considered_actions=m, gumbel=gumbel)
    # jaxpuct's own view of the game: legal masks and terminal flags at every node.
    native = jaxpuct.gumbel_policy(None, key, root, mask_illegal_logits(recurrent_fn), TTT_S,
                                   max_num_considered_actions=m, gumbel=gumbel)
    return ours, theirs, native


@pytest.mark.parametrize("m, exact, seed", [(16, False, 0), (4, True, 1)])
def test_equal_to_mctx_on_tictactoe(m, exact, seed):
    state = tictactoe.batch(TTT_POSITIONS)
    ours, theirs, native = _tictactoe_pair(jax.random.PRNGKey(seed), state, m=m, exact=exact)
    _assert_equal_to_mctx(ours, theirs)
    # Never an illegal move, at any depth, when jaxpuct sees the legal masks.
    tree = native.search_tree
    assert not np.asarray(jnp.where(tree.children_index == jaxpuct.ILLEGAL,
                                    tree.edge_visits, 0)).any()
    jaxpuct.testing.check_tree(tree, TTT_S)
    legal = np.asarray(tictactoe.legal(state))
    assert legal[np.arange(len(TTT_POSITIONS)), np.asarray(native.action)].all()
    np.testing.assert_array_equal(np.asarray(native.action_weights)[~legal], 0.0)


# ------------------------------------------------------------------- oracles

BANDIT_A = 4


def _bandit(rewards):
    """A one-step game: action ``a`` earns ``rewards[b, a]``, discount 0."""

    def recurrent_fn(params, key, action, embedding):
        del params, key
        rows = jnp.arange(action.shape[0])
        reward = rewards[rows, action]
        out = jaxpuct.RecurrentFnOutput(reward=reward, discount=jnp.zeros_like(reward),
                                        prior_logits=jnp.zeros_like(rewards),
                                        value=jnp.zeros_like(reward))
        return out, embedding

    return recurrent_fn


@functools.partial(sc.jit, static_argnames=("sims", "qtransform", "m"))
def _bandit_policy(logits, value, rewards, invalid, gumbel, *, sims, qtransform, m=16):
    root = jaxpuct.RootFnOutput(prior_logits=logits, value=value,
                                embedding=jnp.zeros(logits.shape[:1]))
    return jaxpuct.gumbel_policy(None, jax.random.PRNGKey(0), root, _bandit(rewards), sims,
                                 invalid, max_num_considered_actions=m, qtransform=qtransform,
                                 gumbel=gumbel)


def test_bandit_by_hand():
    logits = np.array([[0.0, -1.0, 2.0, 3.0]], np.float32)
    rewards = np.array([[20.0, 3.0, -1.0, 10.0]], np.float32)
    invalid = np.array([[True, False, False, True]])
    config = jaxpuct.CompletedQConfig(value_scale=0.05, maxvisit_init=60.0)
    out = _bandit_policy(logits, np.zeros(1, np.float32), rewards, invalid,
                         np.zeros((1, 4), np.float32), sims=17, qtransform=config)
    # Two legal actions: m = 2 and one phase, 0,0,1,1,...,7,7 then the 17th visit to
    # the best of the two at 8 visits each. There, with p the legal prior,
    # the mixed value v = 16 * (p1 * 3 + p2 * -1) / 17 lies in [-1, 3], so
    # q̂ = (q + 1) / 4 = [., 1, 0, .] and σ = (60 + 8) * 0.05 * q̂ = 3.4 q̂:
    # action 1 scores -1 - 2 + 3.4 = 0.4, action 2 scores 2 - 2 + 0 = 0.
    np.testing.assert_array_equal(_root_visits(out), [[0, 9, 8, 0]])
    assert int(out.action[0]) == 1
    p = np.exp(np.array([-1.0, 2.0]))
    p /= p.sum()
    mix = 17 * (p[0] * 3 + p[1] * -1) / 18  # raw value 0, 17 visits
    q = np.array([mix, 3.0, -1.0, mix])
    q_hat = (q - q.min()) / (q.max() - q.min())
    sigma = (60 + 9) * 0.05 * q_hat
    z = np.array([-1.0, 2.0]) + sigma[1:3]
    target = np.zeros(4)
    target[1:3] = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    np.testing.assert_allclose(out.action_weights[0], target, rtol=1e-5, atol=1e-6)


def test_policy_improvement_on_random_bandits():
    """With ``use_mixed_value=False`` (unvisited actions complete with ``U(s)``), the
    improved policy's expected completed Q is at least the prior's, per element:
    ``softmax(logits + σ(q))`` tilts the prior towards higher ``q``."""
    rng = np.random.default_rng(0)
    batch = 64
    logits = rng.normal(size=(batch, BANDIT_A)).astype(np.float32) * 2
    rewards = rng.normal(size=(batch, BANDIT_A)).astype(np.float32)
    value = rng.normal(size=batch).astype(np.float32)
    invalid = rng.random((batch, BANDIT_A)) < 0.3
    invalid[:, 0] = False
    config = jaxpuct.CompletedQConfig(use_mixed_value=False)
    gumbel = rng.gumbel(size=(batch, BANDIT_A)).astype(np.float32)
    out = _bandit_policy(logits, value, rewards, invalid, gumbel, sims=6, qtransform=config,
                         m=4)
    visits = _root_visits(out)
    completed = np.where(visits > 0, rewards, value[:, None])
    legal = ~invalid
    prior = np.where(legal, np.exp(logits - logits.max(-1, keepdims=True)), 0.0)
    prior /= prior.sum(-1, keepdims=True)
    improved = np.asarray(out.action_weights)
    assert np.all((improved * completed).sum(-1) >= (prior * completed).sum(-1) - 1e-5)
    # Strictly better somewhere: not a vacuous check.
    assert np.any((improved * completed).sum(-1) > (prior * completed).sum(-1) + 1e-2)
    np.testing.assert_array_equal(improved[invalid], 0.0)
    assert np.all(legal[np.arange(batch), np.asarray(out.action)])


@sc.jit
@functools.partial(checkify.checkify, errors=checkify.nan_checks)
def _nan_checked(logits, rewards, invalid):
    root = jaxpuct.RootFnOutput(prior_logits=logits, value=jnp.zeros(logits.shape[:1]),
                                embedding=jnp.zeros(logits.shape[:1]))
    out = jaxpuct.gumbel_policy(None, jax.random.PRNGKey(0), root, _bandit(rewards), 3, invalid)
    # Completed Q at nodes nobody visited yet (every new node of a tree).
    fresh = jaxpuct.init_tree(root, 4, invalid_actions=invalid)
    stats = gumbel_lib.node_stats(fresh, jaxpuct.CompletedQConfig(),
                                  jnp.zeros(logits.shape[:1], jnp.int32), is_root=False)
    return out, gumbel_lib.improved_policy(stats), gumbel_lib.interior_scores(stats)


def test_no_nan_with_no_legal_root_action_or_unvisited_nodes():
    """``checkify.nan_checks`` checks the output of every operation inside the
    compiled search (what ``jax_debug_nans`` does op by op, without jit): no NaN
    is ever produced, not even in a value masked out afterwards."""
    logits = np.array([[0.0, 1.0, 2.0, 3.0], [1.0, 0.0, 0.0, 0.0]], np.float32)
    rewards = np.ones((2, 4), np.float32)
    invalid = np.array([[True] * 4, [False, True, True, True]])
    err, (out, policy, scores) = _nan_checked(logits, rewards, invalid)
    err.throw()
    assert int(out.action[0]) == -1
    np.testing.assert_array_equal(out.action_weights[0], 0.0)
    np.testing.assert_array_equal(_root_visits(out)[0], 0)
    assert int(out.action[1]) == 0
    np.testing.assert_array_equal(_root_visits(out)[1], [3, 0, 0, 0])
    np.testing.assert_allclose(out.action_weights[1], [1, 0, 0, 0])
    assert np.isfinite(np.asarray(policy)).all()
    np.testing.assert_array_equal(np.asarray(scores)[0], -np.inf)


def test_nan_checks_catch_a_nan():
    """The check above is not vacuous: a NaN root value under the same checks fails."""

    @functools.partial(checkify.checkify, errors=checkify.nan_checks)
    def log_of(x):
        return jnp.log(x)

    err, _ = jax.jit(log_of)(jnp.float32(-1.0))
    with pytest.raises(checkify.JaxRuntimeError):
        err.throw()


# ------------------------------------------------------- jaxpuct's extensions

EXT_B, EXT_A, EXT_S = 4, 6, 32


def _poisoned(recurrent_fn, poison):
    def fn(params, key, action, embedding):
        out, new = recurrent_fn(params, key, action, embedding)
        bad = jnp.arange(action.shape[0]) == poison
        return out.replace(value=jnp.where(bad, jnp.nan, out.value),
                           prior_logits=jnp.where(bad[:, None], jnp.nan, out.prior_logits)
                           ), new

    return fn


@functools.partial(sc.jit, static_argnames=("max_nodes", "graph"))
def _synthetic_policy(key, poison, *, max_nodes=None, graph=None):
    root, recurrent_fn = synthetic.synthetic_game(EXT_B, EXT_A, with_hash=graph is not None)
    return jaxpuct.gumbel_policy(None, key, root, _poisoned(recurrent_fn, poison), EXT_S,
                                 max_num_considered_actions=4, max_nodes=max_nodes,
                                 graph=graph)


def _element_keys(seed):
    """``[B]`` keys: every search of this section takes per-element keys, so that
    they share one compilation."""
    return jax.random.split(jax.random.PRNGKey(seed), EXT_B)


def test_nan_in_one_element_leaves_the_others_bit_identical():
    key = _element_keys(5)
    clean = _synthetic_policy(key, -1)
    poisoned = _synthetic_policy(key, 1)
    others = np.array([0, 2, 3])
    for a, b in zip(jax.tree.leaves(clean), jax.tree.leaves(poisoned), strict=True):
        np.testing.assert_array_equal(np.asarray(a)[others], np.asarray(b)[others])
    # The poisoned element still searches and acts, without NaN.
    assert np.isfinite(np.asarray(poisoned.action_weights)).all()
    assert int(_root_visits(poisoned)[1].sum()) == EXT_S


def test_per_element_keys_keep_the_elements_independent():
    """Element ``b``'s Gumbel draw comes from ``rng_key[b]`` only: a new key for
    element 2 changes its search and nothing else."""
    keys = _element_keys(10)
    base = _synthetic_policy(keys, -1)
    other = _synthetic_policy(keys.at[2].set(jax.random.PRNGKey(99)), -1)
    same = np.array([0, 1, 3])
    for a, b in zip(jax.tree.leaves(base), jax.tree.leaves(other), strict=True):
        np.testing.assert_array_equal(np.asarray(a)[same], np.asarray(b)[same])
    # Element 2's search did change (the order of its visits, at least).
    assert not np.array_equal(base.search_tree.children_index[2],
                              other.search_tree.children_index[2])


def test_capacity_below_the_simulation_count():
    with pytest.warns(UserWarning, match="max_nodes"):
        out = _synthetic_policy(_element_keys(6), -1, max_nodes=12)
    visits = _root_visits(out)
    np.testing.assert_array_equal(visits.sum(-1), EXT_S)
    # The schedule counts edge visits, stored children or not.
    for row in visits:
        assert sorted(row[row > 0]) == [v for v in expected_new_visits(4, EXT_S, 4) if v]
    jaxpuct.testing.check_tree(out.search_tree, EXT_S)
    assert np.isfinite(np.asarray(out.action_weights)).all()


def test_graph_search_without_transpositions_equals_tree_search():
    key = _element_keys(7)
    tree_out = _synthetic_policy(key, -1)
    graph_out = _synthetic_policy(key, -1, graph=jaxpuct.GraphConfig())
    np.testing.assert_array_equal(_root_visits(graph_out), _root_visits(tree_out))
    np.testing.assert_array_equal(graph_out.action, tree_out.action)
    np.testing.assert_allclose(graph_out.action_weights, tree_out.action_weights,
                               rtol=1e-5, atol=1e-6)


@functools.partial(sc.jit, static_argnames=("graph",))
def _tictactoe_graph(key, state, *, graph):
    root = tictactoe.root(state, with_hash=True)
    return jaxpuct.gumbel_policy(None, key, root, tictactoe.make_recurrent_fn(with_hash=True),
                                 TTT_S, graph=graph)


def test_graph_search_on_tictactoe_transpositions():
    state = tictactoe.batch(TTT_POSITIONS)
    out = _tictactoe_graph(jax.random.PRNGKey(8), state, graph=jaxpuct.GraphConfig())
    tree = out.search_tree
    jaxpuct.testing.check_tree(tree, TTT_S)
    np.testing.assert_array_equal(_root_visits(out).sum(-1), TTT_S)
    assert not np.asarray(jnp.where(tree.children_index == jaxpuct.ILLEGAL,
                                    tree.edge_visits, 0)).any()
    # Fewer nodes than simulations somewhere: transpositions were merged.
    assert (np.asarray(tree.num_nodes) < TTT_S + 1).any()
    legal = np.asarray(tictactoe.legal(state))
    assert legal[np.arange(len(TTT_POSITIONS)), np.asarray(out.action)].all()


# ---------------------------------------------------------------- tree reuse

REUSE_S1, REUSE_S2, REUSE_NODES = 48, 16, 96


@sc.jit
def _reuse_searches(key):
    root, recurrent_fn = synthetic.synthetic_game(EXT_B, EXT_A)
    first = jaxpuct.gumbel_policy(None, key, root, recurrent_fn, REUSE_S1,
                                  max_num_considered_actions=4, max_nodes=REUSE_NODES)
    sub, reused = jaxpuct.subtree(first.search_tree, first.action)
    second = jaxpuct.gumbel_policy(None, jax.random.fold_in(key, 1), None, recurrent_fn,
                                   REUSE_S2, max_num_considered_actions=4, tree=sub)
    # A tree holding only its root continues exactly like a new search.
    fresh = jaxpuct.gumbel_policy(None, key, root, recurrent_fn, REUSE_S2,
                                  max_num_considered_actions=4, max_nodes=REUSE_NODES)
    continued = jaxpuct.gumbel_policy(None, key, root, recurrent_fn, REUSE_S2,
                                      max_num_considered_actions=4,
                                      tree=jaxpuct.init_tree(root, REUSE_NODES))
    return sub, reused, second, fresh, continued


def test_tree_reuse_schedules_only_the_new_simulations():
    sub, reused, second, fresh, continued = _reuse_searches(jax.random.PRNGKey(9))
    assert np.asarray(reused).all()
    before = np.asarray(sub.edge_visits[:, 0])
    after = _root_visits(second)
    assert (before.sum(-1) > 0).all()  # something was inherited
    new = after - before
    np.testing.assert_array_equal(new.sum(-1), REUSE_S2)
    expected = expected_new_visits(4, REUSE_S2, 4)
    for row in new:
        assert sorted(row)[-4:] == expected and (np.sort(row)[:-4] == 0).all()
    # The move is among the actions most visited by this search.
    rows = np.arange(EXT_B)
    assert (new[rows, np.asarray(second.action)] == new.max(-1)).all()
    jaxpuct.testing.check_tree(second.search_tree)
    for a, b in zip(jax.tree.leaves(fresh), jax.tree.leaves(continued), strict=True):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("kwargs, match", [
    (dict(max_num_considered_actions=0), "max_num_considered_actions"),
    (dict(gumbel_scale=-1.0), "gumbel_scale"),
    (dict(gumbel=np.zeros((2, 3), np.float32)), "gumbel"),
    (dict(qtransform=dict(value_scale=0.1)), "qtransform"),
    (dict(gumbel_scale=np.ones(3, np.float32)), "gumbel_scale"),
])
def test_bad_arguments(kwargs, match):
    root, recurrent_fn = synthetic.synthetic_game(2, 4)
    with pytest.raises(ValueError, match=match):
        jaxpuct.gumbel_policy(None, jax.random.PRNGKey(0), root, recurrent_fn, 4, **kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(value_scale=0.0), "value_scale"),
    (dict(maxvisit_init=-1.0), "maxvisit_init"),
    (dict(epsilon=0.0), "epsilon"),
    (dict(rescale_values=1), "rescale_values"),
    (dict(value_scale=float("nan")), "value_scale"),
])
def test_bad_completed_q_config(kwargs, match):
    with pytest.raises(ValueError, match=f"CompletedQConfig.{match}"):
        jaxpuct.CompletedQConfig(**kwargs)

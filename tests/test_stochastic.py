"""Chance nodes (:mod:`jaxpuct.stochastic`): equality with
``mctx.stochastic_muzero_policy``, structural invariants (alternating kinds, the
quota rule's lower quota, in-range callback indices, model calls), batch
independence, errors on bad input, and an expectimax oracle on 2x2 2048.

The searches are compiled once per shape (module-level jitted helpers, cached
results) with XLA's cheap CPU pipeline.
"""

from __future__ import annotations

import functools
import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc

import jaxpuct
from jaxpuct import stochastic
from jaxpuct.testing import check_tree
from jaxpuct.testing import stochastic_games as sg

B, A, C, SIMS = 4, 3, 5, 40
ROOT, DECISION_FN, CHANCE_FN = sg.hashed_game(B, A, C)
MCTX_RULE = jaxpuct.PUCTConfig.mctx_muzero()

# Indices each callback received, recorded from inside the compiled search.
_SEEN: dict[str, list[np.ndarray]] = {"action": [], "outcome": []}


def _record(name):
    def fn(x):
        _SEEN[name].append(np.asarray(x))
    return fn


def _recording_decision_fn(params, key, action, state):
    jax.debug.callback(_record("action"), action)
    return DECISION_FN(params, key, action, state)


def _recording_chance_fn(params, key, outcome, afterstate):
    jax.debug.callback(_record("outcome"), outcome)
    return CHANCE_FN(params, key, outcome, afterstate)


@sc.jit
def _ours_mctx_rule(key):
    return stochastic.stochastic_policy(
        None, key, ROOT, _recording_decision_fn, _recording_chance_fn, SIMS,
        selection=MCTX_RULE, dirichlet_fraction=0.0)


@sc.jit(static_argnames=("backup",))
def _search(root, keys, backup):
    return stochastic.stochastic_search(None, keys, root, DECISION_FN, CHANCE_FN, SIMS,
                                        chance_backup=backup)


@functools.cache
def _ours():
    return jax.block_until_ready(_ours_mctx_rule(jax.random.PRNGKey(3)))


def _no_mctx_tie_noise(monkeypatch, module):
    """Makes ``jax.random.uniform`` return zeros inside ``module`` only: mctx adds
    ``1e-7 * uniform`` to its PUCT scores to break ties at random, jaxpuct takes the
    lowest index. (The chance rule of mctx is deterministic already.)"""

    def zeros(key, shape=(), dtype=jnp.float32, minval=0.0, maxval=1.0):
        del key, minval, maxval
        return jnp.zeros(shape, dtype)

    proxy = types.SimpleNamespace(**{n: getattr(jax, n) for n in dir(jax)
                                     if not n.startswith("__")})
    proxy.random = types.SimpleNamespace(**{n: getattr(jax.random, n)
                                            for n in dir(jax.random) if not n.startswith("__")})
    proxy.random.uniform = zeros
    monkeypatch.setattr(module, "jax", proxy)


def test_matches_mctx_stochastic_muzero(monkeypatch):
    mctx = pytest.importorskip("mctx")
    from mctx._src import action_selection

    def decision_fn(params, key, action, state):
        out, after = DECISION_FN(params, key, action, state)
        return mctx.DecisionRecurrentFnOutput(chance_logits=out.chance_logits,
                                              afterstate_value=out.afterstate_value), after

    def chance_fn(params, key, outcome, after):
        out, state = CHANCE_FN(params, key, outcome, after)
        return mctx.ChanceRecurrentFnOutput(action_logits=out.action_logits, value=out.value,
                                            reward=out.reward, discount=out.discount), state

    root = mctx.RootFnOutput(prior_logits=ROOT.prior_logits, value=ROOT.value,
                             embedding=ROOT.embedding)
    _no_mctx_tie_noise(monkeypatch, action_selection)
    theirs = sc.jit(lambda key: mctx.stochastic_muzero_policy(
        None, key, root, decision_fn, chance_fn, SIMS, dirichlet_fraction=0.0))(
            jax.random.PRNGKey(3))
    ours = _ours()
    t, m = ours.search_tree, theirs.search_tree
    # One node per simulation in both, in the same order: compare slot by slot.
    np.testing.assert_array_equal(t.num_nodes, SIMS + 1)
    np.testing.assert_array_equal(stochastic.is_decision_node(t),
                                  m.embeddings.is_decision_node)
    np.testing.assert_array_equal(t.node_visits, m.node_visits)
    # States agree at decision nodes (mctx's chance nodes hold a placeholder).
    decision = np.asarray(stochastic.is_decision_node(t))
    np.testing.assert_array_equal(np.where(decision, t.embeddings.state, 0),
                                  np.where(decision, m.embeddings.state_embedding, 0))
    # mctx returns the tree cut to its decision columns [:A].
    decision = decision[..., None]
    np.testing.assert_array_equal(np.where(decision, t.edge_visits[..., :A], 0),
                                  np.where(decision, m.children_visits, 0))
    # The root prior goes through log(softmax) in mctx: values agree to rounding.
    np.testing.assert_allclose(t.node_values, m.node_values, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.action_weights, theirs.action_weights, atol=1e-6)


def test_node_kinds_alternate_along_every_path():
    tree = _ours().search_tree
    kinds = np.asarray(stochastic.is_decision_node(tree))
    children = np.asarray(tree.children_index)
    assert kinds[:, 0].all()
    for b in range(B):
        for node in range(int(tree.num_nodes[b])):
            for child in children[b, node][children[b, node] >= 0]:
                assert kinds[b, child] != kinds[b, node]
    # Chance nodes have C live outcomes, decision nodes A actions.
    legal = children != jaxpuct.ILLEGAL
    used = np.arange(tree.max_nodes)[None] < np.asarray(tree.num_nodes)[:, None]
    assert (legal[used & kinds][:, A:] == 0).all() and legal[used & ~kinds][:, :C].all()


def test_chance_rule_keeps_the_lower_quota():
    tree = _ours().search_tree
    kinds = np.asarray(stochastic.is_decision_node(tree))
    counts = np.asarray(tree.edge_visits)[..., :C]
    prior = np.asarray(tree.children_prior)[..., :C]
    checked = 0
    for b, node in zip(*np.nonzero(~kinds & (np.asarray(tree.node_visits) > 1)), strict=True):
        n = counts[b, node].sum()
        # N(c) >= floor(n p(c)), Jefferson/D'Hondt apportionment (1e-5: float p).
        assert (counts[b, node] >= np.floor(n * prior[b, node] - 1e-5)).all()
        checked += n > 2
    assert checked >= 3


def test_callbacks_get_only_in_range_indices():
    _ours()
    actions, outcomes = np.concatenate(_SEEN["action"]), np.concatenate(_SEEN["outcome"])
    assert actions.size and outcomes.size
    assert actions.min() >= 0 and actions.max() < A
    assert outcomes.min() >= 0 and outcomes.max() < C


@pytest.mark.parametrize("backup", ["visits", "expectation"])
def test_batch_is_independent_and_calls_are_saved(backup):
    keys = jax.random.split(jax.random.PRNGKey(5), B)
    tree, calls = _search(ROOT, keys, backup)
    for b in range(B):
        alone = jax.tree.map(lambda x, b=b: x[b:b + 1], ROOT)
        one, one_calls = _search(alone, keys[b:b + 1], backup)
        np.testing.assert_array_equal(one.edge_visits[0], tree.edge_visits[b])
        # Different batch shapes compile to different float schedules: 1 ulp apart.
        np.testing.assert_allclose(one.node_values[0], tree.node_values[b], rtol=1e-5,
                                   atol=1e-6)
        # B = 1: exactly one model call per simulation (mctx makes two).
        assert int(one_calls.decision) + int(one_calls.chance) == SIMS
    assert SIMS <= int(calls.decision) + int(calls.chance) <= 2 * SIMS


def test_expectation_backup_values():
    """A chance node's Q is Σ p Q(c) over expanded outcomes plus the unexpanded mass
    times its own value; a decision node's the visit-weighted mean of its edges."""
    tree, _ = _search(ROOT, jax.random.split(jax.random.PRNGKey(5), B), "expectation")
    kinds = np.asarray(stochastic.is_decision_node(tree))
    values, raw = np.asarray(tree.node_values), np.asarray(tree.raw_values)
    children = np.asarray(tree.children_index)
    has = children >= 0
    safe = np.maximum(children, 0)
    rows = np.arange(B)[:, None, None]
    q = np.where(has, np.asarray(tree.node_rewards)[rows, safe]
                 + np.asarray(tree.node_discounts)[rows, safe] * values[rows, safe], 0.0)
    n = np.where(has, np.asarray(tree.edge_visits), 0)
    mean = (raw + (n * q).sum(-1)) / (1 + n.sum(-1))
    p = np.where(has, np.asarray(tree.children_prior), 0.0)
    expectation = (p * q).sum(-1) + (1 - p.sum(-1)) * raw
    expected = np.where(kinds, mean, expectation)
    inner = has.any(-1)
    assert inner.sum() > 10
    np.testing.assert_allclose(values[inner], expected[inner], rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ bad input


def _trace(decision_fn=DECISION_FN, chance_fn=CHANCE_FN, **kwargs):
    return jax.eval_shape(lambda key: stochastic.stochastic_policy(
        None, key, ROOT, decision_fn, chance_fn, 4, **kwargs), jax.random.PRNGKey(0))


def _no_outcomes(params, key, action, state):
    out, after = DECISION_FN(params, key, action, state)
    return out.replace(chance_logits=out.chance_logits[:, :0]), after


def _short_batch(params, key, action, state):
    out, after = DECISION_FN(params, key, action, state)
    return out.replace(chance_logits=out.chance_logits[:1]), after


def _wide_actions(params, key, outcome, after):
    out, state = CHANCE_FN(params, key, outcome, after)
    return out.replace(action_logits=jnp.zeros((B, A + 1))), state


def _bad_reward(params, key, outcome, after):
    out, state = CHANCE_FN(params, key, outcome, after)
    return out.replace(reward=jnp.zeros((B, 1))), state


@pytest.mark.parametrize("kwargs, match", [
    ({"decision_fn": _no_outcomes}, r"C >= 1 chance outcomes, got shape \[4, 0\]"),
    ({"decision_fn": _short_batch}, r"chance_logits must have shape \[B=4, C\], got \[1, 5\]"),
    ({"chance_fn": _wide_actions}, r"action_logits must have shape \[4, 3\], got \[4, 4\]"),
    ({"chance_fn": _bad_reward}, r"reward must have shape \[4\], got \[4, 1\]"),
    ({"chance_backup": "mean"}, r"chance_backup"),
    ({"invalid_actions": jnp.zeros((B, A + 1), bool)}, r"invalid_actions"),
])
def test_bad_input_is_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _trace(**kwargs)


# ------------------------------------------------------------------ expectimax oracle

ORACLE_SIZE, ORACLE_HORIZON, ORACLE_SIMS = 2, 3, 64
ORACLE_SELECTION = jaxpuct.PUCTConfig(c_init=10.0, c_base=None, unvisited_q="parent")
_ROOT_2048, _DECISION_2048, _CHANCE_2048 = sg.game2048_fns()


@sc.jit(static_argnames=("backup",))
def _play_2048(boards, moves_left, backup):
    root = _ROOT_2048(boards, moves_left)
    return stochastic.stochastic_policy(
        None, jax.random.PRNGKey(0), root, _DECISION_2048, _CHANCE_2048, ORACLE_SIMS,
        selection=ORACLE_SELECTION, dirichlet_fraction=0.0, temperature=0.0,
        chance_backup=backup)


@pytest.mark.parametrize("backup", ["expectation"])
def test_expectimax_optimal_on_every_2x2_2048_position(backup):
    states = sg.reachable_2048(ORACLE_SIZE, ORACLE_HORIZON)
    boards = np.array([s[0] for s in states], np.int32)
    moves_left = np.array([s[1] for s in states], np.int32)
    q = np.array([sg.expectimax_2048(*s)[1] for s in states])
    out = _play_2048(boards, moves_left, backup)
    action = np.asarray(out.action)
    best = q.max(axis=1)
    assert np.isfinite(best).all()
    chosen = q[np.arange(len(states)), action]
    assert (chosen >= best - 1e-6).all(), np.nonzero(chosen < best - 1e-6)
    assert not math.isinf(chosen.min())


# Scores reach ~16 here: a large c keeps the unproven moves ahead of a proven move's
# exact value (the solver's rule scores proven edges without exploration).
PROOF_SELECTION = jaxpuct.PUCTConfig(c_init=100.0, c_base=None, unvisited_q="parent")


@sc.jit(static_argnames=("chance_rule",))
def _prove_2048(boards, moves_left, chance_rule):
    root = _ROOT_2048(boards, moves_left)
    return stochastic.stochastic_policy(
        None, jax.random.PRNGKey(0), root, _DECISION_2048, _CHANCE_2048, 128,
        selection=PROOF_SELECTION, dirichlet_fraction=0.0, temperature=0.0,
        solver=jaxpuct.SolverConfig(value_bound=None, chance_rule=chance_rule))


def test_solver_proves_exact_expectimax_values_on_2x2_2048():
    """Proofs through chance nodes: a proven root holds the exact expectimax value
    (2048's spawn probabilities are exact), and its move is expectimax-optimal."""
    # Every position with one move left and the first 16 with two.
    states = [s for s in sg.reachable_2048(ORACLE_SIZE, 2) if s[1] == 1]
    states += [s for s in sg.reachable_2048(ORACLE_SIZE, 2) if s[1] == 2][:16]
    boards = np.array([s[0] for s in states], np.int32)
    moves_left = np.array([s[1] for s in states], np.int32)
    exact = [sg.expectimax_2048(*s) for s in states]
    out = _prove_2048(boards, moves_left, "expectation")
    tree = out.search_tree
    proven = np.asarray(tree.proof_plies[:, 0]) >= 0
    # One move to play: at most 4 chance nodes and 24 end positions, fewer than the
    # 128 simulations, so every such root must be proven.
    assert proven[moves_left == 1].all(), np.nonzero(~proven & (moves_left == 1))
    assert proven[moves_left == 2].any()
    value = np.asarray(tree.node_values[:, 0])
    action = np.asarray(out.action)
    for b in np.nonzero(proven)[0]:
        v, q = exact[b]
        np.testing.assert_allclose(value[b], v, rtol=1e-5, atol=1e-5)
        assert q[action[b]] >= v - 1e-5, (b, q, action[b])
    # Agreement proves a chance node only when all its outcomes agree: never more.
    agree = _prove_2048(boards, moves_left, "agreement").search_tree
    assert np.all(np.asarray(agree.proof_plies[:, 0] >= 0) <= proven)


_HASHED_2048 = sg.game2048_fns(with_hash=True)


@sc.jit(static_argnames=("graph",))
def _search_2048(boards, moves_left, graph):
    root_fn, decision_fn, chance_fn = _HASHED_2048
    return stochastic.stochastic_policy(
        None, jax.random.PRNGKey(0), root_fn(boards, moves_left), decision_fn, chance_fn,
        96, selection=ORACLE_SELECTION, dirichlet_fraction=0.0, temperature=0.0,
        graph=graph)


def test_graph_search_over_chance_nodes_merges_transpositions_on_2048():
    """2x2 2048 with three moves to play: different move orders and spawns reach the
    same boards. Graph search over chance nodes shares those states (fewer nodes
    than the tree for the same simulations), its graph passes the structural checks
    (node kinds alternate along every edge, counts consistent), and its move is
    expectimax-optimal on every position (as the tree search's is)."""
    states = [s for s in sg.reachable_2048(ORACLE_SIZE, ORACLE_HORIZON) if s[1] == 3][:24]
    boards = np.array([s[0] for s in states], np.int32)
    moves_left = np.array([s[1] for s in states], np.int32)
    tree = _search_2048(boards, moves_left, None).search_tree
    out = _search_2048(boards, moves_left, jaxpuct.GraphConfig())
    graph = out.search_tree
    assert graph.kind == "stochastic" and graph.is_graph
    check_tree(graph, None)
    kinds = np.asarray(graph.embeddings.is_decision)
    children = np.asarray(graph.children_index)
    for b in range(len(states)):
        for n in range(int(graph.num_nodes[b])):
            for c in children[b, n][children[b, n] >= 0]:
                assert kinds[b, c] != kinds[b, n], (b, n, c)
    assert np.all(np.asarray(graph.num_nodes) <= np.asarray(tree.num_nodes))
    assert np.any(np.asarray(graph.num_nodes) < np.asarray(tree.num_nodes))
    q = np.array([sg.expectimax_2048(*s)[1] for s in states])
    chosen = q[np.arange(len(states)), np.asarray(out.action)]
    assert (chosen >= q.max(axis=1) - 1e-6).all(), np.nonzero(chosen < q.max(axis=1) - 1e-6)


# ------------------------------------------------------------------ pgx 2048


def test_pgx_2048_split_matches_pgx_step():
    """pgx's one-call step lands on an outcome of the split move + spawn, one with
    p > 0, and the split rules agree with the n x n rules of the oracle."""
    pgx = pytest.importorskip("pgx")
    from jaxpuct.envs import pgx_2048

    env, games = pgx.make("2048"), 16

    @sc.jit
    def split_and_step(key):
        keys = jax.random.split(key, 2 * games).reshape(2, games, -1)
        state = jax.vmap(env.init)(keys[0])
        action = jnp.argmax(state.legal_action_mask, axis=-1).astype(jnp.int32)
        stepped = jax.vmap(env.step)(state, action, keys[1])
        after, score = pgx_2048.move(state._board, action)
        return (state._board, action, stepped._board, stepped.rewards[:, 0],
                stepped.legal_action_mask, after, score, pgx_2048.spawn_probs(after),
                pgx_2048.legal_actions(stepped._board))

    board, action, stepped, reward, stepped_legal, after, score, probs, legal = (
        np.asarray(x) for x in split_and_step(jax.random.PRNGKey(1)))
    np.testing.assert_array_equal(score, reward)
    for b in range(games):
        expected, expected_score = sg.move_2048_np(tuple(board[b]), int(action[b]))
        assert tuple(after[b]) == expected and score[b] == expected_score
    diff = stepped != after
    assert (diff.sum(-1) == 1).all()
    cell = diff.argmax(-1)
    outcome = 2 * cell + stepped[np.arange(games), cell] - 1
    assert (probs[np.arange(games), outcome] > 0).all()
    np.testing.assert_array_equal(legal, stepped_legal)

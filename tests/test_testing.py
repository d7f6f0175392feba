"""Tests of ``jaxpuct.testing``: import isolation, the conformance checker (passes on
the library's own games, names the field of each planted fault), ``check_tree``
(passes on searched trees, catches corrupted ones), and the shared game helpers."""

from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpuct
import jaxpuct.testing as jt
from jaxpuct.testing import random_games, synthetic, tictactoe

B = 4
_TTT_POSITIONS = [tictactoe.EMPTY, tictactoe.parse("X.. .O. ..."),
                  tictactoe.parse("XX. OO. ..."), tictactoe.parse("XOX OXO ...")]


def _ttt_root(**kwargs):
    return tictactoe.root(tictactoe.batch(_TTT_POSITIONS), **kwargs)


# ------------------------------------------------------------------ import isolation


def test_import_pulls_in_no_training_or_game_library():
    code = ("import sys, jaxpuct, jaxpuct.testing; "
            "print(sorted(m for m in ('flax', 'optax', 'pgx', 'orbax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_import_jaxpuct_does_not_import_testing():
    code = "import sys, jaxpuct; print('jaxpuct.testing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ conformance: passes


def test_conformance_passes_on_tictactoe():
    report = jt.check_recurrent_fn(tictactoe.make_recurrent_fn(exact_value=True,
                                                               with_hash=True),
                                   None, _ttt_root(exact_value=True, with_hash=True),
                                   num_steps=6)
    assert report.batch_size == B and report.num_actions == 9
    assert report.has_legal_mask and report.has_terminal and report.has_state_hash
    assert report.num_steps >= 5  # the full board "XOX OXO ..." ends within 3 moves
    assert report.warnings == ()


def test_conformance_passes_on_random_games():
    games = [random_games.pad_game(random_games.random_game(s, 3, 4, merge_prob=0.3), 121)
             for s in range(B)]
    forest, roots = random_games.stack_games(games)
    report = jt.check_recurrent_fn(random_games.make_recurrent_fn(with_hash=True), forest,
                                   random_games.root(forest, roots, with_hash=True),
                                   num_steps=4)
    assert report.has_state_hash and report.warnings == ()


def test_conformance_passes_on_synthetic_game_without_mask():
    root, recurrent_fn = synthetic.synthetic_game(3, 5, with_hash=True)
    report = jt.check_recurrent_fn(recurrent_fn, None, root, num_steps=2)
    assert not report.has_legal_mask and not report.has_terminal


# ------------------------------------------------------------------ conformance: faults


def _planted(fault):
    """The tic-tac-toe recurrent function with ``fault(out, new_state) -> (out, state)``
    applied to its output."""
    base = tictactoe.recurrent_fn

    def fn(params, key, action, embedding):
        out, new_state = base(params, key, action, embedding)
        return fault(out, new_state)

    return fn


def _raises(recurrent_fn, **kwargs) -> jt.ConformanceError:
    with pytest.raises(jt.ConformanceError) as info:
        jt.check_recurrent_fn(recurrent_fn, None, _ttt_root(), num_steps=2, **kwargs)
    return info.value


def test_conformance_names_value_of_wrong_shape():
    err = _raises(_planted(lambda out, s: (out.replace(value=out.value[:, None]), s)))
    assert (err.field, err.check) == ("value", "shape")
    assert str(err).startswith("value: has shape (4, 1), expected (4,)")


def test_conformance_names_embedding_leaf_whose_dtype_changed():
    err = _raises(_planted(lambda out, s: (out, s.replace(board=s.board.astype(jnp.int32)))))
    assert (err.field, err.check) == ("embedding.board", "dtype")
    assert "int8" in str(err) and "int32" in str(err)


def test_conformance_names_value_leaking_across_the_batch():
    err = _raises(_planted(lambda out, s: (
        out.replace(value=out.value + 0.1 * jnp.arange(out.value.shape[0])), s)))
    assert (err.field, err.check) == ("value", "batch_independence")
    assert "leaks across the batch" in str(err)


def test_conformance_names_nan_value():
    err = _raises(_planted(lambda out, s: (out.replace(value=out.value * jnp.nan), s)))
    assert (err.field, err.check) == ("value", "finite")
    assert "must be finite" in str(err)


def test_conformance_names_python_branch_on_traced_value():
    def fault(out, s):
        if out.reward[0] > 0:  # a Python branch: works eagerly, not under jit
            return out.replace(value=out.value + 1.0), s
        return out, s

    err = _raises(_planted(fault))
    assert (err.field, err.check) == ("recurrent_fn", "jit")
    assert "not jit-able" in str(err) and "jnp.where" in str(err)


def test_conformance_names_wrong_dtype_of_terminal_and_hash():
    err = _raises(_planted(lambda out, s: (out.replace(terminal=out.terminal.astype(jnp.int32)),
                                           s)))
    assert (err.field, err.check) == ("terminal", "dtype")
    root = _ttt_root(with_hash=True)
    fn = tictactoe.make_recurrent_fn(with_hash=True)

    def signed_hash(params, key, action, embedding):
        out, s = fn(params, key, action, embedding)
        return out.replace(state_hash=out.state_hash.astype(jnp.int32)), s

    with pytest.raises(jt.ConformanceError, match="state_hash: has dtype int32") as info:
        jt.check_recurrent_fn(signed_hash, None, root, num_steps=1)
    assert info.value.check == "dtype"


def test_conformance_flags_non_terminal_state_without_legal_action():
    err = _raises(_planted(lambda out, s: (out.replace(terminal=jnp.zeros_like(out.terminal)),
                                           s)))
    assert (err.field, err.check) == ("terminal", "terminal")


def test_conformance_warns_about_terminal_value_not_zero():
    def fn(params, key, action, embedding):
        out, s = tictactoe.recurrent_fn(params, key, action, embedding)
        return out.replace(value=jnp.where(out.terminal, -1.0, out.value)), s

    root = tictactoe.root(tictactoe.batch([tictactoe.parse("XX. OO. ...")] * 2))
    with pytest.warns(jt.ConformanceWarning, match="non-zero value"):
        report = jt.check_recurrent_fn(fn, None, root, num_steps=3, seed=1)
    assert any("non-zero value" in w for w in report.warnings)


def test_root_check_rejects_minus_inf_on_legal_action():
    root = _ttt_root()
    bad = root.replace(prior_logits=root.prior_logits.at[0, 0].set(-jnp.inf))
    with pytest.raises(jt.ConformanceError) as info:
        jt.check_root(bad)
    assert (info.value.field, info.value.check) == ("prior_logits", "legal_mask")
    # -inf on an illegal action is fine: cell 0 is taken in position 1.
    jt.check_root(root.replace(prior_logits=root.prior_logits.at[1, 0].set(-jnp.inf)))


# ------------------------------------------------------------------ check_tree


@pytest.fixture(scope="module")
def ttt_trees():
    """Tree-mode and graph-mode searches of 24 simulations from the four positions."""
    fn = tictactoe.make_recurrent_fn(with_hash=True)

    def run(graph):
        return jax.jit(lambda root: jaxpuct.search(
            None, jax.random.PRNGKey(0), root, fn, 24, graph=graph))(
                _ttt_root(with_hash=True))

    return run(None), run(jaxpuct.GraphConfig())


def test_check_tree_passes_on_searched_trees(ttt_trees):
    tree, graph = ttt_trees
    jt.check_tree(tree, 24)
    jt.check_tree(graph, 24)
    jt.check_tree(tree)  # root checks skipped


def _corrupt(tree, field, index, value):
    array = np.array(getattr(tree, field))
    array[index] = value
    return tree.replace(**{field: array})


@pytest.mark.parametrize("field, index, value, message", [
    ("node_visits", (0, 0), 99, "root visits 99 != 25"),
    ("num_nodes", (1,), 0, "num_nodes must be in"),
    ("children_index", (0, 0, 0), 999, "neither ILLEGAL, UNEXPANDED nor a used slot"),
    ("node_visits", (3, 10), 1, "tree 3 .*an unused slot has visits"),
])
def test_check_tree_reports_corruption(ttt_trees, field, index, value, message):
    tree = ttt_trees[0]
    with pytest.raises(AssertionError, match=message):
        jt.check_tree(_corrupt(tree, field, index, value), 24)


def test_check_tree_reports_edge_visits_that_disagree_with_the_child(ttt_trees):
    tree = jax.tree.map(np.asarray, ttt_trees[0])
    parent, action = np.argwhere(tree.children_index[0] > 0)[0]
    child = tree.children_index[0, parent, action]
    broken = _corrupt(tree, "node_visits", (0, child), tree.node_visits[0, child] + 1)
    with pytest.raises(AssertionError, match=f"of its child {child}|visits .* != 1 \\+"):
        jt.check_tree(broken, 24)


def test_check_tree_reports_visited_illegal_action(ttt_trees):
    tree = jax.tree.map(np.asarray, ttt_trees[0])
    # Position 1 ("X.. .O. ...") has cell 0 taken: illegal at its root.
    assert tree.children_index[1, 0, 0] == jaxpuct.ILLEGAL
    broken = _corrupt(tree, "edge_visits", (1, 0, 0), 1)
    with pytest.raises(AssertionError, match="tree 1 .*illegal action was visited"):
        jt.check_tree(broken)


def test_check_tree_rejects_a_non_tree():
    with pytest.raises(ValueError, match="expects a jaxpuct.Tree"):
        jt.check_tree(_ttt_root())


# ------------------------------------------------------------------ shared helpers


def test_tictactoe_code_equals_pgx_board_code():
    # pgx's board: -1 empty, 0 X, 1 O; code sum((board + 1) * 3**i).
    positions = tictactoe.all_positions(include_terminal=True)
    pgx_boards = np.array([[{0: -1, 1: 0, -1: 1}[c] for c in p] for p in positions])
    pgx_codes = ((pgx_boards + 1) * 3 ** np.arange(9)).sum(-1)
    np.testing.assert_array_equal(pgx_codes, [tictactoe.code(p) for p in positions])


def test_optimal_move_table_matches_optimal_moves():
    table = tictactoe.optimal_move_table()
    assert table.any(axis=1).sum() == 4520
    for pos in tictactoe.all_positions()[::97]:
        assert set(np.flatnonzero(table[tictactoe.code(pos)])) == tictactoe.optimal_moves(pos)


def test_mix32_is_lowbias32():
    # Reference values of Wellons' lowbias32 computed with Python integers.
    def lowbias32(x):
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    xs = np.array([0, 1, 12345, 2**31, 2**32 - 1], np.uint32)
    np.testing.assert_array_equal(np.asarray(synthetic.mix32(jnp.asarray(xs))),
                                  [lowbias32(int(x)) for x in xs])


def test_pure_search_on_pgx_tictactoe_conforms():
    pytest.importorskip("pgx")
    from jaxpuct.envs.pgx_games import make_pgx_game

    game = make_pgx_game("tic_tac_toe")
    root_fn, recurrent_fn = jt.make_pure_search_fns(game.environment, game.num_actions)
    root = root_fn(None, None, game.init(jax.random.PRNGKey(0), 2))
    np.testing.assert_array_equal(np.asarray(root.prior_logits), 0.0)
    np.testing.assert_array_equal(np.asarray(root.value), 0.0)
    report = jt.check_recurrent_fn(recurrent_fn, None, root, num_steps=2)
    assert report.has_state_hash and report.has_terminal


# ------------------------------------------------------------------ conformance: a tiny game


def _counter_fn(dtype=jnp.float32, with_mask=True, hash_of=None):
    """A two-element counter game; outputs in ``dtype``, optional mask and hash."""

    def fn(params, key, action, state):
        del params, key
        new = state * 3 + action.astype(state.dtype) + 1
        batch = action.shape[0]
        out = jaxpuct.RecurrentFnOutput(
            reward=jnp.zeros(batch, dtype), discount=jnp.ones(batch, dtype),
            prior_logits=jnp.zeros((batch, 3), dtype), value=jnp.zeros(batch, dtype),
            legal_action_mask=jnp.ones((batch, 3), bool) if with_mask else None,
            state_hash=None if hash_of is None else hash_of(new))
        return out, new

    return fn


def _counter_root(dtype=jnp.float32, hash_of=None, batch=2):
    state = jnp.arange(batch, dtype=jnp.int32)
    return jaxpuct.RootFnOutput(
        prior_logits=jnp.zeros((batch, 3), dtype), value=jnp.zeros(batch, dtype),
        embedding=state, state_hash=None if hash_of is None else hash_of(state))


def _good_hash(state):
    return jnp.stack([state, state // 7], axis=-1).astype(jnp.uint32)


def _zero_hash(state):
    return jnp.zeros((state.shape[0], 2), jnp.uint32)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_conformance_accepts_low_precision_outputs_as_the_search_does(dtype):
    report = jt.check_recurrent_fn(_counter_fn(dtype), None, _counter_root(dtype),
                                   num_steps=2)
    assert report.num_steps == 2
    # The search takes the same outputs.
    tree = jaxpuct.search(None, jax.random.PRNGKey(0), _counter_root(dtype), _counter_fn(dtype),
                          4)
    assert int(tree.num_nodes[0]) == 5


def test_conformance_with_no_step_reads_the_optional_fields_from_the_output():
    with_mask = jt.check_recurrent_fn(_counter_fn(), None, _counter_root(), num_steps=0)
    assert with_mask.num_steps == 0 and with_mask.has_legal_mask
    assert not with_mask.has_terminal
    without = jt.check_recurrent_fn(_counter_fn(with_mask=False), None, _counter_root(),
                                    num_steps=0)
    assert not without.has_legal_mask


def test_conformance_rejects_a_constant_state_hash():
    with pytest.raises(jt.ConformanceError, match="did not change") as info:
        jt.check_recurrent_fn(_counter_fn(hash_of=_zero_hash), None,
                              _counter_root(hash_of=_zero_hash), num_steps=2)
    assert (info.value.field, info.value.check) == ("state_hash", "hash")
    # The same through GraphConfig.hash_fn.
    with pytest.raises(jt.ConformanceError, match="did not change") as info:
        jt.check_recurrent_fn(_counter_fn(), None, _counter_root(), num_steps=2,
                              hash_fn=_zero_hash)
    assert (info.value.field, info.value.check) == ("hash_fn", "hash")
    report = jt.check_recurrent_fn(_counter_fn(hash_of=_good_hash), None,
                                   _counter_root(hash_of=_good_hash), num_steps=2,
                                   hash_fn=_good_hash)
    assert report.warnings == ()


def test_conformance_warns_about_one_move_that_keeps_the_hash():
    def sticky_hash(state):  # state 1 -> child 4 share a hash (4 // 3 == 1)
        return jnp.stack([jnp.where(state == 4, 1, state), state * 0], -1).astype(jnp.uint32)

    fn = _counter_fn(hash_of=sticky_hash)
    root = _counter_root(hash_of=sticky_hash)
    with pytest.warns(jt.ConformanceWarning, match="did not change with action"):
        report = jt.check_recurrent_fn(fn, None, root, num_steps=1, seed=_seed_playing(1, 0))
    assert any("state hash" in w for w in report.warnings)


def _seed_playing(element, action):
    """A seed whose first random move (no root mask: uniform integers) gives
    ``element`` the ``action``."""
    for seed in range(100):
        if int(np.random.default_rng(seed).integers(0, 3, 2)[element]) == action:
            return seed
    raise AssertionError("no seed found")


def test_conformance_rejects_batch_size_zero():
    with pytest.raises(jt.ConformanceError, match="B = 0") as info:
        jt.check_recurrent_fn(_counter_fn(), None, _counter_root(batch=0))
    assert info.value.field == "prior_logits"


# ------------------------------------------------------- conformance: sampled actions

_D = 2


def _vector_fn(fault=None, seen=None):
    """x' = x + a on ``[B, 2]`` states; the policy is N(x' + 1, e^-5): a move drawn
    from a state's own Gaussian is within a few e^-5 of x + 1. ``seen`` records the
    eager calls' ``(action, x)``; ``fault(out, x') -> (out, x')`` plants a fault."""

    def fn(params, key, action, x):
        if seen is not None and not isinstance(action, jax.core.Tracer):
            seen.append((np.asarray(action), np.asarray(x)))
        new = x + action
        zeros = jnp.zeros(x.shape[:1])
        out = jaxpuct.RecurrentFnOutput(
            reward=-jnp.sum(new * new, -1), discount=zeros + 0.5, value=zeros,
            prior_logits=jnp.concatenate([new + 1.0, jnp.full_like(new, -5.0)], -1))
        return (out, new) if fault is None else fault(out, new)

    return fn


_VECTOR_ROOT = jaxpuct.RootFnOutput(
    prior_logits=jnp.concatenate([jnp.ones((3, _D)), jnp.full((3, _D), -5.0)], -1),
    value=jnp.zeros(3), embedding=jnp.zeros((3, _D)))


def test_conformance_plays_gaussian_vectors_from_each_state():
    seen = []
    report = jt.check_recurrent_fn(_vector_fn(seen=seen), None, _VECTOR_ROOT, num_steps=3,
                                   action_space=jaxpuct.sampled.GaussianActions(_D))
    assert report.num_steps == 3 and report.action_dim == _D and report.num_actions == 2 * _D
    assert report.warnings == ()
    batched = [(a, x) for a, x in seen if a.shape[0] == 3]
    assert len(batched) == 3
    for action, x in batched:
        assert action.shape == (3, _D) and action.dtype == np.float32
        # Drawn from N(x + 1, e^-5): the state's own policy, not a fixed one.
        np.testing.assert_allclose(action, x + 1.0, atol=0.05)
    assert np.abs(batched[-1][1]).max() > 2  # the states moved: x = 0, 1, 3


@pytest.mark.parametrize("fault, field, check, words", [
    # An id game handed vectors: indexing by a float action raises.
    (lambda out, x: (out.replace(value=jnp.take(out.value, x[:, 0])), x), "recurrent_fn",
     "call", ["raised"]),
    # D logits instead of the 2D Gaussian parameters.
    (lambda out, x: (out.replace(prior_logits=out.prior_logits[:, :_D]), x), "prior_logits",
     "shape", ["(3, 4)"]),
    (lambda out, x: (out.replace(prior_logits=out.prior_logits.at[:, -1].set(jnp.nan)), x),
     "prior_logits", "finite", ["mean and log std"]),
    (lambda out, x: (out, x + jnp.arange(3.0)[:, None]), "embedding", "batch_independence",
     ["leaks across the batch"]),
])
def test_conformance_names_faults_with_gaussian_actions(fault, field, check, words):
    with pytest.raises(jt.ConformanceError) as info:
        jt.check_recurrent_fn(_vector_fn(fault), None, _VECTOR_ROOT, num_steps=2,
                              check_jit=False,
                              action_space=jaxpuct.sampled.GaussianActions(_D))
    assert (info.value.field, info.value.check) == (field, check), str(info.value)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_conformance_with_discrete_sampled_actions_checks_the_space():
    fn = tictactoe.make_recurrent_fn()
    report = jt.check_recurrent_fn(fn, None, _ttt_root(), num_steps=2, check_jit=False,
                                   check_batch_independence=False,
                                   action_space=jaxpuct.sampled.DiscreteActions(9))
    assert report.num_actions == 9 and report.action_dim is None
    with pytest.raises(jt.ConformanceError, match="has 9 actions, expected 10"):
        jt.check_root(_ttt_root(), action_space=jaxpuct.sampled.DiscreteActions(10))
    with pytest.raises(jt.ConformanceError, match="2D = 18"):
        jt.check_root(_ttt_root(), action_space=jaxpuct.sampled.GaussianActions(9))
    with pytest.raises(ValueError, match="action_space must be"):
        jt.check_recurrent_fn(fn, None, _ttt_root(), action_space="gaussian")


# ------------------------------------------------- factored actions (multi-agent moves)

_AGENTS = 2


def _factored_model(fault=None):
    """The path-finding model with per-agent heads (``[B, 5F]`` factor logits) on
    three 4 x 4 grids, ``fault(out) -> out`` applied to each output."""
    from jaxpuct.testing import pathfinding as pf

    params = pf.make_instances(3, size=4, num_agents=_AGENTS, num_obstacles=2, seed=3)
    root_fn, recurrent_fn = pf.model(joint=False)
    state = pf.State(cells=jnp.asarray(params.start), instance=jnp.arange(3, dtype=jnp.int32))

    def fn(p, key, action, s):
        out, new = recurrent_fn(p, key, action, s)
        return (out if fault is None else fault(out)), new

    # Jitted: op by op, the model's eager calls compiled 130 small programs (3.7 s).
    return params, root_fn(params, state), jax.jit(fn)


def test_conformance_plays_legal_joint_ids_with_factored_actions():
    params, root, fn = _factored_model()
    seen = []

    def recording(p, key, action, s):
        seen.append((np.asarray(action), np.asarray(s.cells), np.asarray(s.instance)))
        return fn(p, key, action, s)

    space = jaxpuct.sampled.FactoredActions((5,) * _AGENTS)
    report = jt.check_recurrent_fn(recording, params, root, num_steps=3, check_jit=False,
                                   action_space=space)
    assert report.num_steps == 3 and report.num_actions == 5 * _AGENTS
    batched = [x for x in seen if x[0].shape == (3,)]
    assert len(batched) == 3
    for action, cells, instance in batched:
        assert action.dtype == np.int32 and np.all((0 <= action) & (action < 5**_AGENTS))
        moves = np.stack([action // 5, action % 5], axis=1)  # agent 0 most significant
        # Every agent's move is legal in its own cell (the NumPy rule of the grid).
        assert np.all(params.legal[instance[:, None], cells, moves])


def test_conformance_plays_every_legal_joint_action_uniformly():
    from jaxpuct.testing.conformance import _random_factored_actions

    space = jaxpuct.sampled.FactoredActions((2, 3))
    legal = np.array([[True, True, False, True, True],    # 2 x 2 legal joint actions
                      [False, True, True, False, False],  # 1 x 1
                      [True, True, False, False, False]])  # factor 1 has none
    rng = np.random.default_rng(0)
    draws = np.stack([_random_factored_actions(rng, legal, 3, space)[0] for _ in range(4000)])
    _, active = _random_factored_actions(rng, legal, 3, space)
    assert active.tolist() == [True, True, False]
    # Row 0: joint ids f0 * 3 + f1 with f0 in {0, 1}, f1 in {1, 2}; about 1000 each.
    ids, counts = np.unique(draws[:, 0], return_counts=True)
    assert ids.tolist() == [1, 2, 4, 5] and counts.min() > 880 and counts.max() < 1120
    assert set(draws[:, 1].tolist()) == {3 + 0}


@pytest.mark.parametrize("fault, field, check, words", [
    # The joint head's width (5^F) where the factors' (5F) is expected.
    (lambda out: out.replace(prior_logits=jnp.zeros((3, 5**_AGENTS))), "prior_logits",
     "shape", ["expected 10", "factor values", "not the joint"]),
    # Agent 1 has no legal move although the state is not terminal.
    (lambda out: out.replace(legal_action_mask=out.legal_action_mask.at[:, 5:].set(False),
                             prior_logits=out.prior_logits.at[:, 5:].set(-jnp.inf)),
     "terminal", "terminal", ["a factor with no legal value"]),
])
def test_conformance_names_faults_with_factored_actions(fault, field, check, words):
    params, root, fn = _factored_model(fault)
    with pytest.raises(jt.ConformanceError) as info:
        jt.check_recurrent_fn(fn, params, root, num_steps=2, check_jit=False,
                              check_batch_independence=False,
                              action_space=jaxpuct.sampled.FactoredActions((5,) * _AGENTS))
    assert (info.value.field, info.value.check) == (field, check), str(info.value)
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    with pytest.raises(jt.ConformanceError, match="factor values of FactoredActions"):
        jt.check_root(root, action_space=jaxpuct.sampled.FactoredActions((5,) * 3))

"""Monte-Carlo Graph Search: the seed's worked examples, equality with tree search
without transpositions, backward induction on DAGs, collisions, cycles."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpuct
from jaxpuct import graph as graph_lib
from jaxpuct.testing import random_games, tictactoe

GRAPH = jaxpuct.GraphConfig()
NO_STOP = jaxpuct.GraphConfig(stop_at_transposition=False)
# Constant c, unvisited Q = parent value: easy to recompute by hand.
PLAIN = jaxpuct.PUCTConfig(c_init=1.0, c_base=None, unvisited_q="parent")


def _dummy_recurrent_fn(params, rng_key, action, embedding):
    """Never reached by the hand-built graphs below (their walks stop at an
    existing node), but the lockstep search calls it once per simulation."""
    batch = action.shape[0]
    out = jaxpuct.RecurrentFnOutput(
        reward=jnp.zeros(batch), discount=jnp.ones(batch),
        prior_logits=jnp.zeros((batch, 3)), value=jnp.zeros(batch),
        state_hash=jnp.stack([embedding + 1000, jnp.zeros_like(embedding)], -1).astype(
            jnp.uint32))
    return out, embedding + 1000


def _hand_built_graph(node_values, raw_values, node_visits, edges, priors):
    """One tree (B=1) with node 0 as root, single-agent (discount +1, reward 0).

    edges: list of (parent, action, child, edge_visits).
    """
    num_nodes = len(node_values)
    root = jaxpuct.RootFnOutput(
        prior_logits=jnp.log(jnp.asarray([priors], jnp.float32)),
        value=jnp.asarray([raw_values[0]], jnp.float32),
        embedding=jnp.zeros((1,), jnp.int32),
        state_hash=jnp.zeros((1, 2), jnp.uint32))
    tree = jaxpuct.init_tree(root, 8, graph=GRAPH)
    index = tree.children_index
    visits = tree.edge_visits
    for parent, action, child, count in edges:
        index = index.at[0, parent, action].set(child)
        visits = visits.at[0, parent, action].set(count)
    pad = 8 - num_nodes
    tree = tree.replace(
        children_index=index, edge_visits=visits,
        children_prior=tree.children_prior.at[0, :num_nodes].set(
            jnp.tile(jnp.asarray(priors, jnp.float32), (num_nodes, 1))),
        node_values=jnp.asarray([list(node_values) + [0.0] * pad], jnp.float32),
        raw_values=jnp.asarray([list(raw_values) + [0.0] * pad], jnp.float32),
        node_visits=jnp.asarray([list(node_visits) + [0] * pad], jnp.int32),
        node_discounts=jnp.ones((1, 8), jnp.float32),
        edge_discounts=jnp.ones((1, 8, 3), jnp.float32),
        node_hash=tree.node_hash.at[0, :num_nodes, 0].set(jnp.arange(num_nodes, dtype=jnp.uint32)),
        num_nodes=jnp.asarray([num_nodes], jnp.int32))
    return graph_lib.rebuild_hash_table(tree)


@functools.partial(jax.jit, static_argnames=("num_simulations", "graph", "selection"))
def _continue(tree, num_simulations, graph=GRAPH, selection=PLAIN):
    return jaxpuct.search(None, jax.random.PRNGKey(0), None, _dummy_recurrent_fn,
                          num_simulations, tree=tree, graph=graph, selection=selection)


def test_seed_example_a_c_parent_sees_child_reevaluated_elsewhere():
    # A (root) prefers C: 30 of its 32 playouts went to C. C was also visited
    # 40 times through other paths and has since been re-evaluated 0.39 -> 0.51
    # by playouts that never passed through A. X is A's weaker alternative,
    # tried 10 times.
    u_a, q_c, q_x = 0.3, 0.51, 0.3
    stale_q_a = (u_a + 30 * 0.39 + 10 * q_x) / 41
    tree = _hand_built_graph(
        node_values=[stale_q_a, q_c, q_x], raw_values=[u_a, 0.4, q_x],
        node_visits=[41, 71, 11], edges=[(0, 0, 1, 30), (0, 1, 2, 10)],
        priors=[0.5, 0.5, 1e-6])

    # Naive DAG search (child visits as edge visits) sees C as explored 71
    # times and turns to X: the failure the seed describes.
    naive = jaxpuct.selection.puct_scores(
        PLAIN, prior=tree.children_prior[:, 0], edge_visits=jnp.asarray([[71, 10, 0]]),
        edge_q=jnp.asarray([[q_c, q_x, 0.0]]), has_q=jnp.asarray([[True, True, False]]),
        legal=jnp.ones((1, 3), bool), parent_value=tree.node_values[:, 0],
        node_visits=tree.node_visits[:, 0], is_root=True)
    assert int(jnp.argmax(naive[0])) == 1

    after = _continue(tree, 1)
    # Edge visits, not C's own count: A keeps its best move ...
    np.testing.assert_array_equal(after.edge_visits[0, 0], [31, 10, 0])
    # ... the playout stops at the transposition (C is not re-entered) ...
    assert int(after.node_visits[0, 1]) == 71
    # ... and A's Q now reflects C's new value.
    expected = (u_a + 31 * q_c + 10 * q_x) / 42
    np.testing.assert_allclose(float(after.node_values[0, 0]), expected, rtol=1e-6)
    assert int(after.node_visits[0, 0]) == 42
    assert float(after.node_values[0, 0]) > stale_q_a + 0.05


def test_seed_example_d_f_shared_child_does_not_drag_parent():
    # D's best child E has Q = 0.56 and D's Q = 0.55 agrees with it. D tried F
    # once; F has since been visited 110 times through other paths, at low value.
    u_d, q_e, q_f = 0.55, 0.56, 0.1
    n_de = 20
    q_d = (u_d + n_de * q_e + 1 * q_f) / (n_de + 2)
    tree = _hand_built_graph(
        node_values=[q_d, q_e, q_f], raw_values=[u_d, q_e, q_f],
        node_visits=[n_de + 2, 40, 111], edges=[(0, 0, 1, n_de), (0, 1, 2, 1)],
        priors=[0.9, 0.1, 1e-6])
    after = _continue(tree, 1)
    # D chose E again and weighted F by its own single edge visit.
    np.testing.assert_array_equal(after.edge_visits[0, 0], [n_de + 1, 1, 0])
    expected = (u_d + (n_de + 1) * q_e + 1 * q_f) / (n_de + 3)
    np.testing.assert_allclose(float(after.node_values[0, 0]), expected, rtol=1e-6)
    # Weighting F by its 111 visits (an all-parents update) would have dragged
    # D down near F's value.
    all_parents = (u_d + n_de * q_e + 111 * q_f) / (n_de + 112)
    assert all_parents < 0.2
    assert float(after.node_values[0, 0]) > 0.53


def test_descending_through_transposition_when_asked():
    tree = _hand_built_graph(
        node_values=[0.4, 0.5, 0.2], raw_values=[0.3, 0.4, 0.2],
        node_visits=[33, 71, 3], edges=[(0, 0, 1, 30), (0, 1, 2, 2)],
        priors=[0.9, 0.1, 1e-6])
    after = _continue(tree, 1, graph=NO_STOP)
    # The walk entered C (71 visits > 30 edge visits) and expanded below it.
    np.testing.assert_array_equal(after.edge_visits[0, 0], [31, 2, 0])
    assert int(after.num_nodes[0]) == 4
    np.testing.assert_array_equal(after.edge_visits[0, 1], [1, 0, 0])
    # C is recomputed idempotently from its edges: N = 1 + 1, whatever it was.
    assert int(after.node_visits[0, 1]) == 2


# --- end to end on games ----------------------------------------------------------

_GAME_RF = random_games.make_recurrent_fn(with_hash=True)


@functools.partial(jax.jit, static_argnames=("num_simulations", "graph", "selection"))
def _game_search(game, roots, key, num_simulations, graph=None, selection=jaxpuct.PUCTConfig()):
    root = random_games.root(game, roots, with_hash=True)
    return jaxpuct.alphazero_policy(game, key, root, _GAME_RF, num_simulations,
                                    dirichlet_fraction=0.0, graph=graph,
                                    selection=selection).search_tree


def _padded(seed, **kwargs):
    return random_games.pad_game(random_games.random_game(seed, num_actions=4, depth=7,
                                                          reward_mode="dense", **kwargs), 4096)


@pytest.mark.parametrize("selection", [jaxpuct.PUCTConfig(), jaxpuct.PUCTConfig.mctx_muzero()])
def test_graph_equals_tree_without_transpositions(selection):
    game = _padded(11)
    roots = jnp.zeros((4,), jnp.int32)
    keys = jax.random.split(jax.random.PRNGKey(3), 4)
    tree = _game_search(game, roots, keys, 96, None, selection)
    graph = _game_search(game, roots, keys, 96, GRAPH, selection)
    np.testing.assert_array_equal(tree.edge_visits, graph.edge_visits)
    np.testing.assert_array_equal(tree.children_index, graph.children_index)
    np.testing.assert_array_equal(tree.num_nodes, graph.num_nodes)
    used = np.arange(tree.max_nodes)[None] < np.asarray(tree.num_nodes)[:, None]
    np.testing.assert_allclose(np.where(used, tree.node_values, 0),
                               np.where(used, graph.node_values, 0), atol=1e-5)


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_graph_root_value_converges_on_dags(seed):
    game = _padded(seed, merge_prob=0.5)
    exact = random_games.game_values(game)[0]
    roots = jnp.zeros((1,), jnp.int32)
    errors = []
    for sims in (16, 512):
        tree = _game_search(game, roots, jax.random.PRNGKey(0), sims, GRAPH)
        errors.append(abs(float(tree.summary().value[0]) - exact))
        # Idempotent backup keeps N(n) = 1 + sum of edge visits on non-terminal nodes.
        used = np.arange(tree.max_nodes) < int(tree.num_nodes[0])
        open_nodes = used & ~np.asarray(tree.node_terminal[0])
        np.testing.assert_array_equal(
            np.asarray(tree.node_visits[0])[open_nodes],
            1 + np.asarray(tree.edge_visits[0]).sum(-1)[open_nodes])
        assert int(tree.edge_visits[0, 0].sum()) == sims
    assert errors[1] < 0.05, errors
    assert errors[1] <= errors[0] + 1e-6, errors


def test_graph_shares_nodes_on_dags():
    game = _padded(4, merge_prob=0.5)
    roots = jnp.zeros((1,), jnp.int32)
    tree = _game_search(game, roots, jax.random.PRNGKey(0), 256, None)
    graph = _game_search(game, roots, jax.random.PRNGKey(0), 256, GRAPH)
    tree_ids = np.asarray(tree.embeddings[0, : int(tree.num_nodes[0])])
    graph_ids = np.asarray(graph.embeddings[0, : int(graph.num_nodes[0])])
    # One node per state in the graph; the tree holds duplicates.
    assert len(set(graph_ids.tolist())) == len(graph_ids)
    assert len(set(tree_ids.tolist())) < len(tree_ids)


def test_bad_hash_collisions_do_not_crash_or_leak():
    # Every state of element 0 hashes to one of 2 values; element 1 is clean.
    game = _padded(7, merge_prob=0.3)
    clean_rf = _GAME_RF

    def colliding_rf(params, key, action, node):
        out, child = clean_rf(params, key, action, node)
        bad = jnp.stack([(child % 2).astype(jnp.uint32), jnp.zeros_like(child, jnp.uint32)], -1)
        use_bad = jnp.arange(child.shape[0]) == 0
        return out.replace(state_hash=jnp.where(use_bad[:, None], bad, out.state_hash)), child

    @jax.jit
    def run(roots):
        root = random_games.root(game, roots, with_hash=True)
        return jaxpuct.search(game, jax.random.PRNGKey(0), root, colliding_rf, 64,
                              graph=GRAPH).summary(), jaxpuct.search(
            game, jax.random.PRNGKey(0), root, clean_rf, 64, graph=GRAPH).summary()

    bad, clean = run(jnp.zeros((2,), jnp.int32))
    assert np.all(np.isfinite(bad.value)) and np.all(np.isfinite(bad.qvalues))
    assert int(bad.visit_counts[0].sum()) == 64
    for field in ("visit_counts", "value", "qvalues"):
        np.testing.assert_array_equal(getattr(bad, field)[1], getattr(clean, field)[1])


def _cycle_recurrent_fn(params, key, action, state):
    """Single-agent chain 0 -> 1 -> 2 -> 3 (terminal, reward 1); action 1 goes
    back to state 0, so the graph has cycles."""
    forward = jnp.minimum(state + 1, 3)
    new = jnp.where(action == 0, forward, 0)
    terminal = new == 3
    batch = state.shape[0]
    out = jaxpuct.RecurrentFnOutput(
        reward=jnp.where(terminal, 1.0, 0.0), discount=jnp.full((batch,), 0.9),
        prior_logits=jnp.zeros((batch, 2)), value=jnp.zeros(batch), terminal=terminal,
        state_hash=jnp.stack([new, jnp.zeros_like(new)], -1).astype(jnp.uint32))
    return out, new


def test_cycles_stop_and_values_stay_finite():
    root = jaxpuct.RootFnOutput(prior_logits=jnp.zeros((2, 2)), value=jnp.zeros(2),
                                embedding=jnp.zeros((2,), jnp.int32),
                                state_hash=jnp.zeros((2, 2), jnp.uint32))
    tree = jax.jit(lambda r: jaxpuct.search(None, jax.random.PRNGKey(0), r,
                                            _cycle_recurrent_fn, 200, graph=GRAPH))(root)
    # Four states, one node each, whatever the number of simulations.
    np.testing.assert_array_equal(tree.num_nodes, [4, 4])
    assert int(tree.edge_visits[0, 0].sum()) == 200
    # The best line is 0 -> 1 -> 2 -> 3: value 0.9**2 * 1 at the root, which
    # the root's search value approaches from below.
    assert np.all(np.isfinite(tree.node_values))
    root_q = tree.summary().qvalues[0]
    assert float(root_q[0]) > float(root_q[1])
    assert 0.5 < float(tree.summary().value[0]) <= 0.81 + 1e-6
    # The terminal node keeps N = 1 and its exact value.
    terminal = np.asarray(tree.node_terminal[0, :4])
    assert terminal.sum() == 1
    assert int(np.asarray(tree.node_visits[0, :4])[terminal][0]) == 1


def test_ttt_graph_at_least_as_good_with_fewer_evaluated_states():
    positions = tictactoe.all_positions()[::9]
    optimal = [tictactoe.optimal_moves(p) for p in positions]
    state = tictactoe.batch(positions)
    rf = tictactoe.make_recurrent_fn(with_hash=True)

    @functools.partial(jax.jit, static_argnames="graph")
    def run(state, graph):
        root = tictactoe.root(state, with_hash=True)
        return jaxpuct.alphazero_policy(None, jax.random.PRNGKey(0), root, rf, 48,
                                        dirichlet_fraction=0.0, temperature=0.0, graph=graph)

    results = {}
    for name, graph in (("tree", None), ("graph", GRAPH)):
        out = run(state, graph)
        actions = np.asarray(out.action)
        rate = np.mean([a in o for a, o in zip(actions, optimal, strict=True)])
        nodes = np.asarray(out.search_tree.num_nodes)
        boards = np.asarray(out.search_tree.embeddings.board)
        players = np.asarray(out.search_tree.embeddings.player)
        distinct = [len({(boards[b, n].tobytes(), int(players[b, n])) for n in range(nodes[b])})
                    for b in range(len(positions))]
        results[name] = (rate, float(np.mean(distinct)), float(np.mean(nodes)))
    assert results["graph"][0] >= results["tree"][0]
    # Tree search evaluated duplicate states; the graph stores each once.
    assert results["graph"][2] == pytest.approx(results["graph"][1])
    assert results["tree"][2] > results["tree"][1]

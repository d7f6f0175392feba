"""``PUCTConfig.uct()`` against OpenSpiel's own UCT search, visit for visit.

The oracle is OpenSpiel's Python ``MCTSBot`` (``open_spiel.python.algorithms.mcts``)
made deterministic: one fixed value function of the board at every new leaf in both
(values in eighths, exact in float32 and float64; a zero value would tie every
unfinished child and hide how the parent count enters), children kept in action
order (its shuffle turned off) and the textbook UCT score (its shortcut of scoring a
child that ended the game by that result alone, without the exploration term, left
out). Under those, the two searches choose the same child at every step, so the
root's visit counts agree exactly.

With the engine's other features (the MCTS-solver, several leaves per step, a
continued tree, sampled actions) the oracles are the structural tree checks, the
rule's own promise under a prior that points elsewhere (every move tried once before
any twice, at every node), and backward induction for the solver's proofs.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpuct import PUCTConfig, alphazero_policy
from jaxpuct.envs.adapter import make_recurrent_fn, make_root_fn
from jaxpuct.envs.pgx_games import make_pgx_game

pyspiel = pytest.importorskip("pyspiel")
pgx = pytest.importorskip("pgx")
mcts = pytest.importorskip("open_spiel.python.algorithms.mcts")

SIMULATIONS = 150


# The leaf value from the mover's view: a weighted count of the mover's and the
# opponent's cells, folded into {-1, -7/8, ..., 1}.
_MINE = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9])
_THEIRS = np.array([2, 7, 1, 8, 2, 8, 1, 8, 3])


def _fold(total):
    return (total % 17 - 8) / 8.0


def _value_apply(params, obs):
    """``obs [B, 3, 3, 2]`` (pgx: the mover's cells, then the opponent's)."""
    cells = obs.reshape(obs.shape[0], 9, 2).astype(jnp.int32)
    total = cells[..., 0] @ jnp.asarray(_MINE) + cells[..., 1] @ jnp.asarray(_THEIRS)
    return jnp.zeros((obs.shape[0], 9)), _fold(total).astype(jnp.float32)


class _Evaluator(mcts.Evaluator):
    def evaluate(self, state):
        mover, history = state.current_player(), state.history()
        mine, theirs = np.zeros(9, int), np.zeros(9, int)
        mine[history[mover::2]] = 1
        theirs[history[1 - mover::2]] = 1
        value = _fold(int(mine @ _MINE + theirs @ _THEIRS))
        return np.array([value, -value] if mover == 0 else [-value, value])

    def prior(self, state):
        return [(a, 1.0) for a in state.legal_actions()]


class _NoShuffle:
    def shuffle(self, items):
        pass


def _textbook_uct(node, parent_count, c):
    if node.explore_count == 0:
        return math.inf
    return (node.total_reward / node.explore_count
            + c * math.sqrt(math.log(parent_count) / node.explore_count))


def _openings(count: int) -> list[list[int]]:
    """Distinct unfinished tic-tac-toe positions from random play, 0 to 5 stones."""
    game, rng, found = pyspiel.load_game("tic_tac_toe"), np.random.default_rng(3), []
    while len(found) < count:
        state, moves = game.new_initial_state(), []
        for _ in range(int(rng.integers(0, 6))):
            if state.is_terminal():
                break
            moves.append(int(rng.choice(state.legal_actions())))
            state.apply_action(moves[-1])
        if not state.is_terminal() and moves not in found:
            found.append(moves)
    return found


def _play(env, moves):
    state = env.init(jax.random.key(0))
    for a in moves:
        state = env.step(state, jnp.int32(a))
    return state


@pytest.mark.parametrize("c", [2.0, pytest.param(0.5, marks=pytest.mark.slow)])
def test_uct_visits_equal_openspiels_uct_search(c):
    game = make_pgx_game("tic_tac_toe")
    apply = _value_apply
    root_fn = make_root_fn(apply, game.environment)
    recurrent_fn = make_recurrent_fn(apply, game.environment)
    env = pgx.make("tic_tac_toe")
    openings = _openings(10)
    states = jax.tree.map(lambda *x: jnp.stack(x), *[
        _play(env, moves) for moves in openings])

    @jax.jit
    def search(keys, state):
        root = root_fn(None, keys[0], state)
        return alphazero_policy(None, keys, root, recurrent_fn, SIMULATIONS,
                                dirichlet_fraction=0.0, temperature=jnp.zeros(keys.shape[0]),
                                selection=PUCTConfig.uct(c)).search_tree.edge_visits[:, 0]

    got = np.asarray(search(jax.random.split(jax.random.key(0), len(openings)), states))

    os_game = pyspiel.load_game("tic_tac_toe")
    for row, moves in enumerate(openings):
        state = os_game.new_initial_state()
        for a in moves:
            state.apply_action(a)
        # OpenSpiel's first simulation evaluates the root, which jaxpuct's root_fn does.
        bot = mcts.MCTSBot(os_game, c, SIMULATIONS + 1, _Evaluator(), solve=False,
                           random_state=_NoShuffle(), child_selection_fn=_textbook_uct)
        want = np.zeros(game.num_actions, np.int64)
        for child in bot.mcts_search(state).children:
            want[child.action] = child.explore_count
        np.testing.assert_array_equal(got[row], want, err_msg=f"opening {moves}, c={c}")
    # Not all spread evenly: the values steer the visits, so the check can fail.
    assert got.max() > 2 * SIMULATIONS / 9


def test_uct_ignores_the_prior_and_tries_every_move_first():
    # Four simulations on a node of four legal moves: one visit each, whatever the prior.
    game = make_pgx_game("tic_tac_toe")
    skewed = lambda params, obs: (jnp.tile(jnp.arange(9.0) * 3, (obs.shape[0], 1)),  # noqa: E731
                                  jnp.zeros(obs.shape[0]))
    states = jax.tree.map(lambda x: x[None], _play(pgx.make("tic_tac_toe"), (0, 1, 2, 4, 3)))

    @jax.jit
    def search(keys, state):
        root = make_root_fn(skewed, game.environment)(None, keys[0], state)
        return alphazero_policy(None, keys, root, make_recurrent_fn(skewed, game.environment),
                                4, dirichlet_fraction=0.0, temperature=jnp.zeros(1),
                                selection=PUCTConfig.uct()).search_tree.edge_visits[0, 0]

    visits = np.asarray(search(jax.random.split(jax.random.key(0), 1), states))
    np.testing.assert_array_equal(visits, [0, 0, 0, 0, 0, 1, 1, 1, 1])


@pytest.mark.slow
def test_the_arenas_pure_search_selects_by_uct_unless_told_puct():
    from jaxpuct.alphazero import arena
    from jaxpuct.envs import rollouts
    from jaxpuct.testing.pure_search import zero_apply

    # The arena's rollout search rebuilt by hand: the same key, so the same rollouts.
    game = make_pgx_game("tic_tac_toe")
    apply = zero_apply(game.num_actions)
    root_fn = make_root_fn(apply, game.environment)
    recurrent_fn = rollouts.make_recurrent_fn(apply, game.environment, mix=1.0,
                                              max_steps=arena.MAX_MOVES["tic_tac_toe"])
    openings = _openings(10)
    states = jax.tree.map(lambda *x: jnp.stack(x), *[
        _play(pgx.make("tic_tac_toe"), moves) for moves in openings])
    keys = jax.random.split(jax.random.key(0), len(openings))

    def direct(selection):
        root = root_fn(None, keys[0], states)  # a uniform prior: the key is unused
        return np.asarray(alphazero_policy(
            None, keys, root, recurrent_fn, 40, dirichlet_fraction=0.0,
            temperature=jnp.zeros(len(openings)), selection=selection).action)

    uct, who = arena.pure_search_agent("tic_tac_toe", 40, "rollouts")
    assert who.startswith("jaxpuct pure UCT search (c = 2, 40 simulations, one random")
    played = np.asarray(uct(keys, states))
    np.testing.assert_array_equal(played, direct(PUCTConfig.uct()))
    puct, who = arena.pure_search_agent("tic_tac_toe", 40, "rollouts", selection="puct")
    assert who.startswith("jaxpuct pure PUCT search (uniform prior, 40 simulations")
    np.testing.assert_array_equal(np.asarray(puct(keys, states)), direct(PUCTConfig()))
    assert np.any(played != direct(PUCTConfig())), "the two rules must differ somewhere"
    with pytest.raises(ValueError, match="selection must be 'uct' or 'puct', got 'ucb'"):
        arena.pure_search_agent("tic_tac_toe", 40, "zero", selection="ucb")


def test_uct_tries_every_root_move_first_in_graph_and_chance_node_searches():
    """The rule reaches the other searches of the PUCT family through the same
    score: a graph search over tic-tac-toe and a chance-node search over a hashed
    stochastic game (its prior skewed) give one visit to each root move first."""
    import jaxpuct
    from jaxpuct.testing import stochastic_games

    game = make_pgx_game("tic_tac_toe")
    apply = _value_apply
    states = jax.tree.map(lambda x: x[None], _play(pgx.make("tic_tac_toe"), (0, 1, 2, 4, 3)))

    @jax.jit
    def graph_search(state):
        root = make_root_fn(apply, game.environment)(None, jax.random.key(0), state)
        return alphazero_policy(None, jax.random.key(0), root,
                                make_recurrent_fn(apply, game.environment), 4,
                                dirichlet_fraction=0.0, temperature=jnp.zeros(1),
                                graph=jaxpuct.GraphConfig(), selection=PUCTConfig.uct()
                                ).search_tree.edge_visits[0, 0]

    np.testing.assert_array_equal(np.asarray(graph_search(states)), [0] * 5 + [1] * 4)

    root, decision_fn, chance_fn = stochastic_games.hashed_game(2, 4, 3, logit_scale=6.0)

    @jax.jit
    def chance_search(root):
        return jaxpuct.stochastic_policy(None, jax.random.key(0), root, decision_fn, chance_fn,
                                         4, dirichlet_fraction=0.0, temperature=0.0,
                                         selection=PUCTConfig.uct())

    out = chance_search(root)
    np.testing.assert_array_equal(np.asarray(out.search_tree.edge_visits[:, 0]),
                                  np.ones((2, 4)))


# ------------------------------------------------- with the engine's other features

_B, _S = 8, 24
_SKEW = jnp.array([8.0, 0.0, 0.0])  # a prior PUCT would follow: move 0 at 0.9993


def _uct_search(feature: str, selection: PUCTConfig):
    """``(tree, forest)``: a search of ``_S`` simulations over ``_B`` random games (3
    moves a turn, 4 turns deep, the prior skewed towards move 0 at every node) with one
    other feature; ``reuse`` is the tree continued below the first search's move for
    another ``_S``."""
    import search_cases as sc

    import jaxpuct
    from jaxpuct.testing import random_games

    forest, roots, _ = sc.game_forest(range(_B))
    game_fn = random_games.make_recurrent_fn()

    def recurrent_fn(params, key, action, embedding):
        out, embedding = game_fn(params, key, action, embedding)
        return out.replace(prior_logits=out.prior_logits + _SKEW), embedding

    kw: dict = dict(dirichlet_fraction=0.0, selection=selection)
    if feature == "solver":
        kw["solver"] = True
    if feature == "leaves":
        kw.update(leaves_per_step=2, virtual_loss=jaxpuct.VirtualLoss())
    if feature == "reuse":
        kw["max_nodes"] = 2 * _S + 1

    @sc.jit
    def search(forest, roots):
        key = jax.random.key(3)
        root = random_games.root(forest, roots)
        root = root.replace(prior_logits=root.prior_logits + _SKEW)
        if feature == "sampled":
            return jaxpuct.sampled_policy(forest, key, root, recurrent_fn, _S, num_samples=2,
                                          **kw).search_tree
        out = alphazero_policy(forest, key, root, recurrent_fn, _S, **kw)
        if feature != "reuse":
            return out.search_tree
        tree, _ = jaxpuct.subtree(out.search_tree, out.action)
        return alphazero_policy(forest, jax.random.fold_in(key, 1), None, recurrent_fn, _S,
                                tree=tree, **kw).search_tree

    return search(forest, jnp.asarray(roots)), forest


def _nodes_that_skipped_a_move(tree, exclude=None) -> list:
    """``(b, node)`` of every node whose visits past its own expansion were enough to
    try each of its legal moves (or sampled slots) once but left one untried."""
    from jaxpuct import ILLEGAL

    children = np.asarray(tree.children_index)
    edge_visits = np.asarray(tree.edge_visits)
    node_visits = np.asarray(tree.node_visits)
    skipped = []
    for b in range(children.shape[0]):
        for n in range(int(tree.num_nodes[b])):
            legal = children[b, n] != ILLEGAL
            if exclude is not None and exclude[b, n]:
                continue
            if node_visits[b, n] - 1 >= legal.sum() > 0 and np.any(edge_visits[b, n][legal] == 0):
                skipped.append((b, n))
    return skipped


@pytest.mark.parametrize("feature", [
    "solver", "leaves", pytest.param("reuse", marks=pytest.mark.slow),
    pytest.param("sampled", marks=pytest.mark.slow)])
def test_uct_composes_with_the_solver_several_leaves_a_continued_tree_and_sampled_moves(
        feature):
    """UCT is a score, so the engine's other features take it as they take PUCT's:
    every tree passes the structural checks; under a prior that puts 0.9993 on one
    move, every node tries each of its moves (sampled slots) before any twice, so a
    node with more visits than moves has visited all (PUCT's own rule, which follows
    the prior, fails this on the same searches); the MCTS-solver's proven nodes hold
    the games' backward-induction values (a proven node is left out of the first
    check: the solver steers its walks)."""
    import search_cases as sc

    from jaxpuct.testing import check_tree

    tree, forest = _uct_search(feature, PUCTConfig.uct())
    # Several leaves, proven nodes and a continued tree each make the root's count
    # differ from the simulations run (as in test_composition.py).
    check_tree(tree, _S if feature == "sampled" else None)
    proven = None
    if feature == "solver":
        proven = sc.check_game_proofs(tree, forest)
        assert proven.sum() > _B, proven.sum()  # not vacuous: proofs below the roots
    assert _nodes_that_skipped_a_move(tree, proven) == []
    puct_tree, _ = _uct_search(feature, PUCTConfig())
    assert _nodes_that_skipped_a_move(puct_tree) != []

"""``PUCTConfig.uct()`` against OpenSpiel's own UCT search, visit for visit.

The oracle is OpenSpiel's Python ``MCTSBot`` (``open_spiel.python.algorithms.mcts``)
made deterministic: one fixed value function of the board at every new leaf in both
(values in eighths, exact in float32 and float64; a zero value would tie every
unfinished child and hide how the parent count enters), children kept in action
order (its shuffle turned off) and the textbook UCT score (its shortcut of scoring a
child that ended the game by that result alone, without the exploration term, left
out). Under those, the two searches choose the same child at every step, so the
root's visit counts agree exactly.
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

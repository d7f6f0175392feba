"""The MCTS-solver in the self-play loop's search (``SelfPlayConfig.solver``),
checked against exact tic-tac-toe minimax on pgx's rules."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pgx")

import jaxpuct.alphazero as az  # noqa: E402
from jaxpuct.alphazero import selfplay  # noqa: E402
from jaxpuct.envs.pgx_games import make_pgx_game  # noqa: E402
from jaxpuct.testing import tictactoe  # noqa: E402

POWERS = 3 ** np.arange(9)


def _positions(stones: int, num: int) -> list:
    """The first ``num`` non-terminal positions with ``stones`` stones."""
    return [p for p in tictactoe.all_positions() if sum(c != 0 for c in p) == stones][:num]


def test_pgx_states_give_the_positions():
    """``tictactoe.pgx_states``: pgx's board of each state is the position (its
    code), and X/O to move as the stone counts say."""
    positions = _positions(4, 20) + _positions(5, 20) + [tictactoe.EMPTY]
    state = tictactoe.pgx_states(positions)
    codes = ((np.asarray(state._x.board).reshape(-1, 9) + 1) * POWERS).sum(-1)
    np.testing.assert_array_equal(codes, [tictactoe.code(p) for p in positions])
    assert not np.any(np.asarray(state.terminated))
    with pytest.raises(ValueError, match="positions\\[0\\] is terminal"):
        tictactoe.pgx_states([tictactoe.parse("XXX/OO./...")])


def _pure_search(config: az.SelfPlayConfig):
    game = make_pgx_game("tic_tac_toe")
    fns = selfplay.make_search_fns(config, game.environment, None, game.num_actions)

    def run(keys, state):
        return selfplay.search(fns, None, keys, state, dirichlet_fraction=0.0,
                               temperature=jnp.zeros((keys.shape[0],), jnp.float32))
    return jax.jit(run)


@pytest.mark.parametrize("policy", ["alphazero", pytest.param("gumbel", marks=pytest.mark.slow)])
def test_selfplay_search_with_the_solver_proves_the_minimax_value(policy):
    """A zero-value search with ``solver=True`` and room for the whole game tree
    proves every root with 4 or 5 stones; the proven root value is the exact
    minimax value and the move is minimax-optimal. The same search without it
    carries no proofs (so the flag reaches the engine)."""
    positions = _positions(4, 48) + _positions(5, 48)
    state = tictactoe.pgx_states(positions)
    codes = np.array([tictactoe.code(p) for p in positions])
    config = az.SelfPlayConfig(num_simulations=400, batch_size=1, policy=policy,
                               considered_actions=9, solver=True)
    keys = jax.random.split(jax.random.key(0), len(codes))
    out = _pure_search(config)(keys, state)
    tree = out.search_tree
    proof = np.asarray(tree.proof_plies)[:, 0]
    assert np.all(proof >= 0), f"{np.sum(proof < 0)} of {len(codes)} roots unproven"
    np.testing.assert_array_equal(np.asarray(tree.node_values)[:, 0],
                                  tictactoe.value_table()[codes])
    optimal = tictactoe.optimal_move_table()[codes]
    action = np.asarray(out.action)
    assert np.all(optimal[np.arange(len(codes)), action])

    plain = _pure_search(dataclasses.replace(config, solver=False))(keys, state)
    assert plain.search_tree.proof_plies is None


def test_solver_config_and_command_line():
    """``--solver`` reaches the config; the sampled search refuses it by name."""
    from examples import selfplay as cli
    config, _ = cli.parse(["--solver"])
    assert config.solver
    assert not cli.parse([])[0].solver
    with pytest.raises(ValueError, match=r"policy sampled .* does not take solver"):
        az.SelfPlayConfig(policy="sampled", solver=True)
    # A run saved before the field existed reads back without it.
    saved = az.SelfPlayConfig().to_json()
    del saved["solver"]
    assert az.SelfPlayConfig.from_json(saved) == az.SelfPlayConfig()

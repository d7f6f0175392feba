"""MuZero self-play's ``temperature_moves``: a game's move is sampled for its first
plies, then greedy, while the stored policy target stays the search's full
distribution. Checked against the search outputs themselves: the greedy move is
the most visited action (lowest index on ties) of the stored target, a Gumbel
search without the draw equals the greedy search, the plies before the switch are
those of a run that samples every ply, and the configuration refuses what it
cannot do.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpuct.muzero import selfplay
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.model import MuZeroModel
from jaxpuct.muzero.networks import init_network

TTT = MuZeroConfig(policy="alphazero", batch_size=16, num_simulations=24, hidden=(16,),
                   latent_size=8, temperature_moves=2)


def _ttt_model(config: MuZeroConfig):
    graphdef, params = init_network(config.network, 9, selfplay.OBS_SHAPE,
                                    jax.random.key(0, impl="rbg"))
    return MuZeroModel(graphdef, discount=config.discount, zero_sum=True), params


def _games(config, model, params):
    return jax.tree.map(np.asarray, selfplay.play_games(config, model, params,
                                                        jax.random.key(3)))


@pytest.mark.slow
def test_tic_tac_toe_moves_turn_greedy_after_temperature_moves_and_targets_do_not():
    model, params = _ttt_model(TTT)
    greedy_later = _games(TTT, model, params)
    every_ply = _games(dataclasses.replace(TTT, temperature_moves=-1), model, params)
    written = greedy_later.written
    plies = greedy_later.obs.sum(-1).astype(int)  # stones on the board
    most_visited = greedy_later.policy.argmax(-1)
    late = written & (plies >= 2)
    assert late.sum() >= 16 * 3
    np.testing.assert_array_equal(greedy_later.action[late], most_visited[late])
    # The first two plies are the sampling run's, search for search (same keys),
    # and so is the third ply's search; only its move differs.
    for name in ("obs", "action", "policy", "root_value"):
        np.testing.assert_array_equal(getattr(greedy_later, name)[:, :2],
                                      getattr(every_ply, name)[:, :2])
    np.testing.assert_array_equal(greedy_later.policy[:, 2], every_ply.policy[:, 2])
    # Visit targets, not one-hot ones, after the switch; and the sampling run's
    # moves do leave the most visited action (so the check above can fail).
    assert np.mean((greedy_later.policy[late] > 0).sum(-1) > 1) > 0.5
    sampled = every_ply.written & (every_ply.obs.sum(-1) >= 2)
    assert np.any(every_ply.action[sampled] != every_ply.policy.argmax(-1)[sampled])


@pytest.mark.parametrize("policy", ["gumbel", "sampled"])
def test_a_search_that_does_not_explore_moves_as_the_greedy_one(policy):
    config = dataclasses.replace(TTT, policy=policy, num_samples=3)
    model, params = _ttt_model(config)
    obs = jax.random.bernoulli(jax.random.key(1), 0.2, (4, 18)).astype(jnp.float32)
    legal = jnp.ones((4, 9), jnp.bool_).at[1, :4].set(False)
    explore = jnp.array([True, False, True, False])

    @jax.jit
    def run(key):
        kinds = dict(none=dict(greedy=False), mixed=dict(greedy=False, explore=explore),
                     greedy=dict(greedy=True))
        return {k: selfplay.search_roots(config, model, params, key, obs, legal, **kw)
                for k, kw in kinds.items()}

    outs = jax.tree.map(np.asarray, run(jax.random.key(5)))
    mixed, none = outs["mixed"], outs["none"]
    if policy == "gumbel":
        # No Gumbel draw where the element does not explore: the greedy search's
        # move and improved policy; a draw where it does: the sampling search's.
        for b, explores in enumerate(np.asarray(explore)):
            ref = none if explores else outs["greedy"]
            assert mixed.action[b] == ref.action[b]
            np.testing.assert_allclose(mixed.action_weights[b], ref.action_weights[b],
                                       rtol=1e-6)
    else:
        # The sampled search's target over its own samples is unchanged; the move
        # where it does not explore is the sample of largest weight.
        np.testing.assert_array_equal(mixed.action_weights, none.action_weights)
        np.testing.assert_array_equal(mixed.sampled_actions, none.sampled_actions)
        top = none.sampled_actions[np.arange(4), none.action_weights.argmax(-1)]
        np.testing.assert_array_equal(mixed.action, np.where(explore, none.action, top))
    assert np.all(np.asarray(legal)[np.arange(4), mixed.action])


def test_temperature_moves_is_checked_and_an_old_run_samples_every_ply():
    assert MuZeroConfig().temperature_moves == -1
    old = {k: v for k, v in TTT.to_json().items() if k != "temperature_moves"}
    assert MuZeroConfig.from_json(old).temperature_moves == -1
    assert selfplay.explore_mask(MuZeroConfig(), jnp.arange(3)) is None
    np.testing.assert_array_equal(selfplay.explore_mask(TTT, jnp.arange(4)),
                                  [True, True, False, False])
    with pytest.raises(ValueError, match="temperature_moves must be >= -1, got -2"):
        MuZeroConfig(temperature_moves=-2)
    with pytest.raises(ValueError, match="temperature_moves counts the plies.*'2048'"):
        MuZeroConfig(game="2048", temperature_moves=0)

"""jaxpuct.envs.connect_four against pgx's connect four, move by move.

Random legal games are played through both rules with the same moves, under one
``jax.jit``: observations, legal masks, terminal flags and the mover's rewards agree
at every ply, and so do the position hashes (graph search), wins in every direction
included. A move into a full column or after
the end changes nothing. A rollout search gives the same visits with either rules,
and with pgx's states in the tree and these rules in its rollouts.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import search_cases as sc

import jaxpuct
from jaxpuct.envs import adapter, rollouts
from jaxpuct.envs import connect_four as c4

pytest.importorskip("pgx")
from jaxpuct.envs.pgx_games import make_pgx_game, rollout_rules  # noqa: E402

B = 256
PLIES = c4.ROWS * c4.COLUMNS


@sc.jit
def _play_both(key):
    """``B`` random legal games through both rules: per ply ``[PLIES, B, ...]`` the
    observations, legal masks, terminal flags and rewards of each, the moves, and
    the boards of the lean rules."""
    pgx_env = make_pgx_game("connect_four").environment
    lean = c4.environment()
    pgx_state = jax.vmap(make_pgx_game("connect_four").env.init)(jax.random.split(key, B))
    # pgx draws which player id moves first; the first mover is colour 0 either way.

    def ply(carry, key):
        theirs, ours = carry
        legal = pgx_env.legal_mask(theirs)
        action = jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf))
        new_theirs, new_ours = pgx_env.step(theirs, action), lean.step(ours, action)
        out = dict(obs=(pgx_env.observe(new_theirs), lean.observe(new_ours)),
                   legal=(pgx_env.legal_mask(new_theirs), lean.legal_mask(new_ours)),
                   terminal=(pgx_env.terminal(new_theirs), lean.terminal(new_ours)),
                   reward=(pgx_env.reward(theirs, new_theirs), lean.reward(ours, new_ours)),
                   hash=(pgx_env.state_hash(new_theirs), lean.state_hash(new_ours)),
                   state=(c4.from_pgx(new_theirs), new_ours),
                   live=~pgx_env.terminal(theirs), board=new_ours.board)
        # A finished game stays finished: both sides step it no further.
        done = pgx_env.terminal(theirs)
        keep = lambda old, new: jax.tree.map(  # noqa: E731
            lambda o, n: jnp.where(done.reshape(done.shape + (1,) * (n.ndim - 1)), o, n),
            old, new)
        return (keep(theirs, new_theirs), keep(ours, new_ours)), out

    _, out = jax.lax.scan(ply, (pgx_state, c4.init(B)), jax.random.split(key, PLIES))
    return out


def _win_directions(board: np.ndarray, colour_stone: int) -> set[str]:
    """The directions in which ``board [6, 7]`` has four ``colour_stone`` in a row."""
    found = set()
    for name, (dr, dc) in {"horizontal": (0, 1), "vertical": (1, 0), "diagonal": (1, 1),
                           "anti-diagonal": (1, -1)}.items():
        for r in range(c4.ROWS):
            for c in range(c4.COLUMNS):
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= i < c4.ROWS and 0 <= j < c4.COLUMNS
                       and board[i, j] == colour_stone for i, j in cells):
                    found.add(name)
    return found


def test_random_games_agree_with_pgx_at_every_ply():
    out = jax.tree.map(np.asarray, _play_both(jax.random.PRNGKey(0)))
    live = out["live"]  # [PLIES, B]: the ply was played (its game had not ended)
    for name in ("obs", "legal", "terminal", "reward", "hash"):
        theirs, ours = out[name]
        np.testing.assert_array_equal(ours[live], theirs[live], err_msg=name)
    # A pgx state mapped to these rules' (rollouts from a tree of pgx states) is the
    # state these rules reached.
    for field, theirs, ours in zip(c4.State._fields, *out["state"], strict=True):
        np.testing.assert_array_equal(ours[live], theirs[live], err_msg=field)
    # Every game ends within 42 plies; wins in all four directions and (rarely)
    # full-board draws occur among them, so every branch of the check was taken.
    ended = out["terminal"][1][-1]
    assert ended.all()
    won = (out["reward"][1] * live).sum(0) == 1
    directions = set()
    last = np.argmax(out["terminal"][1], axis=0)  # the ply that ended each game
    for g in np.flatnonzero(won):
        board = out["board"][last[g], g]
        directions |= _win_directions(board, 1) | _win_directions(board, 2)
    assert directions == {"horizontal", "vertical", "diagonal", "anti-diagonal"}
    assert won.sum() > B // 2


@sc.jit
def _full_column_and_finished_game():
    """Game 0 fills column 0 (then plays column 1); in game 1 the first player stacks
    four in column 3 while the second plays column 4. Then one more move each: into
    the full column, and after the end; and moves into columns -1 and 7."""
    state = c4.init(2)
    for moves in zip([0, 0, 0, 0, 0, 0, 1], [3, 4, 3, 4, 3, 4, 3], strict=True):
        state = c4.step(state, jnp.array(moves))
    after = c4.step(state, jnp.array([0, 4]))
    off_board = [c4.step(state, jnp.array([column, column])) for column in (-1, 7)]
    return (state, after, c4.reward(state, after), c4.terminal(state), c4.legal_mask(state),
            off_board)


def test_a_full_column_an_off_board_column_or_a_finished_game_changes_nothing():
    state, after, reward, terminal, legal, off_board = _full_column_and_finished_game()
    np.testing.assert_array_equal(terminal, [False, True])
    np.testing.assert_array_equal(state.winner, [-1, 0])
    for unchanged in (after, *off_board):
        for a, b in zip(jax.tree.leaves(unchanged), jax.tree.leaves(state), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(reward, [0.0, 0.0])
    np.testing.assert_array_equal(legal, [[False] + [True] * 6, [True] * 7])


def test_an_action_of_another_shape_is_refused_at_trace_time():
    with pytest.raises(ValueError, match=r"action must be \[B\] = \[3\].*got shape \[3, 1\]"):
        jax.eval_shape(c4.step, c4.init(3), jnp.zeros((3, 1), jnp.int32))


# Four positions after three plies each (the first wins the second in column 3 soon).
_OPENINGS = np.array([[3, 3, 2], [0, 1, 2], [6, 5, 4], [3, 4, 3]], np.int32)


@sc.jit
def _rollout_search(key):
    """The action weights ``[3, 4, 7]`` of one rollout search of each opening: with
    pgx's rules, with these, and with pgx's in the tree and these in the rollouts
    (the same key each time): the same game, the same random stream, so the same
    trees."""
    apply_fn = lambda params, obs: (jnp.zeros((obs.shape[0], c4.COLUMNS)),  # noqa: E731
                                    jnp.zeros(obs.shape[0]))
    game = make_pgx_game("connect_four")
    lean_rollouts = rollout_rules("connect_four")  # what the arena's rollout agent uses
    weights = []
    for env, state, options in ((game.environment, game.init(jax.random.PRNGKey(0), 4), {}),
                                (c4.environment(), c4.init(4), {}),
                                (game.environment, game.init(jax.random.PRNGKey(0), 4),
                                 lean_rollouts)):
        for column in _OPENINGS.T:
            state = env.step(state, jnp.asarray(column))
        root = adapter.make_root_fn(apply_fn, env)(None, key, state)
        recurrent_fn = rollouts.make_recurrent_fn(apply_fn, env, mix=1.0, max_steps=PLIES,
                                                  **options)
        weights.append(jaxpuct.alphazero_policy(None, key, root, recurrent_fn, 48,
                                                dirichlet_fraction=0.0,
                                                temperature=0.0).action_weights)
    return jnp.stack(weights)


@pytest.mark.slow
def test_a_rollout_search_is_the_same_with_pgx_rules_and_these():
    # A key under which the four openings' searches differ (with the rollouts'
    # uniforms from jaxpuct.prng; key 1 gave two equal ones), so the check is not vacuous.
    theirs, ours, mixed = np.asarray(_rollout_search(jax.random.PRNGKey(3)))
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(mixed, theirs)
    assert len({tuple(row) for row in ours}) == 4  # four different searches


def test_rollout_rules_come_with_their_state_map():
    assert set(rollout_rules("connect_four")) == {"rollout_env", "rollout_state"}
    assert rollout_rules("tic_tac_toe") == {}
    with pytest.raises(ValueError, match="unknown pgx game 'chess'.*connect_four"):
        rollout_rules("chess")
    apply_fn = lambda params, obs: (jnp.zeros((obs.shape[0], 7)), jnp.zeros(obs.shape[0]))  # noqa: E731
    with pytest.raises(ValueError, match="rollout_env and rollout_state go together"):
        rollouts.make_recurrent_fn(apply_fn, c4.environment(), rollout_env=c4.environment())
    with pytest.raises(ValueError, match="rollout_env and rollout_state go together"):
        rollouts.make_recurrent_fn(apply_fn, c4.environment(), rollout_state=c4.from_pgx)

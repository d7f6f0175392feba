"""Tests of jaxpuct.envs.adapter, jaxpuct.envs.hashing and jaxpuct.envs.pgx_games.

The adapter is checked over random playouts against pgx's own state fields and
against rules written out here independently (lines, full boards, stone counts).
"""

from __future__ import annotations

import functools
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import jaxpuct
from jaxpuct.alphazero import networks
from jaxpuct.envs.adapter import Environment, make_recurrent_fn, make_root_fn, mask_logits
from jaxpuct.envs.hashing import zobrist_hash

pytest.importorskip("pgx")

from jaxpuct.envs.pgx_games import PGX_GAMES, make_pgx_game  # noqa: E402

LOW = np.finfo(np.float32).min
NET_VALUE = 0.5  # what the stand-in network says everywhere


def _stand_in_apply(params, obs):
    """A network stand-in: logits from the observation, constant value ``[B]``."""
    batch = obs.shape[0]
    flat = obs.reshape(batch, -1).astype(jnp.float32)
    logits = flat[:, : params] - flat[:, params: 2 * params]
    return logits, jnp.full((batch,), NET_VALUE)


GAMES = {name: make_pgx_game(name) for name in ("tic_tac_toe", "connect_four")}


def _lines(rows: int, cols: int) -> np.ndarray:
    """Every straight run of ``k`` cells, ``k = 3`` on 3x3 else 4: ``[L, k]``."""
    k = 3 if rows == 3 else 4
    lines = []
    for r in range(rows):
        for c in range(cols):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(r + i * dr, c + i * dc) for i in range(k)]
                if all(0 <= rr < rows and 0 <= cc < cols for rr, cc in cells):
                    lines.append([rr * cols + cc for rr, cc in cells])
    return np.array(lines)


SHAPES = {"tic_tac_toe": (3, 3), "connect_four": (6, 7)}


@functools.partial(jax.jit, static_argnames=("name", "batch"))
def _playout(name: str, batch: int, key: jax.Array):
    """Random legal playout of ``batch`` games, one step past the longest game.

    Returns per step ``[T, B, ...]``: the state before, the action, the adapter's
    output and the state after; and the root output of the initial states.
    """
    game = GAMES[name]
    env = game.environment
    params = game.num_actions
    root_fn = make_root_fn(_stand_in_apply, env)
    recurrent_fn = make_recurrent_fn(_stand_in_apply, env)
    init_key, key = jax.random.split(key)
    state = game.init(init_key, batch)
    root = root_fn(params, key, state)

    def body(state, step_key):
        legal = env.legal_mask(state) & ~env.terminal(state)[:, None]
        logits = jnp.where(legal, 0.0, -jnp.inf)
        action = jnp.where(legal.any(-1), jax.random.categorical(step_key, logits), 0)
        out, new_state = recurrent_fn(params, step_key, action, state)
        return new_state, (state, action, out, new_state)

    num_steps = int(np.prod(SHAPES[name])) + 1
    _, trajectory = jax.lax.scan(body, state, jax.random.split(key, num_steps))
    return root, trajectory


def _check_playout(name: str, batch: int, seed: int):
    rows, cols = SHAPES[name]
    lines = _lines(rows, cols)
    root, (prev, action, out, new) = jax.device_get(
        _playout(name, batch, jax.random.PRNGKey(seed)))
    num_actions = GAMES[name].num_actions

    # Root: the initial position, nothing played.
    assert root.prior_logits.shape == (batch, num_actions)
    np.testing.assert_array_equal(root.legal_action_mask, True)
    np.testing.assert_array_equal(root.value, NET_VALUE)
    assert root.state_hash.shape == (batch, 2) and root.state_hash.dtype == np.uint32
    assert len(set(map(tuple, root.state_hash))) == 1  # same position everywhere

    prev_terminal = prev.terminated
    board = new._x.board  # [T, B, cells], -1 empty, 0 first colour, 1 second
    stones = (board >= 0).sum(-1)
    mover_colour = (stones - 1) % 2  # colour who just moved (first colour starts)
    has_line = (board[..., lines] == mover_colour[..., None, None]).all(-1).any(-1)
    full = stones == rows * cols
    live = ~prev_terminal  # steps taken from a non-terminal state

    # Terminal flags: a line for the mover or a full board (independent rules),
    # and pgx agrees.
    np.testing.assert_array_equal(out.terminal, new.terminated)
    np.testing.assert_array_equal(out.terminal[live], (has_line | full)[live])
    np.testing.assert_array_equal(out.terminal[~live], True)

    # Reward to the mover: +1 for completing a line, 0 otherwise (a move never
    # loses in these games); from pgx, the mover's entry read before the step.
    expected = np.where(live & has_line, 1.0, 0.0)
    np.testing.assert_array_equal(out.reward, expected)
    mover_id = prev.current_player
    np.testing.assert_array_equal(
        out.reward, np.take_along_axis(new.rewards, mover_id[..., None], -1)[..., 0])
    # The player id to move changes with every move.
    np.testing.assert_array_equal(new.current_player[live], 1 - prev.current_player[live])

    # Legal mask: empty cells / non-full columns while the game goes on, none after.
    if name == "tic_tac_toe":
        rule_legal = board < 0
    else:
        rule_legal = (board.reshape(*board.shape[:2], rows, cols) < 0).any(-2)
    expected_legal = rule_legal & ~out.terminal[..., None]
    np.testing.assert_array_equal(out.legal_action_mask, expected_legal)
    np.testing.assert_array_equal(out.legal_action_mask,
                                  new.legal_action_mask & ~new.terminated[..., None])
    # Illegal logits are masked; legal ones are finite.
    assert np.all(out.prior_logits[~expected_legal] == LOW)
    assert np.all(out.prior_logits[expected_legal] > LOW)

    # Value: the network's, except 0 at terminal states; discount -1, 0 at terminal.
    np.testing.assert_array_equal(out.value, np.where(out.terminal, 0.0, NET_VALUE))
    np.testing.assert_array_equal(out.discount, np.where(out.terminal, 0.0, -1.0))
    assert out.reward.dtype == out.value.dtype == out.discount.dtype == np.float32

    # Observation from the view of the player to move: plane 0 holds the stones
    # of the colour to move, plane 1 the opponent's.
    to_move = stones % 2
    obs = new.observation.reshape(*board.shape, 2)
    np.testing.assert_array_equal(obs[..., 0], board == to_move[..., None])
    np.testing.assert_array_equal(obs[..., 1], board == (1 - to_move)[..., None])

    # Every game ended within the scan, and some were won.
    assert new.terminated[-1].all()
    assert out.reward.sum() > 0
    return out, new


@pytest.mark.parametrize("name,batch", [("tic_tac_toe", 32), ("connect_four", 8)])
def test_adapter_follows_pgx_rules_on_random_playouts(name, batch):
    out, new = _check_playout(name, batch, seed=0)
    # Hashes on the sample: distinct positions (board + colour to move) get
    # distinct hashes, and equal positions (other games, move orders) equal ones.
    board = new._x.board.reshape(-1, new._x.board.shape[-1])
    colour = new._x.color.reshape(-1)
    hashes = out.state_hash.reshape(-1, 2)
    by_position = {}
    for b, c, h in zip(board, colour, hashes, strict=True):
        by_position.setdefault((b.tobytes(), int(c)), set()).add(tuple(h))
    assert all(len(hs) == 1 for hs in by_position.values())
    all_hashes = [next(iter(hs)) for hs in by_position.values()]
    assert len(set(all_hashes)) == len(all_hashes) > 50


@functools.partial(jax.jit, static_argnames=("name",))
def _play(name: str, actions: jax.Array) -> jax.Array:
    """Plays ``actions [B, T]`` from the initial state; returns hashes ``[B, 2]``."""
    game = GAMES[name] if name in GAMES else make_pgx_game(name)
    env = game.environment
    state = game.init(jax.random.PRNGKey(3), actions.shape[0])
    state = jax.lax.fori_loop(0, actions.shape[1],
                              lambda t, s: env.step(s, actions[:, t]), state)
    return env.state_hash(state), state.terminated


@pytest.mark.parametrize("name,orders", [
    # Each row: two move orders reaching one position, then a different position.
    ("tic_tac_toe", [[0, 4, 1], [1, 4, 0], [1, 4, 2]]),
    ("connect_four", [[0, 1, 2, 3], [2, 3, 0, 1], [0, 1, 3, 2]]),
    ("othello", [[19, 18, 26, 20], [26, 18, 19, 20], [19, 18, 26, 34]]),
    ("go_9x9", [[0, 80, 2], [2, 80, 0], [2, 80, 3]]),
])
def test_hash_of_transpositions(name, orders):
    hashes, terminated = _play(name, jnp.array(orders, jnp.int32))
    hashes = np.asarray(hashes)
    assert not np.asarray(terminated).any()
    assert tuple(hashes[0]) == tuple(hashes[1])
    assert tuple(hashes[0]) != tuple(hashes[2])


def test_zobrist_hash_includes_player_to_move_and_is_fixed():
    board = jnp.array([[0, 1, 2, 0], [0, 1, 2, 0], [0, 2, 1, 0]], jnp.int32)
    h = np.asarray(zobrist_hash(board, jnp.array([0, 1, 0]), num_values=3))
    assert h.dtype == np.uint32 and h.shape == (3, 2)
    assert len({tuple(row) for row in h}) == 3
    again = np.asarray(jax.jit(functools.partial(zobrist_hash, num_values=3))(
        board, jnp.array([0, 1, 0])))
    np.testing.assert_array_equal(h, again)
    other_seed = np.asarray(zobrist_hash(board, jnp.array([0, 1, 0]), num_values=3, seed=1))
    assert not np.array_equal(h, other_seed)


def test_unknown_game_name_lists_accepted_names():
    with pytest.raises(ValueError) as info:
        make_pgx_game("chess_960")
    for name in PGX_GAMES:
        assert name in str(info.value)


def test_mask_logits_keeps_softmax_and_handles_no_legal_action():
    logits = jnp.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    legal = jnp.array([[True, False, True], [False, False, False]])
    masked = mask_logits(logits, legal)
    probs = jax.nn.softmax(masked)
    np.testing.assert_allclose(probs[0], jax.nn.softmax(jnp.array([1.0, -jnp.inf, 3.0])),
                               rtol=1e-6)
    np.testing.assert_allclose(probs[1], 1.0 / 3.0, rtol=1e-6)


def test_generic_adapter_single_agent_discount():
    """A counter environment: action adds to a total; terminal at 3 or more."""
    env = Environment(
        step=lambda s, a: s + a,
        observe=lambda s: s[:, None].astype(jnp.float32),
        legal_mask=lambda s: jnp.ones((s.shape[0], 2), bool),
        terminal=lambda s: s >= 3,
        reward=lambda prev, s: (s - prev).astype(jnp.float32),
    )

    def apply(params, obs):
        return jnp.zeros((obs.shape[0], 2)), jnp.full((obs.shape[0],), params)

    recurrent_fn = make_recurrent_fn(apply, env, discount=0.9)
    out, new = recurrent_fn(0.25, None, jnp.array([1, 0]), jnp.array([2, 0]))
    np.testing.assert_array_equal(new, [3, 0])
    np.testing.assert_allclose(out.reward, [1.0, 0.0])
    np.testing.assert_allclose(out.discount, [0.0, 0.9])
    np.testing.assert_allclose(out.value, [0.0, 0.25])
    np.testing.assert_array_equal(out.terminal, [True, False])
    np.testing.assert_array_equal(out.legal_action_mask, [[False, False], [True, True]])
    assert out.state_hash is None
    root = make_root_fn(apply, env)(0.25, None, jnp.array([3, 1]))
    np.testing.assert_allclose(root.value, [0.0, 0.25])
    np.testing.assert_array_equal(root.legal_action_mask, [[False, False], [True, True]])


@pytest.mark.parametrize("name,num_actions,obs_shape", [
    ("tic_tac_toe", 9, (3, 3, 2)), ("connect_four", 7, (6, 7, 2)),
    ("othello", 65, (8, 8, 2)), ("go_9x9", 82, (9, 9, 17)),
])
def test_game_sizes(name, num_actions, obs_shape):
    game = make_pgx_game(name)
    assert (game.name, game.num_actions, game.observation_shape) == (
        name, num_actions, obs_shape)


def _zeroed_mlp():
    """``(graphdef, params)`` of a tic-tac-toe MLP with every variable 0 (logits 0,
    value 0: a uniform network), built abstractly, with no computation."""
    abstract = nnx.eval_shape(
        lambda: networks.MLPPolicyValue(9, (3, 3, 2), hidden=(8,), rngs=nnx.Rngs(0)))
    graphdef, state = networks.split(abstract)
    return graphdef, jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), state)


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _search_tic_tac_toe(graphdef, params):
    """Searches three positions: ``[0, 3, 1, 4]`` (X to move wins at 2),
    ``[0, 4, 8, 2]`` (X to move must block at 6) and ``[0, 3, 1, 4, 2]`` (X has
    won: nothing to search). Returns ``(action [3], action_weights [3, 9])``."""
    game = GAMES["tic_tac_toe"]
    env = game.environment
    apply_fn = functools.partial(networks.apply, graphdef)
    root_fn = make_root_fn(apply_fn, env)
    recurrent_fn = make_recurrent_fn(apply_fn, env)
    # -1: no move (pgx steps with -1 on the two live games would be illegal).
    orders = jnp.array([[0, 3, 1, 4, -1], [0, 4, 8, 2, -1], [0, 3, 1, 4, 2]])
    state = game.init(jax.random.PRNGKey(1), 3)

    def play(t, s):
        moved = env.step(s, jnp.maximum(orders[:, t], 0))
        return jax.tree_util.tree_map(
            lambda new, old: jnp.where(
                (orders[:, t] >= 0).reshape((-1,) + (1,) * (new.ndim - 1)), new, old),
            moved, s)

    state = jax.lax.fori_loop(0, 5, play, state)
    key = jax.random.PRNGKey(0)
    root = root_fn(params, key, state)
    out = jaxpuct.alphazero_policy(params, key, root, recurrent_fn, 64,
                                   dirichlet_fraction=0.0, temperature=0.0)
    return out.action, out.action_weights


def test_search_end_to_end_finds_win_and_block():
    """Network + adapter + search in one jit: with a uniform network the search
    alone, through the rewards and the -1 discount, finds the winning move and
    the forced block; a finished game in the batch gets no move. (The same
    adapter also runs unchanged under ``mctx.muzero_policy``.)"""
    graphdef, params = _zeroed_mlp()
    action, weights = jax.device_get(_search_tic_tac_toe(graphdef, params))
    np.testing.assert_array_equal(weights[:2].argmax(-1), [2, 6])
    np.testing.assert_array_equal(action, [2, 6, -1])
    np.testing.assert_array_equal(weights[2], 0.0)


def test_a_game_first_made_inside_jit_leaks_no_tracer():
    """pgx builds arrays when a game's module is imported; made for the first time
    inside a jitted function, the game must still work outside it afterwards (a
    fresh process, so that othello's module is not imported yet)."""
    script = (
        "import jax\n"
        "from jaxpuct.envs.pgx_games import make_pgx_game\n"
        "inside = jax.jit(lambda k: make_pgx_game('othello').init(k, 2).current_player)\n"
        "inside(jax.random.PRNGKey(0))\n"
        "game = make_pgx_game('othello')\n"
        "state = jax.jit(game.init, static_argnums=1)(jax.random.PRNGKey(1), 2)\n"
        "print(int(state.legal_action_mask.sum()))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "8"  # two boards, four opening moves each


@pytest.mark.parametrize("name", ["tic_tac_toe", "connect_four"])
def test_the_one_row_step_equals_the_vmapped_step(name):
    # One row takes pgx's unbatched step (its conditionals kept); it must give the
    # vmapped step's states, leaf for leaf, through legal moves, illegal moves (pgx
    # ends the game with a penalty) and steps of a finished game (no change).
    from jaxpuct.envs.pgx_games import batched_step

    game = make_pgx_game(name)
    one_row, vmapped = batched_step(game.env.step), jax.vmap(game.env.step)

    @jax.jit
    def play(key):
        keys = jax.random.split(key, 3)
        state = game.init(keys[0], 1)
        legal_first = jax.random.bernoulli(keys[1], 0.9, (60,))
        noise = jax.random.uniform(keys[2], (60, game.num_actions))

        def move(carry, t):
            a, b = carry
            scores = noise[t] + jnp.where(legal_first[t], 2.0 * a.legal_action_mask[0], 0.0)
            action = jnp.argmax(scores)[None].astype(jnp.int32)
            a, b = one_row(a, action), vmapped(b, action)
            return (a, b), (a, b)

        _, (xs, ys) = jax.lax.scan(move, (state, state), jnp.arange(60))
        return xs, ys

    for seed in range(4):
        xs, ys = play(jax.random.PRNGKey(seed))
        for x, y in zip(jax.tree.leaves(xs), jax.tree.leaves(ys), strict=True):
            np.testing.assert_array_equal(x, y)
        assert bool(xs.terminated[-1].all())

"""Batch self-play: one training iteration end to end, checkpoints, sharding."""

from __future__ import annotations

import dataclasses
import functools
import os
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import run_on_host_devices

from jaxpuct.sampled import SampledPolicyOutput

pytest.importorskip("pgx")
pytest.importorskip("orbax.checkpoint")

import jaxpuct.alphazero as az  # noqa: E402

TINY = az.SelfPlayConfig(batch_size=8, num_simulations=4, buffer_size=256,
                               train_batch_size=16, hidden=(16,), temperature_moves=2)

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


@pytest.fixture(scope="module")
def trainer():
    return az.Trainer(TINY)


def _leaves_equal(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _copy(tree):
    return jax.tree.map(lambda x: np.array(x), tree)


def _has_winning_move(mine: np.ndarray, theirs: np.ndarray) -> bool:
    for line in LINES:
        cells = list(line)
        if mine[cells].sum() == 2 and theirs[cells].sum() == 0:
            return True
    return False


def test_one_iteration_end_to_end(trainer):
    ts = trainer.init()
    params0 = _copy(ts.params)
    ts, metrics = trainer.iterate(ts, selfplay_steps=20, train_steps=2)
    assert np.isfinite(metrics["loss"]) and metrics["games_finished"] >= TINY.batch_size
    changed = [not np.array_equal(a, np.asarray(b))
               for a, b in zip(jax.tree.leaves(params0), jax.tree.leaves(ts.params),
                               strict=True)]
    assert any(changed)
    assert int(ts.iteration) == 1

    buf = jax.device_get(ts.buffer)
    n = int(buf.num_added)
    assert 0 < n < TINY.buffer_size  # no wrap: rows 0..n-1 in write order
    # Rows 0..n-1 were written (their policies sum to 1, below), no row after them.
    assert int(buf.next_row) == n and not buf.policy[n:].any()
    obs = buf.obs[:n].reshape(n, 9, 2).astype(bool)  # plane 0: mover's marks
    empty = ~obs.any(-1)
    policy, outcome = buf.policy[:n], buf.outcome[:n]
    np.testing.assert_allclose(policy.sum(-1), 1.0, atol=1e-5)
    assert np.all(policy[~empty] == 0)  # mass only on legal moves
    assert set(np.unique(outcome)) <= {-1.0, 0.0, 1.0}
    # Games are written contiguously, each starting at the empty board.
    starts = list(np.nonzero(empty.all(-1))[0]) + [n]
    assert starts[0] == 0
    for s, e in zip(starts[:-1], starts[1:], strict=True):
        z = outcome[s:e]
        assert np.all(z[1:] == -z[:-1])  # the player to move alternates
        last_mine, last_theirs = obs[e - 1, :, 0], obs[e - 1, :, 1]
        if z[-1] == 0:
            assert e - s == 9  # a draw fills the board
        else:
            # The last mover won: it had a winning move; nobody loses by moving.
            assert z[-1] == 1 and _has_winning_move(last_mine, last_theirs)


def test_checkpoint_resume_is_exact(trainer, tmp_path):
    ts = trainer.init()
    ts, _ = trainer.iterate(ts, 5, 1)
    az.save_checkpoint(str(tmp_path), ts, TINY)
    saved = _copy(ts)
    restored = az.restore_checkpoint(str(tmp_path), trainer.init(), TINY)
    _leaves_equal(saved, restored)
    assert int(restored.iteration) == 1
    uninterrupted, m1 = trainer.iterate(ts, 5, 1)
    resumed, m2 = trainer.iterate(restored, 5, 1)
    _leaves_equal(uninterrupted, resumed)
    assert m1 == m2


def test_bad_checkpoints_give_clear_errors(trainer, tmp_path):
    with pytest.raises(az.CheckpointError, match="no checkpoint"):
        az.restore_checkpoint(str(tmp_path / "nothing"), trainer.init(), TINY)
    ts = trainer.init()
    az.save_checkpoint(str(tmp_path), ts, TINY)
    other = az.SelfPlayConfig(**{**TINY.to_json(), "hidden": (32,), "batch_size": 16})
    with pytest.raises(az.CheckpointError, match=r"different configuration.*--batch-size"):
        az.restore_checkpoint(str(tmp_path), trainer.init(), other)
    # Corrupt every file of the checkpoint.
    for dirpath, _, files in os.walk(tmp_path / "checkpoints"):
        for name in files:
            with open(os.path.join(dirpath, name), "wb") as f:
                f.write(b"garbage")
    with pytest.raises(az.CheckpointError) as info:
        az.restore_checkpoint(str(tmp_path), trainer.init(), TINY)
    assert str(tmp_path) in str(info.value)


def test_cli_rejects_bad_arguments(capsys):
    from examples import selfplay as cli
    with pytest.raises(SystemExit):
        cli.main(["--game", "chess"])
    err = capsys.readouterr().err
    assert "tic_tac_toe" in err and "connect_four" in err
    with pytest.raises(SystemExit):
        cli.main(["--batch-size", "0"])
    assert "positive integer" in capsys.readouterr().err


SHARDED_SCRIPT = textwrap.dedent("""
    import jax, numpy as np
    import jaxpuct.alphazero as az
    assert len(jax.devices()) == 4, jax.devices()
    config = az.SelfPlayConfig(batch_size=8, num_simulations=6, buffer_size=128,
                                     train_batch_size=16, hidden=(16,))
    results = []
    for devices in (jax.devices(), jax.devices()[:1]):
        tr = az.Trainer(config, devices=devices)
        ts = tr.init()
        assert len(ts.games.length.sharding.device_set) == len(devices)
        games, buffer, outs = ts.games, ts.buffer, []
        for i in range(6):
            games, buffer, m = tr.selfplay_step(ts.params, games, buffer,
                                                jax.random.PRNGKey(i))
            outs.append(m)
        action = tr.act(ts.params, jax.random.split(jax.random.PRNGKey(9), 8), games.state)
        params, _, loss = tr.train_step(ts.params, ts.opt_state, buffer,
                                        jax.random.PRNGKey(7))
        results.append(jax.device_get((games, buffer, outs, action, params, loss)))
    (g1, b1, o1, a1, p1, l1), (g2, b2, o2, a2, p2, l2) = results
    for x, y in zip(jax.tree.leaves((g1, b1, o1, a1)), jax.tree.leaves((g2, b2, o2, a2))):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(jax.tree.leaves((p1, l1)), jax.tree.leaves((p2, l2))):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
    # The train step is data parallel: each device's network sees 16 / 4 rows,
    # and the gradients meet in an all-reduce (replicated rows ran all 16 on
    # every device, with no collective).
    import dataclasses, re
    tr = az.Trainer(config)
    ts = tr.init()
    text = tr.train_step.lower(ts.params, ts.opt_state, ts.buffer,
                               jax.random.PRNGKey(7)).compile().as_text()
    assert "all-reduce(" in text
    # The hidden layer's [rows, 16] activations (the weights' gradients are
    # [9, 16] and [1, 16]): 4 rows, never the whole minibatch's 16.
    rows = {int(m) for m in re.findall(r"= f32\\[(\\d+),16\\]\\{[^}]*\\} dot\\(", text)}
    assert 4 in rows and 16 not in rows, rows
    with np.testing.assert_raises_regex(ValueError, "train_batch_size \\(6\\) must be"):
        az.Trainer(dataclasses.replace(config, train_batch_size=6))
    print("SHARDED_OK")
""")


@pytest.mark.slow
def test_sharded_search_equals_unsharded():
    run_on_host_devices(SHARDED_SCRIPT, 4, "SHARDED_OK", timeout=300)


def test_selfplay_with_tree_reuse_and_graph_search():
    config = az.SelfPlayConfig(batch_size=8, num_simulations=6, buffer_size=256,
                                     train_batch_size=16, hidden=(16,), temperature_moves=2,
                                     reuse_tree=True, graph_search=True)
    assert config.capacity == 13
    trainer = az.Trainer(config)
    ts = trainer.init()
    games, buffer = ts.games, ts.buffer
    assert not np.any(games.tree_valid)
    inherited = []
    for step in range(6):
        games, buffer, metrics = trainer.selfplay_step(ts.params, games, buffer,
                                                       jax.random.PRNGKey(step))
        inherited.append(int(metrics["inherited_visits"]))
        valid = np.asarray(games.tree_valid)
        # A reused tree is rooted at the game's current position: same board.
        boards = np.asarray(games.tree.embeddings._x.board)[:, 0]
        np.testing.assert_array_equal(boards[valid], np.asarray(games.state._x.board)[valid])
        # Its root keeps the visits the previous search gave that move.
        assert np.all(np.asarray(games.tree.node_visits)[valid, 0] >= 1)
        # Finished games never carry a tree into the next one.
        finished = np.asarray(games.length) == 0
        assert not np.any(valid & finished)
    # After the first move, searches start from inherited visits.
    assert inherited[0] == 0 and sum(inherited[1:]) > 0


def _one_iteration_targets(config):
    """One iteration of ``config``: ``(trainer, state, policy targets [n, 9], legal
    [n, 9])`` of the buffer's rows, checked to be distributions over legal moves."""
    trainer = az.Trainer(config)
    ts, metrics = trainer.iterate(trainer.init(), selfplay_steps=12, train_steps=2)
    assert np.isfinite(metrics["loss"])
    buf = jax.device_get(ts.buffer)
    n = int(buf.num_added)
    legal = ~buf.obs[:n].reshape(n, 9, 2).astype(bool).any(-1)
    policy = buf.policy[:n]
    np.testing.assert_allclose(policy.sum(-1), 1.0, atol=1e-5)
    assert np.all(policy[~legal] == 0)
    return trainer, ts, policy, legal


def test_gumbel_selfplay_trains_on_the_improved_policy():
    """policy=gumbel: the buffer's targets are Gumbel's improved policy (full support
    on the legal moves, not visit counts of 4 simulations), training stays finite,
    and evaluation games are deterministic (no Gumbel noise)."""
    config = dataclasses.replace(TINY, policy="gumbel", considered_actions=4)
    gumbel_trainer, ts, policy, legal = _one_iteration_targets(config)
    # softmax(logits + sigma(q)) is positive on every legal move; 4 simulations
    # could visit at most 4 of the 9 first moves.
    assert np.all(policy[legal] > 0)
    keys = jax.random.split(jax.random.PRNGKey(3), config.batch_size)
    state = ts.games.state
    first = np.asarray(gumbel_trainer.act(ts.params, keys, state))
    again = np.asarray(gumbel_trainer.act(ts.params, jax.random.split(
        jax.random.PRNGKey(4), config.batch_size), state))
    np.testing.assert_array_equal(first, again)


def test_sampled_selfplay_stores_the_weights_over_its_samples():
    """policy=sampled: the buffer's targets are the visit weights over at most
    num_samples legal moves (the samples scattered to [A]), training stays finite;
    dense_weights puts each weight at its id and drops the unfilled slots."""
    _, _, policy, legal = _one_iteration_targets(
        dataclasses.replace(TINY, policy="sampled", num_samples=3))
    assert np.all((policy > 0).sum(-1) <= 3)
    assert np.any((policy > 0).sum(-1) > 1)  # weights, not only the move played
    out = SampledPolicyOutput(
        action=jnp.zeros(2, jnp.int32), action_slot=jnp.zeros(2, jnp.int32),
        action_weights=jnp.array([[0.5, 0.3, 0.2], [0.75, 0.25, 0.0]]),
        sampled_actions=jnp.array([[4, 0, 7], [2, 5, 0]], jnp.int32), search_tree=None)
    want = np.zeros((2, 9))
    want[0, [4, 0, 7]] = [0.5, 0.3, 0.2]
    want[1, [2, 5]] = [0.75, 0.25]
    np.testing.assert_allclose(az.selfplay.dense_weights(out, 9), want, atol=1e-7)
    with pytest.raises(ValueError, match="policy sampled .* does not take reuse_tree"):
        dataclasses.replace(TINY, policy="sampled", reuse_tree=True)


@pytest.mark.slow
def test_selfplay_with_the_solver_reuse_and_graph_search():
    """solver=True composes with tree reuse and graph search in the training loop:
    the buffer's targets stay distributions over the legal moves, the loss finite,
    and the searches carry proofs (the exact minimax checks are in
    tests/test_selfplay_solver.py)."""
    config = dataclasses.replace(TINY, num_simulations=6, solver=True, reuse_tree=True,
                                 graph_search=True)
    trainer, ts, _, _ = _one_iteration_targets(config)
    assert ts.games.tree.proof_plies is not None


@pytest.mark.slow
def test_early_stop_saves_simulations_and_leaves_games_and_targets_unchanged():
    """early_stop: past temperature_moves the move and its one-hot target are the
    most visited action, which early stopping keeps, so self-play writes the same
    games and buffer rows, bit for bit, with simulations saved."""
    config = dataclasses.replace(TINY, num_simulations=16)
    runs = []
    for early_stop in (False, True):
        trainer = az.Trainer(dataclasses.replace(config, early_stop=early_stop))
        ts = trainer.init()
        games, buffer, saved = ts.games, ts.buffer, 0
        for step in range(7):
            games, buffer, metrics = trainer.selfplay_step(ts.params, games, buffer,
                                                           jax.random.PRNGKey(step))
            saved += int(metrics["simulations_saved"])
        runs.append((_copy(games), _copy(buffer), saved))
    (games, buffer, saved), (games_es, buffer_es, saved_es) = runs
    _leaves_equal(games, games_es)
    _leaves_equal(buffer, buffer_es)
    assert int(buffer.num_added) > 0
    assert saved == 0 and saved_es > 0
    with pytest.raises(ValueError, match="early_stop .* needs policy alphazero or sampled"):
        dataclasses.replace(TINY, policy="gumbel", early_stop=True)


@pytest.mark.slow
def test_visit_targets_are_the_visit_distribution_at_every_ply():
    """policy_target=visits: the same search and move as the played target, whose
    weights are the visit distribution at temperature 1 and the most visited action
    alone at temperature 0; the visits target is N / sum N (recomputed in NumPy
    from the tree) at both. Self-play then writes the same games bit for bit, with
    targets past temperature_moves that are not one-hot."""
    config = dataclasses.replace(TINY, num_simulations=8)
    outs = {}
    temperature = jnp.array([1.0, 0.0] * (config.batch_size // 2))
    keys = jax.random.split(jax.random.PRNGKey(5), config.batch_size)
    runs = {}
    for target in ("played", "visits"):
        trainer = az.Trainer(dataclasses.replace(config, policy_target=target))
        ts = trainer.init()
        search = jax.jit(lambda p, k, s, t, fns=trainer.fns: az.selfplay.search(
            fns, p, k, s, dirichlet_fraction=0.25, temperature=t))
        outs[target] = jax.device_get(search(ts.params, keys, ts.games.state, temperature))
        games, buffer = ts.games, ts.buffer
        for step in range(8):
            games, buffer, _ = trainer.selfplay_step(ts.params, games, buffer,
                                                     jax.random.PRNGKey(step))
        runs[target] = (_copy(games), _copy(buffer))
    played, visits = outs["played"], outs["visits"]
    np.testing.assert_array_equal(played.action, visits.action)
    counts = np.asarray(visits.search_tree.edge_visits[:, 0], np.float64)
    want = counts / counts.sum(-1, keepdims=True)
    np.testing.assert_allclose(visits.action_weights, want, atol=1e-6)
    greedy = np.eye(counts.shape[1])[np.argmax(counts, -1)]
    np.testing.assert_allclose(played.action_weights[0::2], want[0::2], atol=1e-6)
    np.testing.assert_array_equal(played.action_weights[1::2], greedy[1::2])
    assert np.any((want[1::2] > 0).sum(-1) > 1)  # not one-hot where the move is greedy

    (games, buffer), (games_v, buffer_v) = runs["played"], runs["visits"]
    _leaves_equal(games.state, games_v.state)
    np.testing.assert_array_equal(buffer.obs, buffer_v.obs)
    n = int(buffer.num_added)
    assert n > 0 and int(buffer_v.num_added) == n
    late = buffer.obs[:n].reshape(n, -1).sum(-1) >= config.temperature_moves
    assert np.all(buffer.policy[:n][late].max(-1) == 1.0)
    assert np.any(buffer_v.policy[:n][late].max(-1) < 1.0)
    np.testing.assert_allclose(buffer_v.policy[:n].sum(-1), 1.0, atol=1e-5)
    # A sampled search: the visit distribution over its root's slots, scattered to
    # the actions they hold.
    trainer = az.Trainer(dataclasses.replace(config, policy="sampled", num_samples=4,
                                             policy_target="visits"))
    ts = trainer.init()
    out = jax.device_get(jax.jit(lambda p, k, s, t: az.selfplay.search(
        trainer.fns, p, k, s, dirichlet_fraction=0.25, temperature=t))(
        ts.params, keys, ts.games.state, temperature))
    slot_counts = np.asarray(out.search_tree.edge_visits[:, 0], np.float64)
    held = np.asarray(out.search_tree.embeddings.actions[:, 0])
    want = np.zeros_like(np.asarray(out.action_weights), np.float64)
    for row in range(config.batch_size):
        np.add.at(want[row], held[row], slot_counts[row] / slot_counts[row].sum())
    np.testing.assert_allclose(out.action_weights, want, atol=1e-6)
    assert np.any((want[1::2] > 0).sum(-1) > 1)
    with pytest.raises(ValueError, match="policy_target .* visits needs policy alphazero"):
        dataclasses.replace(TINY, policy="gumbel", policy_target="visits")
    with pytest.raises(ValueError, match="policy_target .* visits excludes early_stop"):
        dataclasses.replace(TINY, policy_target="visits", early_stop=True)


@pytest.mark.slow
def test_search_symmetry_reaches_the_self_play_search(trainer):
    """``SelfPlayConfig.search_symmetry``. ``average``: the self-play search is
    equivariant, positions and their quarter-turned images giving turned visit counts
    (the plain network's search is not); ``random``: each root is evaluated under one
    of the 8 symmetries, drawn per root, and the whole search runs with it; a bad
    name is refused by name."""
    from jaxpuct.alphazero import selfplay
    from jaxpuct.envs.pgx_games import symmetries
    from jaxpuct.testing import tictactoe

    table = symmetries("tic_tac_toe")
    cells, actions = np.asarray(table.cells), np.asarray(table.actions)
    # Positions that no symmetry but the identity leaves alone, so the check is not
    # about ties; 1 is a quarter turn.
    positions = [p for p in tictactoe.all_positions()
                 if sum(c != 0 for c in p) == 3
                 and all(tuple(np.asarray(p)[cells[k]]) != p for k in range(1, 8))][:8]
    turned = [tuple(int(c) for c in np.asarray(p)[cells[1]]) for p in positions]
    state, turned_state = tictactoe.pgx_states(positions), tictactoe.pgx_states(turned)
    params = trainer.init().params
    keys = jax.random.split(jax.random.key(3), 8)

    def search_fns(mode):
        config = dataclasses.replace(TINY, num_simulations=24, search_symmetry=mode)
        return selfplay.make_search_fns(config, trainer.env, trainer.apply_fn, 9)

    @functools.partial(jax.jit, static_argnums=0)
    def visits(mode, state):
        out = selfplay.search(search_fns(mode), params, keys, state, dirichlet_fraction=0.0,
                              temperature=jnp.zeros((8,)))
        return out.search_tree.summary().visit_counts

    # The turned image's visits at a, turned by the table: v'[a] = v[actions[1, a]].
    np.testing.assert_array_equal(np.asarray(visits("average", turned_state)),
                                  np.asarray(visits("average", state))[:, actions[1]])
    # Not so for the plain network's priors, whose search that check would fail.
    plain = jax.jit(search_fns("none").root_fn)
    prior = np.asarray(plain(params, keys[0], state).prior_logits)
    turned_prior = np.asarray(plain(params, keys[0], turned_state).prior_logits)
    legal = np.isfinite(turned_prior) & (turned_prior > -1e30)
    assert np.abs(np.where(legal, turned_prior - prior[:, actions[1]], 0)).max() > 1e-3

    random_fns = search_fns("random")

    @jax.jit
    def root_values(seed_keys):
        """The root values of four keys ``[4, B]``, and the network's value of each
        position under each symmetry ``[K, B]``."""
        drawn = jax.vmap(lambda key: random_fns.root_fn(params, key, state).value)(seed_keys)
        every = jnp.stack([trainer.apply_fn(params, table.transform_obs(
            state.observation, jnp.full((8,), k)))[1] for k in range(8)])
        return drawn, every

    drawn, every = map(np.asarray, root_values(jax.random.split(jax.random.key(5), 4)))
    k = np.abs(drawn[:, None, :] - every[None]).argmin(axis=1)       # [4, B]
    np.testing.assert_allclose(drawn, every[k, np.arange(8)], atol=1e-6)
    assert len(set(k.ravel().tolist())) >= 4  # drawn per root, not one fixed symmetry
    counts = np.asarray(visits("random", state))
    assert counts.sum(axis=1).tolist() == [24] * 8
    with pytest.raises(ValueError, match="search_symmetry"):
        dataclasses.replace(TINY, search_symmetry="mirror")


@pytest.mark.parametrize("policy, mode", [("gumbel", "average"), ("sampled", "random")])
def test_search_symmetry_with_the_other_policies(trainer, policy, mode):
    """``search_symmetry`` changes the search's two functions, which every policy of the
    loop takes as they are: the Gumbel and the sampled self-play searches run with it
    (one mode each; both modes are checked with PUCT above) and play legal moves with
    targets that are distributions over the legal moves."""
    from jaxpuct.alphazero import selfplay
    from jaxpuct.testing import tictactoe

    positions = [p for p in tictactoe.all_positions() if sum(c != 0 for c in p) == 2][:8]
    state = tictactoe.pgx_states(positions)
    config = dataclasses.replace(TINY, policy=policy, num_simulations=8, search_symmetry=mode)
    fns = selfplay.make_search_fns(config, trainer.env, trainer.apply_fn, 9)
    out = jax.jit(lambda params, keys, state: selfplay.search(
        fns, params, keys, state, dirichlet_fraction=0.25,
        temperature=jnp.ones((8,))))(trainer.init().params,
                                     jax.random.split(jax.random.key(0), 8), state)
    legal = np.asarray(state.legal_action_mask)
    action, weights = np.asarray(out.action), np.asarray(out.action_weights)
    assert legal[np.arange(8), action].all()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-5)
    assert np.all(weights[~legal] == 0)


def _stones(state) -> np.ndarray:
    return (np.asarray(state._x.board) >= 0).sum(-1)


def test_random_openings_start_live_games_after_zero_to_m_random_moves():
    from jaxpuct.alphazero import selfplay
    from jaxpuct.envs.pgx_games import make_pgx_game
    game = make_pgx_game("tic_tac_toe")
    init = jax.vmap(game.env.init)
    keys = jax.random.split(jax.random.PRNGKey(3), 1000)
    assert selfplay.with_random_openings(game.environment, init, 0) is init
    # No tic-tac-toe game ends within 4 plies, so none is skipped: the number of
    # stones is the k drawn, uniform over 0..4 (200 expected each; a binomial's
    # standard deviation is 12.6, so 150-250 is four of them).
    state = jax.jit(selfplay.with_random_openings(game.environment, init, 4))(keys)
    counts = np.bincount(_stones(state), minlength=5)
    assert counts.shape == (5,) and np.all((counts > 150) & (counts < 250)), counts
    assert not np.asarray(state.terminated).any()
    # Colour 0 moves first: a reachable board has as many of its stones as of
    # colour 1's, or one more, and colour stones % 2 is to move.
    board, to_move = np.asarray(state._x.board), np.asarray(state._x.color)
    assert set(np.unique((board == 0).sum(-1) - (board == 1).sum(-1))) <= {0, 1}
    np.testing.assert_array_equal(to_move, _stones(state) % 2)
    # Up to 8 moves, those that would end the game are skipped: every game is
    # still live, and its board has no line of three.
    state = jax.jit(selfplay.with_random_openings(game.environment, init, 8))(keys)
    board = np.asarray(state._x.board)
    assert not np.asarray(state.terminated).any()
    for mark in (0, 1):
        assert not any(np.all(board[:, list(line)] == mark, axis=-1).any() for line in LINES)
    assert _stones(state).max() == 8


def test_random_openings_share_leaves_the_other_games_at_the_start():
    from jaxpuct.alphazero import selfplay
    from jaxpuct.envs.pgx_games import make_pgx_game
    game = make_pgx_game("tic_tac_toe")
    init = jax.vmap(game.env.init)
    keys = jax.random.split(jax.random.PRNGKey(3), 1000)
    assert selfplay.with_random_openings(game.environment, init, 4, share=0.0) is init
    # Share 1 is the default and draws the same openings.
    all_open = jax.jit(selfplay.with_random_openings(game.environment, init, 4))(keys)
    same = jax.jit(selfplay.with_random_openings(game.environment, init, 4, share=1.0))(keys)
    np.testing.assert_array_equal(np.asarray(all_open._x.board), np.asarray(same._x.board))
    # Half the games get an opening, whose k is uniform over 0..4: an empty board has
    # probability 0.5 + 0.5 / 5 = 0.6 (600 of 1,000, standard deviation 15.5), each
    # other count 0.1 (100, standard deviation 9.5); four of them either side.
    half = jax.jit(selfplay.with_random_openings(game.environment, init, 4, share=0.5))(keys)
    counts = np.bincount(_stones(half), minlength=5)
    assert 538 < counts[0] < 662 and np.all((counts[1:] > 62) & (counts[1:] < 138)), counts
    # A game that gets an opening gets the one it gets with share 1.
    opened = _stones(half) > 0
    np.testing.assert_array_equal(np.asarray(half._x.board)[opened],
                                  np.asarray(all_open._x.board)[opened])
    with pytest.raises(ValueError, match=r"share must be in \[0, 1\], got 1.5"):
        selfplay.with_random_openings(game.environment, init, 4, share=1.5)
    with pytest.raises(ValueError, match=r"opening_share .*needs opening_random_moves"):
        dataclasses.replace(TINY, opening_share=0.5)


def test_selfplay_with_random_openings_trains_from_the_random_positions():
    config = dataclasses.replace(TINY, opening_random_moves=4)
    trainer = az.Trainer(config)
    ts = trainer.init()
    assert _stones(ts.games.state).max() > 0 and not np.asarray(ts.games.state.terminated).any()
    ts, metrics = trainer.iterate(ts, selfplay_steps=12, train_steps=2)
    assert np.isfinite(metrics["loss"]) and metrics["games_finished"] >= config.batch_size
    buf = jax.device_get(ts.buffer)
    n = int(buf.num_added)
    stones = buf.obs[:n].reshape(n, 9, 2).astype(bool).any(-1).sum(-1)
    np.testing.assert_allclose(buf.policy[:n].sum(-1), 1.0, atol=1e-5)
    # Games were written whole (a stored game's plies add one stone each), and some
    # stored game starts past the empty board: a ply whose board has more stones
    # than the ply before it by other than one begins a new game.
    starts = np.nonzero(np.diff(stones, prepend=-1) != 1)[0]
    assert np.any(stones[starts] > 0) and np.all(stones[starts] <= 4)

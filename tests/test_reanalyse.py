"""jaxpuct.muzero.reanalyse against an oracle: the same search called directly at
the stored observations of each reanalysed row, and the n-step targets written
out in NumPy from the episode; rows not reanalysed and a fraction of 0 leave the
targets bit for bit; a row's new targets do not depend on the rest of the batch.

Shares test_muzero's tiny network, its writer-free sampler and its episodes
(their compiled functions too, when both files run in one process); compiles one
reanalysing step and one direct search, both at B = 4 rows with 8 simulations.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import test_muzero as tm

import jaxpuct
from jaxpuct.muzero import reanalyse as rea
from jaxpuct.muzero import replay, training
from jaxpuct.muzero.config import MuZeroConfig
from jaxpuct.muzero.model import muzero_puct_config

NUM_SIMULATIONS = 8
ROWS = 4  # the batch; fraction 0.5 reanalyses its first 2 rows
FRACTION = 0.5


def search_fn(params, keys, obs, legal):
    """PUCT with Dirichlet noise at the root: the keys matter."""
    model, _ = tm.tiny_model()
    root = model.root(params, obs, legal)
    return jaxpuct.alphazero_policy(params, keys, root, model.recurrent_fn, NUM_SIMULATIONS,
                                    selection=muzero_puct_config(), dirichlet_fraction=0.25)


_REANALYSE = jax.jit(functools.partial(
    rea.reanalyse_batch, search_fn=search_fn, fraction=FRACTION, unroll_steps=tm.UNROLL,
    td_steps=tm.TD, discount=tm.GAMMA))
_SEARCH = jax.jit(search_fn)
_WRITE_LEGAL = jax.jit(replay.write_episodes)


@functools.cache
def setting():
    """A buffer of four episodes (27 of 32 rows, not wrapped) with random
    non-empty legal masks, its row layout, and a sampled batch of ``ROWS``."""
    rng = np.random.default_rng(5)
    episodes = [tm.random_episode(rng, length) for length in (4, 7, 8, 8)]
    count, steps = 10, 8
    fields = {name: np.zeros((count, steps, *shape), dtype) for name, shape, dtype in (
        ("obs", (tm.OBS_SIZE,), np.float32), ("action", (), np.int32),
        ("reward", (), np.float32), ("policy", (tm.NUM_ACTIONS,), np.float32),
        ("root_value", (), np.float32), ("legal", (tm.NUM_ACTIONS,), bool))}
    written = np.zeros((count, steps), bool)
    layout = {}  # row -> (episode, step)
    for b, e in enumerate(episodes):
        length = len(e["reward"])
        legal = rng.random((length, tm.NUM_ACTIONS)) < 0.6
        legal[np.arange(length), rng.integers(0, tm.NUM_ACTIONS, length)] = True
        e["legal"] = legal
        for name in fields:
            fields[name][b, :length] = e[name]
        written[b, :length] = True
        for t in range(length):
            layout[len(layout)] = (e, t)
    buffer = replay.empty_buffer(tm.BUFFER, (tm.OBS_SIZE,), jnp.float32, tm.NUM_ACTIONS)
    buffer = _WRITE_LEGAL(buffer, episode_end=jnp.zeros(written.shape, jnp.bool_),
                          written=jnp.asarray(written),
                          **{k: jnp.asarray(v) for k, v in fields.items()})
    full = tm.sample(buffer, jax.random.key(11))
    return buffer, layout, full


def rows_of(batch, rows):
    return jax.tree.map(lambda x: x[np.asarray(rows)], batch)


def test_reanalysed_targets_equal_a_direct_search_and_numpy_n_step_targets():
    _, params = tm.tiny_model()
    buffer, layout, full = setting()
    # The stored legal masks are those written, and all legal beyond the filled rows.
    legal = np.asarray(buffer.legal)
    for row, (episode, t) in layout.items():
        np.testing.assert_array_equal(legal[row], episode["legal"][t])
    assert not legal[len(layout):].any()
    batch = rows_of(full, range(ROWS))
    key = jax.random.key(3)
    got = _REANALYSE(buffer, batch, params, key)
    positions = rea.searched_positions(tm.UNROLL, tm.TD, bootstrap=True)
    assert positions == tuple(range(tm.UNROLL + tm.TD + 1))
    count = rea.reanalysed_rows(FRACTION, ROWS)
    assert count == 2
    d, n = tm.GAMMA, tm.TD
    for b in range(count):
        start = int(batch.index[b])
        episode, t = layout[start]
        length = len(episode["reward"])
        rows = (start + np.asarray(positions)) % tm.BUFFER
        stored_legal = legal[rows]
        stored_legal[~stored_legal.any(-1)] = True  # unfilled rows: every action
        keys = jax.random.split(jax.random.fold_in(key, start), len(positions))
        direct = _SEARCH(params, keys, buffer.obs[rows], jnp.asarray(stored_legal))
        policy = np.asarray(direct.action_weights)
        value = np.asarray(direct.search_tree.summary().value)
        for k in range(tm.UNROLL + 1):
            inside = t + k < length
            assert bool(got.targets.policy_mask[b, k]) == inside
            if inside:
                np.testing.assert_array_equal(got.targets.policy[b, k], policy[k])
                assert np.all(policy[k][~episode["legal"][t + k]] == 0)
            else:
                np.testing.assert_array_equal(got.targets.policy[b, k], 0.0)
            z = sum(d ** i * episode["reward"][t + k + i] for i in range(n)
                    if t + k + i < length)
            if t + k + n < length:
                z += d ** n * value[k + n]  # the fresh search's root value
            np.testing.assert_allclose(got.targets.value[b, k], z if inside else 0.0,
                                       rtol=1e-6, atol=1e-7)
            if k:
                acted = t + k - 1 < length
                reward = episode["reward"][t + k - 1] if acted else 0.0
                np.testing.assert_array_equal(got.targets.reward[b, k], np.float32(reward))
    # The new targets differ from the stored ones (else this test could not fail).
    assert not np.allclose(got.targets.policy[:count], batch.targets.policy[:count])
    # Rows not reanalysed, and every other field, bit for bit.
    for new, old in zip(jax.tree.leaves(got.targets), jax.tree.leaves(batch.targets),
                        strict=True):
        np.testing.assert_array_equal(new[count:], old[count:])
    for name in ("obs", "actions", "weights", "index"):
        np.testing.assert_array_equal(getattr(got, name), getattr(batch, name))


def test_fraction_zero_returns_the_batch_and_bad_fractions_are_refused():
    _, params = tm.tiny_model()
    buffer, _, full = setting()
    batch = rows_of(full, range(ROWS))
    same = rea.reanalyse_batch(buffer, batch, params, jax.random.key(0), search_fn, fraction=0.0,
                         unroll_steps=tm.UNROLL, td_steps=tm.TD, discount=tm.GAMMA)
    for new, old in zip(jax.tree.leaves(same), jax.tree.leaves(batch), strict=True):
        np.testing.assert_array_equal(new, old)
    assert rea.reanalysed_rows(0.2, ROWS) == 1 and rea.reanalysed_rows(1.0, ROWS) == ROWS
    with pytest.raises(ValueError, match=r"fraction must be in \[0, 1\], got 1.5"):
        rea.reanalysed_rows(1.5, ROWS)
    with pytest.raises(ValueError, match="reanalyse_fraction"):
        MuZeroConfig(reanalyse_fraction=-0.1)
    with pytest.raises(ValueError, match="reanalyse_fraction"):
        MuZeroConfig(reanalyse_fraction=2.0)
    assert MuZeroConfig().reanalyse_fraction == 0.0
    # Without bootstrap only the policy positions are searched.
    assert rea.searched_positions(5, 9, bootstrap=False) == tuple(range(6))
    assert rea.searched_positions(5, 9, bootstrap=True) == (*range(6), *range(9, 15))


def test_a_rows_new_targets_do_not_depend_on_the_rest_of_the_batch():
    _, params = tm.tiny_model()
    buffer, _, full = setting()
    key = jax.random.key(3)
    index = np.asarray(full.index)
    # Four distinct start rows, then others for the second batch.
    order = list(dict.fromkeys(index.tolist()))
    first = [index.tolist().index(s) for s in order[:ROWS]]
    other = [index.tolist().index(s) for s in order[ROWS:ROWS + 2]]
    base = _REANALYSE(buffer, rows_of(full, first), params, key)
    # Rows 0 and 1 swapped, rows 2 and 3 replaced by others.
    swapped = _REANALYSE(buffer, rows_of(full, [first[1], first[0], *other]), params, key)
    # Row 0 kept, row 1 replaced.
    replaced = _REANALYSE(buffer, rows_of(full, [first[0], other[0], *first[2:]]), params,
                          key)
    for got, want in ((swapped, (1, 0)), (replaced, (0,))):
        for new, old in zip(jax.tree.leaves(got.targets), jax.tree.leaves(base.targets),
                            strict=True):
            np.testing.assert_array_equal(new[:len(want)], old[np.asarray(want)])


@jax.jit
def _targets_over_steps(params):
    # The target after each of 10 steps of a parameter that moves every step.
    def body(target, step):
        moved = jax.tree.map(lambda p: p + step.astype(p.dtype), params)
        target = training.update_target(moved, target, step, 3)
        return target, target
    return jax.lax.scan(body, params, jnp.arange(1, 11))[1]


def test_the_target_network_is_the_online_one_copied_every_n_steps():
    params = {"w": jnp.zeros((2,)), "b": jnp.ones((1,))}
    targets = _targets_over_steps(params)
    steps = np.arange(1, 11)
    copied_at = 3 * (steps // 3)  # the last step s <= step with s % 3 == 0 (0: never)
    np.testing.assert_array_equal(np.asarray(targets["w"]), np.repeat(copied_at, 2).reshape(10, 2))
    np.testing.assert_array_equal(np.asarray(targets["b"])[:, 0], 1.0 + copied_at)
    assert training.update_target(params, None, 1, 0) is params

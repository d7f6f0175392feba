"""Training targets: the value target mixed with the root's search value, and
board-symmetry augmentation, wired into the train step.

The train step's reported value loss is checked against the same minibatch's
loss recomputed outside it from the formula (1 - w) z + w q, and a buffer
without root values keeps the pytree structure (and so the checkpoints) of
runs made before the mix existed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pgx")

import jaxpuct.alphazero as az  # noqa: E402
from jaxpuct.alphazero import buffer as buffer_lib  # noqa: E402
from jaxpuct.alphazero import symmetry  # noqa: E402

MIX = 0.3
CONFIG = az.SelfPlayConfig(batch_size=8, num_simulations=4, buffer_size=256,
                           train_batch_size=32, hidden=(16,), temperature_moves=2,
                           selfplay_steps=9, train_steps=0, value_target_mix=MIX)


@pytest.fixture(scope="module")
def played():
    """A trainer with value_target_mix and its state after nine self-play moves
    (every tic-tac-toe game has ended once)."""
    trainer = az.Trainer(CONFIG)
    ts, _ = trainer.iterate(trainer.init())
    return trainer, ts


def test_root_values_are_kept_per_written_row(played):
    trainer, ts = played
    buf = jax.device_get(ts.buffer)
    n = int(buffer_lib.filled_rows(ts.buffer))
    assert n > 0 and buf.root_value.shape == (CONFIG.buffer_size,)
    q = buf.root_value[:n]
    assert np.all(np.abs(q) <= 1.0) and np.any(q != 0.0)
    assert np.all(buf.root_value[n:] == 0.0)


def test_train_step_value_loss_uses_the_mixed_target(played):
    trainer, ts = played
    rng = jax.random.PRNGKey(7)
    obs, policy, z, q = buffer_lib.sample_rows(ts.buffer, rng, CONFIG.train_batch_size)
    _, value = trainer.apply_fn(ts.params, obs)
    expected = np.mean((np.asarray(value) - ((1 - MIX) * np.asarray(z)
                                             + MIX * np.asarray(q))) ** 2)
    # The step donates the optimiser state: give it a copy.
    opt_state = jax.tree.map(jnp.copy, ts.opt_state)
    _, _, metrics = trainer.train_step(ts.params, opt_state, ts.buffer, rng)
    np.testing.assert_allclose(float(metrics["value_loss"]), expected, rtol=1e-5)
    # The outcome alone would give another loss here (q differs from z).
    outcome_only = np.mean((np.asarray(value) - np.asarray(z)) ** 2)
    assert abs(outcome_only - expected) > 1e-4


def test_without_the_mix_the_buffer_has_its_former_structure():
    plain = buffer_lib.empty_buffer(16, (3, 3, 2), jnp.bool_, 9)
    kept = buffer_lib.empty_buffer(16, (3, 3, 2), jnp.bool_, 9, root_value=True)
    assert plain.root_value is None
    assert len(jax.tree.leaves(kept)) == len(jax.tree.leaves(plain)) + 1
    from jaxpuct.alphazero.training import value_target
    z = jnp.array([1.0, -1.0, 0.0])
    np.testing.assert_array_equal(value_target(z, None, 0.5), z)
    np.testing.assert_allclose(value_target(z, jnp.array([0.2, 0.4, -0.6]), 0.25),
                               [0.8, -0.65, -0.15])


@pytest.mark.slow
def test_augmented_train_step_sees_mirrored_rows():
    """With symmetry_augment the step trains on rows that are, each, one of the
    game's symmetries of the sampled row (checked through the loss: the mean
    over the two connect-four symmetries brackets it)."""
    config = az.SelfPlayConfig(game="connect_four", network="resnet", blocks=1, channels=8,
                               batch_size=8, num_simulations=4, buffer_size=8 * 42,
                               train_batch_size=64, selfplay_steps=12, train_steps=0,
                               symmetry_augment=True, temperature_moves=12)
    trainer = az.Trainer(config)
    ts, _ = trainer.iterate(trainer.init())
    ts, _ = trainer.iterate(ts)
    rng = jax.random.PRNGKey(3)
    obs, policy, z = buffer_lib.sample(ts.buffer, rng, config.train_batch_size)
    augmented, aug_policy = symmetry.symmetry_augment_fn("connect_four")(
        jax.random.fold_in(rng, 1), obs, policy)
    logits, value = trainer.apply_fn(ts.params, augmented)
    expected = -np.mean(np.sum(np.asarray(aug_policy)
                               * np.asarray(jax.nn.log_softmax(logits)), axis=-1))
    opt_state = jax.tree.map(jnp.copy, ts.opt_state)
    _, _, metrics = trainer.train_step(ts.params, opt_state, ts.buffer, rng)
    np.testing.assert_allclose(float(metrics["policy_loss"]), expected, rtol=1e-5)
    mirrored = np.any(np.asarray(augmented) != np.asarray(obs), axis=(1, 2, 3))
    assert 0 < mirrored.sum() < config.train_batch_size


def test_symmetry_augment_is_refused_for_other_games():
    with pytest.raises(ValueError, match="symmetry-augment.*othello"):
        az.SelfPlayConfig(game="othello", symmetry_augment=True, buffer_size=128 * 130)

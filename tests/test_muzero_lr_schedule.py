"""The MuZero optimiser's learning-rate schedule (``LossConfig.lr_schedule``).

Oracles: the step Adam takes on one scalar under a constant gradient is exactly the
learning rate (its bias-corrected moments are then the gradient and its square), so
each step's size is compared with the cosine formula recomputed in NumPy; the
constant default is plain Adam, state and updates; the example resumes a
scheduled run to the same state as an uninterrupted one.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpuct.alphazero.training import decay_mask
from jaxpuct.muzero import stochastic_training, training
from jaxpuct.muzero.config import MuZeroConfig

ADAM_EPS = 1e-8  # optax.adam's default


def cosine_reference(lr: float, decay_steps: int, final: float, t: np.ndarray) -> np.ndarray:
    """Loshchilov and Hutter's cosine decay without restarts, held at its end."""
    progress = np.minimum(t, decay_steps) / decay_steps
    return lr * (final + (1.0 - final) * 0.5 * (1.0 + np.cos(np.pi * progress)))


def adam_steps(optimizer: optax.GradientTransformation, gradient: float, steps: int
               ) -> np.ndarray:
    """``[steps]`` updates of a scalar parameter under a constant ``gradient``."""
    params = {"bias": jnp.zeros(())}  # not a kernel: no weight decay on it
    state = optimizer.init(params)
    updates = []
    for _ in range(steps):
        update, state = optimizer.update({"bias": jnp.asarray(gradient)}, state, params)
        updates.append(float(update["bias"]))
    return np.asarray(updates)


def test_cosine_step_size_is_the_closed_form_at_every_step():
    lr, decay_steps, final = 0.1, 8, 0.1
    config = training.LossConfig(learning_rate=lr, lr_schedule="cosine",
                                 lr_decay_steps=decay_steps, lr_final_fraction=final)
    t = np.arange(13)  # past the horizon too: held at lr * final
    expected = cosine_reference(lr, decay_steps, final, t)
    for gradient in (1.0, -2.5):
        updates = adam_steps(training.make_optimizer(config), gradient, t.size)
        step = -np.sign(gradient) * expected * abs(gradient) / (abs(gradient) + ADAM_EPS)
        # float32 Adam: its moments round at 1e-5; a wrong schedule is off by percents.
        np.testing.assert_allclose(updates, step, rtol=1e-4)
    assert expected[0] == lr and expected[-1] == pytest.approx(lr * final)
    # The stochastic optimiser is the same one (shared, not copied).
    stochastic = stochastic_training.make_stochastic_optimizer(
        stochastic_training.StochasticLossConfig(base=config))
    np.testing.assert_array_equal(adam_steps(stochastic, 1.0, t.size),
                                  adam_steps(training.make_optimizer(config), 1.0, t.size))


def test_the_constant_default_is_plain_adam():
    """State structure and updates of the default equal the optimiser of before
    schedules existed, so checkpoints and results of constant runs are unchanged."""
    config = training.LossConfig(learning_rate=3e-3)
    before = optax.chain(optax.add_decayed_weights(config.weight_decay, mask=decay_mask),
                         optax.adam(config.learning_rate))
    params = {"kernel": jnp.ones((2, 3)), "bias": jnp.zeros((3,))}
    grads = {"kernel": jnp.full((2, 3), 0.5), "bias": jnp.arange(3.0)}
    ours = training.make_optimizer(config)
    assert (jax.tree.structure(ours.init(params))
            == jax.tree.structure(before.init(params)))
    a, b = ours.init(params), before.init(params)
    for _ in range(3):
        ua, a = ours.update(grads, a, params)
        ub, b = before.update(grads, b, params)
        for x, y in zip(jax.tree.leaves(ua), jax.tree.leaves(ub), strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert MuZeroConfig().lr_schedule == "constant"


def test_bad_schedules_are_refused_by_name():
    with pytest.raises(ValueError, match=r"LossConfig.lr_schedule .*'linear'"):
        training.LossConfig(lr_schedule="linear")
    with pytest.raises(ValueError, match=r"LossConfig.lr_decay_steps must be >= 1.*got 0"):
        training.LossConfig(lr_schedule="cosine")
    with pytest.raises(ValueError, match=r"LossConfig.lr_final_fraction .*\[0, 1\], got 1.5"):
        training.LossConfig(lr_final_fraction=1.5)
    with pytest.raises(ValueError, match=r"LossConfig.lr_final_fraction must be >= 0"):
        training.LossConfig(lr_final_fraction=-0.1)
    with pytest.raises(ValueError, match=r"MuZeroConfig.lr_schedule .*'step'"):
        MuZeroConfig(lr_schedule="step")
    with pytest.raises(ValueError, match=r"MuZeroConfig.lr_final_fraction .*got 2.0"):
        MuZeroConfig(lr_final_fraction=2.0)
    with pytest.raises(ValueError, match=r"MuZeroConfig.lr_decay_steps must be >= 0"):
        MuZeroConfig(lr_decay_steps=-1)
    # A cosine schedule without a horizon is refused where the optimiser is made.
    with pytest.raises(ValueError, match=r"lr_decay_steps"):
        _ = MuZeroConfig(lr_schedule="cosine").loss
    with pytest.raises(ValueError, match=r"lr_decay_steps.*0 iterations"):
        MuZeroConfig(lr_schedule="cosine").with_decay_over(0)


def test_the_example_decays_over_its_iterations(monkeypatch):
    from examples import muzero as example

    seen = []
    monkeypatch.setattr(example, "run", lambda config, iterations, *a, **k: seen.append(
        (config, iterations)))
    example.main(["--iterations", "30", "--lr-schedule", "cosine", "--train-steps", "7",
                  "--lr-final-fraction", "0.2"])
    example.main(["--iterations", "30", "--lr-schedule", "cosine", "--lr-decay-steps", "50"])
    example.main(["--iterations", "30"])
    (cosine, _), (given, _), (constant, _) = seen
    assert (cosine.lr_decay_steps, cosine.lr_final_fraction) == (30 * 7, 0.2)
    assert cosine.loss.lr_decay_steps == 210 and cosine.loss.lr_schedule == "cosine"
    assert given.lr_decay_steps == 50
    assert constant == MuZeroConfig() and constant.loss.lr_schedule == "constant"
    assert MuZeroConfig.from_json(cosine.to_json()) == cosine


def test_polyak_average_is_the_closed_form():
    params = [{"w": jnp.asarray([1.0, -2.0])}, {"w": jnp.asarray([3.0, 0.5])},
              {"w": jnp.asarray([-1.0, 4.0])}]
    average, d = params[0], 0.75
    for p in params[1:]:
        average = training.polyak_average(average, p, d)
    # a_2 = d^2 a_0 + d (1 - d) p_1 + (1 - d) p_2
    w = [np.asarray(p["w"], np.float64) for p in params]
    np.testing.assert_allclose(np.asarray(average["w"]),
                               d * d * w[0] + d * (1 - d) * w[1] + (1 - d) * w[2], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(training.polyak_average(params[0], params[1],
                                                                     0.0)["w"]), w[1])
    with pytest.raises(ValueError, match=r"MuZeroConfig.ema_decay .*\[0, 1\), got 1.0"):
        MuZeroConfig(ema_decay=1.0)


@pytest.mark.slow
def test_a_scheduled_averaged_run_resumes_to_the_uninterrupted_state(tmp_path):
    """One iteration, then ``resume`` for a second, ends where two uninterrupted
    iterations do: the schedule's step count is in the checkpointed optimiser
    state, the horizon in the saved config, the moving average in the state.
    The average is the closed form of the iterates, and it is what is evaluated."""
    from examples import muzero as example
    from jaxpuct.alphazero import checkpoints
    from jaxpuct.muzero import selfplay
    from jaxpuct.muzero.model import MuZeroModel

    d = 0.5
    config = MuZeroConfig(policy="alphazero", batch_size=2, num_simulations=2, hidden=(8,),
                          latent_size=8, buffer_size=64, train_batch_size=4, train_steps=2,
                          unroll_steps=2, learning_rate=0.05, lr_schedule="cosine",
                          lr_final_fraction=0.1, ema_decay=d).with_decay_over(2)
    assert config.lr_decay_steps == 4
    split, whole, quiet, rows = str(tmp_path / "split"), str(tmp_path / "whole"), [].append, []
    example.run(config, 1, split, log=quiet, eval_every=0, checkpoint_every=1)
    example.run(config, 2, split, log=quiet, eval_every=0, checkpoint_every=1, resume=True)
    example.run(config, 2, whole, log=rows.append, eval_every=0, checkpoint_every=1)
    graphdef, _, template = example.initial_state(config)
    a, b = (checkpoints.restore_checkpoint(r, template, config) for r in (whole, split))
    assert int(a.iteration) == int(b.iteration) == 2
    counts = [int(x) for x in jax.tree.leaves(a.opt_state) if np.ndim(x) == 0]
    assert 4 in counts  # the schedule's step: 2 iterations x 2 steps
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    first = checkpoints.restore_checkpoint(split, template, config, step=1)
    for e, p0, p1, p2 in zip(*(jax.tree.leaves(t) for t in (
            a.ema_params, template.params, first.params, a.params)), strict=True):
        np.testing.assert_allclose(np.asarray(e), d * d * np.asarray(p0) + d * (1 - d)
                                   * np.asarray(p1) + (1 - d) * np.asarray(p2),
                                   rtol=1e-5, atol=1e-7)
    model = MuZeroModel(graphdef, discount=config.discount, zero_sum=config.zero_sum)
    last = json.loads(rows[-1])
    scores = selfplay.evaluate_optimal_moves(config, model, a.ema_params)
    assert all(last[k] == v for k, v in scores.items())

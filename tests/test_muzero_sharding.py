"""The MuZero example over several devices: games split, training data parallel,
the same run as on one device (tic-tac-toe with reanalyse, and 2048's boards kept
across iterations), a resume on another device count, checked in a process with 4
CPU devices."""

from __future__ import annotations

import textwrap

import pytest
from conftest import run_on_host_devices

SCRIPT = textwrap.dedent("""
    import dataclasses, re, tempfile
    import jax, numpy as np
    from examples import muzero as mz
    from jaxpuct.alphazero import checkpoints
    from jaxpuct.muzero.config import MuZeroConfig
    assert len(jax.devices()) == 4, jax.devices()
    small = dict(batch_size=8, num_simulations=4, train_steps=2, train_batch_size=8,
                 buffer_size=256, hidden=(16,), latent_size=16)
    cases = {
        "tic_tac_toe": MuZeroConfig(reanalyse_fraction=0.5, **small),
        "2048": MuZeroConfig(**{**mz.GAME_DEFAULTS["2048"], **small, "game": "2048",
                                "segment_length": 4, "value_support": 20,
                                "reward_support": 20}),
    }
    for name, config in cases.items():
        states = []
        for devices in (jax.devices(), jax.devices()[:1]):
            with tempfile.TemporaryDirectory() as d:
                mz.run(config, 1, d, log=lambda *a: None, eval_every=0, devices=devices)
                placement = mz.Placement.over(config, devices)
                template = placement.place(mz.initial_state(config)[2])
                restored = checkpoints.restore_checkpoint(d, template, config)
                if len(devices) == 4 and restored.boards is not None:
                    assert all(len(x.sharding.device_set) == 4
                               for x in jax.tree.leaves(restored.boards))
                states.append(jax.device_get(restored))
        a, b = states
        # The same games: actions, masks and boards exactly; float targets to
        # rounding (the network's matmuls over 2 rows a device round otherwise
        # than over 8); the parameters to rounding (the gradient's all-reduce).
        for x, y in zip(jax.tree.leaves((a.buffer, a.boards)),
                        jax.tree.leaves((b.buffer, b.boards))):
            if np.issubdtype(np.asarray(x).dtype, np.floating):
                np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
            else:
                np.testing.assert_array_equal(x, y)
        for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
            np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
    # A run checkpointed on 4 devices resumes on 2 (restored into the new placement).
    config = cases["tic_tac_toe"]
    with tempfile.TemporaryDirectory() as d:
        mz.run(config, 1, d, log=lambda *a: None, eval_every=0)
        mz.run(config, 2, d, log=lambda *a: None, eval_every=0, resume=True,
               devices=jax.devices()[:2])
        template = mz.Placement.over(config, jax.devices()[:2]).place(
            mz.initial_state(config)[2])
        assert int(checkpoints.restore_checkpoint(d, template, config).iteration) == 2
    # The compiled train step splits the batch's 8 rows (2 a device, the reanalysed
    # half 1 a device) and meets in an all-reduce; replicated rows ran all 8 on
    # every device with no collective.
    config = cases["tic_tac_toe"]
    placement = mz.Placement.over(config)
    graphdef, optimizer, ts = mz.initial_state(config)
    ts = placement.place(ts)
    text = mz.train_step.lower(config, graphdef, optimizer, ts.params, ts.opt_state,
                               ts.buffer, jax.random.key(0), ts.target_params, np.int32(0),
                               np.int32(0), batch_sharding=placement.batch
                               ).compile().as_text()
    assert "all-reduce(" in text
    rows = {int(m) for m in re.findall(r"= f32\\[(\\d+),16\\]\\{[^}]*\\} dot\\(", text)}
    assert 2 in rows and 8 not in rows, rows
    print("MUZERO_SHARDED_OK")
""")


@pytest.mark.slow
def test_the_example_over_four_devices_is_the_one_device_run():
    run_on_host_devices(SCRIPT, 4, "MUZERO_SHARDED_OK", timeout=600)


def test_a_batch_that_does_not_split_over_the_devices_is_refused():
    import jax

    from examples import muzero as example
    from jaxpuct.muzero.config import MuZeroConfig

    devices = [jax.devices()[0]] * 3  # only counted: the mesh is never used
    with pytest.raises(ValueError, match=r"train_batch_size \(8\) must be a multiple of "
                                         r"the number of devices \(3\)"):
        example.Placement.over(MuZeroConfig(batch_size=9, train_batch_size=8), devices)
    with pytest.raises(ValueError, match=r"batch_size \(8\) must be"):
        example.Placement.over(MuZeroConfig(batch_size=8, train_batch_size=9), devices)

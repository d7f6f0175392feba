"""The training side's configuration, command line, weight decay and checkpoint layout."""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import numpy as np
import pytest

pytest.importorskip("pgx")
pytest.importorskip("orbax.checkpoint")

import jaxpuct.alphazero as az  # noqa: E402
from examples import selfplay as cli  # noqa: E402
from jaxpuct.alphazero import config as config_lib  # noqa: E402
from jaxpuct.alphazero import training  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_command_line_is_generated_from_the_dataclasses():
    parser = cli.build_parser()
    actions = {a.dest: a for a in parser._actions}
    for cls in (az.SelfPlayConfig, az.RunOptions):
        helps = config_lib.docstring_attributes(cls)
        for field in dataclasses.fields(cls):
            action = actions[field.name]
            assert action.option_strings[0] == "--" + field.name.replace("_", "-")
            assert action.default == field.default
            assert action.help == helps[field.name] and action.help
    # Parsing the defaults gives the dataclasses' defaults.
    config, options = cli.parse([])
    assert config == az.SelfPlayConfig() and options == az.RunOptions()
    text = parser.format_help()
    assert "(default: 800)" in text and "(default: cosine)" in text
    assert "--num-simulations" in text and "--graph-search" in text


def test_demo_overrides_are_fields():
    from examples import demo
    names = {f.name for cls in (az.SelfPlayConfig, az.RunOptions)
             for f in dataclasses.fields(cls)}
    assert set(demo.DEFAULTS) <= names
    config, options = cli.parse([], demo.DEFAULTS)
    assert options.iterations == 500 and config.lr_decay_steps == 4000


def test_bad_values_name_the_flag():
    with pytest.raises(SystemExit) as info:
        cli.main(["--dirichlet-fraction", "2"])
    assert "error:" in str(info.value.code) and "--dirichlet-fraction" in str(info.value.code)
    with pytest.raises(ValueError, match=r"--train-batch-size"):
        az.SelfPlayConfig(train_batch_size=0)


def test_weight_decay_masks_kernels_only():
    config = az.SelfPlayConfig(batch_size=8, buffer_size=256, hidden=(8,), lr_schedule="constant",
                               optimizer="sgd", momentum=0.0, learning_rate=0.5,
                               weight_decay=0.1)
    trainer = az.Trainer(config)
    params = trainer.init().params
    mask = training.decay_mask(params)
    flat = {jax.tree_util.keystr(p): m for p, m in jax.tree_util.tree_flatten_with_path(mask)[0]}
    assert any("kernel" in k for k in flat)
    for key, decayed in flat.items():
        assert decayed == ("kernel" in key), key
    # With zero gradients, sgd moves kernels by -lr * wd * w and nothing else.
    opt = training.make_optimizer(config)
    zeros = jax.tree.map(np.zeros_like, params)
    updates, _ = opt.update(zeros, opt.init(params), params)
    for (path, u), w in zip(jax.tree_util.tree_flatten_with_path(updates)[0],
                            jax.tree.leaves(params), strict=True):
        expected = -0.5 * 0.1 * np.asarray(w) if "kernel" in jax.tree_util.keystr(path) else 0
        np.testing.assert_allclose(np.asarray(u), expected, rtol=1e-6, atol=1e-8)


def test_cosine_schedule_is_per_step_and_extends_past_its_horizon():
    config = az.SelfPlayConfig(lr_decay_steps=10, learning_rate=1.0, lr_final_fraction=0.05)
    schedule = training.learning_rate_schedule(config)
    assert float(schedule(0)) == pytest.approx(1.0)
    assert float(schedule(10)) == pytest.approx(0.05)
    assert float(schedule(1000)) == pytest.approx(0.05)


def test_checkpoint_has_named_keys(tmp_path):
    config = az.SelfPlayConfig(batch_size=8, num_simulations=4, buffer_size=256,
                               train_batch_size=16, hidden=(16,))
    trainer = az.Trainer(config)
    az.save_checkpoint(str(tmp_path), trainer.init(), config)
    with open(tmp_path / "checkpoints" / "0" / "_METADATA") as f:
        text = f.read()
    for name in ("params", "opt_state", "buffer", "games", "iteration", "rng", "kernel"):
        assert f'"{name}"' in text or f"'{name}'" in text or name in text, name
    digest = json.loads((tmp_path / "checkpoints" / "0.sha256.json").read_text())
    assert ".params" in " ".join(digest["sha256"])


def test_gumbel_qtransform_flags_default_to_completed_q_config():
    # The flags' defaults are CompletedQConfig's, so a run without them searches
    # with the same qtransform as before the flags existed.
    from jaxpuct import CompletedQConfig
    default = az.SelfPlayConfig()
    assert (default.value_scale, default.maxvisit_init) == (
        CompletedQConfig().value_scale, CompletedQConfig().maxvisit_init)
    config, _ = cli.parse(["--policy", "gumbel", "--value-scale", "0.03",
                           "--maxvisit-init", "10"])
    assert (config.value_scale, config.maxvisit_init) == (0.03, 10.0)
    with pytest.raises(ValueError, match=r"--value-scale"):
        az.SelfPlayConfig(value_scale=0.0)

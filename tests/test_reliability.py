"""Reliability of training runs: extension, resume, corrupt or interrupted
checkpoints, full disks, NaN guard, run-directory and command-line checks.

Each test uses a tiny configuration and takes a few seconds; the kill tests run
the command line in a subprocess and SIGKILL it inside a checkpoint save.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pgx")
pytest.importorskip("orbax.checkpoint")

import jaxpuct.alphazero as az  # noqa: E402
from examples import selfplay as cli  # noqa: E402
from jaxpuct.alphazero import checkpoints  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = az.SelfPlayConfig(batch_size=8, num_simulations=4, buffer_size=256, train_batch_size=16,
                         hidden=(16,), temperature_moves=2, selfplay_steps=3, train_steps=1,
                         lr_decay_steps=4)
# The command line of TINY (every field that differs from the defaults).
TINY_ARGS = ["--batch-size", "8", "--num-simulations", "4", "--buffer-size", "256",
             "--train-batch-size", "16", "--hidden", "16", "--temperature-moves", "2",
             "--selfplay-steps", "3", "--train-steps", "1", "--lr-decay-steps", "4",
             "--eval-every", "0", "--checkpoint-every", "1", "--no-progress", "--no-plot"]


@pytest.fixture(scope="module")
def trainer():
    return az.Trainer(TINY)


@pytest.fixture(scope="module")
def reference(trainer):
    """Host copies of the uninterrupted run's state after 0..4 iterations."""
    ts, states = trainer.init(), []
    states.append(jax.device_get(ts))
    for _ in range(4):
        ts, _ = trainer.iterate(ts)
        states.append(jax.device_get(ts))
    return states


@pytest.fixture
def fast_cli(monkeypatch, trainer):
    """The command line with the module's compiled trainer for TINY (a new
    Trainer compiles everything again) and evaluation against the random and
    pure-search players only (the minimax tree walk is the demo's job)."""
    real = az.Trainer
    monkeypatch.setattr(az, "Trainer", lambda config: trainer if config == TINY
                        else real(config))

    def evaluate(trainer, params, iteration, seed):
        rng = jax.random.PRNGKey(iteration)
        return {f"eval_{name}_{colour}_{result}": n
                for name in ("random", "pure_search")
                for colour, counts in trainer.play_vs(params, name, rng).items()
                for result, n in counts.items()}

    monkeypatch.setattr(cli, "evaluate", evaluate)


def _assert_same(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _same(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y))
               for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def _save_reference(trainer, reference, run_dir, steps):
    for step in steps:
        az.save_checkpoint(run_dir, trainer.place(reference[step]), TINY)


def _exit_message(argv) -> str:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    return str(info.value.code)


# ------------------------------------------------------------- item 7: extension
@pytest.mark.slow
def test_run_can_be_extended_with_cosine_schedule(tmp_path, reference, fast_cli):
    run_dir = str(tmp_path / "run")
    first = cli.main(TINY_ARGS + ["--run-dir", run_dir, "--iterations", "2"])
    assert first["iteration"] == 2 and first["config"].lr_schedule == "cosine"
    second = cli.main(TINY_ARGS + ["--run-dir", run_dir, "--iterations", "3", "--resume",
                                   "--eval-every", "1"])
    assert second["iteration"] == 3
    assert sum(second["final_eval"].values()) == 2 * TINY.batch_size  # both opponents
    _assert_same(jax.device_get(second["state"]), reference[3])
    # A changed knob of SelfPlayConfig is refused, naming the flag.
    message = _exit_message(TINY_ARGS[2:] + ["--batch-size", "16", "--run-dir", run_dir,
                                             "--iterations", "5", "--resume"])
    assert "--batch-size: saved 8, now 16" in message


# ----------------------------------------------------------- item 10: CLI checks
def test_resume_behind_checkpoint_is_refused_and_equal_is_nothing_to_do(
        tmp_path, trainer, reference, capsys, fast_cli):
    run_dir = str(tmp_path)
    _save_reference(trainer, reference, run_dir, [4])
    message = _exit_message(TINY_ARGS + ["--run-dir", run_dir, "--iterations", "2",
                                         "--resume"])
    assert message.startswith("error:") and "iteration 4" in message
    assert "--iterations 2" in message
    with pytest.raises(SystemExit) as info:
        cli.main(TINY_ARGS + ["--run-dir", run_dir, "--iterations", "4", "--resume"])
    assert info.value.code == 0 and "nothing to do" in capsys.readouterr().out
    assert not os.path.exists(os.path.join(run_dir, "metrics.jsonl"))


def test_resume_on_missing_directory_does_not_create_it(tmp_path):
    run_dir = tmp_path / "missing"
    message = _exit_message(TINY_ARGS + ["--run-dir", str(run_dir), "--resume"])
    assert message.startswith("error:") and "does not exist" in message
    assert not run_dir.exists()


def test_unwritable_run_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    message = _exit_message(TINY_ARGS + ["--run-dir", str(blocker / "run")])
    assert message.startswith("error: run directory") and "not writable" in message
    if os.path.isdir("/proc/self"):  # a read-only file system, even for root
        message = _exit_message(TINY_ARGS + ["--run-dir", "/proc/jaxpuct-test-run"])
        assert message.startswith("error: run directory") and "not writable" in message
    # The same from a shell: one line, no traceback, status 1.
    proc = subprocess.run([sys.executable, "-m", "examples.selfplay", "--run-dir",
                           str(blocker / "run")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: run directory")


def test_help_shows_defaults():
    text = cli.build_parser().format_help()
    assert "--iterations ITERATIONS" in text and "(default: 100)" in text
    assert "--resume-step" in text


def test_help_survives_a_percent_sign_in_a_docstring():
    import argparse

    from jaxpuct.alphazero import config as config_lib

    @dataclasses.dataclass(frozen=True)
    class Options:
        """Options.

        Attributes:
          share: changes under 1% of positions.
        """

        share: float = 0.5

    parser = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    config_lib.add_arguments(parser, Options)
    assert "changes under 1% of positions. (default: 0.5)" in " ".join(
        parser.format_help().split())


def test_metrics_are_strict_json_without_train_steps(tmp_path, fast_cli, monkeypatch):
    monkeypatch.setattr(cli, "evaluate", lambda *args: {})
    run_dir = tmp_path / "run"
    cli.main(TINY_ARGS + ["--run-dir", str(run_dir), "--iterations", "1",
                          "--train-steps", "0"])

    def refuse(name):
        raise ValueError(f"bare {name} in metrics.jsonl")

    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line, parse_constant=refuse) for line in lines]
    assert len(records) == 1 and records[0]["loss"] is None


# --------------------------------------------------------------- item 8: NaN guard
def test_nan_loss_stops_the_run_before_saving(tmp_path, monkeypatch, trainer, fast_cli):
    real_step = trainer.train_step

    def nan_step(params, opt_state, buffer, rng):
        params, opt_state, metrics = real_step(params, opt_state, buffer, rng)
        return params, opt_state, dict(metrics, loss=metrics["loss"] * jnp.nan)

    monkeypatch.setattr(trainer, "train_step", nan_step)
    run_dir = tmp_path / "run"
    message = _exit_message(TINY_ARGS + ["--run-dir", str(run_dir), "--iterations", "2"])
    assert message.startswith("error: iteration 1") and "NaN" in message
    assert checkpoints.available_steps(str(run_dir)) == []
    print("\nfault: NaN loss at iteration 1: run stopped with an error, nothing saved")


def test_non_finite_state_is_never_saved(tmp_path, trainer, reference):
    ts = trainer.place(reference[1])
    poisoned = ts.replace(params=jax.tree.map(lambda x: x * jnp.nan, ts.params))
    with pytest.raises(az.CheckpointError, match="NaN"):
        az.save_checkpoint(str(tmp_path), poisoned, TINY)
    assert checkpoints.available_steps(str(tmp_path)) == []


def test_nan_parameters_are_refused(trainer, reference):
    ts = trainer.place(reference[1])
    poisoned = ts.replace(params=jax.tree.map(lambda x: x * jnp.nan, ts.params))
    with pytest.raises(az.NonFiniteError, match="parameter"):
        trainer.iterate(poisoned, selfplay_steps=1, train_steps=0)


# ------------------------------------------------- item 8: damaged checkpoint files
def _files(path):
    out = []
    for dirpath, _, names in os.walk(path):
        out.extend(os.path.join(dirpath, n) for n in names)
    return sorted(out)


def _damage(path: str, how: str) -> None:
    if how == "delete":
        os.remove(path)
    elif how == "truncate":
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.truncate(size // 2)
    else:  # flip every byte of the middle 16
        with open(path, "r+b") as f:
            data = bytearray(f.read())
            mid = len(data) // 2
            for i in range(max(0, mid - 8), min(len(data), mid + 8)):
                data[i] ^= 0xFF
            f.seek(0)
            f.write(data)


# A damaged file is found by its digest before orbax opens it: no orbax reader is
# left to fail (its coroutines used to report "Exception ignored ... GeneratorExit").
@pytest.mark.slow
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_each_damaged_checkpoint_file_falls_back_or_fails_clearly(tmp_path, trainer,
                                                                  reference):
    """Damages every file of the newest checkpoint in turn (three ways): the
    restore falls back to the previous one, or, for a named step, raises
    CheckpointError naming the file; it never returns anything else."""
    pristine = str(tmp_path / "pristine")
    _save_reference(trainer, reference, pristine, [1, 2])
    run_dir = str(tmp_path / "run")
    newest = os.path.join(pristine, "checkpoints", "2")
    digest_file = newest + ".sha256.json"
    targets = _files(newest) + [digest_file]
    outcomes = {"same": 0, "fallback": 0, "error": 0}
    for target in targets:
        for how in ("corrupt", "truncate", "delete"):
            if how != "delete" and os.path.getsize(target) < 2:
                continue
            shutil.rmtree(run_dir, ignore_errors=True)
            shutil.copytree(pristine, run_dir)
            _damage(os.path.join(run_dir, os.path.relpath(target, pristine)), how)
            restored = jax.device_get(az.restore_checkpoint(run_dir, trainer.init(), TINY))
            assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(restored.params))
            if _same(restored, reference[2]):  # every file is in the digest: never
                outcomes["same"] += 1
                continue
            _assert_same(restored, reference[1])
            outcomes["fallback"] += 1
            named = os.path.relpath(target, newest) if target != digest_file else "sha256"
            with pytest.raises(az.CheckpointError, match=f"checkpoint 2.*{re.escape(named)}"):
                az.restore_checkpoint(run_dir, trainer.init(), TINY, step=2)
            outcomes["error"] += 1
    print(f"\nfault: damaged files of the newest checkpoint: {len(targets)} files, "
          f"{sum(outcomes.values()) - outcomes['error']} damages; restored intact "
          f"{outcomes['same']}, fell back to the previous checkpoint {outcomes['fallback']}, "
          f"--resume-step 2 refused {outcomes['error']}; data lost: none")
    assert outcomes["same"] == 0 and outcomes["fallback"] >= 3
    # A digest whose file list is not a mapping is refused as such, not met by orbax.
    shutil.rmtree(run_dir)
    shutil.copytree(pristine, run_dir)
    damaged_digest = os.path.join(run_dir, "checkpoints", "2.sha256.json")
    with open(damaged_digest) as f:
        recorded = json.load(f)
    with open(damaged_digest, "w") as f:
        json.dump(dict(recorded, files=["not", "a", "mapping"]), f)
    with pytest.raises(az.CheckpointError, match="checkpoint 2: its files cannot be checked"):
        az.restore_checkpoint(run_dir, trainer.init(), TINY, step=2)
    assert outcomes["error"] == outcomes["fallback"]


def test_resume_step_restores_an_older_checkpoint(tmp_path, trainer, reference):
    _save_reference(trainer, reference, str(tmp_path), [1, 2, 3])
    assert checkpoints.available_steps(str(tmp_path)) == [3, 2]  # keep=2
    _assert_same(jax.device_get(az.restore_checkpoint(str(tmp_path), trainer.init(), TINY,
                                                      step=2)), reference[2])
    with pytest.raises(az.CheckpointError, match="no checkpoint 1.*available: 3, 2"):
        az.restore_checkpoint(str(tmp_path), trainer.init(), TINY, step=1)
    # Continuing from 2 replaces the newer history: a later --resume cannot pick
    # checkpoint 3 of the abandoned run.
    az.save_checkpoint(str(tmp_path), trainer.place(reference[2]), TINY)
    assert checkpoints.available_steps(str(tmp_path)) == [2]


# ------------------------------------------------------------- item 8: full disk
def test_full_disk_during_save_keeps_the_previous_checkpoint(tmp_path, trainer, reference,
                                                             monkeypatch):
    import orbax.checkpoint as ocp
    run_dir = str(tmp_path)
    _save_reference(trainer, reference, run_dir, [1, 2])
    real_save = ocp.StandardCheckpointer.save

    def save_then_fill(self, path, *args, **kwargs):
        real_save(self, path, *args, **kwargs)  # the data lands, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def digest_fills(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    for target, patch in ((ocp.StandardCheckpointer, ("save", save_then_fill)),
                          (checkpoints, ("_write_atomically", digest_fills))):
        with monkeypatch.context() as m:
            m.setattr(target, *patch)
            with pytest.raises(az.CheckpointError, match="No space left.*previous"):
                az.save_checkpoint(run_dir, trainer.place(reference[3]), TINY)
        assert checkpoints.available_steps(run_dir) == [2, 1]
        _assert_same(jax.device_get(az.restore_checkpoint(run_dir, trainer.init(), TINY)),
                     reference[2])
        print(f"\nfault: ENOSPC in {patch[0]} while saving checkpoint 3: CheckpointError, "
              f"checkpoints [2, 1] kept, 2 restores exactly; data lost: none")


# ---------------------------------------------- item 8: SIGKILL during a save
KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import orbax.checkpoint as ocp
    from orbax.checkpoint._src.path import atomicity
    from examples import selfplay as cli
    from jaxpuct.alphazero import checkpoints

    point, kill_step, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    saving = {"step": None}

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    real_save = checkpoints.save_checkpoint
    def save_checkpoint(run_dir, ts, config, keep=2):
        saving["step"] = int(ts.iteration)
        if point == "start" and saving["step"] == kill_step:
            die()
        return real_save(run_dir, ts, config, keep)
    checkpoints.save_checkpoint = save_checkpoint
    cli.az.save_checkpoint = save_checkpoint

    def wrap(owner, name, when):
        real = getattr(owner, name)
        def wrapper(*args, **kwargs):
            if saving["step"] == kill_step and when(*args):
                die()
            return real(*args, **kwargs)
        setattr(owner, name, wrapper)

    if point == "before_rename":  # orbax wrote every array to its temporary directory
        async def finalize(self, *args, **kwargs):
            if saving["step"] == kill_step:
                die()
            return await real_finalize(self, *args, **kwargs)
        real_finalize = atomicity.AtomicRenameTemporaryPath.finalize
        atomicity.AtomicRenameTemporaryPath.finalize = finalize
    elif point == "before_digest":  # the checkpoint is complete, its digest is not
        wrap(checkpoints, "_verify_written", lambda *a: True)
    elif point == "digest_replace":  # the digest's temporary file is written
        real_replace = os.replace
        def replace(src, dst):
            if saving["step"] == kill_step and dst.endswith(".sha256.json"):
                die()
            return real_replace(src, dst)
        checkpoints.os.replace = replace
    elif point == "prune":  # deleting the oldest checkpoint after a verified save
        wrap(checkpoints, "_remove_step", lambda run_dir, step: step < kill_step)
    cli.main(argv)
    print("FINISHED")
""")

def _subprocess_env(tmp_path_factory) -> dict[str, str]:
    """The subprocesses share a persistent compilation cache (they compile the
    same functions; only the first pays)."""
    cache = str(tmp_path_factory.getbasetemp() / "jax-cache")
    return dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu",
                JAX_COMPILATION_CACHE_DIR=cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")


# (kill point, step being saved, newest checkpoint that must restore)
KILL_POINTS = [("start", 3, 2), ("before_rename", 3, 2), ("before_digest", 3, 2),
               ("digest_replace", 3, 2), ("prune", 3, 3)]
# One kill point in the quick tier (make test), every point in the whole suite.
_SLOW_KILL_POINTS = ("start", "before_rename", "before_digest", "digest_replace")


@pytest.mark.parametrize("point,step,expected", [
    pytest.param(*p, id=p[0], marks=[pytest.mark.slow] if p[0] in _SLOW_KILL_POINTS else [])
    for p in KILL_POINTS])
def test_sigkill_during_save_then_resume_equals_uninterrupted(point, step, expected, tmp_path,
                                                              trainer, reference,
                                                              tmp_path_factory):
    env = _subprocess_env(tmp_path_factory)
    run_dir = str(tmp_path / "run")
    argv = TINY_ARGS + ["--run-dir", run_dir, "--iterations", "4"]
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, point, str(step), *argv],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert "FINISHED" not in proc.stdout
    restored = az.restore_checkpoint(run_dir, trainer.init(), TINY)
    _assert_same(jax.device_get(restored), reference[expected])  # buffer, iteration, ...
    # Resuming to the end equals the uninterrupted run (what --resume does).
    ts = restored
    for _ in range(4 - expected):
        ts, _ = trainer.iterate(ts)
    _assert_same(jax.device_get(ts), reference[4])
    # The metrics file of the killed run is still valid JSON lines.
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        assert [json.loads(line)["iteration"] for line in f] == list(range(1, step + 1))
    print(f"\nfault: SIGKILL at {point} while saving checkpoint {step}: checkpoint "
          f"{expected} restored exactly, resumed to 4 equal to the uninterrupted run; "
          f"data lost: none")


# ------------------------------------------- item 8: a size limit during a save
FSIZE_SCRIPT = textwrap.dedent("""
    import resource, signal, sys
    from examples import selfplay as cli
    # Writes past this size fail with EFBIG (instead of killing the process), as on
    # a full disk: the checkpoint's metadata files are larger, metrics lines are not.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    cli.main(sys.argv[1:])
""")


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE")
def test_size_limited_files_during_save_give_an_error_line(tmp_path, trainer, reference,
                                                           tmp_path_factory):
    run_dir = str(tmp_path)
    _save_reference(trainer, reference, run_dir, [1, 2])
    env = _subprocess_env(tmp_path_factory)
    proc = subprocess.run([sys.executable, "-c", FSIZE_SCRIPT, *TINY_ARGS, "--run-dir", run_dir,
                           "--iterations", "4", "--resume"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 1, proc.stderr[-3000:]
    # The error line may be spliced into a traceback that orbax's writer thread prints
    # at the same moment, so it is found anywhere in a line, not only at its start.
    errors = re.findall(r"error: [^\n]*", proc.stderr)
    assert len(errors) == 1, proc.stderr[-3000:]
    assert errors[0].startswith("error: could not save checkpoint 3") and "previous" in errors[0]
    # Orbax logs its writer thread's OSError (with its traceback) through absl;
    # nothing escapes the command line itself.
    assert "examples/selfplay.py" not in proc.stderr, proc.stderr[-3000:]
    assert checkpoints.available_steps(run_dir) == [2, 1]
    _assert_same(jax.device_get(az.restore_checkpoint(run_dir, trainer.init(), TINY)),
                 reference[2])
    print("\nfault: files limited to 4 KiB (RLIMIT_FSIZE) while saving checkpoint 3: error "
          "line, exit 1, checkpoints [2, 1] kept, 2 restores exactly; data lost: none")


# ------------------------------------------------- evaluation against OpenSpiel
def test_mcts_evaluation_goes_to_metrics_and_plot(tmp_path, fast_cli, monkeypatch):
    """--mcts-simulations: W/D/L by colour and the score's 95% interval in
    metrics.jsonl and a third panel in metrics.png. (8 games: the batch size, so
    the search compiled for the other tests' evaluations is reused.)"""
    pytest.importorskip("pyspiel")
    monkeypatch.setattr(cli, "evaluate", lambda *args: {})
    run_dir = tmp_path / "run"
    cli.main([a for a in TINY_ARGS if a != "--no-plot"]
             + ["--run-dir", str(run_dir), "--iterations", "1", "--mcts-simulations", "8",
                "--mcts-games", "8"])
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    last = records[0]
    counts = [last[f"eval_mcts_{c}_{r}"] for c in ("first", "second")
              for r in ("win", "draw", "loss")]
    assert sum(counts[:3]) == sum(counts[3:]) == 4
    score = (counts[0] + counts[3] + (counts[1] + counts[4]) / 2) / 8
    assert last["mcts_score"] == pytest.approx(score)
    assert last["mcts_score_low"] <= score <= last["mcts_score_high"]
    assert last["mcts_simulations"] == 8
    assert (run_dir / "metrics.png").exists()
    # Cadence: with the evaluations, or every --mcts-every iterations.
    options = az.RunOptions(mcts_simulations=8, eval_every=0)
    assert [cli.mcts_due(options, i, i == 3) for i in (1, 2, 3)] == [False, False, True]
    options = az.RunOptions(mcts_simulations=8, mcts_every=2)
    assert [cli.mcts_due(options, i, False) for i in (1, 2, 3, 4)] == [False, True, False, True]
    assert not cli.mcts_due(az.RunOptions(), 4, True)
    assert cli.mcts_due(az.RunOptions(mcts_simulations=8, mcts_every=2), 3, False, final=True)
    message = _exit_message(TINY_ARGS + ["--game", "go_9x9", "--buffer-size", "2048",
                                         "--mcts-simulations", "8",
                                         "--run-dir", str(tmp_path / "go")])
    assert "--mcts-simulations" in message and "go_9x9" in message


def test_checkpoint_written_before_an_optional_field_existed_restores(tmp_path, trainer,
                                                                      reference):
    """A checkpoint whose buffer has no ``root_value`` entry at all, and whose digest
    lists no files (as 0.3.0 wrote them), restores into today's state, where that
    field is ``None`` when off."""
    import orbax.checkpoint as ocp
    run_dir = str(tmp_path / "run")
    _save_reference(trainer, reference, run_dir, [1])
    ts = trainer.place(reference[1])
    assert ts.buffer.root_value is None

    def fields(node):
        return {f.name: getattr(node, f.name) for f in dataclasses.fields(node)}

    old_layout = {**fields(ts), "buffer": {k: v for k, v in fields(ts.buffer).items()
                                           if k != "root_value"},
                  "games": {k: v for k, v in fields(ts.games).items() if k != "root_value"}}
    step_dir = os.path.join(run_dir, "checkpoints", "1")
    shutil.rmtree(step_dir)
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(step_dir, old_layout)
        ckptr.wait_until_finished()
    with ocp.StandardCheckpointer() as ckptr:
        assert "root_value" not in ckptr.metadata(step_dir).item_metadata["buffer"]
    # Its digest file as 0.3.0 wrote them too: the arrays' hashes, no file list.
    digest_file = step_dir + ".sha256.json"
    with open(digest_file) as f:
        recorded = json.load(f)
    with open(digest_file, "w") as f:
        json.dump({k: v for k, v in recorded.items() if k != "files"}, f)
    _assert_same(jax.device_get(az.restore_checkpoint(run_dir, trainer.init(), TINY)),
                 reference[1])


def test_mcts_agent_simulations_build_their_own_search(fast_cli, trainer):
    """--mcts-agent-simulations: the agent against MCTSBot searches with that many
    simulations (its search is compiled once), the run's own count otherwise."""
    options = az.RunOptions(mcts_simulations=8)
    assert cli.mcts_agent(trainer, options) is trainer.act
    options = az.RunOptions(mcts_simulations=8, mcts_agent_simulations=2 * TINY.num_simulations)
    act = cli.mcts_agent(trainer, options)
    assert act is not trainer.act and cli.mcts_agent(trainer, options) is act
    from jaxpuct.alphazero import arena, selfplay
    fns = selfplay.make_search_fns(
        dataclasses.replace(TINY, num_simulations=2 * TINY.num_simulations),
        trainer.env, trainer.apply_fn, trainer.game.num_actions)
    reference = arena.greedy_search(fns)
    params = trainer.init().params
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    state = trainer.env_init(jax.random.PRNGKey(1), 8)
    np.testing.assert_array_equal(act(params, keys, state), reference(params, keys, state))


def test_max_minutes_ends_the_run_with_its_final_evaluation(tmp_path, fast_cli):
    """--max-minutes: the run stops at the first iteration past the budget of
    self-play and training time, evaluates and saves there as at --iterations, and
    logs the time spent as train_seconds."""
    run_dir = tmp_path / "run"
    result = cli.main(TINY_ARGS + ["--run-dir", str(run_dir), "--iterations", "50",
                                   "--checkpoint-every", "0", "--max-minutes", "1e-9"])
    assert result["iteration"] == 1 and result["final_eval"]
    assert checkpoints.available_steps(str(run_dir)) == [1]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 1 and 0 < records[0]["train_seconds"] <= records[0]["seconds"]


def test_progress_counts_towards_the_limit_that_ends_the_run():
    """With --max-minutes the bar shows the budget when it will end the run first,
    not "iterations of 10,000" with an ETA of hours."""
    # connect_four's defaults: 10,000 iterations or 60 minutes; 10 iterations took 6 s.
    p = cli.progress(10, 10000, 6.0, 3600.0, 0.6)
    assert (p.unit, p.done, p.total, p.eta_seconds) == ("min", 0.1, 60.0, 3594.0)
    # A budget that the iterations beat: the iterations end the run.
    p = cli.progress(10, 100, 6.0, 3600.0, 0.6)
    assert (p.unit, p.done, p.total) == ("it", 10, 100) and p.eta_seconds == pytest.approx(54)
    assert cli.progress(10, 100, 6.0, 0.0, 0.6).unit == "it"  # no budget
    assert cli.progress(0, 10000, 0.0, 3600.0, None).unit == "min"  # before the first
    assert cli.progress(3, 10000, 90.0, 60.0, 30.0).done == 1.0  # past the budget: full


def test_progress_bar_with_a_time_budget_shows_minutes(tmp_path, fast_cli, monkeypatch, capsys):
    monkeypatch.setattr(cli, "evaluate", lambda *args: {})
    args = [a for a in TINY_ARGS if a != "--no-progress"]
    cli.main(args + ["--run-dir", str(tmp_path / "run"), "--iterations", "50",
                     "--max-minutes", "1e-9"])
    bar = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "min" in bar and "100%" in bar and "/50" not in bar, bar


def test_game_defaults_apply_under_the_command_line():
    """Per-game defaults (examples/selfplay.py GAME_DEFAULTS) replace the field
    defaults for that game only; a flag or a caller's default still wins."""
    tuned = cli.GAME_DEFAULTS["connect_four"]
    assert tuned
    config, options = cli.parse(["--game", "connect_four"])
    merged = {**config.to_json(), **dataclasses.asdict(options)}
    for name, value in tuned.items():
        assert merged[name] == (list(value) if isinstance(value, tuple) else value), name
    config, _ = cli.parse(["--game", "connect_four", "--num-simulations", "7"])
    assert config.num_simulations == 7
    config, _ = cli.parse([], defaults={"game": "connect_four", "num_simulations": 5})
    assert config.num_simulations == 5 and config.game == "connect_four"
    assert cli.parse([]) == (az.SelfPlayConfig(), az.RunOptions())
    # Gumbel's target is its improved policy: the per-game visit target is left out,
    # and asked for by name it is refused.
    assert tuned["policy_target"] == "visits"
    for argv in (["--game", "connect_four", "--policy", "gumbel"],
                 ["--policy=gumbel", "--game=connect_four"]):
        config, _ = cli.parse(argv)
        assert config.policy == "gumbel" and config.policy_target == "played"
        assert config.temperature_moves == tuned["temperature_moves"]
    config, _ = cli.parse([], defaults={"game": "connect_four", "policy": "gumbel"})
    assert config.policy_target == "played"
    with pytest.raises(SystemExit):
        cli.parse(["--game", "connect_four", "--policy", "gumbel", "--policy-target", "visits"])


def test_arena_loads_the_network_of_a_run(tmp_path, trainer, reference):
    """arena.network_agent restores a run's newest checkpoint and its search plays
    (what examples/arena.py --run-dir does)."""
    pytest.importorskip("pyspiel")
    from jaxpuct.alphazero import arena
    run_dir = str(tmp_path / "run")
    _save_reference(trainer, reference, run_dir, [1, 2])
    agent, game, description = arena.network_agent(run_dir, num_simulations=2)
    assert game == "tic_tac_toe" and "iteration 2, 2 simulations" in description
    result = arena.play_match(agent, game, arena.BotSpec(kind="random"), num_games=2)
    assert result.first.games == result.second.games == 1


def _tree_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(root, f))
               for root, _, files in os.walk(path) for f in files)


def test_exported_network_plays_as_its_run_and_fails_its_checks_clearly(
        tmp_path, trainer, reference):
    """examples/export_network.py writes a run's network alone; every reader of a
    run directory (network_agent, ensembles) reads it back, bit for bit the
    checkpoint's parameters, and a damaged, foreign or partial export is refused."""
    from examples import export_network
    from jaxpuct.alphazero import arena
    from jaxpuct.testing import tictactoe
    run_dir, out = str(tmp_path / "run"), str(tmp_path / "net")
    _save_reference(trainer, reference, run_dir, [1, 2])
    assert export_network.main(["--run-dir", run_dir, "--step", "1", "--out", out]) == 0
    iteration, params = arena.restore_network(out, trainer)
    assert iteration == 1
    _assert_same(params, reference[1].params)
    assert _tree_bytes(out) < _tree_bytes(os.path.join(run_dir, "checkpoints", "1")) / 2

    positions = [p for p in tictactoe.all_positions() if sum(c != 0 for c in p) == 4][:32]
    state = tictactoe.pgx_states(positions)
    keys = jax.random.split(jax.random.key(0), len(positions))
    run_agent, _, _ = arena.network_agent(run_dir, step=1, num_simulations=4)
    agent, game, described = arena.network_agent(out, num_simulations=4)
    assert game == "tic_tac_toe" and f"{out} at iteration 1, 4 simulations" in described
    expected = np.asarray(run_agent(keys, state))
    np.testing.assert_array_equal(np.asarray(agent(keys, state)), expected)
    pair, _, paired = arena.network_agent(run_dir, step=1, num_simulations=4, ensemble=[out])
    assert f"averaged with {out} at iteration 1" in paired
    np.testing.assert_array_equal(np.asarray(pair(keys, state)), expected)

    with pytest.raises(az.CheckpointError, match="exports the network of iteration 1, not 2"):
        arena.restore_network(out, trainer, 2)
    wider = az.Trainer(dataclasses.replace(TINY, hidden=(32,)))
    with pytest.raises(az.CheckpointError, match="exports another network: leaf .* is "
                       r"float32\[.*16.*\], expected float32\[.*32.*\]"):
        checkpoints.load_network(out, jax.eval_shape(wider.init).params)
    damaged = str(tmp_path / "damaged")
    shutil.copytree(out, damaged)
    with open(os.path.join(damaged, "network.npz"), "r+b") as f:
        f.seek(-8, os.SEEK_END)
        f.write(b"\xff" * 8)
    with pytest.raises(az.CheckpointError, match="network.npz is missing or differs"):
        arena.restore_network(damaged, trainer)
    # An export cut short before its digest file is not taken for one: the
    # directory then reads as a run with no checkpoint.
    os.remove(os.path.join(damaged, "network.json"))
    assert not checkpoints.is_network_dir(damaged)
    with pytest.raises(az.CheckpointError, match="no usable checkpoint"):
        arena.restore_network(damaged, trainer)
    nan_params = jax.tree.map(lambda x: x * jnp.nan, params)
    with pytest.raises(az.CheckpointError, match="NaN or infinite"):
        checkpoints.save_network(str(tmp_path / "nan"), nan_params, 1, TINY)
    with pytest.raises(SystemExit, match="--out must be another directory"):
        export_network.main(["--run-dir", run_dir, "--out", run_dir])
    other_run = str(tmp_path / "other_run")
    _save_reference(trainer, reference, other_run, [1])
    with pytest.raises(SystemExit, match="holds a training run"):
        export_network.main(["--run-dir", run_dir, "--out", other_run])


# ------------------------------------------------- one process per run directory
def _snapshot(path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``path`` with its modification time and content."""
    return {os.path.relpath(f, path): (os.stat(f).st_mtime_ns, open(f, "rb").read())
            for f in _files(path)}


def test_a_second_process_on_a_busy_run_dir_refuses_and_touches_nothing(
        tmp_path, trainer, reference, fast_cli, tmp_path_factory, monkeypatch):
    from jaxpuct.alphazero import rundir
    monkeypatch.setattr(cli, "evaluate", lambda *args: {})
    run_dir = str(tmp_path / "run")
    _save_reference(trainer, reference, run_dir, [1, 2])
    with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
        f.write('{"iteration": 1}\n{"iteration": 2}\n')
    expected = f"error: run dir {run_dir} is in use by pid {os.getpid()} on {socket.gethostname()}"
    with rundir.acquire(run_dir):  # the first process (this one)
        before = _snapshot(run_dir)
        for extra in ([], ["--resume"], ["--overwrite"]):
            message = _exit_message(TINY_ARGS + ["--run-dir", run_dir, "--iterations", "4",
                                                 *extra])
            assert message == expected, extra
            assert _snapshot(run_dir) == before, extra
        # From a shell: that one line, status 1, at once (before anything compiles).
        tick = time.time()
        proc = subprocess.run([sys.executable, "-m", "examples.selfplay", *TINY_ARGS,
                               "--run-dir", run_dir, "--iterations", "4", "--resume"],
                              env=_subprocess_env(tmp_path_factory), cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        print(f"\nrefusal from a shell after {time.time() - tick:.1f} s")
        assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [expected]
        assert _snapshot(run_dir) == before
    assert not os.path.exists(os.path.join(run_dir, rundir.LOCK_FILE))  # released
    result = cli.main(TINY_ARGS + ["--run-dir", run_dir, "--iterations", "3", "--resume"])
    _assert_same(jax.device_get(result["state"]), reference[3])
    assert not os.path.exists(os.path.join(run_dir, rundir.LOCK_FILE))


LOCK_SCRIPT = textwrap.dedent("""
    import importlib.util, sys, time
    spec = importlib.util.spec_from_file_location("rundir", sys.argv[1])
    rundir = sys.modules["rundir"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rundir)
    rundir.acquire(sys.argv[2])
    print("locked", flush=True)
    time.sleep(120)
""")


def test_the_lock_of_a_killed_process_is_taken_over_with_a_warning(tmp_path, fast_cli,
                                                                   capsys, monkeypatch):
    from jaxpuct.alphazero import rundir
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # The holder loads the lock module alone (no JAX import: it starts at once).
    holder = subprocess.Popen([sys.executable, "-c", LOCK_SCRIPT, rundir.__file__,
                               str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    assert rundir.Holder.from_json((run_dir / rundir.LOCK_FILE).read_text()).pid == holder.pid
    with pytest.raises(rundir.RunDirInUse, match=f"in use by pid {holder.pid} on "):
        rundir.acquire(str(run_dir))
    holder.kill()
    holder.wait()
    monkeypatch.setattr(cli, "evaluate", lambda *args: {})
    cli.main(TINY_ARGS + ["--run-dir", str(run_dir), "--iterations", "1"])
    assert (f"warning: run dir {run_dir} was locked by pid {holder.pid} on "
            f"{socket.gethostname()}, which is gone") in capsys.readouterr().err
    assert not (run_dir / rundir.LOCK_FILE).exists()
    # Where flock excludes nothing (some network file systems), a lock file that
    # names a live process of this host still refuses: here the test's parent.
    parent = rundir.Holder(os.getppid(), socket.gethostname(), rundir._start_time(os.getppid()))
    (run_dir / rundir.LOCK_FILE).write_text(parent.to_json())
    with pytest.raises(rundir.RunDirInUse, match=f"in use by pid {os.getppid()} on "):
        rundir.acquire(str(run_dir))
    print("\nfault: the holder of a run dir's lock SIGKILLed: its lock was taken over "
          "with a warning, the run went on; a second live process refused")


# ------------------------------------------------------------ SIGINT and SIGTERM
def _check_interrupted(code, stderr: str, run_dir: str, signum: int) -> tuple[int, int]:
    """The one line and status of an interrupted run, and nothing left half-done;
    returns (iteration reached, newest checkpoint) from that line."""
    assert code == 128 + signum, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and stderr.strip().splitlines()[-1] == lines[0], stderr[-3000:]
    reached, newest = map(int, re.fullmatch(
        r"interrupted at iteration (\d+); newest intact checkpoint (\d+); resume with "
        r"--resume", lines[0]).groups())
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    assert not [n for n in os.listdir(ckpt_dir) if "orbax-checkpoint-tmp" in n]
    assert checkpoints.newest_intact_step(run_dir) == newest
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        assert [json.loads(line)["iteration"] for line in f] == list(range(1, reached + 1))
    return reached, newest


def _resume_equals_uninterrupted(run_dir: str, reference) -> None:
    """``--resume`` to iteration 4 gives the uninterrupted run's state, and every
    metrics line once."""
    result = cli.main(TINY_ARGS + ["--run-dir", run_dir, "--iterations", "4", "--resume"])
    _assert_same(jax.device_get(result["state"]), reference[4])
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        assert [json.loads(line)["iteration"] for line in f] == [1, 2, 3, 4]


# (point, signal, iteration, iteration reached, newest checkpoint, extra flags)
SIGNAL_POINTS = [
    ("iterate", signal.SIGTERM, 3, 2, 2, []),  # abandoned: nothing of 3 is written
    ("save", signal.SIGINT, 3, 3, 3, []),  # the save completes, then the run stops
    ("metrics", signal.SIGTERM, 3, 3, 2, ["--checkpoint-every", "2"]),  # the line completes
    ("restore", signal.SIGINT, 3, 2, 2, ["--resume"]),  # of checkpoint 2, read in full
]


@pytest.mark.parametrize("point,signum,at,reached,newest,extra", SIGNAL_POINTS,
                         ids=[p[0] for p in SIGNAL_POINTS])
def test_signal_stops_the_run_cleanly_and_resume_equals_uninterrupted(
        point, signum, at, reached, newest, extra, tmp_path, trainer, reference, fast_cli,
        monkeypatch, capsys):
    """A real signal, sent by the run to itself at a known point (the functions
    patched here are the test's hooks; the library has none), through the
    command line's handlers."""
    from orbax.checkpoint._src.path import atomicity
    monkeypatch.setattr(cli, "evaluate", lambda *args: {})
    run_dir = str(tmp_path / "run")
    if point == "restore":  # a run stopped at 2 earlier
        _save_reference(trainer, reference, run_dir, [2])
        with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
            f.write('{"iteration": 1}\n{"iteration": 2}\n')
    current = {"iteration": 0}

    def send(here: str, iteration: int) -> None:
        if here == point and iteration == at:
            os.kill(os.getpid(), signum)

    real_iterate, real_line = trainer.iterate, cli._json_line
    real_finalize, real_restore = (atomicity.AtomicRenameTemporaryPath.finalize,
                                   checkpoints._restore)

    def iterate(ts, *args, **kwargs):
        current["iteration"] = int(ts.iteration) + 1
        send("iterate", current["iteration"])
        return real_iterate(ts, *args, **kwargs)

    def json_line(record):
        send("metrics", record["iteration"])
        return real_line(record)

    async def finalize(self, *args, **kwargs):  # orbax wrote every array, not renamed yet
        send("save", current["iteration"])
        return await real_finalize(self, *args, **kwargs)

    def restore(path, template):
        send("restore", at)
        return real_restore(path, template)

    def unhandled(signum, frame):  # fails the test instead of ending pytest
        raise AssertionError(f"{signal.Signals(signum).name} reached no handler of the run")

    previous = {s: signal.signal(s, unhandled) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with monkeypatch.context() as m:
            m.setattr(trainer, "iterate", iterate)
            m.setattr(cli, "_json_line", json_line)
            m.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", finalize)
            m.setattr(checkpoints, "_restore", restore)
            capsys.readouterr()
            with pytest.raises(SystemExit) as info:
                cli.main(TINY_ARGS + ["--run-dir", run_dir, "--iterations", "4", *extra])
            stderr = capsys.readouterr().err
        assert signal.getsignal(signal.SIGINT) is unhandled  # the run put its handlers back
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert _check_interrupted(info.value.code, stderr, run_dir, signum) == (reached, newest)
    _resume_equals_uninterrupted(run_dir, reference)
    print(f"\nfault: {signal.Signals(signum).name} during {point} of iteration {at}: exit "
          f"{info.value.code}, one line, checkpoint {newest} intact, no temporary folder; "
          f"resumed to 4 equal to the uninterrupted run; data lost: none")


SIGNAL_SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    from orbax.checkpoint._src.path import atomicity
    from examples import selfplay as cli
    from jaxpuct.alphazero import trainer as trainer_lib

    point, argv = sys.argv[1], sys.argv[2:]
    current = {"iteration": 0}
    real_iterate = trainer_lib.Trainer.iterate
    def iterate(self, ts, *args, **kwargs):
        current["iteration"] = int(ts.iteration) + 1
        if point == "outside":  # room for a signal from outside
            time.sleep(1.0)
        return real_iterate(self, ts, *args, **kwargs)
    trainer_lib.Trainer.iterate = iterate

    real_finalize = atomicity.AtomicRenameTemporaryPath.finalize
    async def finalize(self, *args, **kwargs):  # orbax wrote every array, not renamed yet
        if point == "save" and current["iteration"] == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return await real_finalize(self, *args, **kwargs)
    atomicity.AtomicRenameTemporaryPath.finalize = finalize
    cli.evaluate = lambda *args: {}  # the tests here compare states, not games
    cli.main(argv)
    print("FINISHED")
""")


@pytest.mark.parametrize("point,signum", [
    pytest.param("save", signal.SIGINT, id="sigint_in_save"),
    pytest.param("outside", signal.SIGTERM, id="sigterm_from_outside", marks=pytest.mark.slow)])
def test_signal_to_a_process_stops_it_cleanly(point, signum, tmp_path, reference, fast_cli,
                                             tmp_path_factory, monkeypatch):
    """The same through a whole process: SIGINT inside the save of checkpoint 3
    (where Python's default printed orbax's thread tracebacks and left a
    temporary folder), and SIGTERM (what ``kill`` and schedulers send) from
    another process, wherever it lands once the first metrics line is written
    (each iteration sleeps a second first, so that the run is still going)."""
    monkeypatch.setattr(cli, "evaluate", lambda *args: {})
    run_dir = str(tmp_path / "run")
    metrics = os.path.join(run_dir, "metrics.jsonl")
    proc = subprocess.Popen([sys.executable, "-c", SIGNAL_SCRIPT, point, *TINY_ARGS,
                             "--run-dir", run_dir, "--iterations", "4"],
                            env=_subprocess_env(tmp_path_factory), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if point == "outside":
        deadline = time.time() + 240
        while not (os.path.exists(metrics) and open(metrics).read().strip()):
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.02)
        proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=240)
    assert "FINISHED" not in stdout
    reached, newest = _check_interrupted(proc.returncode, stderr, run_dir, signum)
    if point == "save":
        assert (reached, newest) == (3, 3)
    else:
        assert 1 <= newest <= reached < 4
    _resume_equals_uninterrupted(run_dir, reference)
    print(f"\nfault: {signal.Signals(signum).name} to the process ({point}): exit "
          f"{proc.returncode} at iteration {reached}, one line, checkpoint {newest} intact, "
          f"no temporary folder; resumed to 4 equal to the uninterrupted run; data lost: none")


@pytest.mark.slow
def test_arena_agent_with_the_solver_moves_optimally(tmp_path, trainer, reference):
    """``network_agent(solver=True)`` searches with the MCTS-solver whatever the run
    trained with (the run here trained without it). With six stones down (at most
    15 nodes below the root) 64 simulations prove every root, so every move must
    be minimax-optimal whatever the barely trained network says. (The proofs
    themselves are checked against minimax in tests/test_selfplay_solver.py.)"""
    from jaxpuct.alphazero import arena
    from jaxpuct.testing import tictactoe
    run_dir = str(tmp_path / "run")
    _save_reference(trainer, reference, run_dir, [1])
    agent, _, description = arena.network_agent(run_dir, num_simulations=64, solver=True)
    assert "MCTS-solver" in description
    assert "MCTS-solver" not in arena.network_agent(run_dir, num_simulations=2)[2]
    # The network under symmetries, whatever the run trained with (tested in
    # tests/test_selfplay.py); a name that is not one is refused by name.
    averaged = arena.network_agent(run_dir, num_simulations=2, symmetry="average")[2]
    assert "symmetries: average" in averaged
    with pytest.raises(ValueError, match="search_symmetry"):
        arena.network_agent(run_dir, num_simulations=2, symmetry="mirror")
    # An ensemble of the run with itself plays the run's moves (the mean of equal
    # networks is that network); a member that is no run is named as such.
    plain, _, _ = arena.network_agent(run_dir, num_simulations=2)
    pair, _, paired = arena.network_agent(run_dir, num_simulations=2, ensemble=[run_dir])
    assert f"averaged with {run_dir} at iteration 1" in paired
    with pytest.raises(az.CheckpointError, match="ensemble member .* does not exist"):
        arena.network_agent(run_dir, ensemble=[str(tmp_path / "none")])
    positions = [p for p in tictactoe.all_positions()
                 if sum(c != 0 for c in p) == 6][:64]
    state = tictactoe.pgx_states(positions)
    keys = jax.random.split(jax.random.key(0), len(positions))
    action = np.asarray(agent(keys, state))
    optimal = tictactoe.optimal_move_table()[[tictactoe.code(p) for p in positions]]
    assert np.all(optimal[np.arange(len(positions)), action])
    np.testing.assert_array_equal(np.asarray(pair(keys, state)), np.asarray(plain(keys, state)))
    # With graph search as well (the run trained without it), the proofs still make
    # every move optimal.
    graph, _, described = arena.network_agent(run_dir, num_simulations=64, solver=True,
                                              graph_search=True)
    assert "MCTS-solver, graph search" in described
    action = np.asarray(graph(keys, state))
    assert np.all(optimal[np.arange(len(positions)), action])

"""Checkpoints of the whole training state, with integrity checks.

Layout under a run directory::

    config.json                 the SelfPlayConfig (what the run computes)
    checkpoints/<step>/         orbax StandardCheckpointer of the TrainState pytree
                                (its own named keys: params, opt_state, buffer, ...)
    checkpoints/<step>.sha256.json
                                SHA-256 of every array of that state, by key path,
                                and of every file of checkpoints/<step>/, by path,
                                written after the checkpoint was read back intact

A run's network alone can be exported (:func:`save_network`) to a directory of
its own, a few hundred kilobytes where a checkpoint with its replay buffer is
megabytes::

    config.json                 the run's SelfPlayConfig
    network.npz                 the parameters, one array per leaf
    network.json                the iteration, every leaf's key path and SHA-256,
                                and the SHA-256 of network.npz

:func:`load_network` reads it back with the same integrity checks; the arena and
the connect-four benchmarks accept such a directory wherever they take a run's.

A checkpoint counts only when its ``.sha256.json`` exists, its files hash to the
recorded values (checked before orbax opens any of them, so a damaged file is
named in the error rather than met inside orbax's readers) and the arrays restored
from it hash to the same values: a save killed at any point, a truncated,
corrupted or deleted file all make it not count, and :func:`restore_checkpoint`
falls back to the newest one that does (or fails with :class:`CheckpointError`
when asked for a named step). Older checkpoints are deleted only after a newer
one has been written, read back and verified, so a good checkpoint is always on
disk. Orbax writes each checkpoint to a temporary directory and renames it when
complete (its atomicity guarantee), so a half-written one never has the final
name.

Multi-host: the hashes are taken on ``np.asarray`` of each array, i.e. on one
host holding all of it; a multi-host run would hash its addressable shards.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpuct.alphazero.config import SelfPlayConfig, flag

__all__ = ["CheckpointError", "available_steps", "file_digest", "is_network_dir",
           "load_config", "load_network", "newest_intact_step", "remove_partial_saves",
           "restore_checkpoint", "save_checkpoint", "save_network", "state_digest"]

_CONFIG_FILE = "config.json"
_NETWORK_FILE = "network.npz"
_NETWORK_DIGEST = "network.json"
_DIGEST_SUFFIX = ".sha256.json"
_STEP_NAME = re.compile(r"^\d+$")
# Orbax writes a checkpoint to "<step>.orbax-checkpoint-tmp-<timestamp>" and
# renames it when complete.
_ORBAX_TMP = ".orbax-checkpoint-tmp"


class CheckpointError(RuntimeError):
    """A checkpoint could not be written or used; the message says why and where."""


def _checkpoint_dir(run_dir: str) -> str:
    return os.path.join(os.path.abspath(run_dir), "checkpoints")


def _step_dir(run_dir: str, step: int) -> str:
    return os.path.join(_checkpoint_dir(run_dir), str(step))


def _digest_path(run_dir: str, step: int) -> str:
    return _step_dir(run_dir, step) + _DIGEST_SUFFIX


def _write_atomically(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary file and a rename, so that a
    crash leaves either the old file or the new one, never half of one."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def state_digest(tree: Any) -> dict[str, str]:
    """SHA-256 of every array leaf of ``tree`` (dtype, shape and bytes), by key path."""
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        array = np.ascontiguousarray(np.asarray(jax.device_get(leaf)))
        h = hashlib.sha256(f"{array.dtype}{array.shape}".encode())
        h.update(array.tobytes())
        out[jax.tree_util.keystr(path)] = h.hexdigest()
    return out


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_digest(directory: str) -> dict[str, str]:
    """SHA-256 of every file under ``directory``, by its path relative to it."""
    out = {}
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            out[os.path.relpath(path, directory)] = _file_sha256(path)
    return out


def _check_files(run_dir: str, step: int, expected: dict[str, str]) -> None:
    """Raises :class:`CheckpointError` naming the first of the step's recorded files
    that is missing or differs (files added since are not looked at)."""
    directory = _step_dir(run_dir, step)
    for name, want in sorted(expected.items()):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise CheckpointError(f"checkpoint {step} is damaged: its file {path} is missing")
        if _file_sha256(path) != want:
            raise CheckpointError(f"checkpoint {step} fails its integrity check: its file "
                                  f"{path} differs from {_digest_path(run_dir, step)}")


def _all_finite(tree: Any) -> bool:
    return all(bool(np.all(np.isfinite(np.asarray(jax.device_get(x)))))
               for x in jax.tree.leaves(tree))


def available_steps(run_dir: str) -> list[int]:
    """Steps with a checkpoint directory (complete or not), newest first."""
    ckpt_dir = _checkpoint_dir(run_dir)
    if not os.path.isdir(ckpt_dir):
        return []
    return sorted((int(n) for n in os.listdir(ckpt_dir) if _STEP_NAME.match(n)), reverse=True)


def _verified_steps(run_dir: str) -> list[int]:
    return [s for s in available_steps(run_dir) if os.path.exists(_digest_path(run_dir, s))]


def newest_intact_step(run_dir: str) -> int | None:
    """The newest step whose save completed (it was read back and verified, and
    its digest file written); None if there is none. What ``--resume`` restores
    unless a file of it has been damaged since."""
    steps = _verified_steps(run_dir)
    return steps[0] if steps else None


def remove_partial_saves(run_dir: str) -> list[str]:
    """Deletes orbax's temporary folders of saves that never finished (a process
    killed inside a save leaves one behind); returns their names.

    Call it only while holding the run directory's lock
    (:mod:`jaxpuct.alphazero.rundir`): another process's save in progress looks
    the same."""
    ckpt_dir = _checkpoint_dir(run_dir)
    if not os.path.isdir(ckpt_dir):
        return []
    names = sorted(n for n in os.listdir(ckpt_dir) if _ORBAX_TMP in n)
    for name in names:
        shutil.rmtree(os.path.join(ckpt_dir, name), ignore_errors=True)
    return names


def _abstract(template: Any) -> Any:
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), template)


def _on_disk(template: Any, saved: Any) -> Any:
    """``template`` as a tree of dicts shaped like the checkpoint on disk.

    Dataclass nodes (the state, games, buffer) become dicts of their fields, and a
    field that is ``None`` in ``template`` and absent from ``saved`` (the on-disk
    tree metadata) is left out: an optional field added after a checkpoint was
    written (the buffer's ``root_value``) is then no obstacle to reading it."""
    if dataclasses.is_dataclass(template) and not isinstance(template, type):
        out = {}
        for field in dataclasses.fields(template):
            value = getattr(template, field.name)
            on_disk = field.name in saved if saved is not None else True
            if value is None and not on_disk:
                continue
            out[field.name] = _on_disk(value, saved[field.name] if on_disk and saved
                                       is not None else None)
        return out
    return template


def _from_disk(template: Any, restored: Any) -> Any:
    """``template``'s structure with the values of ``restored`` (see :func:`_on_disk`)."""
    if dataclasses.is_dataclass(template) and not isinstance(template, type):
        # Every dataclass a state holds is a chex one or the Tree: both have replace.
        return template.replace(**{name: _from_disk(getattr(template, name), value)  # pyright: ignore[reportAttributeAccessIssue]
                                   for name, value in restored.items()})
    return restored


def _placed_like(template: Any, restored: Any) -> Any:
    """``restored`` uncommitted where ``template`` is: orbax returns committed
    arrays, and jit keys its cache on that, so a resumed run compiled every
    function a second time (the MuZero example's play and train steps)."""
    if isinstance(template, jax.Array) and not template.committed:
        return jnp.asarray(np.asarray(restored))
    return restored


def _restore(path: str, template: Any) -> Any:
    """The checkpoint at ``path`` in ``template``'s structure, shapes and shardings."""
    import orbax.checkpoint as ocp
    with ocp.StandardCheckpointer() as ckptr:
        saved = ckptr.metadata(path).item_metadata
        restored = ckptr.restore(path, _abstract(_on_disk(template, saved)))
    return jax.tree.map(_placed_like, template, _from_disk(template, restored))


def _read(run_dir: str, step: int, template: Any) -> Any:
    """The state saved at ``step``, verified against its digest file."""
    digest_file = _digest_path(run_dir, step)
    if not os.path.exists(digest_file):
        raise CheckpointError(f"checkpoint {step} is incomplete ({digest_file} is missing: "
                              f"the save did not finish)")
    try:
        with open(digest_file) as f:
            recorded = json.load(f)
        expected, files = recorded["sha256"], recorded.get("files")
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"checkpoint {step}: unreadable {digest_file}: {err}") from err
    if files is not None:  # absent in checkpoints written before it was recorded
        try:
            _check_files(run_dir, step, files)
        except (OSError, AttributeError, TypeError) as err:
            raise CheckpointError(f"checkpoint {step}: its files cannot be checked "
                                  f"against {digest_file}: {err}") from err
    try:
        state = _restore(_step_dir(run_dir, step), template)
    except Exception as err:  # orbax and tensorstore raise many kinds
        raise CheckpointError(f"checkpoint {step} is corrupt or does not match this "
                              f"configuration: {type(err).__name__}: {str(err)[:300]}") from err
    got = state_digest(state)
    bad = sorted(k for k in set(expected) | set(got) if expected.get(k) != got.get(k))
    if bad:
        raise CheckpointError(f"checkpoint {step} fails its integrity check ({len(bad)} "
                              f"arrays differ from {digest_file}, e.g. {bad[0]})")
    if not _all_finite(state.params):  # saved by other code than save_checkpoint
        raise CheckpointError(f"checkpoint {step} holds NaN or infinite parameters")
    return state


def save_checkpoint(run_dir: str, ts: Any, config: SelfPlayConfig, keep: int = 2) -> int:
    """Saves ``ts`` as ``run_dir/checkpoints/<ts.iteration>``, reads it back and
    verifies it, then deletes all but the newest ``keep`` verified checkpoints
    (and any newer than this one: see :func:`_prune`).

    Returns:
      The step saved.

    Raises:
      CheckpointError: the parameters are not finite (nothing is written), or the
        save failed (e.g. a full disk): the partial checkpoint is removed and the
        older ones are untouched.
    """
    import orbax.checkpoint as ocp
    step = int(jax.device_get(ts.iteration))
    path = _step_dir(run_dir, step)
    if not _all_finite(ts.params):
        raise CheckpointError(f"refusing to save checkpoint {step}: the parameters hold NaN "
                              f"or infinite values")
    try:
        os.makedirs(_checkpoint_dir(run_dir), exist_ok=True)
        _write_atomically(os.path.join(run_dir, _CONFIG_FILE),
                          json.dumps(config.to_json(), indent=1, sort_keys=True))
        # A directory of this step can only be left over from a save that did not
        # finish (or from a run resumed from an older step): it is replaced.
        _remove_step(run_dir, step)
        with ocp.StandardCheckpointer() as ckptr:
            ckptr.save(path, ts)
            ckptr.wait_until_finished()
        digest = state_digest(ts)
        _verify_written(run_dir, step, ts, digest)
        _write_atomically(_digest_path(run_dir, step),
                          json.dumps({"step": step, "sha256": digest,
                                      "files": file_digest(path)}, indent=0))
    except CheckpointError:
        _remove_step(run_dir, step)
        raise
    except Exception as err:  # OSError (ENOSPC, EROFS, ...) or orbax's wrappers of it
        _remove_step(run_dir, step)
        raise CheckpointError(f"could not save checkpoint {step} in "
                              f"{_checkpoint_dir(run_dir)!r}: {type(err).__name__}: {err}; "
                              f"the previous checkpoints are kept") from err
    _prune(run_dir, keep, step)
    return step


def _verify_written(run_dir: str, step: int, ts: Any, digest: dict[str, str]) -> None:
    back = _restore(_step_dir(run_dir, step), ts)
    if state_digest(back) != digest:
        raise CheckpointError(f"checkpoint {step} in {_checkpoint_dir(run_dir)!r} reads back "
                              f"different from what was written")


def _remove_step(run_dir: str, step: int) -> None:
    # The digest first: without it a half-deleted directory no longer counts.
    if os.path.exists(_digest_path(run_dir, step)):
        os.remove(_digest_path(run_dir, step))
    shutil.rmtree(_step_dir(run_dir, step), ignore_errors=True)


def _prune(run_dir: str, keep: int, saved: int) -> None:
    """Deletes every checkpoint but the newest ``keep`` verified ones up to the one
    just ``saved``. Newer ones come from a run that was resumed from an older step
    (``--resume-step``): they are another history, and resuming from them later
    would mix the two (the metrics file drops their lines likewise)."""
    kept = set([s for s in _verified_steps(run_dir) if s <= saved][:keep])
    for step in available_steps(run_dir):
        if step not in kept:
            _remove_step(run_dir, step)


def load_config(run_dir: str, config_type: type = SelfPlayConfig) -> Any:
    """The config saved in ``run_dir`` (raises :class:`CheckpointError`), read by
    ``config_type.from_json`` (``SelfPlayConfig``, or another frozen config with
    ``to_json``/``from_json`` such as ``jaxpuct.muzero.config.MuZeroConfig``)."""
    path = os.path.join(os.path.abspath(run_dir), _CONFIG_FILE)
    try:
        with open(path) as f:
            return config_type.from_json(json.load(f))
    except FileNotFoundError as err:
        raise CheckpointError(f"no checkpoint in {run_dir!r}: {path} is missing "
                              f"(start without --resume, or pass the right --run-dir)") from err
    except (ValueError, TypeError, KeyError) as err:
        raise CheckpointError(f"corrupt run config {path}: {err}") from err


def _check_same_config(run_dir: str, saved: SelfPlayConfig, config: SelfPlayConfig) -> None:
    if saved == config:
        return
    diff = [f"{flag(f.name)}: saved {getattr(saved, f.name)!r}, now "
            f"{getattr(config, f.name)!r}" for f in dataclasses.fields(config)
            if getattr(saved, f.name) != getattr(config, f.name)]
    raise CheckpointError(f"checkpoint in {run_dir!r} was made with a different "
                          f"configuration ({'; '.join(diff)}); resume with the options of "
                          f"that run, or use another run directory")


def restore_checkpoint(run_dir: str, template: Any, config: SelfPlayConfig,
                       step: int | None = None) -> Any:
    """Restores a checkpoint of ``run_dir`` into ``template``'s structure, shapes,
    dtypes and shardings.

    Args:
      run_dir: the run directory.
      template: a state of the right structure (e.g. ``Trainer.init()``).
      config: must equal the saved config.
      step: the checkpoint to restore; ``None``: the newest intact one (an
        unusable newer one is reported on stderr and skipped).

    Raises:
      CheckpointError: no checkpoint, a config that differs from ``config`` (the
        differing flags are listed), the named ``step`` is unusable, or none is.
    """
    _check_same_config(run_dir, load_config(run_dir, type(config)), config)
    ckpt_dir = _checkpoint_dir(run_dir)
    steps = available_steps(run_dir)
    if step is not None:
        if step not in steps:
            raise CheckpointError(f"no checkpoint {step} in {ckpt_dir!r}; available: "
                                  f"{', '.join(map(str, steps)) or 'none'}")
        steps = [step]
    problems = []
    for candidate in steps:
        try:
            state = _read(run_dir, candidate, template)
        except CheckpointError as err:
            if step is not None:
                raise CheckpointError(f"{err} (in {ckpt_dir!r})") from err
            problems.append(str(err))
            print(f"warning: skipping checkpoint {candidate} in {ckpt_dir!r}: {err}",
                  file=sys.stderr)
            continue
        return state
    raise CheckpointError(f"no usable checkpoint in {ckpt_dir!r}"
                          + (f": {'; '.join(problems)}" if problems else ""))


def is_network_dir(directory: str) -> bool:
    """``directory`` holds an exported network (:func:`save_network`)."""
    return os.path.isfile(os.path.join(directory, _NETWORK_DIGEST))


def save_network(directory: str, params: Any, iteration: int, config: Any) -> None:
    """Exports a network: ``config`` (its ``to_json``), ``params`` and the
    iteration it was trained to, to ``directory`` (created; files already there
    are replaced). The digest file is written last, so a directory whose export
    was interrupted is not taken for a network.

    Raises:
      CheckpointError: ``params`` holds NaN or infinite values, or ``directory``
        holds a training run (its config would be overwritten).
    """
    if not _all_finite(params):
        raise CheckpointError("the network to export holds NaN or infinite parameters")
    if os.path.isdir(_checkpoint_dir(directory)):
        raise CheckpointError(f"{directory!r} holds a training run (checkpoints/); export "
                              f"the network to another directory")
    os.makedirs(directory, exist_ok=True)
    digest_path = os.path.join(directory, _NETWORK_DIGEST)
    if os.path.exists(digest_path):
        os.remove(digest_path)
    _write_atomically(os.path.join(directory, _CONFIG_FILE),
                      json.dumps(config.to_json(), indent=1, sort_keys=True))
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    path = os.path.join(directory, _NETWORK_FILE)
    tmp = f"{path}.tmp-{os.getpid()}.npz"
    # Positional names: the key paths hold brackets and quotes, kept in the digest.
    arrays: dict[str, Any] = {f"leaf_{i}": np.asarray(jax.device_get(leaf))
                              for i, (_, leaf) in enumerate(leaves)}
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    record = {"iteration": int(iteration),
              "leaves": [jax.tree_util.keystr(p) for p, _ in leaves],
              "sha256": state_digest(params), "file_sha256": _file_sha256(path)}
    _write_atomically(digest_path, json.dumps(record, indent=1))


def load_network(directory: str, template: Any) -> tuple[int, Any]:
    """An exported network (:func:`save_network`) in ``template``'s structure.

    Args:
      directory: the export's directory.
      template: parameters of the same network (arrays or ``jax.ShapeDtypeStruct``,
        e.g. ``jax.eval_shape(trainer.init).params``): the structure, shapes and
        dtypes to read into.

    Returns:
      ``(iteration, params)``.

    Raises:
      CheckpointError: no export there, a file that fails its digest, another
        network's parameters (the first differing leaf named), or non-finite values.
    """
    digest_path = os.path.join(directory, _NETWORK_DIGEST)
    path = os.path.join(directory, _NETWORK_FILE)
    try:
        with open(digest_path) as f:
            record = json.load(f)
        iteration, names, expected = record["iteration"], record["leaves"], record["sha256"]
        file_sha = record["file_sha256"]
    except FileNotFoundError as err:
        raise CheckpointError(f"{directory!r} holds no exported network ({digest_path} "
                              f"is missing)") from err
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"unreadable {digest_path}: {err}") from err
    if not os.path.isfile(path) or _file_sha256(path) != file_sha:
        raise CheckpointError(f"exported network {path} is missing or differs from "
                              f"{digest_path}")
    slots, treedef = jax.tree_util.tree_flatten_with_path(template)
    wanted = [jax.tree_util.keystr(p) for p, _ in slots]
    if wanted != names:
        # strict=False: a shorter list's end is itself the difference.
        first = next((f"leaf {n!r} where {w!r} was expected"
                      for w, n in zip(wanted, names, strict=False) if w != n),
                     f"{len(names)} leaves where {len(wanted)} were expected")
        raise CheckpointError(f"{directory!r} exports another network: {first}")
    with np.load(path) as data:
        arrays = [data[f"leaf_{i}"] for i in range(len(names))]
    for name, array, (_, slot) in zip(names, arrays, slots, strict=True):
        if array.shape != tuple(slot.shape) or array.dtype != slot.dtype:
            raise CheckpointError(
                f"{directory!r} exports another network: leaf {name} is "
                f"{array.dtype}{list(array.shape)}, expected {slot.dtype}{list(slot.shape)}")
    params = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(a) for a in arrays])
    got = state_digest(params)
    bad = sorted(k for k in set(expected) | set(got) if expected.get(k) != got.get(k))
    if bad:
        raise CheckpointError(f"exported network in {directory!r} fails its integrity "
                              f"check ({len(bad)} leaves differ, e.g. {bad[0]})")
    if not _all_finite(params):
        raise CheckpointError(f"exported network in {directory!r} holds NaN or infinite "
                              f"parameters")
    return int(iteration), params

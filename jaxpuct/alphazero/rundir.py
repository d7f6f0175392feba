"""One process per run directory: a lock file taken atomically at start.

Two training processes on one run directory corrupt each other: their metrics
lines interleave, one overwrites the other's ``config.json``, and their orbax
saves and prunes delete each other's files. So a run first takes
``<run dir>/.lock``:

* the file holds the pid, host and (on Linux) start time of the holder, so that
  a refusal can say who holds it;
* the exclusion itself is an exclusive ``flock(2)`` on that file, held as long
  as the process lives. The kernel takes it atomically and drops it when the
  process dies, however it dies (SIGKILL included), so a lock whose holder is
  gone is free again, and two processes taking over the same stale lock cannot
  both win (which a lock that is only a file created with ``O_CREAT | O_EXCL``
  cannot guarantee: removing a stale file and creating a new one are two steps).
  ``flock`` works across hosts on NFS (Linux emulates it with NFS byte-range
  locks).

A leftover lock file whose ``flock`` is free means its holder died without
releasing it: it is taken over with a warning. As a second line of defence (file
systems where ``flock`` is a no-op), a holder on this host whose process still
runs (same pid and start time) is refused as well.

POSIX only (``fcntl``).

:func:`read_json_lines` reads what a run appends (``metrics.jsonl``), skipping a
line torn by a process killed in mid-write.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import os
import socket
import sys
import tempfile
from typing import Any

__all__ = ["LOCK_FILE", "Holder", "RunDirInUse", "RunDirLock", "acquire", "read_json_lines",
           "unwritable"]

LOCK_FILE = ".lock"


@dataclasses.dataclass(frozen=True)
class Holder:
    """A process that holds (or held) a run directory's lock.

    Attributes:
      pid: its process id.
      host: ``socket.gethostname()`` where it runs.
      started: its start time in clock ticks since boot (``/proc/<pid>/stat``),
        which tells a live holder from another process that reuses its pid; None
        where that is not available.
    """

    pid: int
    host: str
    started: int | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Holder | None:
        """The holder in a lock file's text; None for an empty or unreadable one
        (a holder between creating the file and writing it)."""
        try:
            data = json.loads(text)
            return cls(pid=int(data["pid"]), host=str(data["host"]),
                       started=None if data.get("started") is None else int(data["started"]))
        except (ValueError, TypeError, KeyError):
            return None


class RunDirInUse(RuntimeError):
    """Another process holds the run directory's lock."""

    def __init__(self, run_dir: str, holder: Holder | None):
        self.run_dir, self.holder = run_dir, holder
        who = (f"pid {holder.pid} on {holder.host}" if holder is not None
               else "another process (its lock file is being written)")
        super().__init__(f"run dir {run_dir} is in use by {who}")


def _start_time(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat``; None without procfs or without that pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # The command name (field 2) may hold spaces and parentheses: split
            # after its closing parenthesis.
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(holder: Holder) -> bool:
    """Whether ``holder`` (a process on this host) still runs."""
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    return holder.started is None or _start_time(holder.pid) in (None, holder.started)


def current_holder() -> Holder:
    pid = os.getpid()
    return Holder(pid=pid, host=socket.gethostname(), started=_start_time(pid))


def _read(fd: int) -> Holder | None:
    os.lseek(fd, 0, os.SEEK_SET)
    return Holder.from_json(os.read(fd, 4096).decode(errors="replace"))


def _write(fd: int, holder: Holder) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, holder.to_json().encode(), 0)
    os.fsync(fd)


def _same_file(fd: int, path: str) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


@dataclasses.dataclass(frozen=True)
class RunDirLock:
    """A held run-directory lock; :meth:`release` (or leaving the ``with``) frees it.

    Attributes:
      path: the lock file.
      fd: its descriptor, which carries the ``flock``.
      taken_over: the previous holder, where its lock was left behind by a
        process that is gone; None for a free directory.
    """

    path: str
    fd: int
    taken_over: Holder | None = None

    def release(self) -> None:
        """Removes the lock file, then drops the ``flock`` (in that order, so that
        a process waiting on the old file sees it unlinked and opens a new one)."""
        try:
            if _same_file(self.fd, self.path):
                os.remove(self.path)
        finally:
            os.close(self.fd)

    def __enter__(self) -> RunDirLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire(run_dir: str, warn=None) -> RunDirLock:
    """Takes the lock of ``run_dir`` (which must exist) for this process.

    Args:
      run_dir: the run directory.
      warn: called with a one-line message when a stale lock is taken over
        (default: print to stderr).

    Raises:
      RunDirInUse: another live process holds it.
      OSError: the lock file cannot be created or written (an unwritable run
        directory).
    """
    warn = warn or (lambda line: print(line, file=sys.stderr))
    path = os.path.join(run_dir, LOCK_FILE)
    me = current_holder()
    # A retry only when the holder released (unlinked) the file between our open
    # and our flock: we then hold a lock on a file nobody else will ever open.
    for _ in range(100):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _read(fd) if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else None
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise RunDirInUse(run_dir, holder) from None
            raise
        if not _same_file(fd, path):
            os.close(fd)
            continue
        previous = _read(fd)
        if (previous is not None and previous.host == me.host and previous.pid != me.pid
                and _alive(previous)):
            os.close(fd)  # flock did not exclude it: a file system without flock
            raise RunDirInUse(run_dir, previous)
        _write(fd, me)
        if previous is not None:
            warn(f"warning: run dir {run_dir} was locked by pid {previous.pid} on "
                 f"{previous.host}, which is gone (killed?); taking the lock over")
        return RunDirLock(path=path, fd=fd, taken_over=previous)
    raise RunDirInUse(run_dir, None)


def unwritable(directory: str) -> str | None:
    """Why a file cannot be created in ``directory`` (None: it can).

    Tries it (a temporary file, removed at once): permission bits alone do not
    tell, e.g. for root or on a read-only file system."""
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".write-probe-")
        os.close(fd)
        os.remove(probe)
    except OSError as err:
        return str(err.strerror or err)
    return None


def read_json_lines(path: str) -> list[dict[str, Any]]:
    """The JSON objects of the lines of ``path``, in order: none if the file is
    missing; a line that does not parse (torn by a killed writer) is skipped."""
    rows: list[dict[str, Any]] = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows

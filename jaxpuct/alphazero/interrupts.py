"""Ctrl-C and SIGTERM in a training run: stop between steps, never inside a write.

Python's default turns SIGINT into a ``KeyboardInterrupt`` wherever the main
thread happens to be. Inside an orbax save that means the writer threads keep
going while the main thread unwinds (about a hundred lines of their tracebacks,
and a ``<step>.orbax-checkpoint-tmp`` folder left behind); inside the write of a
metrics line it means half a line. SIGTERM (what schedulers and ``kill`` send)
ends the process at once, with the same risks.

:class:`SignalGuard` handles both: outside a :meth:`SignalGuard.protected`
section a signal raises :class:`Interrupted` at once (computation is abandoned,
which loses nothing that a resume does not recompute); inside one it is held
until the section ends, so every write that has begun completes. The command
line catches :class:`Interrupted`, says where the run stopped, and exits with
``128 + signal number`` (130 for SIGINT, 143 for SIGTERM), what a shell reports
for a process ended by that signal.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["Interrupted", "SignalGuard"]

HANDLED = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):  # noqa: N818 (a signal, like KeyboardInterrupt)
    """A handled signal arrived; a ``BaseException`` so that ``except Exception``
    in library code (orbax, jax) does not swallow it, as for ``KeyboardInterrupt``.

    Attributes:
      signum: the signal.
      iteration: where the run had got to, set by the code that knows it on the
        way out (None: not known).
    """

    def __init__(self, signum: int, iteration: int | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.iteration = iteration

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


class SignalGuard:
    """Handlers for SIGINT and SIGTERM while in its ``with`` block (the previous
    handlers come back after it). Only the main thread can install handlers;
    elsewhere the guard does nothing and signals keep their handlers."""

    def __init__(self, signals: tuple[int, ...] = HANDLED):
        self._signals = signals
        # Handlers as signal.signal returns them (typeshed's name for that type is private).
        self._previous: dict[int, Any] = {}
        self._depth = 0
        self.pending: int | None = None

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in self._signals:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame) -> None:
        if self._depth:
            self.pending = self.pending or signum  # the first one decides the status
            return
        raise Interrupted(signum)

    @contextlib.contextmanager
    def protected(self) -> Iterator[None]:
        """A section that a signal does not interrupt: one that arrives inside it
        raises :class:`Interrupted` when the section ends (unless the section
        raised something else, which then goes first)."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if not self._depth and self.pending is not None:
            raise Interrupted(self.pending)

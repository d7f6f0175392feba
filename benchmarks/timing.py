"""Wall-clock medians of jitted calls, shared by the benchmark scripts."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import jax


def median_seconds(fn: Callable, *args, reps: int, warm: bool = False) -> float:
    """Median wall seconds of ``fn(*args)`` over ``reps`` calls, each waited for with
    ``block_until_ready``; ``warm`` makes one untimed call first (the compile)."""
    if warm:
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)

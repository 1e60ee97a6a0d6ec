"""Timing in tests on a shared machine: a bound is a ratio to another measurement taken in the same test, so
that the machine's load, which slows both, does not decide the result."""

from __future__ import annotations

import time
from collections.abc import Callable


def fastest(fn: Callable[[], object], repeats: int = 3) -> float:
    """The fastest of `repeats` runs of fn(), in seconds (the run least disturbed by other processes)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)

"""A planted host stall or drift for tests (`loadtest.benchmarks.planted`): a SCHED_FIFO busy loop that takes one
core (or a growing share of it) from every other process; a machine that refuses real-time scheduling skips the
test, saying why.

    with host_stall(core=0, stall_ms=20, every_s=0.5, max_s=10):
        ...  # every 0.5 s, nothing else runs on core 0 for 20 ms

Not for: a stall inside the server (the null backend's `--null_stall_ms`/`--null_stall_every_s`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from loadtest.benchmarks import planted
from loadtest.benchmarks.planted import refused_reason

__all__ = ["host_drift", "host_stall"]


@contextmanager
def host_stall(core: int, stall_ms: float, every_s: float, max_s: float) -> Iterator[subprocess.Popen]:
    """A busy loop holding `core` for `stall_ms` every `every_s` at SCHED_FIFO priority 50, for at most `max_s`."""
    with _skipped_where_refused(), planted.stall(core, stall_ms, every_s, max_s) as proc:
        yield proc


@contextmanager
def host_drift(core: int, max_share: float, ramp_s: float, max_s: float,
               period_ms: float = 10.0) -> Iterator[subprocess.Popen]:
    """A share of `core` taken that grows from 0 to `max_share` over `ramp_s`, for at most `max_s`."""
    with _skipped_where_refused(), planted.drift(core, max_share, ramp_s, max_s, period_ms) as proc:
        yield proc


@contextmanager
def _skipped_where_refused() -> Iterator[None]:
    reason = refused_reason()
    if reason:
        pytest.skip(reason)
    yield

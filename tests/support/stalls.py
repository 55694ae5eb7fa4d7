"""A planted host stall or drift for tests: a SCHED_FIFO busy loop that takes one core (or a growing share of it)
from every other process.

    with host_stall(core=0, stall_ms=20, every_s=0.5, max_s=10):
        ...  # every 0.5 s, nothing else runs on core 0 for 20 ms

The loop runs as root under `chrt -f 50 taskset -c CORE`, ends by itself after `max_s`, and is killed
when the block ends; a machine that refuses real-time scheduling skips the test, saying why.

Not for: a stall inside the server (the null backend's `--null_stall_ms`/`--null_stall_every_s`).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

LOOP = """
import time
end = time.monotonic() + {max_s}
while time.monotonic() < end:
    start = time.perf_counter()
    while time.perf_counter() - start < {stall_s}:
        pass
    time.sleep({every_s} - {stall_s})
"""


def refused_reason() -> str:
    """Why this machine cannot plant a real-time stall ("" when it can)."""
    try:
        done = subprocess.run(["chrt", "-f", "50", "true"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"chrt cannot run: {exc}"
    return "" if done.returncode == 0 else f"chrt -f 50 refused: {done.stderr.strip()}"


@contextmanager
def host_stall(core: int, stall_ms: float, every_s: float, max_s: float) -> Iterator[subprocess.Popen]:
    """A busy loop holding `core` for `stall_ms` every `every_s` at SCHED_FIFO priority 50, for at most `max_s`."""
    with _realtime(core, LOOP.format(max_s=max_s, stall_s=stall_ms / 1000.0, every_s=every_s)) as proc:
        yield proc


RAMP = """
import time
start = time.monotonic()
while (now := time.monotonic()) < start + {max_s}:
    share = min({max_share}, {max_share} * (now - start) / {ramp_s})
    spin_until = time.perf_counter() + share * {period_s}
    while time.perf_counter() < spin_until:
        pass
    time.sleep((1 - share) * {period_s})
"""


@contextmanager
def host_drift(core: int, max_share: float, ramp_s: float, max_s: float,
               period_ms: float = 10.0) -> Iterator[subprocess.Popen]:
    """A SCHED_FIFO loop taking a share of `core` that grows from 0 to `max_share` over `ramp_s` (then stays),
    in slices of `period_ms`: a machine whose speed drifts down while the block runs, for at most `max_s`."""
    with _realtime(core, RAMP.format(max_s=max_s, max_share=max_share, ramp_s=ramp_s,
                                     period_s=period_ms / 1000.0)) as proc:
        yield proc


@contextmanager
def _realtime(core: int, code: str) -> Iterator[subprocess.Popen]:
    """`code` run by Python under `chrt -f 50 taskset -c CORE`, killed when the block ends; skips the test where
    this machine refuses real-time scheduling."""
    reason = refused_reason()
    if reason:
        pytest.skip(reason)
    proc = subprocess.Popen(["chrt", "-f", "50", "taskset", "-c", str(core), sys.executable, "-c", code])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()

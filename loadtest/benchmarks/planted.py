"""Planted host noise: a SCHED_FIFO busy loop that takes one core (or a growing share of it) from every other
process, for tests and benchmarks that need a host stall or a drifting machine on demand.

    with stall(core=0, stall_ms=20, every_s=0.5, max_s=10):
        ...  # every 0.5 s, nothing else runs on core 0 for 20 ms
    with drift(core=0, max_share=0.7, ramp_s=200, max_s=240):
        ...  # core 0 runs ever slower for everything else: 0% taken at first, 70% after 200 s

The loop runs as root under `chrt -f 50 taskset -c CORE`, ends by itself after `max_s`, and is killed when the
block ends. A machine that refuses real-time scheduling raises `Refused` with the reason.

Not for: a stall inside the server (the null backend's `--null_stall_ms`/`--null_stall_every_s`).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

STALL_LOOP = """
import time
end = time.monotonic() + {max_s}
while time.monotonic() < end:
    start = time.perf_counter()
    while time.perf_counter() - start < {stall_s}:
        pass
    time.sleep({every_s} - {stall_s})
"""

RAMP_LOOP = """
import time
start = time.monotonic()
while (now := time.monotonic()) < start + {max_s}:
    share = min({max_share}, {max_share} * (now - start) / {ramp_s})
    spin_until = time.perf_counter() + share * {period_s}
    while time.perf_counter() < spin_until:
        pass
    time.sleep((1 - share) * {period_s})
"""


class Refused(RuntimeError):
    """This machine does not allow a real-time loop (not root, or no `chrt`)."""


def refused_reason() -> str:
    """Why this machine cannot plant a real-time loop ("" when it can)."""
    try:
        done = subprocess.run(["chrt", "-f", "50", "true"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"chrt cannot run: {exc}"
    return "" if done.returncode == 0 else f"chrt -f 50 refused: {done.stderr.strip()}"


@contextmanager
def stall(core: int, stall_ms: float, every_s: float, max_s: float) -> Iterator[subprocess.Popen]:
    """A busy loop holding `core` for `stall_ms` every `every_s` at SCHED_FIFO priority 50, for at most `max_s`."""
    with realtime(core, STALL_LOOP.format(max_s=max_s, stall_s=stall_ms / 1000.0, every_s=every_s)) as proc:
        yield proc


@contextmanager
def drift(core: int, max_share: float, ramp_s: float, max_s: float,
          period_ms: float = 10.0) -> Iterator[subprocess.Popen]:
    """A SCHED_FIFO loop taking a share of `core` that grows from 0 to `max_share` over `ramp_s` (then stays),
    in slices of `period_ms`: a machine whose speed drifts down while the block runs, for at most `max_s`."""
    with realtime(core, RAMP_LOOP.format(max_s=max_s, max_share=max_share, ramp_s=ramp_s,
                                         period_s=period_ms / 1000.0)) as proc:
        yield proc


@contextmanager
def realtime(core: int, code: str) -> Iterator[subprocess.Popen]:
    """`code` run by Python under `chrt -f 50 taskset -c CORE`, killed when the block ends; `Refused` where this
    machine refuses real-time scheduling."""
    reason = refused_reason()
    if reason:
        raise Refused(reason)
    proc = subprocess.Popen(["chrt", "-f", "50", "taskset", "-c", str(core), sys.executable, "-c", code])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()

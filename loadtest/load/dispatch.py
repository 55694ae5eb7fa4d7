"""The open-loop dispatcher's clock: wait for each send's intended time, on time.

A sleep alone wakes late (the timer's and the kernel's slack: a median ~0.75 ms on an idle core of
the build machine), and in an open loop that lateness lands in every latency. `Dispatcher` sleeps
less by the oversleep it has seen (quick to rise, slow to fall) plus a margin, then spins to the
intended time, yielding to the other greenlets (or, on a native thread, the CPU), never spinning
more than `spin_share` of the gap to the next send, so the spin's CPU stays a bounded share
however high the rate.

Not for: when sends are intended (`loadtest.load.arrivals`) or what a late send counts as
(`loadtest.load.collector`).
"""

from __future__ import annotations

import time

import gevent

SPIN_MARGIN_S = 0.0001  # woken this much earlier than the oversleep seen, then spun
FALL = 0.05  # a smaller oversleep moves the estimate 5% of the way toward it


class Dispatcher:
    """`wait_until(when, gap)` returns at `when` (or as soon after as it can)."""

    def __init__(self, spin_share: float, sleep=gevent.sleep, clock=time.time, spin=None) -> None:
        """`sleep(s)` waits; `spin()` is one step of the final spin (default `sleep(0)`: a greenlet
        yields; a native thread passes `os.sched_yield`, which lets other threads have the CPU)."""
        self.spin_share, self.sleep, self.clock = spin_share, sleep, clock
        self.spin = spin if spin is not None else (lambda: sleep(0))
        self.oversleep_s = 0.0

    def early_s(self, gap_s: float) -> float:
        """How long before the send to stop sleeping and start spinning."""
        if self.spin_share <= 0:
            return 0.0
        return min(self.oversleep_s + SPIN_MARGIN_S, self.spin_share * gap_s)

    def wait_until(self, when_unix_s: float, gap_s: float) -> None:
        early_s = self.early_s(gap_s)
        asked_s = when_unix_s - self.clock() - early_s
        if asked_s > 0:
            slept_from = self.clock()
            self.sleep(asked_s)
            self.learn(self.clock() - slept_from - asked_s)
        while early_s > 0 and self.clock() < when_unix_s:
            self.spin()

    def learn(self, oversleep_s: float) -> None:
        """One sleep's overshoot: a larger one is taken at once, smaller ones pull the estimate down slowly."""
        oversleep_s = max(0.0, oversleep_s)
        if oversleep_s > self.oversleep_s:
            self.oversleep_s = oversleep_s
        else:
            self.oversleep_s += FALL * (oversleep_s - self.oversleep_s)

"""A capacity run's whole time (`capacity --budget-min`, a shape sweep's budget), shared out among its searches as
they begin.

Each search is given what is left of the run's time, less a reserve, split evenly over the searches not yet begun:
servers that took long to start, or searches that ended early, move the shares of those after them. A paired
comparison's searches begin together and run interleaved (each one's clock runs only while it is measured), so
together they take the sum of their shares, plus the reference cells measured between their rounds: the reserve.
A repeat of the comparison begins while at least half an average repeat's time is left (`SHORTEST_SHARE`, the
tuner's rule for its evaluations too), its searches cut to what is left. A run that measures the tool ceiling after
its searches (`loadtest.search.tool_ceiling_run`) keeps `TOOL_CEILING_SHARE` of its time for it: its searches
share the rest, so the twins add at most 0.15 / 0.85 (18%) to the searches' time. `--budget-min` is the whole command's
time: its searches get it less what the command spent before they began and the report's reserve (`REPORT_S`).

Not for: a search's own deadline (`loadtest.search.capacity`) or the bundle's minutes (`loadtest.bundle.budget`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# Of the time left, what a paired comparison's reference cells take (one short closed-loop cell between rounds of
# one cell per search: about a fifth of a two-search comparison's time), and one after the other the last
# search's slack (its final cell may end past its deadline by a little).
PAIRED_RESERVE = 0.2
ALONE_RESERVE = 0.05
TOOL_CEILING_SHARE = 0.15  # of a run's time, kept for its twins after the searches (issue #59: at most 20% more)
SHORTEST_SHARE = 0.5  # of an average repeat's (the tuner: evaluation's) time: with less left, none begins
# What `capacity` takes after its searches: the report built (figures included) and the console's end (the demo's,
# on a 2-core build machine with tests beside it: ~15 s), kept out of a `--budget-min`'s searches.
REPORT_S = 25.0


@dataclass
class RunBudget:
    """`total_s` for the run's `searches`, counted from `start()`; `kept` of it kept after them (the tool ceiling)."""

    total_s: float
    searches: int
    clock: Callable[[], float] = time.monotonic
    kept: float = 0.0
    _deadline: float = field(default=0.0, init=False)
    _left: int = field(default=0, init=False)

    def start(self) -> None:
        self._deadline = self.clock() + self.total_s * (1 - self.kept)
        self._left = self.searches

    def end(self) -> float:
        """When the whole budget ends, on `clock`: the searches' deadline and the share kept after it."""
        return self._deadline + self.total_s * self.kept

    def share_s(self, starting: int, paired: bool) -> float:
        """The time of each of the `starting` searches that begin now."""
        share = share_of(self._deadline - self.clock(), self._left, paired)
        self._left = max(0, self._left - starting)
        return share

    def left_s(self) -> float:
        return self._deadline - self.clock()

    def fits(self, took_s: Sequence[float]) -> bool:
        """Whether one more round (a repeat), after rounds that took `took_s`, may begin: while at least
        `SHORTEST_SHARE` of an average one's time is left (the first always may)."""
        return not took_s or self.left_s() >= SHORTEST_SHARE * sum(took_s) / len(took_s)


def share_of(left_s: float, searches: int, paired: bool) -> float:
    """Each of `searches`' share of `left_s`, less the reserve (`PAIRED_RESERVE` where they run paired)."""
    return max(0.0, left_s) * (1 - (PAIRED_RESERVE if paired else ALONE_RESERVE)) / max(1, searches)


def searches_s(run_s: float, spent_s: float, report_s: float = REPORT_S) -> float:
    """Of a whole command's `run_s` (`capacity --budget-min`), what its searches share: less the `spent_s` it took
    before they began (the plan read, the servers' slots) and the report's reserve."""
    return max(0.0, run_s - spent_s - report_s)


__all__ = ["REPORT_S", "SHORTEST_SHARE", "TOOL_CEILING_SHARE", "RunBudget", "searches_s", "share_of"]

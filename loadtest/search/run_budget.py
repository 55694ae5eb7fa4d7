"""A capacity run's whole time (a shape sweep's budget), shared out among its searches as they begin.

Each search is given what is left of the run's time, less a reserve, split evenly over the searches not yet begun:
servers that took long to start, or searches that ended early, move the shares of those after them. A paired
comparison's searches begin together and run interleaved (each one's clock runs only while it is measured), so
together they take the sum of their shares, plus the reference cells measured between their rounds: the reserve.

Not for: a search's own deadline (`loadtest.search.capacity`) or the bundle's minutes (`loadtest.bundle.budget`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Of the time left, what a paired comparison's reference cells take (one short closed-loop cell between rounds of
# one cell per search: about a fifth of a two-search comparison's time), and one after the other the last
# search's slack (its final cell may end past its deadline by a little).
PAIRED_RESERVE = 0.2
ALONE_RESERVE = 0.05


@dataclass
class RunBudget:
    """`total_s` for the run's `searches`, counted from `start()`."""

    total_s: float
    searches: int
    clock: Callable[[], float] = time.monotonic
    _deadline: float = field(default=0.0, init=False)
    _left: int = field(default=0, init=False)

    def start(self) -> None:
        self._deadline = self.clock() + self.total_s
        self._left = self.searches

    def share_s(self, starting: int, paired: bool) -> float:
        """The time of each of the `starting` searches that begin now."""
        share = share_of(self._deadline - self.clock(), self._left, paired)
        self._left = max(0, self._left - starting)
        return share


def share_of(left_s: float, searches: int, paired: bool) -> float:
    """Each of `searches`' share of `left_s`, less the reserve (`PAIRED_RESERVE` where they run paired)."""
    return max(0.0, left_s) * (1 - (PAIRED_RESERVE if paired else ALONE_RESERVE)) / max(1, searches)


__all__ = ["RunBudget", "share_of"]

"""Where a capacity search measures next, between its passing rate and its range's upper end: pure functions over
its steps (`loadtest.search.capacity.CapacitySearch` asks them).

- `upper_end`: the lowest rate above the passing one shown to fail (its own windows, its confirmation's, or its
  latest recheck's) or where the load generator was the limit; never one that stayed inconclusive;
- `undecided`: the rates whose own windows stayed inconclusive: near the knee, their share over the objective near
  its 1%;
- `next_rate`: the middle of the range; with undecided rates inside it, the middle of its wider side of them, no
  nearer to them than `UNDECIDED_GAP` of the precision (nearer, a rate would likely be inconclusive too); with no
  upper end yet, `UNDECIDED_STEP` times the precision above the highest undecided rate (its share there well past 1%:
  a quick fail). Rates to 0.1 req/s: finer is below measurement noise.

Not for: running the search (`loadtest.search.capacity`) or concluding it (`loadtest.judge.conclusion`).
"""

from __future__ import annotations

from collections.abc import Sequence

from loadtest.judge.conclusion import final_verdicts
from loadtest.judge.verdicts import Decision, Step

UNDECIDED_GAP = 0.25
UNDECIDED_STEP = 2.0


def upper_end(steps: Sequence[Step], low: float) -> float | None:
    """The lowest rate above `low` shown to fail or where the load generator was the limit; None: none."""
    above = [key[0] for key, step in final_verdicts(steps).items() if key[0] > low
             and step.verdict.decision in (Decision.FAIL, Decision.LOADGEN)]
    return min(above, default=None)


def undecided(steps: Sequence[Step]) -> list[float]:
    """Rates whose own windows stayed inconclusive (a confirmation's do not count: its rate passed)."""
    return [key[0] for key, step in final_verdicts(steps).items()
            if not key[1] and step.verdict.decision == Decision.INCONCLUSIVE]


def next_rate(low: float, upper: float | None, undecided_rps: Sequence[float], precision: float,
              max_rps: float) -> float | None:
    """The next rate to try between `low` (passing) and `upper` (see the module); None: nothing left to try."""
    gap = 1 + UNDECIDED_GAP * precision
    inside = sorted(r for r in undecided_rps if r > low and (upper is None or r < upper))
    if upper is None:
        return min(max_rps, round(inside[-1] * (1 + UNDECIDED_STEP * precision), 1)) if inside else None
    if not inside:
        middle = round((low + upper) / 2, 1)
        return middle if low < middle < upper else None
    below = round((low + inside[0]) / 2, 1)  # raises the low end
    above = round((inside[-1] + upper) / 2, 1)  # lowers the upper end
    fits_below = low < below and below * gap <= inside[0]
    fits_above = above < upper and above >= inside[-1] * gap
    if fits_below and (not fits_above or inside[0] / low >= upper / inside[-1]):
        return below
    return above if fits_above else None


__all__ = ["UNDECIDED_GAP", "UNDECIDED_STEP", "next_rate", "undecided", "upper_end"]

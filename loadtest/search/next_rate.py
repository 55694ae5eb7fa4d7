"""What a capacity search measures next, between its passing rate and its range's upper end: pure functions over
its steps (`loadtest.search.capacity.CapacitySearch` asks them).

- `upper_end`: the lowest rate above the passing one shown to fail (its own windows, its confirmation's, or its
  latest recheck's) or where the load generator was the limit; never one that stayed inconclusive;
- `undecided`: the rates whose own windows stayed inconclusive: near the knee, their share over the objective near
  its 1%;
- `next_rate`: the middle of the range; with undecided rates inside it, the middle of its wider side of them, no
  nearer to them than `UNDECIDED_GAP` of the precision (nearer, a rate would likely be inconclusive too); with no
  upper end yet, `UNDECIDED_STEP` times the precision above the highest undecided rate (its share there well past 1%:
  a quick fail). Rates to 0.1 req/s: finer is below measurement noise.

And a paired search's final measurements: how they went (`Final`), the attempt a rate's next measurement is
(`next_attempt`), and the round its answer stands on (`standing_round`).

Not for: running the search (`loadtest.search.capacity`) or concluding it (`loadtest.judge.conclusion`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from loadtest.evidence.vocab import Role
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


def undecided_inside(steps: Sequence[Step], low: float) -> list[float]:
    """The undecided rates between `low` and its upper end, lowest first."""
    upper = upper_end(steps, low)
    return sorted(r for r in undecided(steps) if low < r and (upper is None or r < upper))


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


class Final(Enum):
    """How a search's final measurements went."""

    HELD = "held"  # its answer stands
    LOWERED = "lowered"  # its confirmation did not pass: the search goes on below
    RAISED = "raised"  # its upper end did not fail again: the range above the answer is searched again


def next_attempt(steps: Sequence[Step], rate: float, confirming: bool) -> int:
    """0 for a rate's first confirmation (or first windows); one more than its last attempt after that."""
    attempts = [s.attempt for s in steps if s.confirming == confirming and s.rate_rps == rate]
    return max(attempts) + 1 if attempts else 0


def standing_round(steps: Sequence[Step], rounds: Sequence[int | None], rate: float) -> int | None:
    """The round of the answer's last final measurement: its upper end's recheck where one followed the latest
    confirmation at `rate`, else that confirmation's first round; None where that confirmation did not pass."""
    confirming = [(i, s) for i, s in enumerate(steps) if s.confirming and s.rate_rps == rate]
    if not confirming or not confirming[-1][1].verdict.passed:
        return None
    attempt = confirming[-1][1].attempt
    began = next(i for i, s in confirming if s.attempt == attempt)
    rechecked = [i for i, s in enumerate(steps) if i > began and s.role == Role.RECHECK]
    return rounds[rechecked[-1] if rechecked else began]


__all__ = ["UNDECIDED_GAP", "UNDECIDED_STEP", "Final", "next_attempt", "next_rate", "standing_round", "undecided",
           "undecided_inside", "upper_end"]

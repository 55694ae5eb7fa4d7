"""A paired search's final measurements (`loadtest.search.capacity.CapacitySearch._final`): how they went, the
attempt a rate's next measurement is, and the round its answer stands on (pure functions over its steps).

Not for: running them (`loadtest.search.capacity`) or the agreement between searches (`loadtest.search.interleave`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from loadtest.evidence.vocab import Role
from loadtest.judge.verdicts import Step


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


__all__ = ["Final", "next_attempt", "standing_round"]

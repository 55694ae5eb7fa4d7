"""What a capacity search's cells say, with its uncertainty: the one place a capacity is concluded.

The search (`loadtest.search.capacity`) concludes from its steps as it goes; the report, the sizing
and the tuner conclude from the same steps rebuilt from the records (`loadtest.report.answers.answers`),
so both read the same answer:

- cells at one offered rate are pooled: a rate's first window and the extensions that measured it
  longer (role `extend`), separately for its confirmation, whose verdict stands on its own window;
- the capacity is the highest rate whose confirmation passed; the lowest rate above it that failed
  (with confidence) bounds it from above; rates above it that stayed inconclusive are listed with
  their N, never read as a pass or a fail;
- a search cut short before it confirmed its highest pass still answers with its best evidence: the
  highest rate above the capacity (and below any failing rate) whose own windows passed, labelled
  "passed, not confirmed" (`AnswerKind`); "none" only when nothing passed;
- a rate that passed and whose confirmation then failed is *unsteady*, named with both verdicts;
- a pass above a fail is reported as not monotone, naming both;
- a load generator that did not keep up above the capacity makes it a lower bound ("at least");
- stalls independent of the load: where three or more rates that did not pass, with p50 at most 60%
  of the objective, span a factor of 4 or more and the share of requests over the objective at the
  lowest is at least half the share at the highest: it did not fall with the rate
  (a stall on a clock hits each request with the same chance whatever the rate; a queue's tail
  shrinks steeply as the rate falls), the finding names their length and pace.

Pure functions. Not for: choosing rates (`loadtest.search.capacity`) or judging a cell (`loadtest.judge.verdicts`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from loadtest.evidence.objective import Objective
from loadtest.judge.verdicts import Decision, Step

STALL_P50_SHARE = 0.6  # p50 at most this share of the objective: not an overloaded (or merely slow) server
STALL_RATE_SPAN = 3.8  # the rates that did not pass span about a factor of 4 (two halvings, rates rounded to 0.1)
STALL_MIN_RATES = 3  # rates that did not pass, with p50 well under the objective
STALL_SHARE_KEPT = 0.5  # the over-objective share at the lowest rate is at least this share of the highest's
STALL_MIN_OVER = 2  # requests over the objective at the lowest rate, for its share to mean something


DEFAULT_OBJECTIVES_MS = (5.0, 10.0, 25.0, 50.0, 100.0)  # p99 objectives one search's cells are also answered at


class AnswerKind(StrEnum):
    """What a capacity answer rests on."""

    CONFIRMED = "confirmed"  # a separate, longer measurement at the rate passed too
    PASSED = "passed, not confirmed"  # the rate's own windows passed; its confirmation was not (yet) measured
    NONE = "none"  # nothing passed




def final_verdicts(steps: Sequence[Step]) -> dict[tuple[float, bool], Step]:
    """Each rate's last step, and its confirmation's (the verdict of its group: a confirmation measured again
    answers with its latest attempt)."""
    last: dict[tuple[float, bool], Step] = {}
    for step in steps:
        last[step.key] = step
    return last


@dataclass(frozen=True)
class Stalls:
    """Stalls independent of the load, estimated from the rates that did not pass."""

    stall_ms: float  # about how long: the median of those cells' slowest requests
    per_s: float | None  # about how often: the over-objective share / (stall - objective)
    over_shares: tuple[tuple[float, float], ...]  # (rate, share over the objective), highest rate first

    def describe(self, objective: Objective) -> str:
        shares = ", ".join(f"{share:.1%} at {rate:g} req/s" for rate, share in self.over_shares)
        pace = f", about {self.per_s:.1f} per second" if self.per_s else ""
        return (f"stalls of about {self.stall_ms:.0f} ms{pace}, independent of the load: the share of requests over "
                f"{objective.p99_ms:g} ms did not fall as the rate fell ({shares})")


def stalls(steps: Sequence[Step], objective: Objective) -> Stalls | None:
    """The stall finding, or None when the rates that did not pass look like a queue (or are too few)."""
    groups = [s for s in final_verdicts(steps).values() if not s.confirming
              and s.verdict.decision in (Decision.FAIL, Decision.INCONCLUSIVE) and s.verdict.evidence is not None]
    quiet = sorted((s for s in groups if s.result.latency_p50_ms is not None
                    and s.result.latency_p50_ms <= STALL_P50_SHARE * objective.p99_ms), key=lambda s: -s.rate_rps)
    if len(quiet) < STALL_MIN_RATES:
        return None
    high, low = quiet[0], quiet[-1]
    assert high.verdict.evidence is not None and low.verdict.evidence is not None
    if high.rate_rps < STALL_RATE_SPAN * low.rate_rps or low.verdict.evidence.over < STALL_MIN_OVER:
        return None
    if low.verdict.evidence.over_share < STALL_SHARE_KEPT * high.verdict.evidence.over_share:
        return None
    cells = [c.result for c in steps if c.group in {s.group for s in quiet}]
    slowest = [c.latency_max_ms for c in cells if c.latency_max_ms is not None]
    if not slowest:
        return None
    stall_ms = statistics.median(slowest)
    share = statistics.fmean(s.verdict.evidence.over_share for s in quiet if s.verdict.evidence)
    per_s = share / ((stall_ms - objective.p99_ms) / 1000.0) if stall_ms > objective.p99_ms else None
    return Stalls(stall_ms, per_s, tuple((s.rate_rps, s.verdict.evidence.over_share) for s in quiet
                                         if s.verdict.evidence))


@dataclass(frozen=True)
class Conclusion:
    """A search's capacity with its uncertainty."""

    objective: Objective
    capacity: Step | None  # the highest rate whose confirmation passed
    lowest_failing_rps: float | None  # lowest rate above it that failed with confidence (or whose confirmation did)
    inconclusive: tuple[Step, ...] = ()  # rates above the capacity that neither passed nor failed
    loadgen_limited_rps: float | None = None  # lowest rate above the capacity where the load generator was the limit
    not_monotone: tuple[tuple[Step, Step], ...] = ()  # (a pass, a fail at a lower rate)
    stalls: Stalls | None = None
    best_pass: Step | None = None  # the highest unconfirmed pass above the capacity, below any failing rate
    unsteady: tuple[tuple[Step, Step], ...] = ()  # (a rate's pass, its confirmation that then failed)
    loadgen_limit: Step | None = None  # the step at `loadgen_limited_rps`: what its load generator's cell showed

    @property
    def met(self) -> bool:
        """A confirmed capacity (the tuner compares only those)."""
        return self.capacity is not None

    @property
    def kind(self) -> AnswerKind:
        if self.capacity is not None:
            return AnswerKind.CONFIRMED
        return AnswerKind.PASSED if self.best_pass is not None else AnswerKind.NONE

    @property
    def answer(self) -> Step | None:
        """The rate answered: the confirmed capacity, else the best unconfirmed pass (None: nothing passed)."""
        return self.capacity or self.best_pass

    @property
    def capacity_rps(self) -> float | None:
        return self.capacity.rate_rps if self.capacity else None

    @property
    def at_least(self) -> bool:
        """The capacity is a lower bound: the load generator, not the server, stopped the search above the
        answered rate (a rate the load generator limited at or below the answer bounds nothing)."""
        limited = self.loadgen_limited_rps
        if limited is None or (self.answer is not None and limited <= self.answer.rate_rps):
            return False
        return self.lowest_failing_rps is None or limited < self.lowest_failing_rps

    def upper_rps(self) -> float | None:
        """The range's upper end: the lowest rate above the answer (the capacity, else the best unconfirmed pass)
        shown to fail the objective; never an inconclusive one, which only shows the knee is near (None: no rate
        above failed, and the range is one-sided)."""
        floor = self.answer.rate_rps if self.answer else 0.0
        failing = self.lowest_failing_rps
        return failing if failing is not None and failing > floor else None

    def uncertainty(self) -> str:
        """`between 730 and 766 req/s` or `at least 730 req/s` and what bounds it (of the answered rate)."""
        if self.answer is None:
            return ""
        low = f"{self.answer.rate_rps:g}"
        if self.at_least:
            return f"at least {low} req/s: the load generator's limit at {self.loadgen_limited_rps:g} req/s"
        upper = self.upper_rps()
        if upper is None:
            return f"at least {low} req/s: the search stopped (no higher rate shown to fail)"
        return f"between {low} and {upper:g} req/s (upper end {upper:g})"


    def unmet_reason(self) -> str:
        """Why there is no capacity: stalls, or what was measured above, with N where inconclusive."""
        if self.stalls is not None:
            return f"unmet: {self.stalls.describe(self.objective)}"
        parts = [describe_unsteady(pair) for pair in self.unsteady]
        if self.lowest_failing_rps is not None:
            parts.append(f"lowest failing rate {self.lowest_failing_rps:g} req/s")
        for step in self.inconclusive[:3]:
            parts.append(f"inconclusive at {step.rate_rps:g} req/s ({step.verdict.reason})")
        if self.loadgen_limited_rps is not None:
            parts.append(f"the load generator was the limit at {self.loadgen_limited_rps:g} req/s")
        return "; ".join(parts) or "no rate passed"


def _not_monotone(last: dict[tuple[float, bool], Step]) -> tuple[tuple[Step, Step], ...]:
    passes = [s for s in last.values() if s.verdict.passed]
    fails = [s for s in last.values() if s.verdict.decision == Decision.FAIL]
    return tuple((p, f) for p in passes for f in fails if p.rate_rps > f.rate_rps)


def _unsteady(last: dict[tuple[float, bool], Step]) -> tuple[tuple[Step, Step], ...]:
    """Rates whose own windows passed and whose confirmation then failed, lowest first."""
    pairs = [(s, last[(s.rate_rps, True)]) for s in last.values() if not s.confirming and s.verdict.passed
             and (s.rate_rps, True) in last and last[(s.rate_rps, True)].verdict.decision == Decision.FAIL]
    return tuple(sorted(pairs, key=lambda pair: pair[0].rate_rps))


def _best_pass(last: dict[tuple[float, bool], Step], floor: float, failing: float | None) -> Step | None:
    """The highest rate above `floor` whose own windows passed, below the lowest failing rate (a rate whose
    confirmation failed is failing), and whose confirmation, if one was measured, did not end without a pass
    (inconclusive, or the load generator's limit: all its windows together no longer support the pass, and
    the rate is listed as inconclusive instead)."""
    ceiling = failing if failing is not None else float("inf")
    passes = [s for s in last.values() if not s.confirming and s.verdict.passed and floor < s.rate_rps < ceiling
              and ((s.rate_rps, True) not in last or last[(s.rate_rps, True)].verdict.passed)]
    return max(passes, key=lambda s: s.rate_rps, default=None)


def conclude(steps: Sequence[Step], objective: Objective) -> Conclusion:
    """The capacity, its bounds, and what else the steps show (see the module docstring)."""
    last = final_verdicts(steps)
    confirmed = [s for s in last.values() if s.confirming and s.verdict.passed]
    capacity = max(confirmed, key=lambda s: s.rate_rps, default=None)
    floor = capacity.rate_rps if capacity else 0.0
    above = [s for s in last.values() if s.rate_rps > floor]
    failing = min((s.rate_rps for s in above if s.verdict.decision == Decision.FAIL), default=None)
    inconclusive = tuple(sorted((s for s in above if s.verdict.decision == Decision.INCONCLUSIVE),
                                key=lambda s: s.rate_rps))
    limited = min((s for s in above if s.verdict.decision == Decision.LOADGEN), key=lambda s: s.rate_rps, default=None)
    return Conclusion(objective, capacity, failing, inconclusive, limited.rate_rps if limited else None,
                      _not_monotone(last), stalls(steps, objective), _best_pass(last, floor, failing), _unsteady(last),
                      limited)


def describe_unsteady(pair: tuple[Step, Step]) -> str:
    """`passed at 1295.5 req/s, then its confirmation failed (k=1,276 of 7,569): unsteady`."""
    passed, failed = pair
    e = failed.verdict.evidence
    how = f"k={e.over:,} of {e.requests:,}" if e else failed.verdict.reason
    return f"passed at {passed.rate_rps:g} req/s, then its confirmation failed ({how}): unsteady"


def describe_pair(pair: tuple[Step, Step]) -> str:
    passed, failed = pair
    return (f"passed at {passed.rate_rps:g} req/s ({passed.role.value}) above a fail at {failed.rate_rps:g} req/s "
            f"({failed.role.value}: {failed.verdict.reason})")

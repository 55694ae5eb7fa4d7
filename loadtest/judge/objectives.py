"""A capacity search's cells at every p99 objective: its rate table, and its capacity at each objective.

One search measures rates around its own objective; its cells say more than that one answer. Per
offered rate, every window measured there is pooled (its first window, extensions and confirmation:
their histograms merge exactly), and:

- `rate_table`: offered against achieved req/s and img/s, p50/p90/p99/p99.9 of all the rate's requests,
  N, the windows, and whether any was overloaded (`loadtest.judge.overload`) or limited by the load generator;
- `objective_answers`: at each objective (recorded with the search; by default 5, 10, 25, 50 and 100 ms,
  besides its own) the capacity under the same confidence rule: the highest offered rate whose pooled
  verdict passes there, `confirmed` when that rate has a confirmation that passes there (or two windows
  that pass separately), else `passed, not confirmed`; "at least" where no higher rate failed there (the
  search did not go high enough to bound it), and a pass above a rate that failed named as not monotone.

Pure functions over `CellResult`s. Not for: the search's own answer at its objective
(`loadtest.report.answers.answers.search_answer`) or the comparisons built on both (`loadtest.report.answers.answers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from loadtest.evidence.objective import Objective
from loadtest.evidence.records import CellResult
from loadtest.evidence.stats import merge_encoded
from loadtest.evidence.vocab import CellStatus, Role
from loadtest.judge.conclusion import DEFAULT_OBJECTIVES_MS, AnswerKind, Conclusion
from loadtest.judge.confidence import DEFAULT_CONFIDENCE, Evidence
from loadtest.judge.overload import overloaded_reason
from loadtest.judge.verdicts import Decision, Step, client_limited, pooled_verdict, verdict_of


def offered_rps(cell: CellResult) -> float | None:
    """The rate a search offered (None for its closed-loop probe); else the open-loop rate."""
    value = cell.search.offered_rps if cell.search else cell.load.rate_rps
    return None if value is None else float(value)


def interrupted(cell: CellResult) -> bool:
    """A cell Ctrl-C (or SIGTERM) stopped: recorded failed, but no evidence on the server."""
    return cell.status != CellStatus.OK and cell.failure_reason.startswith("interrupted")


def rated(cells: Sequence[CellResult]) -> list[CellResult]:
    """A search's cells that measured an offered rate: not its probe, its start, or a cell it was interrupted in."""
    return [c for c in cells if offered_rps(c) is not None
            and not (c.search and c.search.role in (Role.PROBE, Role.START, Role.REFERENCE)) and not interrupted(c)]



@dataclass(frozen=True)
class RateRow:
    """One offered rate of a search, every window at it pooled (its confirmation and extensions too)."""

    offered_rps: float
    achieved_rps: float  # completions over the measured seconds of all its windows
    achieved_ips: float
    p50_ms: float | None  # from the windows' merged latency histogram
    p90_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    requests: int  # N: requests in the merged histogram
    windows: int  # cells measured at the rate
    overloaded: bool  # some window's server did not keep up (`loadtest.judge.overload`)
    loadgen_limited: bool  # some window's load generator was the limit


def _by_rate(cells: Sequence[CellResult]) -> dict[float, list[CellResult]]:
    groups: dict[float, list[CellResult]] = {}
    for cell in rated(cells):
        rate = offered_rps(cell)
        assert rate is not None
        groups.setdefault(rate, []).append(cell)
    return dict(sorted(groups.items()))


def _percentile_ms(histogram, percentile: float) -> float | None:
    if histogram.get_total_count() == 0:
        return None
    return round(histogram.get_value_at_percentile(percentile) / 1000.0, 3)


def rate_table(cells: Sequence[CellResult]) -> tuple[RateRow, ...]:
    """Per offered rate of one search's cells, lowest first: achieved req/s and img/s, p50/p90/p99/p99.9 of all
    its windows' requests (histograms merged exactly), N, and whether any window was overloaded."""
    rows = []
    for rate, group in _by_rate(cells).items():
        measured = [c for c in group if c.status == CellStatus.OK]
        seconds = sum(c.load.duration_s for c in measured)
        merged = merge_encoded(c.histogram_us for c in measured)
        achieved = sum(c.throughput_rps * c.load.duration_s for c in measured) / seconds if seconds else 0.0
        images = sum(c.throughput_ips * c.load.duration_s for c in measured) / seconds if seconds else 0.0
        p50, p90, p99, p999 = (_percentile_ms(merged, p) for p in (50.0, 90.0, 99.0, 99.9))
        rows.append(RateRow(rate, round(achieved, 1), round(images, 1), p50, p90, p99, p999,
                            merged.get_total_count(), len(group), any(overloaded_reason(c) for c in group),
                            any(client_limited(c) for c in group)))
    return tuple(rows)


def search_objectives(cells: Sequence[CellResult]) -> tuple[float, ...]:
    """The objectives a search's cells are answered at: those it recorded (else `DEFAULT_OBJECTIVES_MS`) and
    its own, lowest first."""
    tag = next((c.search for c in cells if c.search), None)
    recorded = (tag and tag.objectives) or DEFAULT_OBJECTIVES_MS
    own = [tag.objective.p99_ms] if tag else []
    return tuple(sorted({float(o) for o in recorded} | set(own)))


@dataclass(frozen=True)
class ObjectiveAnswer:
    """One search's cells answered at one p99 objective, every window at a rate pooled.

    The capacity is the highest offered rate whose pooled verdict passes at the objective; `kind` says
    what it rests on: `confirmed` when that rate has a confirmation whose own windows pass there, or at
    least two windows that pass separately, else `passed, not confirmed`; `none` when no rate passed."""

    p99_objective_ms: float
    kind: AnswerKind
    capacity_rps: float | None
    capacity_ips: float | None  # achieved img/s at that rate (all its windows)
    evidence: Evidence | None  # the pooled verdict's: N, k over the objective, the p99 estimate
    upper_rps: float | None  # the lowest rate above it that did not pass (failed, inconclusive, or client-limited)
    lowest_failing_rps: float | None  # the lowest rate above it that failed at this objective
    not_monotone: tuple[tuple[float, float], ...] = ()  # (a passing rate, a lower rate that failed here)
    reason: str = ""  # why there is no capacity ("" when there is one)
    conclusion: Conclusion | None = field(default=None, compare=False)  # for `search_at`: bounds, not monotone
    confirmed_rps: float | None = None  # the highest rate confirmed at this objective (the capacity, or below it)

    @property
    def at_least(self) -> bool:
        """No rate above the capacity failed at this objective: the search did not go high enough to bound it
        (or only the load generator's limit did)."""
        return self.capacity_rps is not None and self.lowest_failing_rps is None

    def describe(self) -> str:
        """`933 req/s (confirmed: p99 <= 21.3 ms at 99% confidence, N=6192, k=42; between 933 and 1000 req/s)`, or
        `none: ...`."""
        if self.capacity_rps is None:
            return f"none ({self.reason})"
        e = self.evidence
        why = f"p99 <= {e.estimate_ms:.3f} ms at {e.confidence:.0%} confidence, N={e.requests}, k={e.over}" if e \
            else "passed"
        if self.at_least:
            bound = ("at least: no higher rate measured failing" if self.upper_rps is None
                     else f"at least: above it only {self.upper_rps:g} req/s, which did not fail here")
        else:
            bound = f"between {self.capacity_rps:g} and {self.upper_rps:g} req/s"
        odd = "".join(f"; not monotone: passed at {high:g} req/s above a fail at {low:g} req/s"
                      for high, low in self.not_monotone)
        below = (f"; confirmed at {self.confirmed_rps:g} req/s" if self.kind == AnswerKind.PASSED
                 and self.confirmed_rps is not None else "")
        return f"{self.capacity_rps:g} req/s ({self.kind.value}: {why}; {bound}{odd}{below})"

    def line(self) -> str:
        """`p99 <= 25 ms: 933 req/s (confirmed: ...)`."""
        return f"p99 <= {self.p99_objective_ms:g} ms: {self.describe()}"


def _rate_step(rate: float, group: Sequence[CellResult], objective: Objective, confidence: float) -> Step:
    """A rate's pooled step at `objective`: every window together (represented by its confirmation, if any)."""
    confirming = [c for c in group if c.search and c.search.confirming]
    shown = (confirming or list(group))[-1]
    return Step(rate, Role(shown.search.role if shown.search else Role.BRACKET), shown,
                pooled_verdict(group, objective, confidence), bool(confirming))


def _confirmed_at(group: Sequence[CellResult], objective: Objective, confidence: float) -> bool:
    confirming = [c for c in group if c.search and c.search.confirming]
    if confirming and pooled_verdict(confirming, objective, confidence).passed:
        return True
    return sum(verdict_of([c], objective, confidence).passed for c in group if c.status == CellStatus.OK) >= 2


def objective_answer(cells: Sequence[CellResult], objective: Objective) -> ObjectiveAnswer:
    """One search's cells at one p99 objective (see `ObjectiveAnswer`)."""
    confidence = next((c.search.confidence_or(DEFAULT_CONFIDENCE) for c in cells if c.search), DEFAULT_CONFIDENCE)
    groups = _by_rate(cells)
    steps = {rate: _rate_step(rate, group, objective, confidence) for rate, group in groups.items()}
    passing = [rate for rate, step in steps.items() if step.verdict.passed]
    top = max(passing, default=None)
    above = [step for rate, step in steps.items() if top is None or rate > top]
    failing = min((s.rate_rps for s in above if s.verdict.decision == Decision.FAIL), default=None)
    not_passing = [s.rate_rps for s in above if not s.verdict.passed]
    pairs = tuple((p, f.rate_rps) for p in sorted(passing) for f in steps.values()
                  if f.verdict.decision == Decision.FAIL and f.rate_rps < p)
    conclusion = Conclusion(objective, steps[top] if top is not None else None, failing,
                            tuple(s for s in above if s.verdict.decision == Decision.INCONCLUSIVE),
                            min((s.rate_rps for s in above if s.verdict.decision == Decision.LOADGEN), default=None),
                            tuple((steps[p], steps[f]) for p, f in pairs))
    if top is None:
        reason = conclusion.unmet_reason() if steps else "no rate measured"
        return ObjectiveAnswer(objective.p99_ms, AnswerKind.NONE, None, None, None, min(not_passing, default=None),
                               failing, pairs, reason, conclusion)
    confirmed = max((rate for rate in passing if _confirmed_at(groups[rate], objective, confidence)), default=None)
    kind = AnswerKind.CONFIRMED if confirmed == top else AnswerKind.PASSED
    row = next(r for r in rate_table(groups[top]))
    return ObjectiveAnswer(objective.p99_ms, kind, top, row.achieved_ips, steps[top].verdict.evidence,
                           min(not_passing, default=None), failing, pairs, "", conclusion, confirmed)


def objective_answers(cells: Sequence[CellResult], objectives: Iterable[float]) -> tuple[ObjectiveAnswer, ...]:
    """One search's cells (`CellResult.search` of one id) answered at each objective, lowest first: pure, for
    the console's and the report's multi-objective tables."""
    return tuple(objective_answer(cells, Objective(ms)) for ms in sorted(set(objectives)))

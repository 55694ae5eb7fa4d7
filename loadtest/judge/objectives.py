"""A capacity search's cells at every p99 objective: its rate table, and its capacity at each objective.

One search measures rates around its own objective; its cells say more than that one answer. Per
offered rate, every window measured there is pooled (its first window, extensions and confirmation:
their histograms merge exactly), and:

- `rate_table`: offered against achieved req/s and img/s, p50/p90/p99/p99.9 of all the rate's requests,
  N, the windows, and whether any was overloaded (`loadtest.judge.overload`) or limited by the load generator;
- `objective_answers`: at each objective (recorded with the search; by default 5, 10, 25, 50 and 100 ms,
  besides its own) the capacity by the one rule, `conclude`, on the search's steps rebuilt with each rate's
  verdict at that objective: the highest rate whose confirmation passed there (`confirmed`), and above it the
  highest rate whose own windows passed (`passed, not confirmed`); a lower bound (`Bound`) where the load
  generator was the limit or no higher rate failed there; carried up from the stricter objectives, so a
  configuration's capacity never falls as the objective loosens.

Pure functions over `CellResult`s. Not for: the search's own answer at its objective
(`loadtest.report.answers.answers.search_answer`) or the comparisons built on both (`loadtest.report.answers.answers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from loadtest.evidence.objective import Objective
from loadtest.evidence.records import CellResult
from loadtest.evidence.stats import merge_encoded
from loadtest.evidence.vocab import CellStatus, Role
from loadtest.judge.conclusion import DEFAULT_OBJECTIVES_MS, AnswerKind, Conclusion, conclude
from loadtest.judge.confidence import DEFAULT_CONFIDENCE, Evidence
from loadtest.judge.overload import overloaded_reason
from loadtest.judge.verdicts import Step, client_limited, step_after


def offered_rps(cell: CellResult) -> float | None:
    """The rate a search offered (None for its closed-loop probe); else the open-loop rate."""
    value = cell.search.offered_rps if cell.search else cell.load.rate_rps
    return None if value is None else float(value)


def interrupted(cell: CellResult) -> bool:
    """A cell Ctrl-C (or SIGTERM) stopped: recorded failed, but no evidence on the server."""
    return cell.status != CellStatus.OK and cell.failure_reason.startswith("interrupted")


def rated(cells: Sequence[CellResult]) -> list[CellResult]:
    """A search's cells that measured an offered rate: not its probe, its start, or a cell it was interrupted in."""
    skipped = (Role.PROBE, Role.START, Role.REFERENCE, Role.TOOL_CEILING)
    return [c for c in cells if offered_rps(c) is not None
            and not (c.search and c.search.role in skipped) and not interrupted(c)]



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


class Bound(StrEnum):
    """Why a capacity is only a lower bound ("≥"): what stopped the search above it."""

    NONE = ""  # bounded above: a rate above it failed at this objective
    LOADGEN = "the load generator's limit"  # the load generator could not offer more
    STOPPED = "the search stopped"  # no rate above it failed here: the search did not go high enough


@dataclass(frozen=True)
class ObjectiveAnswer:
    """One search's cells answered at one p99 objective by `conclude`, the one rule for a capacity.

    `confirmed_rps`: the highest rate whose confirmation (a separate, longer measurement) passed there;
    `passed_rps`: the highest rate above it whose own windows passed, not confirmed, below any rate that failed;
    `capacity_rps` is the figure compared (the confirmed rate, else the pass) and `kind` what it rests on."""

    p99_objective_ms: float
    kind: AnswerKind
    capacity_rps: float | None
    capacity_ips: float | None  # achieved img/s at that rate (all its windows)
    evidence: Evidence | None  # the answering step's verdict's: N, k over the objective, the p99 estimate
    upper_rps: float | None  # the upper end: the lowest rate above the answer shown to fail
    lowest_failing_rps: float | None  # the lowest rate above it that failed at this objective
    not_monotone: tuple[tuple[float, float], ...] = ()  # (a passing rate, a lower rate that failed here)
    reason: str = ""  # why there is no capacity ("" when there is one)
    conclusion: Conclusion | None = field(default=None, compare=False)  # for `search_at`: bounds, not monotone
    confirmed_rps: float | None = None  # the highest rate confirmed at this objective
    passed_rps: float | None = None  # the highest unconfirmed pass above it (None: none)
    bound: Bound = Bound.NONE  # why the answer is only a lower bound

    @property
    def at_least(self) -> bool:
        """The answer is a lower bound (`bound` says why)."""
        return self.capacity_rps is not None and self.bound != Bound.NONE

    def describe(self) -> str:
        """`933 req/s (confirmed: p99 <= 21.3 ms at 99% confidence, N=6192, k=42; between 933 and 1000 req/s)`, or
        `none: ...`."""
        odd = "".join(f"; not monotone: passed at {high:g} req/s above a fail at {low:g} req/s"
                      for high, low in self.not_monotone)
        if self.capacity_rps is None:
            return f"none ({self.reason}{odd})"
        e = self.evidence
        why = f"p99 <= {e.estimate_ms:.3f} ms at {e.confidence:.0%} confidence, N={e.requests}, k={e.over}" if e \
            else "passed"
        if self.at_least:
            bound = f"at least: {self.bound.value}"
        else:
            bound = f"between {self.capacity_rps:g} and {self.upper_rps:g} req/s"
        above = f"; {self.passed_rps:g} req/s passed, not confirmed" if self.passed_rps is not None \
            and self.kind == AnswerKind.CONFIRMED else ""
        return f"{self.capacity_rps:g} req/s ({self.kind.value}: {why}; {bound}{odd}{above})"

    def line(self) -> str:
        """`p99 <= 25 ms: 933 req/s (confirmed: ...)`."""
        return f"p99 <= {self.p99_objective_ms:g} ms: {self.describe()}"


def steps_of(cells: Sequence[CellResult], objective: Objective) -> list[Step]:
    """A search's steps rebuilt from its records, each with its rate's pooled verdict at `objective`, as the
    search made them."""
    steps: list[Step] = []
    for cell in rated(cells):
        rate = offered_rps(cell)
        assert rate is not None
        tag = cell.tag
        role = Role(tag.role)
        confirming = role == Role.CONFIRM if tag.confirming is None else bool(tag.confirming)
        steps.append(step_after(steps, rate, role, cell, confirming, objective, tag.confidence_or(DEFAULT_CONFIDENCE),
                                tag.attempt))
    return steps


def _bound(found: Conclusion) -> Bound:
    if found.answer is None:
        return Bound.NONE
    if found.at_least:
        return Bound.LOADGEN
    return Bound.STOPPED if found.upper_rps() is None else Bound.NONE


def objective_answer(cells: Sequence[CellResult], objective: Objective) -> ObjectiveAnswer:
    """One search's cells at one p99 objective, concluded by `conclude` (see `ObjectiveAnswer`)."""
    steps = steps_of(cells, objective)
    found = conclude(steps, objective)
    pairs = tuple((p.rate_rps, f.rate_rps) for p, f in found.not_monotone)
    step = found.answer
    if step is None:
        failed = next((c.failure_reason for c in cells if c.failure_reason), "")
        reason = found.unmet_reason() if steps else "no rate measured" + (f": {failed}" if failed else "")
        return ObjectiveAnswer(objective.p99_ms, AnswerKind.NONE, None, None, None, found.upper_rps(),
                               found.lowest_failing_rps, pairs, reason, found)
    row = next(r for r in rate_table([c for c in rated(cells) if offered_rps(c) == step.rate_rps]))
    passed = found.best_pass.rate_rps if found.best_pass else None
    return ObjectiveAnswer(objective.p99_ms, found.kind, step.rate_rps, row.achieved_ips, step.verdict.evidence,
                           found.upper_rps(), found.lowest_failing_rps, pairs, "", found, found.capacity_rps,
                           passed, _bound(found))


def _top(*rates: float | None) -> float | None:
    return max((r for r in rates if r is not None), default=None)


def carried(stricter: ObjectiveAnswer, looser: ObjectiveAnswer) -> ObjectiveAnswer:
    """`looser` never below `stricter`: a rate confirmed (or passed) at a stricter objective is confirmed (or
    passed) at any looser one, so each is carried up where the looser one's own is lower."""
    confirmed = _top(stricter.confirmed_rps, looser.confirmed_rps)
    passed = _top(stricter.passed_rps, looser.passed_rps)
    passed = None if passed is not None and confirmed is not None and passed <= confirmed else passed
    if (confirmed, passed) == (looser.confirmed_rps, looser.passed_rps):
        return looser
    top = confirmed if confirmed is not None else passed
    source = stricter if stricter.capacity_rps == top else looser
    upper = looser.upper_rps if looser.upper_rps is not None and top is not None and looser.upper_rps > top else None
    bound = Bound.NONE if upper is not None else (source.bound if source.bound != Bound.NONE else Bound.STOPPED)
    return replace(looser, kind=AnswerKind.CONFIRMED if confirmed is not None else AnswerKind.PASSED,
                   capacity_rps=top, capacity_ips=source.capacity_ips, evidence=source.evidence, upper_rps=upper,
                   lowest_failing_rps=looser.lowest_failing_rps if upper is not None else None, reason="",
                   conclusion=source.conclusion, confirmed_rps=confirmed, passed_rps=passed, bound=bound)


def objective_answers(cells: Sequence[CellResult], objectives: Iterable[float]) -> tuple[ObjectiveAnswer, ...]:
    """One search's cells (`CellResult.search` of one id) answered at each objective, lowest first, each carried
    up from the stricter ones (`carried`): pure, for the console's and the report's multi-objective tables."""
    out: list[ObjectiveAnswer] = []
    for ms in sorted(set(objectives)):
        here = objective_answer(cells, Objective(ms))
        out.append(carried(out[-1], here) if out else here)
    return tuple(out)

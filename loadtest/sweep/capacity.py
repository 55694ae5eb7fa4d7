"""Capacity under a latency objective: the highest offered rate a server serves at p99 <= L, with
the confidence its verdicts state.

The search, as perf_analyzer's `--latency-threshold` search and MLPerf LoadGen's Server scenario
do it, on open-loop (Poisson) cells only, each one a recorded cell:

1. bracket: from a start rate, double while the rate passes (halve while it does not), until one
   passing rate and one above it that did not pass are known;
2. bisect between them until (upper - passing) / passing <= the precision;
3. confirm the highest passing rate with a longer, separate measurement; if that does not pass, it
   becomes the upper end and the search goes on below it. The last step a search may take is kept
   for a confirmation, so a search cut short by its step limit still answers when it can.

Each rate is judged by `loadtest.verdicts` at the stated confidence (MLPerf's early-stopping rule:
`loadtest.confidence`): pass, fail, inconclusive, or the load generator's limit. A rate's first
window is long enough to hold the requests a pass needs (459 at p99, 99%: a window is sized in
requests, not seconds; at high rates the usual window already holds them). An inconclusive rate is
measured longer (role `extend`): the window grows to the requests a verdict would likely need, up to
`max_rate_s` seconds at that rate in all (a rate that only steers the bisection is extended once; a
confirmation, which is the answer, until it is settled or the cap is reached), and every window at
the rate is pooled. A rate still inconclusive is never taken as a pass or a fail: above a pass it
only bounds the bisection (the answer lists it with its N), and below the rate whose `max_rate_s`
cannot hold 1.1 x the 459 requests a pass needs (at p99, 99%) the search stops and says so. A load
generator that did not keep up says nothing about the server: such a rate bounds the bisection from
above like a failing one, and the highest passing rate below it is confirmed and answered as "at
least" (a confirmation that does not hold lowers the bound, as any other).
While bracketing downward it stops as soon as the rates that did not pass show stalls independent
of the load (`loadtest.sweep.conclusion.stalls`), rather than bisecting towards zero.

The answer is always a measured, passing (and confirmed) rate, never an interpolated one, with
its uncertainty (`loadtest.sweep.conclusion.Conclusion`). The search is bounded by a step limit
and a deadline, and ends early when the server stops answering.

Not for: measuring a cell (`CapacitySearch` is given a `measure` function; the command line wires
it to `loadtest.sweep.runner.CellRunner`) or sizing replicas (`loadtest.analysis.size`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loadtest import confidence as conf
from loadtest.records import CellResult
from loadtest.sweep.conclusion import Conclusion, Role, Step, conclude, final_verdicts, stalls, step_after
from loadtest.verdicts import Decision, Verdict

FIRST_WINDOW_MARGIN = 1.1  # a first window holds 10% more than the requests a pass needs at the offered rate

__all__ = ["CapacityAnswer", "CapacitySearch", "Measured", "Role", "SearchSettings", "Step"]


@dataclass(frozen=True)
class SearchSettings:
    p99_ms: float  # the objective
    start_rps: float
    precision: float = 0.05  # stop bisecting when (upper - passing) / passing <= this
    min_rps: float = 1.0  # below this the objective is called unmet
    max_rps: float = 1_000_000.0  # the bracket never offers more
    max_steps: int = 20  # cells, confirmations and extensions included
    max_s: float = 900.0  # wall time for the whole search
    confidence: float = conf.DEFAULT_CONFIDENCE
    max_rate_s: float = 30.0  # measured seconds at one rate (its windows together) for a verdict
    gate: bool = False  # the start rate is one to beat (the tuner's incumbent): no pass there ends the search
    window_s: float | None = None  # a rate's first window (None: `measure` decides); grown to hold a verdict's N
    confirm_window_s: float | None = None  # a confirmation's

    def check(self) -> None:
        if not self.p99_ms > 0:
            raise ValueError(f"the p99 objective must be positive, got {self.p99_ms} ms")
        if not self.min_rps <= self.start_rps <= self.max_rps:
            raise ValueError(f"start rate {self.start_rps} req/s outside [{self.min_rps}, {self.max_rps}]")
        if not 0 < self.precision < 1:
            raise ValueError(f"precision must be in (0, 1), got {self.precision}")
        if self.max_steps < 2:
            raise ValueError(f"a search needs at least 2 steps, got {self.max_steps}")
        if not 0.5 <= self.confidence < 1:
            raise ValueError(f"confidence must be in [0.5, 1), got {self.confidence}")
        if not self.max_rate_s > 0:
            raise ValueError(f"max_rate_s must be positive, got {self.max_rate_s}")

    def lowest_conclusive_rps(self) -> float:
        """Below this rate, `max_rate_s` seconds cannot hold the requests a pass needs with the first window's
        margin to spare (Poisson arrivals at the cap fall short of the expected count about half the time)."""
        return FIRST_WINDOW_MARGIN * conf.requests_to_pass(0, confidence=self.confidence) / self.max_rate_s


@dataclass(frozen=True)
class Measured:
    """What `measure` hands back: the recorded cell, and whether the server still answered after it."""

    result: CellResult
    server_alive: bool = True


@dataclass(frozen=True)
class CapacityAnswer:
    """The highest confirmed passing rate, with its uncertainty, and how it was found."""

    p99_ms: float
    conclusion: Conclusion
    steps: tuple[Step, ...]
    ended_because: str  # "converged", "step limit", "time limit", "stalls ...", "the load generator ..."

    @property
    def capacity(self) -> Step | None:
        return self.conclusion.capacity

    @property
    def lowest_failing_rps(self) -> float | None:
        return self.conclusion.lowest_failing_rps

    @property
    def met(self) -> bool:
        return self.capacity is not None


# measure(rate, role, window_s): window_s None is the role's usual window; else that many seconds.
Measure = Callable[[float, Role, "float | None"], Measured]


@dataclass
class CapacitySearch:
    """Runs the search with `measure(rate_rps, role, window_s) -> Measured`; `run()` returns the answer."""

    settings: SearchSettings
    measure: Measure
    clock: Callable[[], float] = time.monotonic
    steps: list[Step] = field(default_factory=list)
    limited_at: float | None = None  # the lowest rate where the load generator was the limit

    def run(self) -> CapacityAnswer:
        self.settings.check()
        self.deadline = self.clock() + self.settings.max_s
        try:
            self._narrow(*self._bracket())
            ended = "converged"
            if self._steps_left() <= 0 and self._bracket_too_wide():
                ended = f"step limit ({self.settings.max_steps} cells; the last one confirmed the highest passing rate)"
        except _Stop as stop:
            ended = str(stop)
        return CapacityAnswer(self.settings.p99_ms, conclude(self.steps, self.settings.p99_ms), tuple(self.steps),
                              ended)

    # ------------------------------------------------------------------ bracket, bisect, confirm

    def _bracket(self) -> tuple[float | None, float | None]:
        """A passing rate and a higher one that did not pass (the passing one None when none passed)."""
        s = self.settings
        rate = s.start_rps
        first = self._judge(rate, Role.BRACKET)
        if s.gate and not first.passed:
            raise _Stop(f"did not pass at {rate:g} req/s, the rate to beat ({first.describe()})")
        if first.passed:
            while rate < s.max_rps and self._steps_left() > 1:
                higher = min(rate * 2, s.max_rps)
                verdict = self._judge(higher, Role.BRACKET)
                if not verdict.passed:
                    if verdict.decision == Decision.LOADGEN:
                        self.limited_at = higher
                    return rate, higher
                rate = higher
            return rate, None  # passes at the highest rate it may offer
        while rate > s.min_rps:
            lower = max(round(rate / 2, 1), s.min_rps)
            if lower < s.lowest_conclusive_rps():
                raise _Stop(f"no pass down to {rate:g} req/s; below {s.lowest_conclusive_rps():.1f} req/s a rate's "
                            f"{s.max_rate_s:g} s cannot hold the {conf.requests_to_pass(0, confidence=s.confidence)} "
                            f"requests a pass needs at {s.confidence:.0%} confidence with "
                            f"{FIRST_WINDOW_MARGIN - 1:.0%} to spare")
            if self._judge(lower, Role.BRACKET).passed:
                return lower, rate
            found = stalls(self.steps, s.p99_ms)
            if found is not None:
                raise _Stop(f"unmet: {found.describe(s.p99_ms)}")
            rate = lower
        raise _Stop(f"objective not met even at {s.min_rps:g} req/s")

    def _narrow(self, low: float | None, high: float | None) -> None:
        """Bisect, then confirm the highest passing rate; a confirmation that does not pass lowers the bound.
        A rate where the load generator was the limit is bisected toward like a failing one (a lower rate may
        still be within the load generator's reach): the answer is "at least" the highest passing rate below
        the lowest such rate, to the precision asked for."""
        while low is not None:
            while (high is not None and (high - low) / low > self.settings.precision and self._steps_left() > 1):
                middle = round((low + high) / 2, 1)  # rates to 0.1 req/s: finer is below measurement noise
                if not low < middle < high:
                    break
                verdict = self._judge(middle, Role.BISECT)
                if verdict.passed:
                    low = middle
                    continue
                high = middle
                if verdict.decision == Decision.LOADGEN:
                    self.limited_at = middle if self.limited_at is None else min(self.limited_at, middle)
            if self._judge(low, Role.CONFIRM).passed:
                if high is not None and self._at_client_limit(high):
                    raise _Stop(f"the load generator was the limit at {self.limited_at:g} req/s")
                return
            high, low = low, self._highest_passing_below(low)
        raise _Stop("no passing rate held up under confirmation")

    def _at_client_limit(self, rate: float) -> bool:
        return self.limited_at is not None and rate >= self.limited_at

    def _highest_passing_below(self, rate: float) -> float | None:
        below = [g[0] for g, s in final_verdicts(self.steps).items() if not g[1] and s.verdict.passed and g[0] < rate]
        if below:
            return max(below)
        lower = rate / 2
        return lower if lower >= max(self.settings.min_rps, self.settings.lowest_conclusive_rps()) else None

    # ------------------------------------------------------------------ one rate's verdict

    def _judge(self, rate: float, role: Role) -> Verdict:
        """Measure `rate`, and measure it longer while its verdict is inconclusive and the bounds allow: a
        confirmation (the answer) up to `max_rate_s`, a rate that only steers the bisection once."""
        confirming = role == Role.CONFIRM
        step = self._step(rate, role, self._first_window_s(rate, confirming), confirming)
        extensions = 0
        while step.verdict.decision == Decision.INCONCLUSIVE and (confirming or extensions < 1):
            window_s = self._extension_s(step)
            if window_s is None:
                break
            step = self._step(rate, Role.EXTEND, window_s, confirming)
            extensions += 1
        return step.verdict

    def _first_window_s(self, rate: float, confirming: bool) -> float | None:
        """The usual window, grown (up to `max_rate_s`) so that it holds the requests a pass needs: a window
        is sized in requests, not seconds. None: the usual window, as `measure` decides it."""
        usual = self.settings.confirm_window_s if confirming else self.settings.window_s
        if usual is None:
            return None
        wanted_s = FIRST_WINDOW_MARGIN * conf.requests_to_pass(0, confidence=self.settings.confidence) / rate
        return usual if wanted_s <= usual else round(min(wanted_s, self.settings.max_rate_s), 1)

    def _extension_s(self, step: Step) -> float | None:
        """The next window at an inconclusive rate, sized to the requests a pass needs; None: no room."""
        evidence = step.verdict.evidence
        reserve = 1 if step.confirming else 2  # a non-confirming rate leaves a step for the confirmation
        if evidence is None or self._steps_left() < reserve or self.clock() > self.deadline:
            return None
        measured_s = sum(s.result.load.duration_s for s in self.steps if s.group == step.group)
        room_s = self.settings.max_rate_s - measured_s
        rate = max(step.result.throughput_rps, step.rate_rps * 0.5)
        if room_s < 0.5:
            return None
        wanted = needed_requests(evidence.requests, evidence.over, self.settings.confidence)
        if wanted is None:  # a share over the objective near 1%: only the most requests allowed can settle it
            return round(room_s, 1)
        return round(min(room_s, max(1.0, 1.1 * (wanted - evidence.requests) / rate)), 1)

    def _step(self, rate: float, role: Role, window_s: float | None, confirming: bool) -> Step:
        self._check_bounds()
        measured = self.measure(rate, role, window_s)
        step = step_after(self.steps, rate, role, measured.result, confirming, self.settings.p99_ms,
                          self.settings.confidence)
        self.steps.append(step)
        if not measured.server_alive:
            raise _Stop("the server stopped answering")
        return step

    # ------------------------------------------------------------------ bounds

    def _bracket_too_wide(self) -> bool:
        """Whether the answer's bracket is wider than the precision asked for (or has no upper end)."""
        conclusion = conclude(self.steps, self.settings.p99_ms)
        upper = conclusion.upper_rps()
        if conclusion.capacity is None or upper is None:
            return True
        return (upper - conclusion.capacity.rate_rps) / conclusion.capacity.rate_rps > self.settings.precision

    def _steps_left(self) -> int:
        return self.settings.max_steps - len(self.steps)

    def _check_bounds(self) -> None:
        if len(self.steps) >= self.settings.max_steps:
            raise _Stop(f"step limit ({self.settings.max_steps} cells)")
        if self.clock() > self.deadline:
            raise _Stop(f"time limit ({self.settings.max_s:g} s)")


def needed_requests(requests: int, over: int, confidence: float) -> int | None:
    """Requests in all that would likely settle an inconclusive rate were the share over the objective to
    stay as seen: enough for a pass below 0.8% over, for a fail above 1.25%; None in between (a rate at
    its knee: only the most requests allowed can settle it)."""
    share = over / requests if requests else 0.0
    allowed = 1 - conf.PERCENTILE
    if share < 0.8 * allowed:
        total = conf.requests_to_pass(over, confidence=confidence)
        for _ in range(20):  # more requests bring more over the objective, at the share seen
            more = conf.requests_to_pass(max(over, math.ceil(share * total)), confidence=confidence)
            if more <= total:
                break
            total = more
        return total
    if share > 1.25 * allowed:
        total = max(requests, 1)
        while not conf.confidently_over(total, math.ceil(share * total), confidence=confidence):
            total *= 2
        return total
    return None


class _Stop(Exception):
    """The search ends before converging; the message says why."""

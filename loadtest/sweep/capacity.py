"""Capacity under a latency objective: the highest offered rate a server serves at p99 <= L.

The search, as perf_analyzer's `--latency-threshold` search and MLPerf LoadGen's Server scenario
do it, on open-loop (Poisson) cells only, each one a recorded cell:

1. bracket: from a start rate, double while the cell passes (halve while it fails), until one
   passing and one failing rate are known;
2. bisect between them until (failing - passing) / passing <= the precision;
3. confirm the highest passing rate with a longer measurement; if that fails, it becomes the
   failing bound and the search goes on below it. The last step a search may take is always kept
   for a confirmation, so a search cut short by its step limit still answers when it can.

A rate that fails while bracketing or bisecting with its median still within the objective is
measured once more (role `retry`) and fails only if that fails too: near the knee one stall in a
short window can push a p99 over the objective, and a single such cell would otherwise cap the
answer far below the server's capacity. A cell whose median is over the objective too (or that has
none) is overloaded, not unlucky: it fails at once.

A cell passes when it was measured, is valid (no errors, not saturated, stable) and its p99 <= L.
The answer is always a measured, passing (and confirmed) rate, never an interpolated one. The
search is bounded by a step limit and a deadline, and ends early when the server stops answering.

Not for: measuring a cell (`CapacitySearch` is given a `measure` function; the command line wires
it to `loadtest.sweep.runner.CellRunner`) or sizing replicas (`loadtest.analysis.size`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from loadtest.records import CellResult
from loadtest.vocab import CellStatus


class Role(StrEnum):
    """Why a search measured a cell; recorded with the cell."""

    PROBE = "probe"  # a short closed loop that picks the start rate
    BRACKET = "bracket"
    BISECT = "bisect"
    CONFIRM = "confirm"
    START = "start"  # the search's server did not start or answer: its one cell, recorded failed
    RETRY = "retry"  # a failing rate measured once more: it fails only if this fails too


@dataclass(frozen=True)
class SearchSettings:
    p99_ms: float  # the objective
    start_rps: float
    precision: float = 0.05  # stop bisecting when (failing - passing) / passing <= this
    min_rps: float = 1.0  # below this the objective is called unmet
    max_rps: float = 1_000_000.0  # the bracket never offers more
    max_steps: int = 20  # cells, confirmations included
    max_s: float = 900.0  # wall time for the whole search

    def check(self) -> None:
        if not self.p99_ms > 0:
            raise ValueError(f"the p99 objective must be positive, got {self.p99_ms} ms")
        if not self.min_rps <= self.start_rps <= self.max_rps:
            raise ValueError(f"start rate {self.start_rps} req/s outside [{self.min_rps}, {self.max_rps}]")
        if not 0 < self.precision < 1:
            raise ValueError(f"precision must be in (0, 1), got {self.precision}")
        if self.max_steps < 2:
            raise ValueError(f"a search needs at least 2 steps, got {self.max_steps}")


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str  # why it failed; "" when it passed


def verdict(result: CellResult, p99_ms: float) -> Verdict:
    """Whether a measured cell meets the objective, and if not, why."""
    if result.status != CellStatus.OK:
        return Verdict(False, f"failed: {result.failure_reason}")
    if not result.valid:
        return Verdict(False, "; ".join(f"{f.flag}: {f.reason}" for f in result.flags))
    if result.latency_p99_ms is None or result.latency_p99_ms > p99_ms:
        return Verdict(False, f"p99 {result.latency_p99_ms} ms > {p99_ms:g} ms")
    return Verdict(True, "")


@dataclass(frozen=True)
class Measured:
    """What `measure` hands back: the recorded cell, and whether the server still answered after it."""

    result: CellResult
    server_alive: bool = True


@dataclass(frozen=True)
class Step:
    rate_rps: float
    role: Role
    result: CellResult
    verdict: Verdict


@dataclass(frozen=True)
class CapacityAnswer:
    """The highest confirmed passing rate (None when the objective was never met) and how it was found."""

    p99_ms: float
    capacity: Step | None  # the confirmed passing cell
    lowest_failing_rps: float | None  # the bracket's upper end
    steps: tuple[Step, ...]
    ended_because: str  # "converged", "step limit", "time limit", "server stopped answering", ...

    @property
    def met(self) -> bool:
        return self.capacity is not None


Measure = Callable[[float, Role], Measured]


@dataclass
class CapacitySearch:
    """Runs the search with `measure(rate_rps, role) -> Measured`; `run()` returns the answer."""

    settings: SearchSettings
    measure: Measure
    clock: Callable[[], float] = time.monotonic
    steps: list[Step] = field(default_factory=list)

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
        capacity = self._confirmed()
        floor = capacity.rate_rps if capacity else 0.0
        return CapacityAnswer(self.settings.p99_ms, capacity, lowest_failing(self.steps, floor), tuple(self.steps),
                              ended)

    def _bracket(self) -> tuple[float | None, float | None]:
        """A passing and a failing rate (the passing one None when even min_rps fails)."""
        s = self.settings
        rate = s.start_rps
        if self._passes(rate, Role.BRACKET):
            while rate < s.max_rps and self._steps_left() > 1:
                higher = min(rate * 2, s.max_rps)
                if not self._passes(higher, Role.BRACKET):
                    return rate, higher
                rate = higher
            return rate, None  # passes at the highest rate it may offer
        while rate > s.min_rps:
            lower = max(round(rate / 2, 1), s.min_rps)
            if self._passes(lower, Role.BRACKET):
                return lower, rate
            rate = lower
        raise _Stop(f"objective not met even at {s.min_rps:g} req/s")

    def _narrow(self, low: float | None, high: float | None) -> None:
        """Bisect, then confirm the highest passing rate; a failed confirmation lowers the bound."""
        while low is not None:
            while high is not None and (high - low) / low > self.settings.precision and self._steps_left() > 1:
                middle = round((low + high) / 2, 1)  # rates to 0.1 req/s: finer is below measurement noise
                if not low < middle < high:
                    break
                if self._passes(middle, Role.BISECT):
                    low = middle
                else:
                    high = middle
            if self._step(low, Role.CONFIRM).verdict.passed:
                return
            high, low = low, self._highest_passing_below(low)
        raise _Stop("no passing rate held up under confirmation")

    def _highest_passing_below(self, rate: float) -> float | None:
        below = [r for r, passed in rate_outcomes(self.steps).items() if passed and r < rate]
        if below:
            return max(below)
        lower = rate / 2
        return lower if lower >= self.settings.min_rps else None

    def _step(self, rate: float, role: Role) -> Step:
        self._check_bounds()
        measured = self.measure(rate, role)
        step = Step(rate, role, measured.result, verdict(measured.result, self.settings.p99_ms))
        self.steps.append(step)
        if not measured.server_alive:
            raise _Stop("the server stopped answering")
        return step

    def _bracket_too_wide(self) -> bool:
        """Whether the answer's bracket is wider than the precision asked for (or has no upper end)."""
        confirmed = self._confirmed()
        if confirmed is None:
            return True
        failing = lowest_failing(self.steps, confirmed.rate_rps)
        return failing is None or (failing - confirmed.rate_rps) / confirmed.rate_rps > self.settings.precision

    def _passes(self, rate: float, role: Role) -> bool:
        """Measure `rate`; a failure is measured once more (when a step is left for it) and stands only if
        that fails too."""
        first = self._step(rate, role)
        if first.verdict.passed:
            return True
        return worth_a_retry(first.result, self.settings.p99_ms) and self._steps_left() > 1 \
            and self._step(rate, Role.RETRY).verdict.passed

    def _steps_left(self) -> int:
        return self.settings.max_steps - len(self.steps)

    def _check_bounds(self) -> None:
        if len(self.steps) >= self.settings.max_steps:
            raise _Stop(f"step limit ({self.settings.max_steps} cells)")
        if self.clock() > self.deadline:
            raise _Stop(f"time limit ({self.settings.max_s:g} s)")

    def _confirmed(self) -> Step | None:
        """The highest confirmed passing cell so far (a search cut short still answers with it)."""
        confirmed = [s for s in self.steps if s.role == Role.CONFIRM and s.verdict.passed]
        return max(confirmed, key=lambda s: s.rate_rps, default=None)


def worth_a_retry(result: CellResult, p99_ms: float) -> bool:
    """A failed cell that may have been unlucky: measured, its median within the objective."""
    return result.status == CellStatus.OK and result.latency_p50_ms is not None and result.latency_p50_ms <= p99_ms


def rate_outcomes(steps: tuple[Step, ...] | list[Step]) -> dict[float, bool]:
    """Whether each rate passed while bracketing or bisecting: its last measurement decides (a retry's)."""
    return {s.rate_rps: s.verdict.passed for s in steps if s.role in (Role.BRACKET, Role.BISECT, Role.RETRY)}


def lowest_failing(steps: tuple[Step, ...] | list[Step], floor: float) -> float | None:
    """The bracket's upper end: the lowest rate above `floor` that failed, its retry included, or whose
    confirmation failed."""
    failed = [rate for rate, passed in rate_outcomes(steps).items() if not passed and rate > floor]
    failed += [s.rate_rps for s in steps if s.role == Role.CONFIRM and not s.verdict.passed and s.rate_rps > floor]
    return min(failed, default=None)


class _Stop(Exception):
    """The search ends before converging; the message says why."""

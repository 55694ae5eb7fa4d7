"""Capacity under a latency objective: the highest offered rate a server serves at p99 <= L, with
the confidence its verdicts state.

The search, as perf_analyzer's `--latency-threshold` search and MLPerf LoadGen's Server scenario
do it (LoadGen's peak finding confirms a lower rate before it searches upward), on open-loop
(Poisson) cells only, each one a recorded cell:

1. anchor: the start rate (half a closed-loop probe's throughput), halved while it does not pass;
   the first rate that passes is confirmed at once (a longer, separate measurement), so that a
   search cut short early still answers with a confirmed rate;
2. bracket: from the anchor, double while the rate passes, until a passing rate and one above it
   that did not pass are known;
3. bisect between them until (upper - passing) / passing <= the precision;
4. confirm the highest passing rate. A confirmation that fails at a rate that passed names the rate
   *unsteady* (`loadtest.judge.conclusion.describe_unsteady`); it becomes the upper end and the
   search goes on below it. The last step a search may take, and the time a confirmation needs, are
   kept for the confirmation.
5. in a paired comparison (`pairing` given: `loadtest.search.interleave.Turn`), the searches agree on their
   answers before they end: each says whether its answer passed and the round its confirmation was
   measured in. Answers that all passed, confirmed within three rounds of each other (about half a minute),
   stand. All passed in different minutes: those confirmed before the newest one's minutes confirm again, all
   in one round (a held call: a new attempt at the same rate, its own verdict), so that the ratio's two answers
   come from the same minutes, while the newest waits (each confirmation more at a knee is one more chance to
   fail). One did not pass: it searches on below, and the others wait for its next answer, then agree again. A
   search whose time runs out answers with its last confirmation (the ratio's range then carries the
   machine's drift between the two answers: `loadtest.report.answers.paired`).

Whatever stops it (its step limit, its deadline, Ctrl-C or SIGTERM: `interrupts`) it answers with its
best evidence: the highest confirmed rate; above it, the highest rate that passed but was not
confirmed ("passed, not confirmed"); "none" only when nothing passed. A cell is never started
when the time left cannot hold it: its window (at least the 459 requests a pass needs at p99, 99%,
at its rate) plus the cell's overhead (`cell_overhead_s`: warm-up, Locust's start and the scrapes).

Each rate is judged by `loadtest.judge.verdicts` at the stated confidence (MLPerf's early-stopping rule:
`loadtest.judge.confidence`): pass, fail, inconclusive, or the load generator's limit. A rate's first
window is long enough to hold the requests a pass needs (a window is sized in requests, not
seconds; at high rates the usual window already holds them). An inconclusive rate is measured
longer (role `extend`): the window grows to the requests a verdict would likely need (a rate whose
latency grew within its one cell, to that cell's length at least: `loadtest.judge.verdicts`), up to
`max_rate_s` seconds at that rate in all (a rate that only steers the bisection is extended once; a
confirmation, which is the answer, until it is settled or the cap is reached), and every window at
the rate is pooled. A rate still inconclusive is never taken as a pass or a fail: above a pass it
only bounds the bisection (the answer lists it with its N), and below the rate whose `max_rate_s`
cannot hold 1.1 x the 459 requests a pass needs (at p99, 99%) the search stops and says so. A load
generator that did not keep up says nothing about the server: such a rate bounds the bisection from
above like a failing one, and the highest passing rate below it is confirmed and answered as "at
least" (a confirmation that does not hold lowers the bound, as any other).
While halving downward it stops as soon as the rates that did not pass show stalls independent
of the load (`loadtest.judge.conclusion.stalls`), rather than bisecting towards zero.

The answer is always a measured, passing rate, never an interpolated one, with its uncertainty
(`loadtest.judge.conclusion.Conclusion`). The search ends early when the server stops answering.

Not for: measuring a cell (`CapacitySearch` is given a `measure` function; the command line wires
it to `loadtest.measure.cell_sweep.CellRunner`), answering other objectives from the same cells
(`loadtest.judge.objectives.objective_answers`) or sizing replicas (`loadtest.report.sizing.size`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from loadtest.evidence.vocab import Role
from loadtest.judge import confidence as conf
from loadtest.judge.conclusion import conclude, final_verdicts, stalls
from loadtest.judge.verdicts import Decision, Step, Verdict, step_after
from loadtest.search.search_settings import (
    FIRST_WINDOW_MARGIN,
    Agreement,
    CapacityAnswer,
    Measure,
    SearchSettings,
)

CLOCK_SLACK_S = 0.5  # a confirmation shortened to the time left leaves this for the clock to move before it starts



class Pairing(Protocol):
    """A paired comparison's seat (`loadtest.search.interleave.Turn`): the round of the last cell, and agreement."""

    last_round: int | None

    def agree(self, passed: bool, round_: int | None) -> Agreement: ...


@dataclass
class CapacitySearch:
    """Runs the search with `measure(rate_rps, role, window_s) -> Measured`; `run()` returns the answer.
    `measure` raising one of `interrupts` (Ctrl-C; the command line adds the cell sweep's `Interrupted`) ends
    the search with the answer of the steps before it."""

    settings: SearchSettings
    measure: Measure
    clock: Callable[[], float] = time.monotonic
    steps: list[Step] = field(default_factory=list)
    limited_at: float | None = None  # the lowest rate where the load generator was the limit
    interrupts: tuple[type[BaseException], ...] = (KeyboardInterrupt,)
    pairing: Pairing | None = None  # a paired comparison's seat: final answers agreed in the same minutes
    _rounds: list[int | None] = field(default_factory=list)  # the round each step was measured in (paired)

    def run(self) -> CapacityAnswer:
        self.settings.check()
        self.deadline = self.clock() + self.settings.max_s
        interrupted = False
        try:
            self._narrow(*self._bracket())
            ended = "converged"
            if self._bracket_too_wide():
                ended = self._cut_short()
        except _Stop as stop:
            ended = str(stop)
        except self.interrupts:
            ended, interrupted = "interrupted", True
        return CapacityAnswer(self.settings.objective, conclude(self.steps, self.settings.objective), tuple(self.steps),
                              ended, interrupted)

    # ------------------------------------------------------------------ anchor, bracket, bisect, confirm

    def _bracket(self) -> tuple[float, float | None]:
        """A confirmed passing rate (the anchor) and a higher one that did not pass (None: none did)."""
        s = self.settings
        rate, high = s.start_rps, None
        verdict = self._judge(rate, Role.BRACKET)
        if s.gate and not verdict.passed:
            raise _Stop(f"did not pass at {rate:g} req/s, the rate to beat ({verdict.describe()})")
        while not (verdict.passed and self._secure(rate)):
            high, rate = rate, self._lower(rate, verdict)
            verdict = self._judge(rate, Role.BRACKET)
        if high is not None:
            return rate, high
        while rate < s.max_rps and self._room_to_climb(min(rate * 2, s.max_rps), rate):
            higher = min(rate * 2, s.max_rps)
            verdict = self._judge(higher, Role.BRACKET)
            if not verdict.passed:
                if verdict.decision == Decision.LOADGEN:
                    self.limited_at = higher
                return rate, higher
            rate = higher
        return rate, None  # passes at the highest rate it may offer, or no room to go higher

    def _secure(self, rate: float) -> bool:
        """Confirm a passing anchor at once; whether it held. One that did not is unsteady: the search goes
        on below it (in a tuner's gate, it ends)."""
        if self._judge(rate, Role.CONFIRM).passed:
            return True
        if self.settings.gate:
            raise _Stop(f"did not hold at {rate:g} req/s, the rate to beat: it passed, then its confirmation failed")
        return False

    def _lower(self, rate: float, verdict: Verdict) -> float:
        """The next rate down from one that did not pass (or did not hold); stops where no lower rate can
        show a pass, or where the rates that did not pass show stalls independent of the load."""
        s = self.settings
        found = stalls(self.steps, s.objective)
        if found is not None:
            raise _Stop(f"unmet: {found.describe(s.objective)}")
        if rate <= s.min_rps:
            raise _Stop(f"objective not met even at {s.min_rps:g} req/s")
        lower = max(round(rate / 2, 1), s.min_rps)
        if lower < s.lowest_conclusive_rps():
            raise _Stop(f"no pass down to {rate:g} req/s; below {s.lowest_conclusive_rps():.1f} req/s a rate's "
                        f"{s.max_rate_s:g} s cannot hold the {conf.requests_to_pass(0, confidence=s.confidence)} "
                        f"requests a pass needs at {s.confidence:.0%} confidence with "
                        f"{FIRST_WINDOW_MARGIN - 1:.0%} to spare")
        return lower

    def _narrow(self, low: float, high: float | None) -> None:
        """Bisect, then confirm the highest passing rate; a confirmation that does not pass lowers the bound.
        A rate where the load generator was the limit is bisected toward like a failing one (a lower rate may
        still be within the load generator's reach): the answer is "at least" the highest passing rate below
        the lowest such rate, to the precision asked for."""
        while True:
            while high is not None and (high - low) / low > self.settings.precision:
                middle = round((low + high) / 2, 1)  # rates to 0.1 req/s: finer is below measurement noise
                if not low < middle < high or not self._room_to_climb(middle, low):
                    break
                verdict = self._judge(middle, Role.BISECT)
                if verdict.passed:
                    low = middle
                    continue
                high = middle
                if verdict.decision == Decision.LOADGEN:
                    self.limited_at = middle if self.limited_at is None else min(self.limited_at, middle)
            if self._final(low):
                if high is not None and self._at_client_limit(high):
                    raise _Stop(f"the load generator was the limit at {self.limited_at:g} req/s")
                return
            high, below = low, self._highest_passing_below(low)
            if below is None:
                raise _Stop("no passing rate held up under confirmation")
            low = below

    def _final(self, rate: float) -> bool:
        """Whether `rate` holds as the answer. Alone: confirmed before, or now. Paired: confirmed in the same minutes
        as every other search's answer (module step 5); True also where it passed and its time cannot hold another
        attempt."""
        if self.pairing is None:
            return self._confirmed(rate) or self._judge(rate, Role.CONFIRM).passed
        measure = not self._confirmed(rate)
        while True:
            passed = self._judge(rate, Role.CONFIRM, self._next_attempt(rate), held=True).passed if measure else True
            said = self.pairing.agree(passed, self._standing_round(rate))
            if not passed or said == Agreement.STAND:
                return passed
            measure = said == Agreement.AGAIN  # else another searches on below: agree again on its next answer
            if measure and not self._room_to_confirm(rate):
                return True

    def _standing_round(self, rate: float) -> int | None:
        """The round the latest confirmation at `rate` began in, where it passed; None otherwise."""
        confirming = [(i, s) for i, s in enumerate(self.steps) if s.confirming and s.rate_rps == rate]
        if not confirming or not confirming[-1][1].verdict.passed:
            return None
        attempt = confirming[-1][1].attempt
        return self._rounds[next(i for i, s in confirming if s.attempt == attempt)]

    def _next_attempt(self, rate: float) -> int:
        """0 for a rate's first confirmation; one more than its last attempt after that."""
        attempts = [s.attempt for s in self.steps if s.confirming and s.rate_rps == rate]
        return max(attempts) + 1 if attempts else 0

    def _room_to_confirm(self, rate: float) -> bool:
        return self._steps_left() > 0 and self._confirm_s(rate) <= self._time_left()

    def _confirm_s(self, rate: float) -> float:
        """The least a confirmation at `rate` takes: its window (holding a pass's requests) and overhead."""
        s = self.settings
        return self._cell_s(rate, max(s.confirm_window_s or 0.0, min(self._wanted_s(rate), s.max_rate_s)))

    def _confirmed(self, rate: float) -> bool:
        step = final_verdicts(self.steps).get((rate, True))
        return step is not None and step.verdict.passed

    def _at_client_limit(self, rate: float) -> bool:
        return self.limited_at is not None and rate >= self.limited_at

    def _highest_passing_below(self, rate: float) -> float | None:
        last = final_verdicts(self.steps)
        unsteady = {g[0] for g, s in last.items() if g[1] and s.verdict.decision == Decision.FAIL}
        below = [g[0] for g, s in last.items() if not g[1] and s.verdict.passed and g[0] < rate
                 and g[0] not in unsteady]
        if below:
            return max(below)
        lower = rate / 2
        return lower if lower >= max(self.settings.min_rps, self.settings.lowest_conclusive_rps()) else None

    # ------------------------------------------------------------------ one rate's verdict

    def _judge(self, rate: float, role: Role, attempt: int = 0, held: bool = False) -> Verdict:
        """Measure `rate`, and measure it longer while its verdict is inconclusive and the bounds allow: a
        confirmation (the answer) up to `max_rate_s`, a rate that only steers the bisection once. `held`: its first
        cell waits for the comparison's round of final confirmations."""
        confirming = role == Role.CONFIRM
        step = self._step(rate, role, self._first_window_s(rate, confirming), confirming, attempt, held)
        extensions = 0
        while step.verdict.decision == Decision.INCONCLUSIVE and (confirming or extensions < 1):
            window_s = self._extension_s(step)
            if window_s is None:
                break
            step = self._step(rate, Role.EXTEND, window_s, confirming, attempt)
            extensions += 1
        return step.verdict

    def _first_window_s(self, rate: float, confirming: bool) -> float | None:
        """The usual window, grown (up to `max_rate_s`) so that it holds the requests a pass needs: a window
        is sized in requests, not seconds; a confirmation's shortened to the time left where that still holds
        them. None: the usual window, as `measure` decides it."""
        usual = self.settings.confirm_window_s if confirming else self.settings.window_s
        if usual is None:
            return None
        wanted_s = self._wanted_s(rate)
        if wanted_s > usual:
            return round(min(wanted_s, self.settings.max_rate_s), 1)
        room_s = self._time_left() - self.settings.cell_overhead_s - CLOCK_SLACK_S
        return round(room_s, 1) if confirming and wanted_s <= room_s < usual else usual

    def _wanted_s(self, rate: float) -> float:
        """Seconds at `rate` holding the requests a pass needs, with the first window's margin."""
        return FIRST_WINDOW_MARGIN * conf.requests_to_pass(0, confidence=self.settings.confidence) / rate

    def _extension_s(self, step: Step) -> float | None:
        """The next window at an inconclusive rate, sized to the requests a pass needs; None: no room (steps,
        its rate's `max_rate_s`, or the time left)."""
        evidence = step.verdict.evidence
        reserve = 1 if step.confirming else 2  # a non-confirming rate leaves a step for the confirmation
        if evidence is None or self._steps_left() < reserve:
            return None
        measured_s = sum(s.result.load.duration_s for s in self.steps if s.group == step.group)
        room_s = self.settings.max_rate_s - measured_s  # the rate's cap; the time left is checked after
        rate = max(step.result.throughput_rps, step.rate_rps * 0.5)
        if room_s < 0.5:
            return None
        wanted = conf.needed_requests(evidence.requests, evidence.over, self.settings.confidence)
        if wanted is None:  # a share over the objective near 1%: only the most requests allowed can settle it
            window_s = room_s
        else:
            window_s = min(room_s, max(1.0, 1.1 * (wanted - evidence.requests) / rate, step.verdict.again_s))
        if self.settings.cell_overhead_s + window_s > self._time_left():
            return None  # a window the time left cannot hold: not started
        return round(window_s, 1)

    def _step(self, rate: float, role: Role, window_s: float | None, confirming: bool, attempt: int = 0,
              held: bool = False) -> Step:
        self._check_bounds(rate, window_s)
        paired = {"attempt": attempt, "held": held} if self.pairing is not None else {}
        measured = self.measure(rate, role, window_s, **paired)
        step = step_after(self.steps, rate, role, measured.result, confirming, self.settings.objective,
                          self.settings.confidence, attempt)
        self.steps.append(step)
        self._rounds.append(self.pairing.last_round if self.pairing is not None else None)
        if not measured.server_alive:
            raise _Stop("the server stopped answering")
        return step

    # ------------------------------------------------------------------ bounds

    def _bracket_too_wide(self) -> bool:
        """Whether the answer's bracket is wider than the precision asked for (or has no upper end)."""
        conclusion = conclude(self.steps, self.settings.objective)
        upper = conclusion.upper_rps()
        if conclusion.capacity is None or upper is None:
            return True
        return (upper - conclusion.capacity.rate_rps) / conclusion.capacity.rate_rps > self.settings.precision

    def _steps_left(self) -> int:
        return self.settings.max_steps - len(self.steps)

    def _time_left(self) -> float:
        return self.deadline - self.clock()

    def _cell_s(self, rate: float, window_s: float | None) -> float:
        """The least a cell at `rate` takes: its window (at least the requests a pass needs) and overhead."""
        needed_s = conf.requests_to_pass(0, confidence=self.settings.confidence) / rate
        return self.settings.cell_overhead_s + max(window_s or 0.0, needed_s)

    def _room_to_climb(self, rate: float, low: float) -> bool:
        """Whether a step at `rate` fits and, while the passing rate `low` below it is not confirmed yet, still
        leaves a step and the time to confirm it (the answer). Once `low` is confirmed, what is left is spent
        higher up: a pass there is answered too, as "passed, not confirmed"."""
        step_s = self._cell_s(rate, self._first_window_s(rate, False))
        if self._confirmed(low) and self.pairing is None:  # paired, the final confirmation is measured again
            return self._steps_left() > 0 and step_s <= self._time_left()
        return self._steps_left() > 1 and step_s + self._confirm_s(low) <= self._time_left()

    def _cut_short(self) -> str:
        """Why a search that converged nowhere near the precision stopped: its steps, or its time."""
        s = self.settings
        if self._steps_left() <= 0:
            return f"step limit ({s.max_steps} cells)"
        answer = conclude(self.steps, s.objective).capacity
        if answer is not None and not self._room_to_climb(answer.rate_rps * (1 + s.precision), answer.rate_rps):
            return f"time limit ({s.max_s:g} s): {self._time_left():.1f} s left, too little for a higher rate"
        return "converged"

    def _check_bounds(self, rate: float, window_s: float | None) -> None:
        s = self.settings
        if len(self.steps) >= s.max_steps:
            raise _Stop(f"step limit ({s.max_steps} cells)")
        left_s, needed_s = self._time_left(), self._cell_s(rate, window_s)
        if left_s <= 0:
            raise _Stop(f"time limit ({s.max_s:g} s)")
        if needed_s > left_s:
            raise _Stop(f"time limit ({s.max_s:g} s): {rate:g} req/s not started, its cell needs ~{needed_s:.1f} s "
                        f"and {left_s:.1f} s were left")


class _Stop(Exception):
    """The search ends before converging; the message says why."""

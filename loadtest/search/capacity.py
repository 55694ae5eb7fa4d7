"""Capacity under a latency objective: the highest offered rate a server serves at p99 <= L, with the confidence its
verdicts state (docs/methodology.md#capacity-under-a-latency-objective says it at length).

The search, as perf_analyzer's `--latency-threshold` search and MLPerf LoadGen's Server scenario do it, on open-loop
(Poisson) cells only, each one a recorded cell:

1. anchor: the start rate (half a closed-loop probe's throughput), halved while it does not pass; the first rate
   that passes is confirmed at once, so that a search cut short early still answers with a confirmed rate;
2. bracket: from the anchor, double while the rate passes, until one above it does not;
3. bisect until (upper end - passing) / passing <= the precision, the upper end always a rate shown to fail; rates
   that stayed inconclusive are stepped around (`loadtest.search.next_rate`);
4. confirm the highest passing rate. A confirmation that fails names the rate *unsteady*; it becomes the upper end
   and the search goes on below it. The last steps a search may take, and their time, are kept for it.
5. paired (`pairing`: `loadtest.search.interleave.Turn`), the upper end is measured again (role `recheck`) in the
   round after the confirmation, so both ends of each range come from the same minutes (one that does not fail
   again is no upper end: the search goes on above), and the searches agree on their answers before they end: those
   confirmed within three rounds of each other stand; older ones confirm again, all in one round, while the newest
   waits; one that did not hold searches on while the others wait for its next answer. The search ends early when
   the server stops answering.

Whatever stops it (its step limit, its deadline, Ctrl-C or SIGTERM: `interrupts`) it answers with its best evidence:
the highest confirmed rate; above it, the highest rate that passed but was not confirmed; "none" only when nothing
passed. A cell is never started when the time left cannot hold it (`cell_overhead_s` and its window). Each rate is
judged by `loadtest.judge.verdicts` at the stated confidence (MLPerf's early-stopping rule, on the
effective N where slow requests cluster: `loadtest.judge.dispersion`): pass, fail, inconclusive, or the load
generator's limit. A first window holds the requests a pass needs; an inconclusive rate is measured longer (role
`extend`, sized for the requests a verdict would likely need, up to `max_rate_s` at the rate in all; once for a rate
that only steers the bisection, until settled for a confirmation), its windows pooled. An inconclusive rate is never
a pass or a fail, nor an upper end; below the rate whose `max_rate_s` cannot hold 1.1 x the 459 requests a pass
needs the search stops and says so. A rate where the load generator was the limit bounds the bisection like a fail,
and the answer below it is "at least". While halving downward it stops as soon as the rates that did not pass
show stalls independent of the load (`loadtest.judge.conclusion.stalls`). The answer is always a measured, passing
rate, never an interpolated one, with its uncertainty (`Conclusion`).
Not for: measuring a cell (`measure`: the command line wires it to `loadtest.measure.cell_sweep.CellRunner`),
other objectives from the same cells (`loadtest.judge.objectives`) or sizing (`loadtest.report.sizing`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from loadtest.evidence.vocab import Role
from loadtest.judge import confidence as conf
from loadtest.judge.conclusion import conclude, final_verdicts, stalls
from loadtest.judge.verdicts import Decision, Step, Verdict, step_after
from loadtest.search.next_rate import (
    Final,
    next_attempt,
    next_rate,
    standing_round,
    undecided,
    undecided_inside,
    upper_end,
)
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
    on_step: Callable[[CapacitySearch], None] | None = None  # after each step (the console's progress line)
    _rounds: list[int | None] = field(default_factory=list)  # the round each step was measured in (paired)

    def run(self) -> CapacityAnswer:
        self.settings.check()
        self.deadline = self.clock() + self.settings.max_s
        interrupted = False
        try:
            self._narrow(self._bracket()[0])
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
        """Confirm a passing anchor at once; whether it held (if not: below it; in a tuner's gate, the end)."""
        if self._judge(rate, Role.CONFIRM).passed:
            return True
        if self.settings.gate:
            raise _Stop(f"did not hold at {rate:g} req/s, the rate to beat: it passed, then its confirmation failed")
        return False

    def _lower(self, rate: float, verdict: Verdict) -> float:
        """The next rate down from one that did not pass or hold; stops where none lower can pass, or at stalls."""
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

    def _narrow(self, low: float) -> None:
        """Bisect until the range is within the precision, then confirm its low end (paired: and its upper end again,
        `_final`); a confirmation that does not pass lowers the range, an upper end that does not fail again raises it.
        Below a rate where the load generator was the limit the answer is "at least" the highest pass."""
        while True:
            low = self._bisect(low)
            final = self._final(low)
            if final == Final.HELD:
                upper = upper_end(self.steps, low)
                if upper is not None and self._at_client_limit(upper):
                    raise _Stop(f"the load generator was the limit at {self.limited_at:g} req/s")
                return
            if final == Final.RAISED:
                continue  # the upper end did not fail again: the range above `low` is searched again
            below = self._highest_passing_below(low)
            if below is None:
                raise _Stop("no passing rate held up under confirmation")
            low = below

    def _bisect(self, low: float) -> float:
        """Rates between `low` (passing) and the lowest rate above it shown to fail (or the load generator's limit),
        until the range is within the precision or no rate is left to try; the new low end."""
        while True:
            upper = upper_end(self.steps, low)
            if upper is not None and (upper - low) / low <= self.settings.precision:
                return low
            rate = next_rate(low, upper, undecided(self.steps), self.settings.precision, self.settings.max_rps)
            if rate is None or not self._room_to_climb(rate, low):
                return low
            verdict = self._judge(rate, Role.BISECT)
            if verdict.passed:
                low = rate
            elif verdict.decision == Decision.LOADGEN:
                self.limited_at = rate if self.limited_at is None else min(self.limited_at, rate)

    def _final(self, rate: float) -> Final:
        """Whether `rate` holds as the answer. Alone: confirmed before, or now. Paired: confirmed in the same minutes
        as every other search's answer (module step 5), with its upper end measured again in the next round, so that
        both ends of every range come from the same minutes; held also where it passed and its time cannot hold
        another attempt."""
        if self.pairing is None:
            confirmed = self._confirmed(rate) or self._judge(rate, Role.CONFIRM).passed
            return Final.HELD if confirmed else Final.LOWERED
        measure = not self._confirmed(rate)
        while True:
            passed = self._judge(rate, Role.CONFIRM, next_attempt(self.steps, rate, True), held=True).passed \
                if measure else True
            upper_held = self._recheck(rate) if passed and measure else True
            said = self.pairing.agree(passed and upper_held, standing_round(self.steps, self._rounds, rate))
            if not passed:
                return Final.LOWERED
            if not upper_held:
                return Final.RAISED
            if said == Agreement.STAND:
                return Final.HELD
            measure = said == Agreement.AGAIN  # else another searches on: agree again on its next answer
            if measure and not self._room_to_confirm(rate):
                return Final.HELD

    def _recheck(self, low: float) -> bool:
        """The range's upper end (a rate whose own windows failed) measured again in the round after the confirmation of
        `low`; whether it failed again. True where there is none (or its confirmation is what failed), or no room to
        measure it (the older fail then stands, and the ratio's range allows for the machine's drift since)."""
        upper = upper_end(self.steps, low)
        if upper is None:
            return True
        own = final_verdicts(self.steps).get((upper, False))
        if own is None or own.verdict.decision != Decision.FAIL or not self._room_to_recheck(upper):
            return True  # none, one the load generator limited, or one whose confirmation (not its windows) failed
        verdict = self._judge(upper, Role.RECHECK, next_attempt(self.steps, upper, False), held=True)
        return verdict.decision == Decision.FAIL

    def _room_to_confirm(self, rate: float) -> bool:
        return self._steps_left() > 0 and self._confirm_s(rate) <= self._time_left()

    def _room_to_recheck(self, rate: float) -> bool:
        return self._steps_left() > 0 and self._cell_s(rate, self._first_window_s(rate, False)) <= self._time_left()

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
        phi = evidence.dispersion  # slow requests in clusters: the rule stands on N / phi of them
        effective = conf.needed_requests(math.floor(evidence.requests / phi), math.ceil(evidence.over / phi),
                                         self.settings.confidence)
        if effective is None:  # a share over the objective near 1%: only the most requests allowed can settle it
            window_s = room_s
        else:
            wanted = math.ceil(effective * phi)
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
        if self.on_step is not None:
            self.on_step(self)
        if not measured.server_alive:
            raise _Stop("the server stopped answering")
        return step

    # ------------------------------------------------------------------ bounds

    def _bracket_too_wide(self) -> bool:  # than the precision asked for, or no upper end
        conclusion = conclude(self.steps, self.settings.objective)
        upper = conclusion.upper_rps()
        if conclusion.capacity is None or upper is None:
            return True
        return (upper - conclusion.capacity.rate_rps) / conclusion.capacity.rate_rps > self.settings.precision

    def _steps_left(self) -> int:
        return self.settings.max_steps - len(self.steps)

    def _time_left(self) -> float:
        return self.deadline - self.clock()

    def time_left_s(self) -> float:  # its own clock: in a paired comparison, not while it waits
        return max(0.0, self._time_left())

    def _cell_s(self, rate: float, window_s: float | None) -> float:
        """The least a cell at `rate` takes: its window (at least the requests a pass needs) and overhead."""
        needed_s = conf.requests_to_pass(0, confidence=self.settings.confidence) / rate
        return self.settings.cell_overhead_s + max(window_s or 0.0, needed_s)

    def _climb_needs(self, rate: float, low: float) -> tuple[int, float]:
        """(cells, seconds) a step at `rate` needs: with `low` below it unconfirmed, the step and `low`'s confirmation;
        with `low` confirmed, the step alone (a pass is answered as "passed, not confirmed"). Paired, the final round
        also measures the upper end again, and the confirmation again."""
        step_s = self._cell_s(rate, self._first_window_s(rate, False))
        if self._confirmed(low) and self.pairing is None:
            return 1, step_s
        if self.pairing is None:
            return 2, step_s + self._confirm_s(low)
        return 3, 2 * step_s + self._confirm_s(low)

    def _room_to_climb(self, rate: float, low: float) -> bool:
        cells, seconds = self._climb_needs(rate, low)  # whether they are left
        return self._steps_left() >= cells and seconds <= self._time_left()

    def _cut_short(self) -> str:
        """Why a search that converged nowhere near the precision stopped: its steps, or its time."""
        s = self.settings
        if self._steps_left() <= 0:
            return f"step limit ({s.max_steps} cells)"
        answer = conclude(self.steps, s.objective).capacity
        cells, seconds = self._climb_needs(answer.rate_rps * (1 + s.precision), answer.rate_rps) if answer else (0, 0)
        if self._steps_left() < cells:  # a paired search stopped here with 2 of its cells left, said "time limit"
            return f"step limit ({s.max_steps} cells): {self._steps_left()} left, too few for a higher rate's round"
        if seconds > self._time_left():
            return f"time limit ({s.max_s:g} s): {self._time_left():.1f} s left, too little for a higher rate"
        inside = undecided_inside(self.steps, answer.rate_rps) if answer is not None else []
        if inside:
            return ("no rate left to try: " + ", ".join(f"{r:g}" for r in sorted(inside)) + " req/s inside the range "
                    "stayed inconclusive (the knee, or its slow requests clustered)")
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

"""Batching tuning: the TF Serving batching parameters with the highest capacity under a p99 objective.

The search, as Triton Model Analyzer's quick search does it, visits far fewer configurations than
the full grid of candidate values:

1. batching off, the baseline every gain is measured against;
2. TF Serving's advice for the device (tensorflow_serving/batching/README.md, "CPU-only: One
   Approach" / "GPU: One Approach"), which is the `cpu` or `gpu` profile of serving.toml, handed in
   as the start;
3. coordinate ascent from the start: for each field in `TUNED_FIELDS`, step from the incumbent's
   value to the next value up its ladder and keep stepping while the challenger beats the incumbent
   (below); if the first step up did not, try downward likewise; then the next field.
   Passes repeat while any field moved (bounded by `max_passes`).

A challenger is first measured at the incumbent's capacity C with the same confidence rule (one
rate, not a search from scratch): one that does not pass there loses at once; one that does is
searched upward from C. It replaces the incumbent only when its confirmed capacity is above the
incumbent's upper end (the lowest rate shown to fail for the incumbent), i.e. beats it by more than
their uncertainty; where the incumbent has no upper end, by more than `min_gain`. Paired (`evaluate_pair`,
what `mnist-bench tune` does): each challenger is searched beside the incumbent, both servers up at once and
their cells interleaved (`loadtest.search.capacity_search.Capacities.compare`), and the bar is the incumbent's
capacity and upper end measured in those same minutes, so the machine's drift between evaluations cannot
make a challenger win or lose. An unmet
objective or a failed evaluation counts as capacity 0. No parameters are evaluated twice. The search is bounded by a
number of evaluations and a deadline, both checked before each evaluation: one begins while at least half an
average evaluation's time is left (`run_budget.SHORTEST_SHARE`), and its searches are cut to what is left (by
`evaluate`: `loadtest.search.tune_run.TuneRun`), so the whole tuning ends by its deadline and uses it; a search cut
short answers with its best so far.

Not for: measuring a configuration (`Tuner` is given an `evaluate` function that starts a server
with the profile, runs a capacity search and stops it) or printing and writing the answer
(`loadtest.search.tuning_output`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from loadtest.evidence.objective import Objective
from loadtest.search.ladders import (
    OFF,
    TUNED_FIELDS,
    Ladders,
    check_start,
    default_ladders,
    grid_size,
    labelled,
    neighbour,
    parameters_key,
    with_field,
)
from loadtest.search.run_budget import SHORTEST_SHARE
from model_export.provenance import cpu_cores
from serving.deploy.config import BatchingProfile
from serving.endpoint import Device

__all__ = ["UNRESOLVED", "Evaluated", "Stage", "TuneAnswer", "TuneSettings", "Tuner", "Visit"]

UNRESOLVED = "unresolved"  # a challenger confirmed under the bar that may yet beat it: an unconfirmed pass above the
# bar, or no rate above its capacity shown to fail


@dataclass(frozen=True)
class Evaluated:
    """What `evaluate` hands back for one configuration: its capacity, or None and why."""

    capacity_rps: float | None  # None: objective unmet, or the server failed
    capacity_ips: float | None = None
    p99_ms: float | None = None  # at the capacity
    note: str = ""  # why unmet or failed; anything worth keeping otherwise
    upper_rps: float | None = None  # the lowest rate above the capacity shown to fail (None: not measured)
    at_least: bool = False  # the load generator was the limit above it: the capacity is only a lower bound
    passed_rps: float | None = None  # the best pass above the capacity that its search did not confirm (None: none)

    @property
    def met(self) -> bool:
        return self.capacity_rps is not None

    @property
    def score(self) -> float:
        """The capacity compared between configurations: 0 when unmet or failed."""
        return self.capacity_rps or 0.0


# evaluate(profile, beat_rps): beat_rps None is a full search; else the rate to beat, tried first.
Evaluate = Callable[[BatchingProfile, "float | None"], Evaluated]
# evaluate_pair(incumbent, challenger): both searched paired; (the incumbent's result now, the challenger's).
EvaluatePair = Callable[[BatchingProfile, BatchingProfile], "tuple[Evaluated, Evaluated]"]


class Stage(StrEnum):
    """Why the tuner evaluated a configuration; recorded in the trail."""

    OFF = "off"  # batching off: the baseline
    ADVICE = "advice"  # TF Serving's advice for the device: the start
    ASCENT = "ascent"  # one field moved from the incumbent


@dataclass(frozen=True)
class Visit:
    """One evaluated configuration, in the order evaluated, with what decided it."""

    number: int
    stage: Stage
    profile: BatchingProfile
    result: Evaluated
    decision: str  # "baseline", "start", "kept: +12%", "within the uncertainty: +3%", "worse: -20%", "unmet: ...",
    # "unresolved: ..." (its confirmed capacity does not beat the bar; a pass it did not confirm does, or no rate above
    # it was shown to fail)
    moved_field: str | None = None  # the field the ascent moved; None for off and the advice
    duration_s: float = 0.0
    against: Evaluated | None = None  # paired: the incumbent measured beside it, the bar it was judged by


@dataclass(frozen=True)
class Gain:
    """One capacity over another: `ratio` (e.g. 2.31), or None and the reason."""

    ratio: float | None
    reason: str = ""
    at_least: bool = False  # the winner's capacity is a lower bound (its load generator was the limit): so is this


@dataclass(frozen=True)
class TuneSettings:
    objective: Objective  # each capacity was measured under it (carried into the answer)
    device: Device = Device.CPU
    cores: int | None = None  # None: the cores this process may run on
    batch_size: int = 1  # images per request; max_batch_size never goes below it
    ladders: Ladders = field(default_factory=dict)  # per-field candidate values over `default_ladders`
    min_gain: float = 0.05  # relative capacity gain that beats noise
    max_evaluations: int = 24  # off and the advice included
    max_s: float = 3600.0  # wall time for the whole search
    max_passes: int = 3  # coordinate-ascent passes over the fields

    def check(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"the request batch size must be >= 1, got {self.batch_size}")
        if not 0 <= self.min_gain < 1:
            raise ValueError(f"min_gain must be in [0, 1), got {self.min_gain}")
        if self.max_evaluations < 2:
            raise ValueError(f"tuning needs at least 2 evaluations (off and the advice), got {self.max_evaluations}")
        if self.max_passes < 1:
            raise ValueError(f"tuning needs at least 1 pass, got {self.max_passes}")
        unknown = set(self.ladders) - set(TUNED_FIELDS)
        if unknown:
            raise ValueError(f"no ladder for {', '.join(sorted(unknown))}: the tuner moves {', '.join(TUNED_FIELDS)}")
        for name, values in self.ladders.items():
            lowest = 0 if name == "batch_timeout_micros" else 1
            if any(value < lowest for value in values):
                raise ValueError(f"the {name} ladder must hold values >= {lowest}, got {list(values)}")


@dataclass(frozen=True)
class TuneAnswer:
    """The best batching configuration found (None when none met the objective) and how it was found."""

    objective: Objective
    batch_size: int
    winner: Visit | None  # the best batching configuration; may serve less than `off`
    off: Visit | None  # None when the search ended before measuring it
    advice: Visit | None
    trail: tuple[Visit, ...]
    ended_because: str  # "converged", "budget: N configurations", "time limit (S s)", "pass limit (N passes)"
    grid_size: int  # configurations in the full grid of the ladders
    min_gain: float = 0.05

    @property
    def configurations_visited(self) -> int:
        """Batching configurations evaluated (batching off not counted)."""
        return sum(1 for visit in self.trail if visit.stage != Stage.OFF)

    @property
    def gain_vs_off(self) -> Gain:
        return gain(self.winner, self.off, "batching off")

    @property
    def gain_vs_advice(self) -> Gain:
        return gain(self.winner, self.advice, "TF Serving's advice")


def gain(winner: Visit | None, baseline: Visit | None, label: str) -> Gain:
    """The winner's capacity over the baseline's, or why there is no ratio."""
    if winner is None:
        return Gain(None, "no batching configuration met the objective")
    if baseline is None:
        return Gain(None, f"{label} was not measured (the search ended first)")
    if baseline.result.capacity_rps is None:
        why = f": {baseline.result.note}" if baseline.result.note else ""
        return Gain(None, f"{label} did not meet the objective{why}")
    if baseline.result.at_least:  # a ratio over a lower bound bounds nothing
        return Gain(None, f"{label} is only a lower bound: the load generator was the limit")
    assert winner.result.capacity_rps is not None
    return Gain(winner.result.capacity_rps / baseline.result.capacity_rps, at_least=winner.result.at_least)


# ---------------------------------------------------------------- ladders

def ladders_for(settings: TuneSettings) -> dict[str, tuple[int, ...]]:
    """The defaults for the device and cores, with the settings' ladders in their place (sorted, unique)."""
    ladders = default_ladders(settings.device, settings.cores or cpu_cores(), settings.batch_size)
    ladders.update({name: tuple(sorted(set(values))) for name, values in settings.ladders.items()})
    return ladders



@dataclass
class Tuner:
    """Runs the search with `evaluate(profile, beat_rps) -> Evaluated`; `run()` returns the answer."""

    settings: TuneSettings
    start: BatchingProfile  # TF Serving's advice for the device
    evaluate: Evaluate
    clock: Callable[[], float] = time.monotonic
    trail: list[Visit] = field(default_factory=list)
    evaluate_pair: EvaluatePair | None = None  # set: every challenger is searched beside the incumbent

    def run(self) -> TuneAnswer:
        self.settings.check()
        self.ladders = ladders_for(self.settings)
        check_start(self.start, self.ladders)
        self.deadline = self.clock() + self.settings.max_s
        self.seen: dict[tuple, Visit] = {}
        self.incumbent: Visit | None = None
        try:
            self._visit(OFF, Stage.OFF)
            self.incumbent = self._visit(self.start, Stage.ADVICE)
            ended = self._ascend()
        except _Stop as stop:
            ended = str(stop)
        return self._answer(ended)

    def _ascend(self) -> str:
        """Passes over the fields while any field moved; says why it ended."""
        for _ in range(self.settings.max_passes):
            moved = [name for name in TUNED_FIELDS if self._move(name)]
            if not moved:
                return "converged"
        return f"pass limit ({self.settings.max_passes} passes)"

    def _move(self, name: str) -> bool:
        """Step one field upward while it improves; if the first step up did not, downward."""
        return self._walk(name, upward=True) or self._walk(name, upward=False)

    def _walk(self, name: str, upward: bool) -> bool:
        moved = False
        while True:
            assert self.incumbent is not None
            value = neighbour(self.ladders[name], getattr(self.incumbent.profile, name), upward)
            if value is None:
                return moved
            candidate = labelled(self.start, with_field(self.incumbent.profile, name, value))
            # Paired, a configuration seen before was beaten by the incumbent (or by one the incumbent beat), and
            # its old measurement was never beside the incumbent: it is not measured again, nor kept.
            revisit = self.evaluate_pair is not None and parameters_key(candidate) in self.seen
            visit = self._visit(candidate, Stage.ASCENT, name)
            if revisit or not self._improves(visit.result, visit.against):
                return moved
            self.incumbent, moved = visit, True

    def _improves(self, result: Evaluated, against: Evaluated | None = None) -> bool:
        """Above the incumbent's upper end (beyond both uncertainties), else above min_gain where it has none;
        `against`: the incumbent as measured beside the challenger (paired), else its own evaluation."""
        assert self.incumbent is not None
        best, score = against or self.incumbent.result, result.score
        if best.score <= 0:
            return score > 0
        if best.upper_rps is not None:
            return score > best.upper_rps
        return score > best.score * (1 + self.settings.min_gain)

    def _rate_to_beat(self, stage: Stage) -> float | None:
        if stage != Stage.ASCENT or self.incumbent is None or not self.incumbent.result.met:
            return None
        return self.incumbent.result.capacity_rps

    def _visit(self, profile: BatchingProfile, stage: Stage, moved_field: str | None = None) -> Visit:
        """The configuration's visit: an earlier one with the same parameters, or a new evaluation."""
        key = parameters_key(profile)
        if key in self.seen:
            return self.seen[key]
        self._check_budget()
        began = self.clock()
        against = None
        if self.evaluate_pair is not None and stage == Stage.ASCENT and self.incumbent is not None:
            against, result = self._evaluate_pair(self.incumbent.profile, profile)
        else:
            result = self._evaluate(profile, self._rate_to_beat(stage))
        visit = Visit(len(self.trail) + 1, stage, profile, result, self._decision(stage, result, against),
                      moved_field, self.clock() - began, against)
        self.trail.append(visit)
        self.seen[key] = visit
        return visit

    def _evaluate(self, profile: BatchingProfile, beat_rps: float | None) -> Evaluated:
        """A failed evaluation (a server that would not start, say) is a result, not the end of the search;
        anything else (Ctrl-C) ends it."""
        try:
            return self.evaluate(profile, beat_rps)
        except (ValueError, OSError, RuntimeError) as exc:  # one bad configuration must not lose the whole search
            return Evaluated(None, note=f"failed: {type(exc).__name__}: {exc}")

    def _evaluate_pair(self, incumbent: BatchingProfile, challenger: BatchingProfile) -> tuple[Evaluated, Evaluated]:
        """Both searched paired; a failed comparison is a result, as a failed evaluation is."""
        assert self.evaluate_pair is not None
        try:
            return self.evaluate_pair(incumbent, challenger)
        except (ValueError, OSError, RuntimeError) as exc:
            failed = Evaluated(None, note=f"failed: {type(exc).__name__}: {exc}")
            return failed, failed

    def _decision(self, stage: Stage, result: Evaluated, against: Evaluated | None = None) -> str:
        if not result.met:
            return f"unmet: {result.note}" if result.note else "unmet"
        if stage == Stage.OFF:
            return "baseline"
        if stage == Stage.ADVICE or self.incumbent is None:
            return "start"
        bar = against or self.incumbent.result
        best = bar.score
        if best <= 0:
            return "kept: the incumbent was unmet" + (" beside it" if against else "")
        beside = f" against the incumbent's {best:g} req/s measured beside it" if against else ""
        change = f"{result.score / best - 1:+.0%}{beside}"
        upper = bar.upper_rps
        if self._improves(result, against):
            return f"kept: {change}" + (f", above the incumbent's upper end {upper:g} req/s" if upper else "")
        if self._improves(replace(result, capacity_rps=result.passed_rps), against):
            return (f"{UNRESOLVED}: {result.passed_rps:g} req/s passed, not confirmed; "
                    f"confirmed {change}")
        if result.score >= best * (1 - self.settings.min_gain):
            return f"within the uncertainty: {change}" + (f" (not above {upper:g} req/s)" if upper else "")
        return self._below(result, best, change)

    @staticmethod
    def _below(result: Evaluated, best: float, change: str) -> str:
        """A challenger confirmed below the bar is worse only where a rate at or under the bar failed for it: with
        no rate above its capacity shown to fail (a search cut short, the load generator the limit) it is
        unresolved; with its upper end above the bar, the two ranges overlap."""
        if result.upper_rps is None:
            return f"{UNRESOLVED}: no rate above {result.score:g} req/s shown to fail; confirmed {change}"
        if result.upper_rps > best:
            return f"within the uncertainty: {change} (its upper end {result.upper_rps:g} req/s is above {best:g})"
        return f"worse: {change}"

    def _check_budget(self) -> None:
        s = self.settings
        if len(self.trail) >= s.max_evaluations:
            raise _Stop(f"budget: {s.max_evaluations} configurations")
        durations = [visit.duration_s for visit in self.trail]
        expected_s = sum(durations) / len(durations) if durations else 0.0
        if self.deadline - self.clock() < expected_s * SHORTEST_SHARE:
            raise _Stop(f"time limit ({s.max_s:g} s)")

    def _answer(self, ended: str) -> TuneAnswer:
        by_stage = {visit.stage: visit for visit in self.trail if visit.stage != Stage.ASCENT}
        winner = self.incumbent if self.incumbent is not None and self.incumbent.result.met else None
        return TuneAnswer(self.settings.objective, self.settings.batch_size, winner, by_stage.get(Stage.OFF),
                          by_stage.get(Stage.ADVICE), tuple(self.trail), ended,
                          grid_size(self.start, self.ladders), self.settings.min_gain)


class _Stop(Exception):
    """The search ends before converging; the message says why."""

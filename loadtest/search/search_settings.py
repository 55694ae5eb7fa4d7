"""A capacity search's inputs and its answer: the settings it runs under, what one measurement hands back,
and the answer it gives (`loadtest.search.capacity.CapacitySearch` runs it).

Not for: the search's decisions (`loadtest.search.capacity`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from loadtest.evidence.objective import Objective
from loadtest.evidence.records import CellResult
from loadtest.judge import confidence as conf
from loadtest.judge.conclusion import AnswerKind, Conclusion
from loadtest.judge.verdicts import Step


class Agreement(StrEnum):
    """What a paired comparison's searches agree on their answers (`loadtest.search.interleave`)."""

    STAND = "stand"  # every answer passed, confirmed in the same minutes
    AGAIN = "again"  # every answer passed, in different minutes: each confirms again, all in one round
    WAIT = "wait"  # one did not pass: it searches on below, the others wait for its next answer


FIRST_WINDOW_MARGIN = 1.1  # a first window holds 10% more than the requests a pass needs at the offered rate


@dataclass(frozen=True)
class SearchSettings:
    objective: Objective
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
    cell_overhead_s: float = 0.0  # a cell's seconds beyond its window: warm-up, Locust's start-up, the scrapes

    def check(self) -> None:
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
        if self.cell_overhead_s < 0:
            raise ValueError(f"cell_overhead_s must not be negative, got {self.cell_overhead_s}")

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
    """The search's best evidence: the highest confirmed passing rate, else the highest unconfirmed pass
    (`kind`), with its uncertainty, and how it was found."""

    objective: Objective
    conclusion: Conclusion
    steps: tuple[Step, ...]
    ended_because: str  # "converged", "step limit", "time limit", "interrupted", "stalls ...", ...
    interrupted: bool = False  # Ctrl-C or SIGTERM ended it: the answer stands on the steps before

    @property
    def capacity(self) -> Step | None:
        """The confirmed capacity (None when no confirmation passed)."""
        return self.conclusion.capacity

    @property
    def best_pass(self) -> Step | None:
        """The highest pass above the capacity that was not confirmed."""
        return self.conclusion.best_pass

    @property
    def kind(self) -> AnswerKind:
        return self.conclusion.kind

    @property
    def lowest_failing_rps(self) -> float | None:
        return self.conclusion.lowest_failing_rps

    @property
    def met(self) -> bool:
        """A confirmed capacity: what the tuner compares."""
        return self.capacity is not None


# measure(rate, role, window_s): window_s None is the role's usual window; else that many seconds. In a paired
# comparison also attempt= (a confirmation measured again) and held= (a final confirmation: `agree`).
Measure = Callable[..., Measured]

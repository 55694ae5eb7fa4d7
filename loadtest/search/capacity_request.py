"""What a capacity run searches, and how one search ended: `CapacityRequest` and `SearchEnd`.

A request names the plan (its [run] settings and its [capacity] objective per request batch, and targets), the
default objective (`--p99-ms`) and the search's bounds. `searches_at` says which searches run at a request batch:
one per target's objective there (two targets at one batch, p99 ≤ 10 ms and ≤ 50 ms: two searches), else one
at the batch's objective.

Not for: running the searches (`loadtest.search.capacity_search`) or their decisions (`loadtest.search.capacity`).
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtest.evidence.objective import Objective
from loadtest.judge.conclusion import DEFAULT_OBJECTIVES_MS, AnswerKind
from loadtest.judge.confidence import DEFAULT_CONFIDENCE
from loadtest.judge.goals import parse_goal
from loadtest.measure import plan as plans
from loadtest.search.search_settings import CapacityAnswer


@dataclass(frozen=True)
class CapacityRequest:
    """What to search: the objective, the request batch size, and the search's bounds."""

    plan: plans.Plan  # its [run] settings: samples, check, protocol, windows; its [capacity] objective per batch
    objective: Objective  # `--p99-ms`: each search's, where the plan's [capacity] sets none for its request batch
    precision: float = 0.05
    start_rps: float | None = None  # None: from a closed-loop probe
    min_rps: float = 1.0
    max_steps: int = 20
    max_s: float = 900.0
    confirm_factor: float = 3.0  # the confirmation's window, in measure_s
    confidence: float = DEFAULT_CONFIDENCE  # every verdict's, on p99 <= the objective
    max_rate_s: float = 30.0  # measured seconds at one rate, its extensions included
    objectives: tuple[float, ...] = DEFAULT_OBJECTIVES_MS  # p99s its cells are also answered at (recorded)

    def objective_at(self, batch_size: int) -> Objective:
        """The objective of a search at this request batch: the one place it is derived."""
        return Objective(self.plan.capacity.p99_objective_ms(batch_size, self.objective.p99_ms))

    def searches_at(self, batch_size: int) -> tuple[Objective, ...]:
        """The objective of each search at this request batch, strictest first: one per objective of the plan's
        targets at this batch (`[capacity] goals`), else the batch's own (`objective_at`)."""
        at = {goal.p99_objective_ms for goal in map(parse_goal, self.plan.capacity.goals) if goal.batch == batch_size}
        return tuple(Objective(p99) for p99 in sorted(at)) or (self.objective_at(batch_size),)


@dataclass(frozen=True)
class SearchEnd:
    """One search's end: its answer, or why it could not run (`answer` None)."""

    server: str
    batch_size: int
    answer: CapacityAnswer | None
    failure: str = ""
    objective: Objective | None = None  # the search's (`CapacityRequest.searches_at`)
    search_id: str = ""  # its cells' `search["id"]`

    @property
    def met(self) -> bool:
        """A confirmed capacity."""
        return self.answer is not None and self.answer.met

    @property
    def passed(self) -> bool:
        """A passing rate answered, confirmed or not."""
        return self.answer is not None and self.answer.kind != AnswerKind.NONE


__all__ = ["CapacityRequest", "SearchEnd"]

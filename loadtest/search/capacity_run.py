"""One capacity search against one running server (`CapacityRun`): each rate `loadtest.search.capacity.CapacitySearch`
asks for becomes one open-loop cell recorded with the search's tag (`search_tag`); a rate measured again takes the
next arrival seed. A cell the load generator limited is measured again with one more Locust process while its cores
allow. Without a start rate a short closed-loop probe (concurrency 4) measures what the server takes and the search
starts at half of it; a probe that measures nothing raises `NotMeasured`.

Not for: which servers are searched and in what order (`loadtest.search.capacity_search.Capacities`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from loadtest.evidence.objective import Objective
from loadtest.evidence.search_tag import ComparisonTag, SearchTag, ShapeTag
from loadtest.evidence.vocab import LoadMode, Role
from loadtest.judge.conclusion import DEFAULT_OBJECTIVES_MS
from loadtest.judge.confidence import DEFAULT_CONFIDENCE
from loadtest.judge.verdicts import client_limited
from loadtest.measure import plan as plans
from loadtest.measure.cell_sweep import CellRunner, Interrupted, cell_estimate_s
from loadtest.measure.probe import Prober
from loadtest.search.capacity import CapacitySearch, Pairing
from loadtest.search.capacity_output import Progress, range_text
from loadtest.search.capacity_request import CapacityRequest
from loadtest.search.search_settings import CapacityAnswer, Measured, SearchSettings
from model_export.provenance import cpu_cores
from serving.deploy.process import pinned_cores
from serving.endpoint import ServedEndpoint

PROBE_USERS = 4  # the start-rate probe: a short closed loop, enough users to keep a server busy


@dataclass
class CapacityRun:
    """One search against one running server; every cell recorded by `cells` with the search's tag."""

    request: CapacityRequest
    cells: CellRunner
    target: ServedEndpoint
    search_id: str
    prober: Prober
    batch_size: int = 1
    beat_rps: float | None = None  # a rate to beat (the tuner's incumbent): no pass there ends the search at once
    model_version: int | None = None
    measure_cell: Callable[..., Any] | None = None  # CellRunner.measure, or a paired comparison's turn at it
    clock: Callable[[], float] = time.monotonic  # the search's deadline runs on it
    comparison: ComparisonTag | None = None  # the paired comparison its cells belong to (`loadtest.search.comparison`)
    pairing: Pairing | None = None  # paired: the comparison's seat, where the final answers are agreed
    start_of: Callable[[float], float] | None = None  # paired: the comparison's common start, from this one's own
    asked: Objective | None = None  # the search's objective (`CapacityRequest.searches_at`); None: the batch's
    shape: ShapeTag | None = None  # its server's replica shape, in a shape sweep
    retag: Callable[[SearchTag], SearchTag] | None = None  # a tool-ceiling twin's search: its cells' tags, as twins'
    progress: Progress | None = None  # the console's line for this search, updated after each of its cells
    _confirming: bool = False  # the last measured rate was a confirmation: its extensions are too
    _processes: int = 0  # Locust processes now: the plan's, plus any added where its client was the limit
    _measured_at: dict[float, int] = field(default_factory=dict)  # cells measured so far at each rate

    def run(self) -> CapacityAnswer:
        r = self.request
        start = self.beat_rps or r.start_rps or self._start_from_probe()
        if self.beat_rps is None and r.start_rps is None and self.start_of is not None:
            start = self.start_of(start)
        settings = SearchSettings(objective=self.objective, start_rps=start, precision=r.precision,
                                  min_rps=r.min_rps, max_steps=r.max_steps, max_s=r.max_s, confidence=r.confidence,
                                  max_rate_s=r.max_rate_s, gate=self.beat_rps is not None,
                                  window_s=r.plan.run.measure_s,
                                  confirm_window_s=r.plan.run.measure_s * r.confirm_factor,
                                  cell_overhead_s=cell_estimate_s(r.plan.run) - r.plan.run.measure_s)
        return CapacitySearch(settings, self._measure, clock=self.clock,
                              interrupts=(Interrupted, KeyboardInterrupt), pairing=self.pairing,
                              on_step=self._progress if self.progress is not None else None).run()

    def _progress(self, search: CapacitySearch) -> None:
        """This search's console line: its range so far, how wide, and its budget left."""
        assert self.progress is not None
        self.progress.update(self.search_id, f"search {self.search_id.rsplit('/', 1)[-1]} ({self.target.name}, "
                             f"{self.objective}, request batch {self.batch_size}): "
                             f"{range_text(search.steps, self.objective)}; {len(search.steps)} cells, "
                             f"{search.time_left_s():.0f} s of {search.settings.max_s:.0f} s left")

    @property
    def objective(self) -> Objective:
        return self.asked or self.request.objective_at(self.batch_size)

    def _start_from_probe(self) -> float:
        """Half the throughput a short closed loop gets (never below min_rps)."""
        cell = plans.Cell(LoadMode.CLOSED, self.batch_size, PROBE_USERS, None)
        result, probe = self._cell(cell, self.request.plan.run, Role.PROBE, None, False)
        if not probe.ok or result.requests == 0:
            raise NotMeasured(f"the start-rate probe measured nothing: {result.failure_reason or probe.error}")
        return max(self.request.min_rps, round(result.throughput_rps / 2, 1))

    def _measure(self, rate_rps: float, role: Role, window_s: float | None, attempt: int = 0,
                 held: bool = False) -> Measured:
        self._processes = max(self._processes, self.request.plan.run.processes)
        before = self._measured_at.get(rate_rps, 0)
        self._measured_at[rate_rps] = before + 1
        run = replace(self.request.plan.run, processes=self._processes,
                      arrival_seed=self.request.plan.run.arrival_seed + before)
        if window_s is not None:
            run = replace(run, measure_s=window_s)
        elif role == Role.CONFIRM:
            run = replace(run, measure_s=run.measure_s * self.request.confirm_factor)
        cell = plans.Cell(LoadMode.OPEN, self.batch_size, None, rate_rps)
        confirming = role == Role.CONFIRM or (role == Role.EXTEND and self._confirming)
        self._confirming = confirming
        result, probe = self._cell(cell, run, role, rate_rps, confirming, attempt, held)
        while probe.ok and client_limited(result) and self._processes < self._load_cores():
            self._processes += 1
            self.cells.say(f"the load generator was the limit at {rate_rps:g} req/s: measuring it again with "
                           f"{self._processes} Locust processes")
            run = replace(run, processes=self._processes)
            result, probe = self._cell(cell, run, role, rate_rps, confirming, attempt)
        return Measured(result, server_alive=probe.ok)

    def _load_cores(self) -> int:
        """Cores the load generator may use without taking the server's: its pinned cores; unpinned, the
        cores beside a pinned server's; with neither pinned, only the processes it has (no way to tell)."""
        plan = self.request.plan
        pinned = pinned_cores(plan.run.loadgen_cpus)
        if pinned:
            return pinned
        server = pinned_cores(plan.launch.server_cpus)
        return max(1, cpu_cores() - server) if server else self._processes

    def _cell(self, cell: plans.Cell, run: plans.RunSettings, role: Role, rate_rps: float | None, confirming: bool,
              attempt: int = 0, held: bool = False):
        tag = search_tag(self.search_id, role, self.objective, rate_rps, self.request.confidence, confirming,
                         self.request.objectives, self.comparison)
        tag = replace(tag, attempt=attempt, shape=self.shape)
        tag = self.retag(tag) if self.retag else tag
        measure = self.measure_cell or self.cells.measure
        hold = {"held": True} if held else {}  # a paired comparison's final confirmation (`Turn.call`)
        result, probe = measure(self.prober, self.target, cell, run, 0, self.model_version, search=tag, **hold)
        self.model_version = probe.model_version or self.model_version
        return result, probe


def search_tag(search_id: str, role: Role, objective: Objective, rate_rps: float | None,
               confidence: float = DEFAULT_CONFIDENCE, confirming: bool = False,
               objectives: tuple[float, ...] = DEFAULT_OBJECTIVES_MS,
               comparison: ComparisonTag | None = None) -> SearchTag:
    """What a search's cell records about the search (`CellResult.search`); `CellRunner` adds the cell's own
    evidence on the objective (`loadtest.judge.verdicts.evidence_record`). `objectives`: the p99s the report
    answers the search's cells at, besides its own (`loadtest.report.answers.answers.objective_answers`); `comparison`:
    the comparison it is part of (`loadtest.search.comparison.comparison_tag`), when it is."""
    return SearchTag(search_id, role, objective, rate_rps, confidence, confirming, tuple(objectives), comparison)


class NotMeasured(Exception):
    """A search that could not begin (its probe measured nothing)."""

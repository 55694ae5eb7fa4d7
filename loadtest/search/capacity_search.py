"""`mnist-bench capacity`: capacity searches run against real servers, every probe a recorded cell.

`Capacities` runs `loadtest.search.capacity.CapacitySearch` once per server and request batch, all into one
results directory: on the running servers, or on configurations it starts (`loadtest.measure.servers`). Each
search is a `loadtest.search.capacity_run.CapacityRun` (every rate one recorded open-loop cell). Without a start
rate each search starts at half a short closed-loop probe's throughput (paired: every search at the lowest of
those). A server that does not start or answer gets one failed cell (role `start`), and the next goes on. After the
searches, each configuration's tool ceiling is measured (`loadtest.search.tool_ceiling_run`; `tool_ceiling=False`:
not), within its share of the run's time budget (`loadtest.search.run_budget.TOOL_CEILING_SHARE`).

Not for: the search's decisions (`loadtest.search.capacity`) or a grid of cells (`loadtest.measure.cell_sweep`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from loadtest.evidence.objective import Objective
from loadtest.evidence.search_tag import ComparisonTag
from loadtest.evidence.tables import plain_table
from loadtest.evidence.vocab import LoadMode, Role
from loadtest.measure import plan as plans
from loadtest.measure.cell_sweep import CellRunner, Interrupted
from loadtest.measure.probe import Prober
from loadtest.measure.servers import Slot, StartFailed, ToStart
from loadtest.search.capacity_output import Progress, outcome_line, trail_table
from loadtest.search.capacity_request import CapacityRequest, SearchEnd
from loadtest.search.capacity_run import CapacityRun, NotMeasured, search_tag
from loadtest.search.comparison import REFERENCE_USERS, Reference, Repeats, comparison_tag
from loadtest.search.interleave import Turn, interleave
from loadtest.search.run_budget import TOOL_CEILING_SHARE, RunBudget
from loadtest.search.tool_ceiling_run import ToolCeilings, TwinClock
from serving.endpoint import ServedEndpoint


@dataclass
class Capacities:
    """One search per server and request batch size (and repeat), in one results directory. Several servers
    are compared paired (`interleaved`): all up at once, their searches' cells alternating, a reference cell
    between slices (`loadtest.search.comparison`); else one after the other, each server stopped before the next."""

    request: CapacityRequest  # one search per server and each of `batch_sizes` (per objective: `searches_at`)
    servers: Sequence[Slot]
    batch_sizes: Sequence[int]
    results_root: Path
    out: TextIO = sys.stdout
    plan_path: str = ""
    outcomes: list[SearchEnd] = field(default_factory=list)
    repeats: Repeats = field(default_factory=Repeats)  # how many times the whole comparison runs
    interleaved: bool = True  # several servers: paired (False: searched one after the other)
    budget_s: float | None = None  # the searches' whole time (--budget-min's, a shape sweep's), shared as they begin
    tool_ceiling: bool = True  # after the searches, each configuration's twin (`loadtest.search.tool_ceiling_run`)
    verbose: bool = True  # each cell's line on the console (else in the run's console.log only)

    def __post_init__(self) -> None:
        self.shapes = {s.name: tag for s in self.servers if isinstance(s, ToStart) and (tag := s.shape_tag())}
        self.cells = CellRunner.new_run(self.results_root, self.request.plan, self.plan_path, self.out)
        self.progress = Progress(self.out)
        self.cells.verbose = self.verbose
        self.cells.printer = self.progress.print
        self.run_id, self.run_dir = self.cells.run_id, self.cells.run_dir
        self.prober = Prober(self.request.plan.run)
        self._ids = 0
        self._comparisons = 0
        self.points = [(b, o) for b in self.batch_sizes for o in self.request.searches_at(b)]
        # shared among the repeats that run (`--repeat`); one more (`--max-repeats`) begins only in what they leave
        # (`RunBudget.fits`): shares kept for repeats that never ran left a demo at 197 of its 330 s (issue #67)
        searches = len(self.servers) * len(self.points) * self.repeats.at_least
        kept = TOOL_CEILING_SHARE if self.tool_ceiling else 0.0
        self.budget = RunBudget(self.budget_s, searches, kept=kept) if self.budget_s is not None else None
        self._max_s: float | None = None  # the searches beginning now: their share of the budget

    def limit_each(self, max_s: float | None) -> None:
        """Searches begun from now on end within `max_s` (None: their own `max_s`): a caller's budget (the tuner's)."""
        self._max_s = max_s

    def _share(self, starting: int, paired: bool) -> None:
        if self.budget is not None:
            self._max_s = self.budget.share_s(starting, paired)
            self.cells.say(f"the run's time budget: {starting} search(es) beginning, each at most {self._max_s:.0f} s")

    @property
    def paired(self) -> bool:
        return self.interleaved and len(self.servers) > 1

    def run(self) -> list[SearchEnd]:
        """Every search; Interrupted (Ctrl-C, SIGTERM) propagates after the running cell was recorded and the
        running searches answered from the cells before it (their outcomes kept in `outcomes`)."""
        how = "paired: all up, their cells interleaved" if self.paired else "one after the other"
        repeats = f" x {self.repeats.at_least} repeats" if self.repeats.at_least > 1 else ""
        self.cells.say(f"capacity run {self.run_id}: {self._objectives()}, "
                       f"{len(self.servers)} server(s) x request batch {', '.join(map(str, self.batch_sizes))}"
                       f"{repeats} ({how}); results in {self.run_dir}")
        began = time.monotonic()
        if self.budget is not None:
            self.budget.start()
        with self.progress.shown():
            if self.paired:
                self._run_paired(began)
            else:
                for repeat in self.repeats.each(self.cells, [self._comparison_id(*p) for p in self.points],
                                                self.budget):
                    self._run_sequential(repeat)
                self._tool_ceilings(began)
        return self.outcomes

    def _tool_ceilings(self, began: float) -> None:
        """Each configuration's twin, checking its searches' answers (`loadtest.search.tool_ceiling_run`), within
        the run budget's share for it (none: `TOOL_CEILING_SHARE` of the searches' time)."""
        if not self.tool_ceiling:
            return
        clock = TwinClock(began, TOOL_CEILING_SHARE, self.budget.end() if self.budget is not None else None)
        clock.start()
        twins = ToolCeilings(self.request, self.cells, self.prober, self.run_dir / "servers", clock)
        for slot in self.servers:
            twins.check(slot, [o for o in self.outcomes if o.server == slot.name])

    def _run_sequential(self, repeat: int) -> None:
        names = [slot.name for slot in self.servers]
        for slot in self.servers:
            try:
                with slot.serve(self.run_dir / "servers", self.cells.say) as target:
                    for batch, objective in self.points:
                        self._share(1, False)
                        self._search(target, batch, comparison=self._comparison(batch, objective, repeat, names),
                                     objective=objective)
            except StartFailed as failed:
                self.cells.say(failed.reason)
                for batch, objective in self.points:
                    self._not_searched(failed.planned, batch, failed.reason, objective=objective)

    def _run_paired(self, began: float) -> None:
        with self._all_up(self.servers) as answering:
            for batch, objective in self.points:
                for repeat in self.repeats.each(self.cells, [self._comparison_id(batch, objective)], self.budget):
                    if answering:
                        self._compare(answering, batch, repeat, objective=objective)
            self._tool_ceilings(began)  # the servers still up

    def compare(self, slots: Sequence[Slot], batch_size: int) -> list[SearchEnd]:
        """One paired comparison of `slots` at `batch_size` (the tuner's unit: its incumbent and a challenger): all
        started, searched interleaved, stopped; their outcomes in the slots' order."""
        first = len(self.outcomes)
        self._comparisons += 1
        with self._all_up(slots) as answering:
            if answering:
                self._compare(answering, batch_size, 1, f"{self.run_id}/c{self._comparisons}")
        ended = {o.server: o for o in self.outcomes[first:]}
        return [ended[slot.name] for slot in slots]

    @contextmanager
    def _all_up(self, slots: Sequence[Slot]) -> Iterator[list[tuple[ServedEndpoint, int | None]]]:
        """Every slot's server up for the block (stopped after it): those that answer, each with the model version
        it reported; one that does not start or answer gets its failed cells, recorded."""
        with ExitStack() as servers:
            answering = []
            for slot in slots:
                try:
                    target = servers.enter_context(slot.serve(self.run_dir / "servers", self.cells.say))
                except StartFailed as failed:
                    self.cells.say(failed.reason)
                    for batch, objective in self.points:
                        self._not_searched(failed.planned, batch, failed.reason, objective=objective)
                    continue
                probe = self.prober.probe(target)
                if probe.ok:
                    answering.append((target, probe.model_version))
                else:
                    for batch, objective in self.points:
                        self._not_searched(target, batch, probe.not_answering(target), objective=objective)
            yield answering

    def _compare(self, answering: Sequence[tuple[ServedEndpoint, int | None]], batch: int, repeat: int,
                 comparison_id: str = "", objective: Objective | None = None) -> None:
        # every server's search at `batch` (and `objective`), interleaved, a reference cell between slices
        objective = objective or self.request.objective_at(batch)
        targets = [target for target, _ in answering]
        comparison = comparison_tag(comparison_id or self._comparison_id(batch, objective), repeat, True,
                                    [t.name for t in targets])
        ids = [self._next_id() for _ in targets]
        reference = Reference(self.cells, self.prober, targets[0], self.request.plan.run,
                              search_tag(f"{comparison.id}/reference", Role.REFERENCE, objective, None,
                                         self.request.confidence, comparison=comparison))
        self.cells.say(f"paired comparison {comparison.id} (repeat {repeat}): "
                       f"{' against '.join(t.name for t in targets)} at request batch {batch}, their cells "
                       f"interleaved; reference cell: {targets[0].name}, {REFERENCE_USERS} users back to back")
        self._share(len(targets), True)
        ended: dict[int, SearchEnd] = {}
        starts: dict[int, float] = {}
        bodies = [self._paired_body(t, batch, search_id, comparison, ended, i, version, starts, objective)
                  for i, ((t, version), search_id) in enumerate(zip(answering, ids, strict=True))]
        try:
            reference.measure("start")
            interleave(bodies, between=reference.between)
            reference.measure("end")
        finally:
            for i in sorted(ended):
                self._ended(ended[i])

    def _paired_body(self, target: ServedEndpoint, batch: int, search_id: str, comparison: ComparisonTag,
                     ended: dict[int, SearchEnd], index: int, version: int | None,
                     starts: dict[int, float], objective: Objective) -> Callable[[Turn], SearchEnd]:
        def body(turn: Turn) -> SearchEnd:
            def measure_cell(*args: Any, held: bool = False, **kwargs: Any) -> Any:
                return turn.call(lambda: self.cells.measure(*args, **kwargs), held=held)

            def common_start(own: float) -> float:  # the lowest probe's: anchors confirmed side by side compare
                turn.call(lambda: starts.__setitem__(index, own), held=True)
                turn.agree(True, None)  # answered once every search still going has said its own
                return min(starts.values())

            outcome = self._searched(target, batch, search_id, comparison, model_version=version,
                                     measure_cell=measure_cell, clock=turn.clock, pairing=turn,
                                     start_of=common_start, asked=objective)
            ended[index] = outcome
            return outcome
        return body

    def search(self, slot: Slot, batch_size: int, beat_rps: float | None = None) -> SearchEnd:
        """One search on one server (started for it when it is a configuration); the tuner's unit. With
        `beat_rps`, the search starts there and ends at once unless the server passes at it."""
        try:
            with slot.serve(self.run_dir / "servers", self.cells.say) as target:
                return self._search(target, batch_size, beat_rps)
        except StartFailed as failed:
            return self._not_searched(failed.planned, batch_size, failed.reason)

    def _search(self, target: ServedEndpoint, batch_size: int, beat_rps: float | None = None,
                comparison: ComparisonTag | None = None, objective: Objective | None = None) -> SearchEnd:
        search_id = self._next_id()
        probe = self.prober.probe(target)
        if not probe.ok:
            return self._not_searched(target, batch_size, probe.not_answering(target), search_id, objective)
        outcome = self._ended(self._searched(target, batch_size, search_id, comparison, beat_rps,
                                             model_version=probe.model_version, asked=objective))
        if outcome.answer is not None and outcome.answer.interrupted:
            raise Interrupted()
        return outcome

    def _searched(self, target: ServedEndpoint, batch_size: int, search_id: str, comparison: ComparisonTag | None,
                  beat_rps: float | None = None, model_version: int | None = None, **hooks: Any) -> SearchEnd:
        """One search on an answering server, its trail and answer printed (not yet in `outcomes`)."""
        request = self.request if self._max_s is None else replace(self.request,
                                                                   max_s=min(self.request.max_s, self._max_s))
        run = CapacityRun(request, self.cells, target, search_id, self.prober, batch_size, beat_rps,
                          model_version, comparison=comparison, shape=self.shapes.get(target.name),
                          progress=self.progress, **hooks)
        self.cells.say(f"capacity search {search_id}: {run.objective}, request batch {batch_size}, "
                       f"on {target.name} ({target.grpc_target})")
        try:
            answer = run.run()
        except NotMeasured as exc:
            return SearchEnd(target.name, batch_size, None, str(exc), run.objective, search_id)
        outcome = SearchEnd(target.name, batch_size, answer, objective=run.objective, search_id=search_id)
        self.cells.say(plain_table(trail_table(answer), 10_000) + "\n" + outcome_line(outcome, run.objective, True))
        return outcome

    def _comparison(self, batch: int, objective: Objective, repeat: int,
                    names: Sequence[str]) -> ComparisonTag | None:
        """The comparison tag of servers searched one after the other (None with one: nothing is compared)."""
        if len(self.servers) < 2:
            return None
        return comparison_tag(self._comparison_id(batch, objective), repeat, False, names)

    def _comparison_id(self, batch: int, objective: Objective) -> str:
        """`<run>/b16`; `<run>/b16-50ms` where the batch has searches at several objectives (`searches_at`)."""
        several = len(self.request.searches_at(batch)) > 1
        return f"{self.run_id}/b{batch}" + (f"-{objective.p99_ms:g}ms" if several else "")

    def _next_id(self) -> str:
        self._ids += 1
        return f"{self.run_id}/{self._ids}"

    def _objectives(self) -> str:
        """`p99 <= 10 ms` and, where the plan sets another objective for a batch size, that one too."""
        others = ", ".join(f"{o.p99_ms:g} ms at request batch {b}" for b, o in self.points
                           if o != self.request.objective)
        return f"{self.request.objective}" + (f" ({others}: the plan's [capacity])" if others else "")

    def _not_searched(self, target: ServedEndpoint, batch_size: int, reason: str, search_id: str = "",
                      objective: Objective | None = None) -> SearchEnd:
        search_id = search_id or self._next_id()
        cell = plans.Cell(LoadMode.OPEN, batch_size, None, None)
        objective = objective or self.request.objective_at(batch_size)
        tag = search_tag(search_id, Role.START, objective, None, self.request.confidence,
                         objectives=self.request.objectives)
        self.cells.not_run(target, cell, self.request.plan.run, reason, 0,
                           search=replace(tag, shape=self.shapes.get(target.name)))
        return self._ended(SearchEnd(target.name, batch_size, None, reason, objective, search_id))

    def _ended(self, outcome: SearchEnd) -> SearchEnd:
        self.outcomes.append(outcome)
        return outcome

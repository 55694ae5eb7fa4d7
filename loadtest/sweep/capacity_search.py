"""`mnist-bench capacity`: capacity searches run against real servers, every probe a recorded cell.

Wires `loadtest.sweep.capacity.CapacitySearch` to real measurements. `Capacities` runs one search
per server and request batch size, all into one results directory (`results/<UTC time>/`, as a
sweep's): the servers are the running ones, or configurations it starts one at a time
(`loadtest.sweep.servers`), each stopped before the next. A search measures one open-loop cell per
rate it asks for (the confirmation `confirm_factor` times longer), each appended to `results.jsonl`
tagged with the search's id, its role and the objective. A cell whose load generator was the limit
is measured again with one more Locust process while the load generator's cores allow (its pinned
cores, or those beside a pinned server); otherwise the search answers "at least". Without a start
rate, a short closed-loop probe cell (concurrency 4) measures what the server takes, and the search
starts at half of it. A
server that does not start, or does not answer, gets one failed cell (role `start`) with the
reason, and the next search goes on.

Not for: the search's decisions (`loadtest.sweep.capacity`) or a grid of cells (`loadtest.sweep.runner`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from rich.table import Table

from loadtest.confidence import DEFAULT_CONFIDENCE
from loadtest.records import CellResult
from loadtest.sweep import plan as plans
from loadtest.sweep.capacity import AnswerKind, CapacityAnswer, CapacitySearch, Measured, Role, SearchSettings, Step
from loadtest.sweep.conclusion import DEFAULT_OBJECTIVES_MS, describe_pair, describe_unsteady
from loadtest.sweep.probe import Prober
from loadtest.sweep.runner import CellRunner, Interrupted, cell_estimate_s
from loadtest.sweep.servers import Slot, StartFailed
from loadtest.tables import plain_table
from loadtest.verdicts import client_limited
from loadtest.vocab import LoadMode
from model_export.provenance import cpu_cores
from serving.deploy.process import pinned_cores
from serving.endpoint import ServedEndpoint

PROBE_USERS = 4  # the start-rate probe: a short closed loop, enough users to keep a server busy


@dataclass(frozen=True)
class CapacityRequest:
    """What to search: the objective, the request batch size, and the search's bounds."""

    plan: plans.Plan  # its [run] settings: samples, check, protocol, windows
    p99_ms: float
    batch_size: int = 1
    precision: float = 0.05
    start_rps: float | None = None  # None: from a closed-loop probe
    min_rps: float = 1.0
    max_steps: int = 20
    max_s: float = 900.0
    confirm_factor: float = 3.0  # the confirmation's window, in measure_s
    confidence: float = DEFAULT_CONFIDENCE  # every verdict's, on p99 <= the objective
    max_rate_s: float = 30.0  # measured seconds at one rate, its extensions included
    gate: bool = False  # start_rps is a rate to beat: a search that does not pass there ends at once
    objectives: tuple[float, ...] = DEFAULT_OBJECTIVES_MS  # p99s its cells are also answered at (recorded)


@dataclass(frozen=True)
class Outcome:
    """One search's end: its answer, or why it could not run (`answer` None)."""

    server: str
    batch_size: int
    answer: CapacityAnswer | None
    failure: str = ""
    p99_ms: float | None = None  # the search's objective (the plan's for its batch size, else --p99-ms)
    search_id: str = ""  # its cells' `search["id"]`

    @property
    def met(self) -> bool:
        """A confirmed capacity."""
        return self.answer is not None and self.answer.met

    @property
    def passed(self) -> bool:
        """A passing rate answered, confirmed or not."""
        return self.answer is not None and self.answer.kind != AnswerKind.NONE


@dataclass
class CapacityRun:
    """One search against one running server; every cell recorded by `cells` with the search's tag."""

    request: CapacityRequest
    cells: CellRunner
    target: ServedEndpoint
    search_id: str
    prober: Prober
    model_version: int | None = None
    _confirming: bool = False  # the last measured rate was a confirmation: its extensions are too
    _processes: int = 0  # Locust processes now: the plan's, plus any added where its client was the limit

    def run(self) -> CapacityAnswer:
        r = self.request
        start = r.start_rps if r.start_rps is not None else self._start_from_probe()
        settings = SearchSettings(p99_ms=r.p99_ms, start_rps=start, precision=r.precision, min_rps=r.min_rps,
                                  max_steps=r.max_steps, max_s=r.max_s, confidence=r.confidence,
                                  max_rate_s=r.max_rate_s, gate=r.gate, window_s=r.plan.run.measure_s,
                                  confirm_window_s=r.plan.run.measure_s * r.confirm_factor,
                                  cell_overhead_s=cell_estimate_s(r.plan.run) - r.plan.run.measure_s)
        return CapacitySearch(settings, self._measure, interrupts=(Interrupted, KeyboardInterrupt)).run()

    def _start_from_probe(self) -> float:
        """Half the throughput a short closed loop gets (never below min_rps)."""
        cell = plans.Cell(LoadMode.CLOSED, self.request.batch_size, PROBE_USERS, None)
        result, probe = self._cell(cell, self.request.plan.run, Role.PROBE, None, False)
        if not probe.ok or result.requests == 0:
            raise _NotMeasured(f"the start-rate probe measured nothing: {result.failure_reason or probe.error}")
        return max(self.request.min_rps, round(result.throughput_rps / 2, 1))

    def _measure(self, rate_rps: float, role: Role, window_s: float | None) -> Measured:
        self._processes = max(self._processes, self.request.plan.run.processes)
        run = replace(self.request.plan.run, processes=self._processes)
        if window_s is not None:
            run = replace(run, measure_s=window_s)
        elif role == Role.CONFIRM:
            run = replace(run, measure_s=run.measure_s * self.request.confirm_factor)
        cell = plans.Cell(LoadMode.OPEN, self.request.batch_size, None, rate_rps)
        confirming = role == Role.CONFIRM or (role == Role.EXTEND and self._confirming)
        self._confirming = confirming
        result, probe = self._cell(cell, run, role, rate_rps, confirming)
        while probe.ok and client_limited(result) and self._processes < self._load_cores():
            self._processes += 1
            self.cells.say(f"the load generator was the limit at {rate_rps:g} req/s: measuring it again with "
                           f"{self._processes} Locust processes")
            run = replace(run, processes=self._processes)
            result, probe = self._cell(cell, run, role, rate_rps, confirming)
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

    def _cell(self, cell: plans.Cell, run: plans.RunSettings, role: Role, rate_rps: float | None, confirming: bool):
        tag = search_tag(self.search_id, role, self.request.p99_ms, rate_rps, self.request.confidence, confirming,
                         self.request.objectives)
        result, probe = self.cells.measure(self.prober, self.target, cell, run, 0, self.model_version, search=tag)
        self.model_version = probe.model_version or self.model_version
        return result, probe


def search_tag(search_id: str, role: Role, p99_ms: float, rate_rps: float | None,
               confidence: float = DEFAULT_CONFIDENCE, confirming: bool = False,
               objectives: tuple[float, ...] = DEFAULT_OBJECTIVES_MS) -> dict:
    """What a search's cell records about the search (`CellResult.search`); the runner adds the cell's own
    evidence on the objective (`loadtest.verdicts.evidence_record`). `objectives`: the p99s the report
    answers the search's cells at, besides its own (`loadtest.analysis.answers.objective_answers`)."""
    return {"id": search_id, "role": role.value, "p99_objective_ms": p99_ms, "offered_rps": rate_rps,
            "confidence": confidence, "confirming": confirming, "objectives": list(objectives)}


class _NotMeasured(Exception):
    """A search that could not begin (its probe measured nothing)."""


@dataclass
class Capacities:
    """One search per server and request batch size, in one results directory."""

    request: CapacityRequest  # its batch_size is replaced by each of `batch_sizes`
    servers: Sequence[Slot]
    batch_sizes: Sequence[int]
    results_root: Path
    out: TextIO = sys.stdout
    plan_path: str = ""
    outcomes: list[Outcome] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cells = CellRunner.new_run(self.results_root, self.request.plan, self.plan_path, self.out)
        self.run_id, self.run_dir = self.cells.run_id, self.cells.run_dir
        self.prober = Prober(self.request.plan.run)

    def run(self) -> list[Outcome]:
        """Every search in turn; Interrupted (Ctrl-C, SIGTERM) propagates after the running cell was recorded
        and the running search answered from the cells before it (its outcome kept in `outcomes`)."""
        self.cells.say(f"capacity run {self.run_id}: {self._objectives()}, "
                       f"{len(self.servers)} server(s) x request batch {', '.join(map(str, self.batch_sizes))}; "
                       f"results in {self.run_dir}")
        for slot in self.servers:
            try:
                with slot.serve(self.run_dir / "servers", self.cells.say) as target:
                    for batch in self.batch_sizes:
                        self._search(target, batch)
            except StartFailed as failed:
                self.cells.say(failed.reason)
                for batch in self.batch_sizes:
                    self._not_searched(failed.planned, batch, failed.reason)
        return self.outcomes

    def search(self, slot: Slot, batch_size: int, beat_rps: float | None = None) -> Outcome:
        """One search on one server (started for it when it is a configuration); the tuner's unit. With
        `beat_rps`, the search starts there and ends at once unless the server passes at it."""
        try:
            with slot.serve(self.run_dir / "servers", self.cells.say) as target:
                return self._search(target, batch_size, beat_rps)
        except StartFailed as failed:
            return self._not_searched(failed.planned, batch_size, failed.reason)

    def _search(self, target: ServedEndpoint, batch_size: int, beat_rps: float | None = None) -> Outcome:
        p99_ms = self.request.plan.capacity.p99_ms(batch_size, self.request.p99_ms)
        request = replace(self.request, batch_size=batch_size, p99_ms=p99_ms)
        if beat_rps is not None:
            request = replace(request, start_rps=beat_rps, gate=True)
        search_id = f"{self.run_id}/{len(self.outcomes) + 1}"
        probe = self.prober.probe(target)
        if not probe.ok:
            reason = f"server {target.name} at {target.grpc_target} is not answering ({probe.error})"
            return self._not_searched(target, batch_size, reason)
        self.cells.say(f"capacity search {search_id}: p99 <= {request.p99_ms:g} ms, request batch {batch_size}, "
                       f"on {target.name} ({target.grpc_target})")
        run = CapacityRun(request, self.cells, target, search_id, self.prober, probe.model_version)
        try:
            answer = run.run()
        except _NotMeasured as exc:
            return self._ended(Outcome(target.name, batch_size, None, str(exc), p99_ms, search_id))
        outcome = Outcome(target.name, batch_size, answer, p99_ms=p99_ms, search_id=search_id)
        self.cells.say(plain_table(trail_table(answer), 10_000) + "\n" + outcome_line(outcome, request.p99_ms, True))
        self._ended(outcome)
        if answer.interrupted:
            raise Interrupted()
        return outcome

    def _objectives(self) -> str:
        """`p99 <= 10 ms` and, where the plan sets another objective for a batch size, that one too."""
        own = {b: self.request.plan.capacity.p99_ms(b, self.request.p99_ms) for b in self.batch_sizes}
        others = ", ".join(f"{p99:g} ms at request batch {b}" for b, p99 in own.items() if p99 != self.request.p99_ms)
        return f"p99 <= {self.request.p99_ms:g} ms" + (f" ({others}: the plan's [capacity])" if others else "")

    def _not_searched(self, target: ServedEndpoint, batch_size: int, reason: str) -> Outcome:
        search_id = f"{self.run_id}/{len(self.outcomes) + 1}"
        cell = plans.Cell(LoadMode.OPEN, batch_size, None, None)
        p99_ms = self.request.plan.capacity.p99_ms(batch_size, self.request.p99_ms)
        self.cells.not_run(target, cell, self.request.plan.run, reason, 0,
                           search=search_tag(search_id, Role.START, p99_ms, None, self.request.confidence,
                                             objectives=self.request.objectives))
        return self._ended(Outcome(target.name, batch_size, None, reason, p99_ms, search_id))

    def _ended(self, outcome: Outcome) -> Outcome:
        self.outcomes.append(outcome)
        return outcome


def trail_table(answer: CapacityAnswer) -> Table:
    """Every cell the search measured, in order: its own window, and its rate's verdict so far (pooled)."""
    table = Table(box=None, pad_edge=False)
    for name in ("#", "role", "offered req/s", "req/s", "img/s", "p50 ms", "p99 ms", "N", "k", "est. p99 ms",
                 "verdict"):
        table.add_column(name, justify="left" if name in ("role", "verdict") else "right")
    for number, step in enumerate(answer.steps, 1):
        r, e = step.result, step.verdict.evidence
        role = f"{step.role.value}{' (confirm)' if step.role == Role.EXTEND and step.confirming else ''}"
        table.add_row(str(number), role, f"{step.rate_rps:g}", f"{r.throughput_rps:.1f}", f"{r.throughput_ips:.1f}",
                      _ms(r.latency_p50_ms), _ms(r.latency_p99_ms), str(e.requests) if e else "—",
                      str(e.over) if e else "—", _ms(e.estimate_ms) if e else "—",
                      step.verdict.decision.value if step.verdict.passed else step.verdict.describe())
    return table


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def answer_line(answer: CapacityAnswer, what: str = "") -> str:
    """`capacity: [what: ]...` with the answered rate, what it rests on (`confirmed`, or `passed, not confirmed`),
    img/s, the estimate and the bounds; or `none`/`unmet` and why. An interrupted search says so."""
    prefix = f"capacity: {what + ': ' if what else ''}"
    c = answer.conclusion
    cells = f"{len(answer.steps)} cells, {answer.ended_because}"
    extra = "".join(f"; not monotone: {describe_pair(pair)}" for pair in c.not_monotone)
    step = c.answer
    if step is None:  # the reason names any unsteady rate
        if c.stalls is not None:
            return f"{prefix}unmet at p99 <= {answer.p99_ms:g} ms: {c.stalls.describe(answer.p99_ms)} ({cells}){extra}"
        return f"{prefix}none at p99 <= {answer.p99_ms:g} ms: {c.unmet_reason()} ({cells}){extra}"
    extra = "".join(f"; {describe_unsteady(pair)}" for pair in c.unsteady) + extra
    if c.capacity is not None and c.best_pass is not None:
        extra = f"; higher, passed, not confirmed: {_rests_on(c.best_pass)}" + extra
    r: CellResult = step.result
    bound = "at least " if c.at_least else ""
    return (f"{prefix}{bound}{step.rate_rps:g} req/s ({r.throughput_ips:.1f} img/s), {c.kind.value}: "
            f"{_evidence(step)} <= {answer.p99_ms:g} ms (p50 {r.latency_p50_ms} ms); {c.uncertainty()} "
            f"({cells}){extra}")


def _evidence(step: Step) -> str:
    e = step.verdict.evidence
    return f"p99 <= {e.estimate_ms:.3f} ms at {e.confidence:.0%} confidence (N={e.requests}, k={e.over})" if e \
        else "passed"


def _rests_on(step: Step) -> str:
    return f"{step.rate_rps:g} req/s ({_evidence(step)})"


def outcome_line(outcome: Outcome, p99_ms: float, named: bool) -> str:
    """One search's last word; `named` prefixes the server and batch (several searches in one run)."""
    what = f"{outcome.server}, request batch {outcome.batch_size}" if named else ""
    if outcome.answer is not None:
        return answer_line(outcome.answer, what)
    objective = outcome.p99_ms if outcome.p99_ms is not None else p99_ms
    return f"capacity: {what + ': ' if what else ''}none at p99 <= {objective:g} ms: {outcome.failure}"


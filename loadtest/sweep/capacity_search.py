"""`mnist-bench capacity`: the capacity search run against one real server, every probe a recorded cell.

Wires `loadtest.sweep.capacity.CapacitySearch` to real measurements: a results directory of its
own (`results/<UTC time>/`, as a sweep's), one open-loop cell per rate the search asks for (the
confirmation measured `confirm_factor` times longer), each appended to `results.jsonl` tagged with
the search's id, its role and the objective. Without a start rate, a short closed-loop probe cell
(concurrency 4) measures what the server takes, and the search starts at half of it.

Not for: the search's decisions (`loadtest.sweep.capacity`) or a grid of cells (`loadtest.sweep.runner`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from rich.table import Table

from loadtest.records import CellResult
from loadtest.sweep import plan as plans
from loadtest.sweep.capacity import CapacityAnswer, CapacitySearch, Measured, Role, SearchSettings
from loadtest.sweep.probe import Prober
from loadtest.sweep.runner import CellRunner
from loadtest.sweep.targets import SweepError
from loadtest.tables import plain_table
from loadtest.vocab import LoadMode
from serving.endpoint import ServedEndpoint

PROBE_USERS = 4  # the start-rate probe: a short closed loop, enough users to keep a server busy


@dataclass(frozen=True)
class CapacityRequest:
    """What to search: the server, the objective, the request batch size, and the search's bounds."""

    plan: plans.Plan  # its [run] settings: samples, check, protocol, windows
    target: ServedEndpoint
    p99_ms: float
    batch_size: int = 1
    precision: float = 0.05
    start_rps: float | None = None  # None: from a closed-loop probe
    min_rps: float = 1.0
    max_steps: int = 20
    max_s: float = 900.0
    confirm_factor: float = 3.0  # the confirmation's window, in measure_s


@dataclass
class CapacityRun:
    """One search against one server; `run()` returns its answer, every cell recorded in `cells`."""

    request: CapacityRequest
    results_root: Path
    out: TextIO = sys.stdout
    plan_path: str = ""

    def __post_init__(self) -> None:
        self.cells = CellRunner.new_run(self.results_root, self.request.plan, self.plan_path, self.out)
        self.run_id, self.run_dir = self.cells.run_id, self.cells.run_dir
        self.prober = Prober(self.request.plan.run)
        self.model_version: int | None = None

    def run(self) -> CapacityAnswer:
        r = self.request
        probe = self.prober.probe(r.target)
        if not probe.ok:
            raise SweepError(f"server {r.target.name} at {r.target.grpc_target} is not answering ({probe.error})")
        self.model_version = probe.model_version
        self.cells.say(f"capacity search {self.run_id}: p99 <= {r.p99_ms:g} ms, request batch {r.batch_size}, "
                       f"on {r.target.name} ({r.target.grpc_target}); results in {self.run_dir}")
        start = r.start_rps if r.start_rps is not None else self._start_from_probe()
        settings = SearchSettings(p99_ms=r.p99_ms, start_rps=start, precision=r.precision, min_rps=r.min_rps,
                                  max_steps=r.max_steps, max_s=r.max_s)
        return CapacitySearch(settings, self._measure).run()

    def _start_from_probe(self) -> float:
        """Half the throughput a short closed loop gets (never below min_rps)."""
        cell = plans.Cell(LoadMode.CLOSED, self.request.batch_size, PROBE_USERS, None)
        result, probe = self._cell(cell, self.request.plan.run, Role.PROBE, None)
        if not probe.ok or result.requests == 0:
            raise SweepError(f"the start-rate probe measured nothing: {result.failure_reason or probe.error}")
        return max(self.request.min_rps, round(result.throughput_rps / 2, 1))

    def _measure(self, rate_rps: float, role: Role) -> Measured:
        run = self.request.plan.run
        if role == Role.CONFIRM:
            run = replace(run, measure_s=run.measure_s * self.request.confirm_factor)
        cell = plans.Cell(LoadMode.OPEN, self.request.batch_size, None, rate_rps)
        result, probe = self._cell(cell, run, role, rate_rps)
        return Measured(result, server_alive=probe.ok)

    def _cell(self, cell: plans.Cell, run: plans.RunSettings, role: Role, rate_rps: float | None):
        tag = {"id": self.run_id, "role": role.value, "p99_objective_ms": self.request.p99_ms,
               "offered_rps": rate_rps}
        result, probe = self.cells.measure(self.prober, self.request.target, cell, run, self.request.max_steps,
                                           self.model_version, search=tag)
        self.model_version = probe.model_version or self.model_version
        return result, probe


def trail_table(answer: CapacityAnswer) -> Table:
    """Every rate the search measured, in order, with what decided it."""
    table = Table(box=None, pad_edge=False)
    for name in ("#", "role", "offered req/s", "req/s", "img/s", "p50 ms", "p99 ms", "verdict"):
        table.add_column(name, justify="left" if name in ("role", "verdict") else "right")
    for number, step in enumerate(answer.steps, 1):
        r = step.result
        table.add_row(str(number), step.role.value, f"{step.rate_rps:g}", f"{r.throughput_rps:.1f}",
                      f"{r.throughput_ips:.1f}", _ms(r.latency_p50_ms), _ms(r.latency_p99_ms),
                      "pass" if step.verdict.passed else f"fail: {step.verdict.reason}")
    return table


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def answer_line(answer: CapacityAnswer) -> str:
    """The last line printed: `capacity: ...` with req/s, img/s and the p99, or why there is none."""
    bound = f"{answer.lowest_failing_rps:g} req/s" if answer.lowest_failing_rps is not None else "none measured"
    cells = f"{len(answer.steps)} cells, {answer.ended_because}"
    if answer.capacity is None:
        passing = [s.rate_rps for s in answer.steps if s.verdict.passed and s.role != Role.CONFIRM]
        unconfirmed = f"; highest passing, unconfirmed: {max(passing):g} req/s" if passing else ""
        return (f"capacity: none at p99 <= {answer.p99_ms:g} ms{unconfirmed}; lowest failing rate {bound} "
                f"({cells})")
    r: CellResult = answer.capacity.result
    return (f"capacity: {answer.capacity.rate_rps:g} req/s ({r.throughput_ips:.1f} img/s) at p99 "
            f"{r.latency_p99_ms} ms <= {answer.p99_ms:g} ms (p50 {r.latency_p50_ms} ms); lowest failing rate "
            f"{bound} ({cells})")


def answer_text(answer: CapacityAnswer) -> str:
    """The trail of every measured rate, then the answer line (last)."""
    return plain_table(trail_table(answer), 10_000) + "\n" + answer_line(answer)

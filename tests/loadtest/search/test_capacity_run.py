"""`CapacityRun` between the search and the cells: a cell whose load generator was the limit is measured
again with one more Locust process while the load generator's cores allow, else the search answers
"at least". The cells come from a stand-in for `CellRunner` that records every run it was asked for."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from loadtest.evidence.objective import Objective
from loadtest.measure import plan as plans
from loadtest.measure.cell_sweep import Interrupted
from loadtest.measure.probe import Probe
from loadtest.search.capacity_output import answer_line
from loadtest.search.capacity_request import CapacityRequest
from loadtest.search.capacity_run import CapacityRun
from tests.loadtest.search.test_capacity import FAST_US, cell


@dataclass
class Cells:
    """Answers every cell with fast latencies; a single Locust process is the limit above `one_process_rps`."""

    one_process_rps: float
    runs: list[tuple[float, int]] = field(default_factory=list)  # (rate, processes) of every cell asked for
    seeds: list[tuple[float, int]] = field(default_factory=list)  # (rate, arrival seed) of every cell asked for
    said: list[str] = field(default_factory=list)

    def measure(self, prober, target, spec: plans.Cell, run: plans.RunSettings, total, version, search):
        rate = spec.rate_rps or 0.0
        self.runs.append((rate, run.processes))
        self.seeds.append((rate, run.arrival_seed))
        limited = run.processes == 1 and rate > self.one_process_rps
        measured = cell(rate, run.measure_s, {FAST_US: max(1, round(rate * run.measure_s))},
                        loadgen_cpu=99.0 if limited else None)
        return replace(measured, search=search), Probe(True, 1, "")

    def say(self, text: str) -> None:
        self.said.append(text)


def capacity_run(cells: Cells, loadgen_cpus: str, server_cpus: str = "") -> CapacityRun:
    plan = plans.Plan(run=plans.RunSettings(measure_s=2.0, loadgen_cpus=loadgen_cpus),
                      launch=plans.LaunchSettings(server_cpus=server_cpus))
    request = CapacityRequest(plan, objective=Objective(50.0), start_rps=1000.0, max_steps=6, precision=0.5)
    return CapacityRun(request, cells, target=None, search_id="s/1", prober=None)  # type: ignore[arg-type]


def test_a_limited_load_generator_gets_another_process_where_its_cores_allow():
    cells = Cells(one_process_rps=1500)
    answer = capacity_run(cells, loadgen_cpus="0,1").run()
    assert (2000.0, 1) in cells.runs and (2000.0, 2) in cells.runs  # measured again with two processes
    assert cells.runs.index((2000.0, 2)) == cells.runs.index((2000.0, 1)) + 1
    assert all(processes == 2 for _, processes in cells.runs[cells.runs.index((2000.0, 2)):])  # and kept
    assert any("measuring it again with 2 Locust processes" in line for line in cells.said)
    assert answer.met and not answer.conclusion.at_least and answer.capacity.rate_rps >= 2000


@pytest.mark.parametrize("loadgen_cpus, server_cpus", [("1", "0"), ("", "")])
def test_without_a_free_core_the_answer_is_at_least(loadgen_cpus, server_cpus):
    cells = Cells(one_process_rps=1500)
    answer = capacity_run(cells, loadgen_cpus, server_cpus).run()
    assert all(processes == 1 for _, processes in cells.runs)
    assert answer.met and answer.conclusion.at_least and answer.capacity.rate_rps == 1500  # bisected toward 2000
    assert answer.ended_because == "the load generator was the limit at 2000 req/s"


@dataclass
class InterruptedCells(Cells):
    """Ctrl-C during the cell after `cells` measured ones (`CellRunner` records it, then raises `Interrupted`)."""

    cells: int = 3

    def measure(self, prober, target, spec, run, total, version, search):
        if len(self.runs) == self.cells:
            raise Interrupted()
        return super().measure(prober, target, spec, run, total, version, search)


def test_an_interrupted_search_answers_from_the_cells_before_it():
    cells = InterruptedCells(one_process_rps=10_000)
    answer = capacity_run(cells, loadgen_cpus="1").run()  # 1000 req/s, its confirmation, 2000; then Ctrl-C
    assert answer.interrupted and answer.ended_because == "interrupted" and len(answer.steps) == 3
    assert answer.met and answer.capacity.rate_rps == 1000 and answer.best_pass.rate_rps == 2000
    line = answer_line(answer)
    assert line.startswith("capacity: 1000 req/s (") and ", confirmed: p99 <= " in line
    assert "higher, passed, not confirmed: 2000 req/s" in line and "(3 cells, interrupted)" in line


def test_a_rate_measured_again_gets_the_next_arrival_seed():
    """The anchor (1000 req/s) and its confirmation: two cells at one rate, two schedules (seeds 1 and 2), so
    that the confirmation's requests are new samples, not the same bursts again; a new rate starts at seed 1."""
    cells = Cells(one_process_rps=10_000)
    capacity_run(cells, loadgen_cpus="1").run()
    assert cells.seeds[:3] == [(1000.0, 1), (1000.0, 2), (2000.0, 1)]
    assert len(set(cells.seeds)) == len(cells.seeds)

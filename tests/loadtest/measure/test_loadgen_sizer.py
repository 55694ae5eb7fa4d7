"""Locust processes sized to a cell's rate by the generator's measured cost per request (hand-computed)."""

from __future__ import annotations

from types import SimpleNamespace

from loadtest.evidence.vocab import LoadMode
from loadtest.measure import plan as plans
from loadtest.measure.locust_run import LoadgenSizer, processes_for


def test_enough_processes_for_the_rate_at_half_a_core_each():
    assert processes_for(1000.0, 0.0004, 8) == (1, False)  # 0.4 of a core: one process
    assert processes_for(2000.0, 0.0004, 8) == (2, False)  # 0.8 of a core: two at 0.4 each
    assert processes_for(10_000.0, 0.0004, 8) == (8, False)  # 4 cores: 8 at 0.5 each
    assert processes_for(12_000.0, 0.0004, 8) == (8, True)  # 4.8 cores: the plan's 8 are short
    assert processes_for(0.5, 0.0004, 8) == (1, False)


def test_the_sizer_learns_from_each_cell_and_leaves_closed_loops_alone():
    run = plans.RunSettings(processes=4)
    open_cell = plans.Cell(LoadMode.OPEN, 1, None, 3000.0)
    sizer = LoadgenSizer()
    assert sizer.sized(run, open_cell) == (run, False)  # nothing measured yet: the plan's number
    sizer.learn(SimpleNamespace(requests=5000, cpu_s_by_pid={"1": 0.6, "2": 0.4}))  # 0.2 ms a request
    sized, short = sizer.sized(run, open_cell)
    assert (sized.processes, short) == (2, False)  # 3000 x 0.2 ms = 0.6 of a core
    assert sizer.sized(run, plans.Cell(LoadMode.CLOSED, 1, 16, None)) == (run, False)
    sizer.learn(SimpleNamespace(requests=0, cpu_s_by_pid={}))  # a failed cell teaches nothing
    assert sizer.cpu_s_per_request == 0.0002

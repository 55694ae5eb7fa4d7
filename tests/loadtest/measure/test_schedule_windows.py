"""A real open-loop cell on the null backend (seed 1, the default): its records carry the sends its schedule
put in each window and the mean latency of the requests sent there, and the unstable rule reads them."""

from __future__ import annotations

import os

import pytest

from loadtest.judge.overload import overloaded_reason
from loadtest.measure import plan as plans
from loadtest.measure.cell_sweep import Sweep
from serving.deploy.process import start_server
from tests.loadtest.measure.test_sweep import short_plan, target_of
from tests.support import timing

pytestmark = pytest.mark.integration


def test_a_low_rate_cell_records_its_schedule_per_window_and_is_stable(exported_model, tmp_path):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--null_delay_ms", "1", backend="null") as server:
        plan = short_plan(exported_model.samples_path, measure_s=3.0, window_s=0.5, check="shape",
                          grid=plans.Grid(batch_sizes=(1,), concurrency=(), rates_rps=(60,)))
        results = Sweep(plan, [target_of(server)], tmp_path, out=open(os.devnull, "w")).run()
    [cell] = [r for r in results if r.load.mode == "open"]
    assert len(cell.window_scheduled_rps) == len(cell.window_throughput_rps) == len(cell.window_latency_ms) == 6
    # Every request was sent by the schedule in the measured window: the windows' sends add up to them.
    assert sum(cell.window_scheduled_rps) * 0.5 == pytest.approx(cell.requests, abs=1)
    # A 1 ms delay at 60 req/s keeps up: each window completes what it sent, give or take the
    # requests crossing a window's edge, so the cell is stable, not overloaded, and its latency is small (keeping up
    # is this machine's speed; each window's mean above 0.5 ms, behind the 1 ms delay, is the code's).
    timing.holds("a stable cell", "unstable" not in [f.flag for f in cell.flags], cell.flags)
    timing.holds("not overloaded", overloaded_reason(cell) is None, overloaded_reason(cell))
    assert all(m is None or 0.5 < m for m in cell.window_latency_ms), cell.window_latency_ms
    timing.holds("each window's mean latency < 50 ms", all(m is None or m < 50.0 for m in cell.window_latency_ms),
                 cell.window_latency_ms)

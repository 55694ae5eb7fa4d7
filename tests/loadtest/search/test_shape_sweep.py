"""A shape sweep's plan and servers, and a run's budget shared out among its searches (no server started)."""

from __future__ import annotations

import pytest

from loadtest.measure import plan as plans
from loadtest.measure.servers import Running, configurations
from loadtest.search.run_budget import PAIRED_RESERVE, RunBudget
from loadtest.search.shape_sweep import shape_sweep

PLAN = plans.Plan(configs=(plans.PlannedServer(device="cpu", batching="off"),),
                  launch=plans.LaunchSettings(kind="embedded", server_flags=("--workers", "1", "--backend", "null")))


def test_each_configuration_becomes_one_server_per_shape_named_and_pinned_by_it(tmp_path):
    plan, sweep = shape_sweep(PLAN, "auto", 3.0, cores=[0, 1])
    assert sweep is not None and sweep.budget_s == 180.0
    assert plan.run.loadgen_cpus == "1" and plan.capacity.shapes == (1, 2) and plan.capacity.shapes_budget_min == 3.0
    slots = sweep.slots(list(configurations(plan)))
    assert [s.name for s in slots] == ["cpu-off-1c", "cpu-off-2c"]
    one, two = (s._request(tmp_path, s.name) for s in slots)
    assert (one.cpus, two.cpus) == ("0", "0-1")
    assert one.server_flags == ("--backend", "null")  # one frontend per pinned core: the plan's --workers left out
    assert slots[1].shape_tag().shares_loadgen and slots[1].shape_tag().family == "cpu-off"


def test_without_shapes_nothing_changes():
    plan, sweep = shape_sweep(PLAN, None, None, cores=[0, 1])
    assert sweep is None and plan == PLAN


def test_the_plans_shapes_are_used_when_the_flag_is_not_given():
    from dataclasses import replace
    planned = replace(PLAN, capacity=plans.CapacityObjectives(shapes=(1,), shapes_budget_min=2.0))
    plan, sweep = shape_sweep(planned, None, None, cores=[0, 1])
    assert sweep is not None and [s.cores for s in sweep.shapes.shapes] == [1] and sweep.budget_s == 120.0


def test_running_servers_cannot_be_given_cores():
    _, sweep = shape_sweep(PLAN, "1", None, cores=[0, 1])
    assert sweep is not None
    with pytest.raises(plans.PlanError, match="not running servers"):
        sweep.slots([Running(plans.endpoint_at("cpu", "127.0.0.1:8500", "", "mnist"))])


def test_no_shape_that_fits_is_an_error():
    with pytest.raises(plans.PlanError, match="no replica shape fits this machine: 4 cores: this machine gives 2"):
        shape_sweep(PLAN, "4", None, cores=[0, 1])


def test_a_budget_is_shared_out_as_searches_begin():
    now = [0.0]
    budget = RunBudget(100.0, 4, clock=lambda: now[0])
    budget.start()
    now[0] = 20.0  # the servers took 20 s to start
    first = budget.share_s(2, paired=True)
    assert first == pytest.approx(80.0 * (1 - PAIRED_RESERVE) / 4)
    now[0] = 40.0  # the first two ended early: the last two share what is left
    assert budget.share_s(2, paired=True) == pytest.approx(60.0 * (1 - PAIRED_RESERVE) / 2)

"""Planning a device run to its budget: hand-computed estimates, what is kept and what is left out."""

from __future__ import annotations

import pytest

from loadtest.bundle.budget import Costs, Search, batches_that_fit, candidates, plan_to_budget, search_bound_s


def test_a_search_is_bounded_by_its_minutes_plus_one_cell_or_by_its_steps():
    # a cell at most: 6 s of Locust start and scrapes + 0.5 s warm-up + 10 s measured = 16.5 s
    assert search_bound_s(1.0, 8, 0.5, 10.0) == pytest.approx(60 + 16.5)  # 9 cells would be 148.5 s
    assert search_bound_s(1.0, 2, 0.5, 10.0) == pytest.approx(3 * 16.5)  # the probe and 2 steps: 49.5 s
    assert search_bound_s(0.2, 2, 0.5, 3.0, cell_overhead_s=5.0) == pytest.approx(12 + 8.5)


def test_searches_are_tried_by_device_then_batch_then_configuration():
    wanted = candidates(["gpu", "cpu"], {"gpu": ["off", "gpu"], "cpu": ["off", "cpu"]}, [1, 32])
    assert [(s.server, s.batch) for s in wanted] == [
        ("gpu-off", 1), ("gpu-gpu", 1), ("gpu-off", 32), ("gpu-gpu", 32),
        ("cpu-off", 1), ("cpu-cpu", 1), ("cpu-off", 32), ("cpu-cpu", 32)]


def test_the_plan_keeps_what_fits_and_says_what_it_left_out():
    # 600 s, 10% margin -> 540 s; 140 s reserved -> 400 s for searches: a search 100 s, a start 40 s
    costs = Costs(search_s=100, start_s=40, reserve_s=140, margin=0.1)
    wanted = candidates(["gpu", "cpu"], {"gpu": ["off", "gpu"], "cpu": ["off", "cpu"]}, [1, 8])
    plan = plan_to_budget(wanted, costs, 600)
    # gpu-off 1: 140 (start + search), gpu-gpu 1: 140 -> 280, gpu-off 8: 100 -> 380; gpu-gpu 8 would be 480
    assert plan.kept == (Search("gpu", "off", 1), Search("gpu", "gpu", 1), Search("gpu", "off", 8))
    assert plan.planned_s == 380
    assert [(o.search.server, o.search.batch, o.reason) for o in plan.left_out] == [
        ("gpu-gpu", 8, "needs 100 s, 20 s of the budget left"),
        ("cpu-off", 1, "needs 140 s with its server start, 20 s of the budget left"),
        ("cpu-cpu", 1, "needs 140 s with its server start, 20 s of the budget left"),
        ("cpu-off", 8, "needs 140 s with its server start, 20 s of the budget left"),
        ("cpu-cpu", 8, "needs 140 s with its server start, 20 s of the budget left")]
    assert plan.configurations() == [("gpu", "off", [1, 8]), ("gpu", "gpu", [1])]
    assert plan.to_dict()["left_out"][0] == {"device": "gpu", "profile": "gpu", "batch": 8,
                                             "reason": "needs 100 s, 20 s of the budget left"}


def test_a_search_on_a_server_already_started_fits_where_a_new_start_does_not():
    # 300 s, no margin, 50 s reserved -> 250 s: gpu-off 1 (140) kept; gpu-gpu 1 (140 -> 280) left out;
    # gpu-off 8 (100, no start -> 240) kept; gpu-gpu 8 (140) left out
    plan = plan_to_budget(candidates(["gpu"], {"gpu": ["off", "gpu"]}, [1, 8]),
                          Costs(search_s=100, start_s=40, reserve_s=50, margin=0.0), 300)
    assert plan.kept == (Search("gpu", "off", 1), Search("gpu", "off", 8))
    assert [o.search for o in plan.left_out] == [Search("gpu", "gpu", 1), Search("gpu", "gpu", 8)]
    assert "left out: gpu-gpu batch 1: needs 140 s with its server start, 110 s of the budget left" in \
        "\n".join(plan.describe())


def test_a_budget_smaller_than_the_reserve_keeps_nothing():
    plan = plan_to_budget([Search("cpu", "off", 1)], Costs(search_s=20, start_s=20, reserve_s=100), 90)
    assert plan.kept == () and plan.configurations() == []
    assert plan.left_out[0].reason == "needs 40 s with its server start, 0 s of the budget left"


def test_at_run_time_only_the_searches_that_still_fit_run():
    costs = Costs(search_s=100, start_s=40, reserve_s=0)
    assert batches_that_fit(3, costs, 139) == 0  # not even one start and one search
    assert batches_that_fit(3, costs, 140) == 1
    assert batches_that_fit(3, costs, 339) == 2
    assert batches_that_fit(3, costs, 1000) == 3

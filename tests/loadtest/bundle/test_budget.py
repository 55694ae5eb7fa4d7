"""Planning a device run to its budget: hand-computed estimates, what is kept and what is left out."""

from __future__ import annotations

import pytest

from loadtest.bundle import budget
from loadtest.bundle.budget import (
    Costs,
    Search,
    batches_that_fit,
    candidates,
    plan_paired,
    plan_to_budget,
    reference_bound_s,
    search_bound_s,
)


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


def test_a_reference_cell_is_estimated_as_the_comparison_measures_it():
    from loadtest.search import comparison

    assert budget.REFERENCE_CELL_S == comparison.REFERENCE_WARMUP_S + comparison.REFERENCE_S
    assert budget.REFERENCE_EVERY == comparison.REFERENCE_EVERY


def test_a_paired_comparisons_reference_cells_are_bounded_by_its_rounds():
    # a search of 37.5 s whose shortest cell is 8.5 s has at most 5 rounds: references at start, end, after round 3
    assert reference_bound_s(37.5, 8.5, 8) == pytest.approx(3 * (6 + 1.3))
    assert reference_bound_s(37.5, 8.5, 1) == pytest.approx(2 * (6 + 1.3))  # 2 cells: start and end only
    assert reference_bound_s(200, 8.5, 8) == pytest.approx(5 * (6 + 1.3))  # 9 cells: after rounds 3, 6, 9


def test_a_paired_plan_keeps_whole_batches_of_every_configuration_that_fits():
    # 600 s, 10% margin -> 540 s, 40 reserved -> 500 s. Batch 1: gpu-off 140, gpu-gpu 140 + 30 (references) = 310,
    # cpu-off 140 -> 450, cpu-cpu 140 does not fit (50 s left). Batch 8: 3 searches + references = 330: left out.
    costs = Costs(search_s=100, start_s=40, reserve_s=40, margin=0.1)
    configurations = [("gpu", "off"), ("gpu", "gpu"), ("cpu", "off"), ("cpu", "cpu")]
    plan = plan_paired(configurations, [1, 8], costs, 600, reference_s=30)
    assert plan.paired and plan.planned_s == 450 and plan.batches() == [1]
    assert plan.kept == (Search("gpu", "off", 1), Search("gpu", "gpu", 1), Search("cpu", "off", 1))
    assert [(o.search.server, o.search.batch, o.reason) for o in plan.left_out] == [
        ("cpu-cpu", 1, "needs 140 s with its server start, 50 s of the budget left"),
        ("cpu-cpu", 8, "needs 140 s with its server start, 50 s of the budget left"),
        ("gpu-off", 8, "all 3 configurations at this batch need 330 s, 50 s of the budget left"),
        ("gpu-gpu", 8, "all 3 configurations at this batch need 330 s, 50 s of the budget left"),
        ("cpu-off", 8, "all 3 configurations at this batch need 330 s, 50 s of the budget left")]
    assert plan.configurations() == [("gpu", "off", [1]), ("gpu", "gpu", [1]), ("cpu", "off", [1])]
    assert "paired (all up at once" in plan.describe()[0] and plan.to_dict()["paired"]


def test_a_paired_plan_with_room_for_every_batch_keeps_them_in_the_order_asked():
    costs = Costs(search_s=30, start_s=20, reserve_s=0, margin=0.0)
    plan = plan_paired([("cpu", "off"), ("cpu", "cpu")], [32, 1], costs, 1000, reference_s=20)
    # batch 32: 50 + 50 + 20 = 120; batch 1: 30 + 30 + 20 = 80
    assert plan.batches() == [32, 1] and plan.planned_s == 200 and not plan.left_out
    assert plan.configurations() == [("cpu", "off", [32, 1]), ("cpu", "cpu", [32, 1])]


def test_one_configuration_alone_is_no_comparison():
    plan = plan_paired([("cpu", "off"), ("cpu", "cpu")], [1], Costs(search_s=30, start_s=20, reserve_s=0,
                                                                      margin=0.0), 60, reference_s=20)
    assert plan.kept == (Search("cpu", "off", 1),) and not plan.paired


def test_a_replica_shape_costs_its_configurations_starts_searches_and_reference_cells():
    costs = Costs(search_s=30, start_s=20, reserve_s=0, margin=0.0)
    # 2 configurations: 2 x (20 + 2 batches x 30) = 160, and 2 batches' reference cells 2 x 10 = 180
    assert budget.shape_bound_s(2, 2, costs, reference_s=10) == 180
    assert budget.shape_bound_s(1, 1, costs, reference_s=0) == 50


def test_a_shape_sweep_keeps_the_smaller_shapes_that_fit_and_names_the_larger_that_do_not():
    # 500 s, 10% margin -> 450 s, 30 s reserved -> 420 s; a shape: 2 x (15 + 33.5) + 21.9 = 118.9 s
    costs = Costs(search_s=33.5, start_s=15, reserve_s=30, margin=0.1)
    plan = budget.plan_shapes([8, 1, 4, 2], 2, 1, costs, 500, reference_s=21.9)
    assert plan.shape_s == pytest.approx(118.9) and plan.kept == (1, 2, 4)
    assert plan.planned_s == pytest.approx(356.7) and plan.searches_per_shape == 2
    assert plan.left_out == (budget.ShapeLeftOut(8, "needs 119 s, 63 s of the budget left"),)
    assert plan.sweep_minutes(0.35) == pytest.approx(3 * 2 * 0.35)  # each search's share: its own --max-minutes
    assert "shapes kept (cores per replica): 1, 2, 4, 357 s planned" in plan.describe()[0]
    assert plan.describe()[1] == "  left out: 8 cores a replica: needs 119 s, 63 s of the budget left"
    assert plan.to_dict()["kept_shapes"] == [1, 2, 4] and plan.to_dict()["left_out_shapes"][0]["cores"] == 8
    none = budget.plan_shapes([1, 2], 2, 1, costs, 100, reference_s=21.9)
    assert none.kept == () and [o.cores for o in none.left_out] == [1, 2] and none.sweep_minutes(0.35) == 0

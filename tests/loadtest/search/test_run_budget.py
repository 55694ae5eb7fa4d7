"""A capacity run's time budget (`loadtest.search.run_budget`): what `--budget-min` leaves the searches, and whether
one more repeat fits, with hand-computed numbers; the plan's `[capacity] budget_min` (no server started)."""

from __future__ import annotations

import pytest

from loadtest.commands.search_commands import searches_budget_s
from loadtest.measure import plan as plans
from loadtest.search.run_budget import REPORT_S, TOOL_CEILING_SHARE, RunBudget, searches_s


def test_the_searches_get_the_run_less_what_was_spent_before_them_and_the_reports_reserve():
    assert searches_s(330.0, 12.0, report_s=25.0) == pytest.approx(293.0)  # 5.5 min, 12 s to start, 25 s report
    assert searches_s(330.0, 12.0) == pytest.approx(318.0 - REPORT_S)
    assert searches_s(30.0, 12.0, report_s=25.0) == 0.0  # nothing left: never negative


def test_one_more_repeat_fits_while_half_an_average_repeats_time_is_left():
    now = [0.0]
    budget = RunBudget(300.0, 6, clock=lambda: now[0])
    budget.start()
    assert budget.fits([])  # the first always begins
    now[0] = 250.0  # repeats of 100 s and 150 s: average 125, half of it 62.5; 50 s left
    assert budget.left_s() == pytest.approx(50.0) and not budget.fits([100.0, 150.0])
    now[0] = 237.5  # 62.5 s left: exactly half
    assert budget.fits([100.0, 150.0])
    now[0] = 320.0  # past the deadline
    assert not budget.fits([100.0])


def test_a_run_budget_shares_what_it_leaves_the_searches():
    # 5.5 min, 10 s spent, 25 s report: 295 s; servers up after 35 s, a paired comparison of 2 of 6 searches:
    # each (295 - 35) x 0.8 / 6 = 34.67 s
    now = [0.0]
    budget = RunBudget(searches_s(330.0, 10.0, report_s=25.0), 6, clock=lambda: now[0])
    budget.start()
    now[0] = 35.0
    assert budget.share_s(2, paired=True) == pytest.approx(260.0 * 0.8 / 6)


def test_the_plans_budget_leaves_the_searches_their_time_within_a_shape_sweeps(capsys):
    plan = plans.Plan(capacity=plans.CapacityObjectives(budget_min=5.5))
    began, twelve_s_later = 1000.0, (lambda: 1012.0)  # 12 s spent before the searches, on an injected clock
    assert searches_budget_s(plan, None, began, twelve_s_later) == pytest.approx(330.0 - 12.0 - REPORT_S)
    assert searches_budget_s(plan, 120.0, began, twelve_s_later) == 120.0  # a shape sweep's own budget, the shorter
    assert searches_budget_s(plans.Plan(), 120.0, began, twelve_s_later) == 120.0
    assert searches_budget_s(plans.Plan(), None, began, twelve_s_later) is None
    said = capsys.readouterr().out
    assert "the run's time budget: 5.5 min: 12 s spent before the searches, 25 s kept for the report" in said
    assert plan.to_dict()["capacity"]["budget_min"] == 5.5  # recorded with the run's plan
    assert "budget_min" not in plans.Plan(capacity=plans.CapacityObjectives(goals=("1000:10:1",))).to_dict()["capacity"]


def test_a_negative_budget_in_the_plan_is_refused(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text("[capacity]\nbudget_min = -1\n")
    with pytest.raises(plans.PlanError, match=r"\[capacity\] budget_min = -1: expected minutes >= 0"):
        plans.load_plan(path)


def test_the_tool_ceilings_share_is_kept_from_the_searches_and_ends_the_budget():
    now = [0.0]
    budget = RunBudget(300.0, 2, clock=lambda: now[0], kept=TOOL_CEILING_SHARE)
    budget.start()
    assert budget.left_s() == pytest.approx(255.0)  # the searches' 85%
    assert budget.share_s(1, False) == pytest.approx(255.0 * 0.95 / 2)
    assert budget.end() == pytest.approx(300.0)  # the twins' time runs to the budget's end

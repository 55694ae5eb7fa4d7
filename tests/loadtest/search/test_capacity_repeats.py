"""Repeats past `--repeat` (`loadtest.search.comparison.Repeats`, as `Capacities` runs them): one more while a
comparison's repeats have no majority that agree, up to the cap. Each repeat's searches are stood in for by
hand-made cells appended to the run's own (`tests.loadtest.report.answers.test_paired.comparison`), and the run asks the
real `paired.without_majority` of them. Under a run's time budget (`--budget-min`), a repeat that does not fit is not
started: the stand-ins move a hand-driven clock."""

from __future__ import annotations

import io
from contextlib import contextmanager
from dataclasses import replace

from loadtest.evidence.objective import Objective
from loadtest.measure.plan import load_plan, with_overrides
from loadtest.report.answers.paired import without_majority
from loadtest.search.capacity_search import Capacities, CapacityRequest
from loadtest.search.comparison import Repeats
from loadtest.search.run_budget import RunBudget
from tests.loadtest.report.answers.test_paired import comparison
from tests.support.cli import invoke
from tests.support.paths import REPO


def capacities(tmp_path, monkeypatch, gains, repeats=2, max_repeats=0, budget_s=None, repeat_s=0.0):
    """A paired run of two stand-in servers whose repeat N reads batching gain `gains[N - 1]`, its range ×0.5–×2
    of it (`test_paired.comparison`), each repeat taking `repeat_s` of a run budgeted `budget_s`; the repeats it
    ran, and its console."""
    out = io.StringIO()
    plan = with_overrides(load_plan(REPO / "loadtest/plans/demo.toml"), input_data="random")  # no samples file
    run = Capacities(CapacityRequest(plan, Objective(10.0)),
                     [object(), object()], [1], tmp_path, out=out,
                     repeats=Repeats(repeats, max_repeats, without_majority))
    now = [0.0]
    if budget_s is not None:
        run.budget = RunBudget(budget_s, 6, clock=lambda: now[0])  # 2 servers x up to 3 repeats
    ran = []

    @contextmanager
    def all_up(slots):
        yield [("cpu-off", None), ("cpu-cpu", None)]

    def compare(answering, batch, repeat, comparison_id="", objective=None):
        ran.append(repeat)
        now[0] += repeat_s
        cells = comparison(repeat, gains[repeat - 1], first_index=20 * repeat)
        run.cells.results.extend(replace(c, search=replace(c.tag, comparison=replace(
            c.tag.comparison, id=f"{run.run_id}/b{batch}"))) for c in cells)

    monkeypatch.setattr(run, "_all_up", all_up)
    monkeypatch.setattr(run, "_compare", compare)
    run.run()
    return ran, out.getvalue()


def test_repeats_apart_get_another_until_a_majority_agrees(tmp_path, monkeypatch):
    ran, console = capacities(tmp_path, monkeypatch, [2.0, 0.4, 1.8, 2.0], max_repeats=4)
    assert ran == [1, 2, 3]  # the third (×1.80) overlaps the first (×2.00): two of three agree
    assert "no ratio lies in the ranges of more than half its 2 repeats; repeat 3 (at most 4)" in console


def test_no_more_than_max_repeats_however_they_disagree(tmp_path, monkeypatch):
    ran, _ = capacities(tmp_path, monkeypatch, [4.0, 0.4, 0.05, 16.0], max_repeats=3)  # each apart from each
    assert ran == [1, 2, 3]


def test_repeats_that_agree_or_no_max_repeats_run_repeat_times(tmp_path, monkeypatch):
    assert capacities(tmp_path, monkeypatch, [2.0, 1.8, 1.0], max_repeats=3)[0] == [1, 2]
    assert capacities(tmp_path, monkeypatch, [2.0, 0.4, 1.8])[0] == [1, 2]  # max_repeats 0: --repeat only


def test_a_repeat_begins_only_while_half_an_average_repeats_time_is_left(tmp_path, monkeypatch):
    # 300 s, 130 s a repeat: after two, 40 s left, under 65 (half of 130): the third, asked for, is not started
    ran, console = capacities(tmp_path, monkeypatch, [2.0, 0.4, 1.8], max_repeats=3, budget_s=300, repeat_s=130)
    assert ran == [1, 2]
    assert ("repeat 3 not started: 40 s of the run's time budget left, under half a repeat's (130 s on average)"
            in console)
    # 100 s a repeat: 100 s left after two, over 50: the third runs
    assert capacities(tmp_path, monkeypatch, [2.0, 0.4, 1.8], max_repeats=3, budget_s=300, repeat_s=100)[0] == [1, 2, 3]


def test_the_budget_cuts_even_the_repeats_asked_for(tmp_path, monkeypatch):
    # --repeat 3 in 300 s, 200 s a repeat: 100 s left after one, at least 100 (half of 200): a second; then none
    ran, console = capacities(tmp_path, monkeypatch, [2.0, 1.9, 2.1], repeats=3, budget_s=300, repeat_s=200)
    assert ran == [1, 2] and "repeat 3 not started: 0 s of the run's time budget left" in console


def test_max_repeats_below_repeat_is_refused_in_one_line(tmp_path):
    done = invoke("capacity", "--target", "127.0.0.1:1", "--p99-ms", "10", "--repeat", "3", "--max-repeats", "2",
                  "--results-dir", tmp_path)
    assert done.exit_code != 0 and "--max-repeats 2 is fewer than --repeat 3" in done.stderr
    assert not list(tmp_path.iterdir())  # refused before anything was measured

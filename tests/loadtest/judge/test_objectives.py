"""One capacity search's cells answered at several p99 objectives, and its rate table, from hand-built
cells whose latencies are known (µs -> requests), against verdicts worked out by hand at 99% confidence
(a pass needs N >= 459 with k = 0 over the objective)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from loadtest.evidence.provenance_record import Provenance
from loadtest.evidence.search_tag import SearchTag
from loadtest.judge.conclusion import AnswerKind
from loadtest.judge.objectives import Bound, carried, objective_answers, rate_table
from loadtest.report.answers import answers
from tests.loadtest.report.handmade import server
from tests.loadtest.search.test_capacity import cell

OBJECTIVES = (5.0, 10.0, 25.0, 50.0, 100.0)
OFF = server("cpu-off", "off")
ON = server("cpu-cpu", "cpu")

# (role, offered req/s, window s, {latency µs: requests}, confirming)
STEPS = [
    ("bracket", 100, 10.0, {2_000: 1000}, False),  # passes everywhere
    ("confirm", 100, 30.0, {2_000: 3000}, True),  # ... and is confirmed
    ("bracket", 200, 5.0, {4_000: 940, 20_000: 60}, False),  # 6% over 5 and 10 ms: fails; passes from 25 ms
    ("bracket", 400, 2.5, {30_000: 900, 60_000: 100}, False),  # fails up to 50 ms; passes at 100 ms
    ("bisect", 300, 3.3, {4_000: 980, 40_000: 20}, False),  # 2% over 25 ms: fails; passes from 50 ms
    ("extend", 300, 3.3, {4_000: 980, 40_000: 20}, False),  # a second window that passes on its own there
]


def search_cells(label=OFF, search_id="s1", scale: float = 1.0, steps=STEPS):
    cells = []
    for index, (role, rate, window_s, counts, confirming) in enumerate(steps):
        measured = cell(rate * scale, window_s, counts)
        tag = {"id": search_id, "role": role, "p99_objective_ms": 10.0, "offered_rps": rate * scale,
               "confidence": 0.99, "confirming": confirming, "objectives": list(OBJECTIVES)}
        cells.append(replace(measured, server=label, cell_index=index, search=SearchTag.from_dict(tag),
                             provenance=Provenance(host="bench")))
    return cells


def test_one_search_answers_every_objective():
    """`conclude` at each objective: confirmed only by a confirmation (two windows that pass are a pass), the
    highest unconfirmed pass above it kept beside it, and a figure that never falls as the objective loosens."""
    found = {a.p99_objective_ms: a for a in objective_answers(search_cells(), OBJECTIVES)}
    assert list(found) == list(OBJECTIVES)
    summary = {o: (a.capacity_rps, a.passed_rps, a.kind, a.upper_rps, a.at_least) for o, a in found.items()}
    assert summary == {
        5.0: (100, None, AnswerKind.CONFIRMED, 200, False),
        10.0: (100, None, AnswerKind.CONFIRMED, 200, False),
        25.0: (100, 200, AnswerKind.CONFIRMED, 300, False),  # one window at 200: passed, not confirmed
        50.0: (100, 300, AnswerKind.CONFIRMED, 400, False),  # two windows at 300 pass: still not confirmed
        100.0: (100, 400, AnswerKind.CONFIRMED, None, True),  # nothing above 400 failed: the search stopped
    }
    assert found[100.0].bound == Bound.STOPPED and found[50.0].bound == Bound.NONE
    assert found[10.0].evidence.requests == 3000 and found[10.0].evidence.over == 0  # the confirmation's own
    assert found[25.0].lowest_failing_rps == 300 and found[25.0].not_monotone == ()
    assert found[10.0].line().startswith("p99 <= 10 ms: 100 req/s (confirmed: p99 <= ")
    assert found[10.0].line().endswith("N=3000, k=0; between 100 and 200 req/s)")
    assert found[100.0].line().endswith("at least: the search stopped; 400 req/s passed, not confirmed)")
    assert [found[o].confirmed_rps for o in OBJECTIVES] == [100] * 5


def test_a_looser_objective_never_answers_lower():
    """A confirmation that passed at a stricter objective holds at a looser one: carried up."""
    looser = objective_answers(search_cells(), OBJECTIVES)
    stricter, loose = looser[1], replace(looser[2], confirmed_rps=None, capacity_rps=50.0, passed_rps=None)
    held = carried(stricter, loose)
    assert (held.confirmed_rps, held.capacity_rps, held.kind) == (100, 100, AnswerKind.CONFIRMED)
    figures = [a.capacity_rps for a in looser]
    assert figures == sorted(figures)


def test_a_pass_above_a_rate_that_failed_is_named():
    steps = [("bracket", 100, 10.0, {4_000: 950, 20_000: 50}, False),  # fails at 10 ms
             ("bracket", 200, 5.0, {4_000: 1000}, False)]  # passes at 10 ms
    [at_10] = objective_answers(search_cells(steps=steps), [10.0])
    assert at_10.capacity_rps is None and at_10.not_monotone == ((200, 100),)  # a pass above a fail answers nothing
    assert "not monotone: passed at 200 req/s above a fail at 100 req/s" in at_10.line()


def test_nothing_passing_answers_none_with_the_reason():
    [at_5] = objective_answers(search_cells(steps=STEPS[2:4]), [5.0])
    assert at_5.kind == AnswerKind.NONE and at_5.capacity_rps is None
    assert at_5.line() == "p99 <= 5 ms: none (lowest failing rate 200 req/s)"


def test_rate_table_pools_every_window_at_a_rate():
    rows = {r.offered_rps: r for r in rate_table(search_cells())}
    assert list(rows) == [100, 200, 300, 400]
    both = rows[300]
    assert (both.requests, both.windows, both.overloaded) == (2000, 2, False)
    assert both.achieved_rps == 300 and both.achieved_ips == pytest.approx(300 * cell(1, 1, {1: 1}).images)
    assert both.p50_ms == pytest.approx(4.0, rel=0.01) and both.p90_ms == pytest.approx(4.0, rel=0.01)
    assert both.p999_ms == pytest.approx(40.0, rel=0.01)  # 20 of 2,000 at 40 ms: the slowest 1%
    assert rows[100].requests == 4000 and rows[100].windows == 2


def test_gain_and_ratio_at_every_objective_both_sides_answered():
    """Batching on answers twice batching off's rates at every objective: a gain of 2 of the confirmed capacities
    wherever one side is bounded above, and the same answers at the search's own objective (10 ms)."""
    result = answers.answer(search_cells(OFF, "off") + search_cells(ON, "on", scale=2.0))
    assert result.objectives_ms() == OBJECTIVES
    gains = {d.p99_objective_ms: d.gain for d in result.objective_devices}
    assert set(gains) == set(OBJECTIVES)
    assert all(gains[o].ratio == pytest.approx(2.0) for o in OBJECTIVES[:-1])
    assert gains[100.0].ratio is None and "both capacities are lower bounds" in gains[100.0].reason
    assert gains[25.0].describe() == "×2.00 (×0.67–×6.00)"  # 200/300 and 600/100
    [own] = [d for d in result.devices if d.p99_objective_ms == 10.0]
    assert own.gain.ratio == pytest.approx(2.0) and own.best.capacity_rps == 200
    off = next(s for s in result.searches if s.search_id == "off")
    assert [o.p99_objective_ms for o in off.objectives] == list(OBJECTIVES) and len(off.rates) == 4

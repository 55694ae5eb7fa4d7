"""The calibration's bookkeeping (`loadtest.benchmarks.calibrate`): what counts as a range holding its theory, the
service time read where a range was measured, and the summary over runs. The runs themselves are a benchmark
(`make bench-calibrate`), not a test."""

from __future__ import annotations

from dataclasses import replace

import pytest

from loadtest.benchmarks.calibrate import Held, PairRun, summary
from loadtest.benchmarks.service_theory import Outside, ServiceCells, handler_s, service_at, theory_of
from loadtest.evidence.cell_parts import PhaseWindow, ServerPhases
from loadtest.evidence.stats import encode, histogram_of
from tests.loadtest.search.test_capacity import passing_cell


def timed(throughput_rps: float, handler_ms: float, index: int = 0, latency_ms: float = 4.0, users: int = 4):
    """A closed-loop cell at `throughput_rps` whose server timed `handler_ms` a call in its handler."""
    base = passing_cell()
    phases = ServerPhases("test", PhaseWindow(handler_ms * 1000, None, 100.0), {}, (), "", None)
    return replace(base, cell_index=index, throughput_rps=throughput_rps, server_phases=phases,
                   load=replace(base.load, concurrency=users, rate_rps=None),
                   histogram_us=encode(histogram_of([latency_ms * 1000.0] * 100)))


def test_a_range_holds_only_two_sided_and_around_its_theory():
    assert Held("a", 100.0, 95.0, 105.0).holds and Held("a", 100.0, 95.0, 105.0).width == pytest.approx(105 / 95)
    assert not Held("a", 100.0, 101.0, 105.0).holds and not Held("a", 100.0, 90.0, 99.0).holds
    one_sided = Held("a", 100.0, 95.0, None)
    assert not one_sided.holds and one_sided.width is None and "one-sided" in one_sided.describe()


def test_the_work_outside_the_handler_is_read_where_the_range_was_measured():
    outside = Outside(((0, 0.0002), (10, 0.0004)))
    assert outside.at(5) == pytest.approx(0.0003) and outside.at(-1) == 0.0002 and outside.at(20) == 0.0004
    first = ServiceCells((timed(1000 / 3.2, 3.0),), ())  # 0.2 ms outside its handler
    other = ServiceCells((timed(1000 / 5.0, 4.7),), ())  # 0.3 ms: 1.5 x the first's
    at = [timed(150.0, 4.8, index=5)]
    # the other's own handler time there, plus 1.5 x the first server's work outside its handler at cell 5
    assert service_at(other, first, outside, at) == pytest.approx(0.0048 + 1.5 * 0.0003)
    assert handler_s(at[0]) == pytest.approx(0.0048)


def test_the_theory_is_where_an_md1_queue_meets_the_objective():
    cells = ServiceCells((timed(250.0, 3.8),), (timed(200.0, 3.8, users=1, latency_ms=4.5),))
    theory = theory_of(cells, 0.004, objective_ms=50.0)
    assert theory.client_ms_p50 == pytest.approx(0.5, abs=0.01)  # 4.5 ms alone less S
    assert theory.service_ms_each == (4.0,)
    assert 0.75 / 0.004 < theory.capacity_rps < 0.9 / 0.004  # an M/D/1 queue meets 50 ms near 80% busy


def test_the_summary_counts_holding_ranges_and_flags_the_wide_and_the_slow():
    runs = [PairRun("ratio", n, 300.0 if n < 3 else 340.0,
                    (Held("ratio target0", 100.0, 95.0, 104.0 if n < 3 else 130.0),),
                    Held("ratio target1 ÷ target0", 0.6, 0.55, 0.66)) for n in (1, 2, 3)]
    text = summary(runs)
    assert "ratio target0, capacity: holds theory in 3 of 3; width median ×1.095, widest ×1.368 (OVER ×1.2)" in text
    assert "ratio target1 ÷ target0, ratio: holds theory in 3 of 3; width median ×1.200" in text
    assert "ratio: longest run 5.7 min (OVER 5.5 min)" in text

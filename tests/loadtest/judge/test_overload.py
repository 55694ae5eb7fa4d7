"""Overloaded open-loop cells: completions short of the schedule, or latency growing window to window; never a
peak in the report's tables. Hand-made cells, figures computed by hand."""

from __future__ import annotations

from dataclasses import replace

from loadtest.judge.overload import overloaded_reason
from loadtest.report.answers.answers import answer
from loadtest.report.configs import config_labels, config_of
from loadtest.report.figures import figures_of
from loadtest.report.sections.details import PEAK_HEADER, peak_table
from loadtest.report.series import group_series, sustained
from tests.loadtest.report.handmade import cell, server

CPU = server("cpu-off", "off")


def windows(c, done: list[float], sent: list[float], latency_ms: list[float] | None = None):
    return replace(c, load=replace(c.load, window_s=0.5, duration_s=len(sent) * 0.5), window_throughput_rps=done,
                   window_scheduled_rps=sent, window_latency_ms=latency_ms or [])


def test_completions_short_of_the_schedule_are_overloaded():
    base = cell(CPU, rate=1800.0)
    # 4 windows of 0.5 s at 900 req/s: 1,800 sent, 1,400 completed: 400 short > 3 * sqrt(1,800) = 127, and 22%.
    short = windows(base, [700.0] * 4, [900.0] * 4)
    assert overloaded_reason(short) == ("completed 700.0 req/s of the 900.0 req/s its schedule sent (22% short): "
                                        "the server did not keep up")
    # The seeded schedule's own dip and burst, completed as sent: not overloaded.
    seeded = windows(base, [190.0, 198.0, 130.0, 244.0], [190.0, 198.0, 130.0, 244.0])
    assert overloaded_reason(seeded) is None
    # 3% short (the requests still in flight at the end): under 5%, not overloaded.
    assert overloaded_reason(windows(base, [873.0] * 4, [900.0] * 4)) is None


def test_latency_growing_window_to_window_is_a_queue_building():
    base = cell(CPU, rate=200.0)
    growing = windows(base, [200.0] * 4, [200.0] * 4, [3.0, 40.0, 150.0, 297.0])
    # halves: (3 + 40) / 2 = 21.5 ms, (150 + 297) / 2 = 223.5 ms
    assert overloaded_reason(growing) == ("mean latency grew from 21.50 ms to 223.50 ms between the cell's halves: "
                                          "a queue building")
    hiccup = windows(base, [200.0] * 4, [200.0] * 4, [2.0, 2.2, 6.0, 2.1])  # 2.1 -> 4.05 ms: under +5 ms
    assert overloaded_reason(hiccup) is None


def test_older_records_compare_with_the_offered_rate_and_closed_loops_never_overload():
    assert overloaded_reason(cell(CPU, rate=1800.0, rps=1290.0)) == (
        "served 1,290.0 req/s of the 1,800.0 req/s offered (28% short): the server did not keep up")
    assert overloaded_reason(cell(CPU, rate=200.0, rps=188.0)) is None  # 6% short: a seeded schedule's own
    assert overloaded_reason(cell(CPU, mode="closed", concurrency=8, rps=100.0)) is None


def test_an_overloaded_cell_is_never_a_peak_and_the_table_says_so():
    ok = replace(cell(CPU, rate=400.0, index=0), latency_p50_ms=3.0)
    overloaded = replace(cell(CPU, rate=1802.0, rps=1290.0, index=1), latency_p50_ms=297.0)
    results = [ok, overloaded]
    assert not sustained(overloaded) and sustained(ok)
    labels = config_labels(config_of(c) for c in results)
    figures = figures_of(results, answer(results), labels)
    assert [f.peak.cell.cell_index for f in figures.values() if f.peak] == [0]
    series = group_series(results)
    table = peak_table(series, ["S1"], labels, figures)
    row = dict(zip(PEAK_HEADER, table.rows[0]))
    assert row["peak req/s"] == "396.0" and row["peak load"] == "open loop, 400 req/s offered"
    assert row["note"] == ("overloaded, not a peak: offered rate 1,802 req/s, p50 297 ms: served 1,290.0 req/s of the "
                       "1,802.0 req/s offered (28% short): the server did not keep up")

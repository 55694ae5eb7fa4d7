"""The per-process collector: measurement window, late sends, errors, and exact delta merging."""

from __future__ import annotations

from dataclasses import replace

from loadtest.evidence import stats
from loadtest.load.collector import WRONG_ANSWER, Aggregate, CallRecord, Collector


def record(intended: float, latency_us: float, *, late_s: float = 0.0, status: str = "OK", correct: int = 4):
    ok = status == "OK"
    return CallRecord(intended, intended + late_s, latency_us, ok, status, "" if ok else "boom", 4,
                      correct if ok else 0, 4 if ok else 0)


def collector() -> Collector:
    # Window [100, 102) s, 1 s throughput windows, a send > 2 ms after its intended time is late.
    return Collector(start_unix_s=100.0, end_unix_s=102.0, window_s=1.0, late_threshold_s=0.002)


def test_only_calls_intended_inside_the_window_count():
    c = collector()
    for intended in (99.9, 100.0, 101.999, 102.0):
        c.add(record(intended, 1000))
    assert c.requests == 2 and c.ok_requests == 2


def test_late_sends_errors_accuracy_and_windows():
    c = collector()
    c.add(record(100.1, 3000, late_s=0.0025))  # late: 2.5 ms > 2 ms
    c.add(record(100.2, 1000, late_s=0.002))  # exactly at the threshold: on time
    c.add(record(100.3, 500, status="UNAVAILABLE"))
    c.add(record(101.5, 2000, status=WRONG_ANSWER))
    c.add(record(101.2, 900_000, correct=3))  # done at 102.1 s: window 2, outside the 2 windows
    assert (c.requests, c.ok_requests, c.late_sends) == (5, 3, 1)
    assert c.errors_by_code == {"UNAVAILABLE": 1, WRONG_ANSWER: 1}
    assert (c.correct, c.checked, c.images) == (11, 12, 12)
    assert c.window_counts == {"0": 2, "2": 1}
    assert (c.min_us, c.max_us, c.sum_us) == (1000, 900_000, 904_000)
    c.note_pool_wait(100.5)
    c.note_pool_wait(103.0)  # outside the window
    assert c.pool_waits == 1 and c.take_delta()["pool_waits"] == 1 and c.pool_waits == 0


def test_deltas_from_two_processes_merge_exactly():
    """Latencies and (open loop) dispatch lags alike: the merged histograms equal the union's."""
    a, b = collector(), collector()
    latencies_a, lags_a = [1000, 2000, 3500, 48_000], [0.000_020, 0.000_900, 0.0, 0.000_300]
    latencies_b, lags_b = [700, 1200, 250_000], [0.012, 0.000_001, 0.000_050]
    for i, (latency, lag) in enumerate(zip(latencies_a, lags_a)):
        a.add(replace(record(100.0 + i * 0.1, latency, late_s=lag), scheduled=True))
    for i, (latency, lag) in enumerate(zip(latencies_b, lags_b)):
        b.add(replace(record(100.5 + i * 0.1, latency, late_s=lag), scheduled=True))
    total = Aggregate()
    total.add_delta(a.take_delta())
    total.add_delta(b.take_delta())
    total.add_delta(a.take_delta())  # an empty report (nothing new) changes nothing
    assert stats.same_counts(total.histogram, stats.histogram_of(latencies_a + latencies_b))
    assert total.requests == 7 and total.deltas == 3
    summary = total.latency()
    assert summary.min_ms == 0.7 and summary.max_ms == 250.0
    assert a.requests == 0 and a.histogram.get_total_count() == 0  # taking a delta empties the collector
    lags = stats.histogram_of([round(lag * 1e6) for lag in lags_a + lags_b])
    assert stats.same_counts(total.lag_histogram, lags) and total.lag_max_us == 12_000
    assert a.lag_histogram.get_total_count() == 0 and a.lag_max_us is None


def scheduled(intended: float, lag_s: float, status: str = "OK") -> CallRecord:
    ok = status == "OK"
    return CallRecord(intended, intended + lag_s, 1000 + lag_s * 1e6, ok, status, "" if ok else "boom", 1,
                      1 if ok else 0, 1 if ok else 0, scheduled=True)


def test_dispatch_lag_of_scheduled_sends_only_failed_ones_included():
    c = collector()
    c.add(scheduled(100.1, 0.000_050))
    c.add(scheduled(100.2, 0.000_150))
    c.add(scheduled(100.3, 0.003, status="UNAVAILABLE"))  # dispatch does not depend on the answer
    c.add(scheduled(100.4, -0.000_010))  # left early: no lag
    c.add(record(100.5, 1000, late_s=0.004))  # a closed-loop call: nothing was scheduled
    c.add(scheduled(103.0, 0.5))  # outside the window
    assert c.lag_histogram.get_total_count() == 4 and c.lag_max_us == 3000
    lag = c.dispatch_lag()
    assert lag is not None and lag.max_ms == 3.0 and lag.p50_ms == 0.05
    assert collector().dispatch_lag() is None


def test_per_window_sends_and_latency_by_intended_time_merge_across_processes():
    # Process A: two scheduled sends in window 0 (2 ms and 4 ms), one failed scheduled send in window 1;
    # process B: one scheduled send at 100.9 s that takes 300 ms, so it completes in window 1 but was sent in 0.
    a, b = collector(), collector()
    a.add(replace(record(100.1, 2000), scheduled=True))
    a.add(replace(record(100.2, 4000), scheduled=True))
    a.add(replace(record(101.5, 0, status="UNAVAILABLE"), scheduled=True))
    b.add(replace(record(100.9, 300_000), scheduled=True))
    merged = Aggregate()
    merged.add_delta(a.take_delta())
    merged.add_delta(b.take_delta())
    assert merged.scheduled_counts == {"0": 3, "1": 1}  # by intended send time, failures included
    assert merged.window_counts == {"0": 2, "1": 1}  # completions by completion time, OK only
    assert stats.window_counts_to_rps(merged.scheduled_counts, 1.0, 2) == [3.0, 1.0]
    # Window 0's OK sends: (2 + 4 + 300) / 3 ms; window 1 has no OK send.
    assert stats.window_means_ms(merged.sent_latency_sum_us, merged.sent_ok_counts, 2) == [102.0, None]
    assert a.scheduled_counts == {} and a.sent_latency_sum_us == {}  # taken: the delta emptied it


def test_closed_loop_calls_schedule_nothing():
    c = collector()
    c.add(record(100.5, 1000))
    assert c.scheduled_counts == {} and c.sent_ok_counts == {"0": 1}

"""Pure statistics of the load test, checked against hand-computed numbers."""

from __future__ import annotations

import pytest

from loadtest.evidence import stats


def test_percentiles_of_one_to_a_thousand_microseconds():
    # Below 2048 µs a 3-significant-digit HdrHistogram is exact to 1 µs, so the percentiles of
    # 1..1000 µs are the order statistics: p50 = 500, p90 = 900, p99 = 990, p99.9 = 999.
    summary = stats.summarise(stats.histogram_of(range(1, 1001)), exact_min_us=1, exact_max_us=1000,
                              exact_sum_us=500500)
    assert summary.count == 1000
    assert (summary.p50_ms, summary.p90_ms, summary.p95_ms) == (0.5, 0.9, 0.95)
    assert (summary.p99_ms, summary.p999_ms) == (0.99, 0.999)
    assert (summary.min_ms, summary.max_ms) == (0.001, 1.0)
    assert summary.mean_ms == pytest.approx(0.5005, abs=0.001)


def test_exact_extremes_beat_bucket_edges():
    # 5000 µs falls in a 4 µs wide bucket (4096..8191 µs at 3 digits): the histogram alone says 5003.
    histogram = stats.histogram_of([5000, 5000, 5000])
    assert stats.summarise(histogram).max_ms == 5.003
    assert stats.summarise(histogram, 5000, 5000, 15000).max_ms == 5.0
    assert stats.summarise(histogram, 5000, 5000, 15000).mean_ms == 5.0
    assert stats.summarise(histogram, 5000, 5000, 15000).p99_ms == 5.0  # never above the exact max


def test_empty_histogram_summarises_to_none():
    summary = stats.summarise(stats.new_histogram())
    assert summary.count == 0 and summary.p99_ms is None and summary.max_ms is None
    assert stats.encode(stats.new_histogram()) == ""
    assert stats.decode("").get_total_count() == 0


def test_merge_of_encoded_parts_equals_histogram_of_all_samples():
    first = [120, 130, 5000, 5001, 250_000]
    second = [1, 999, 1_000_000, 123_456_789]
    merged = stats.merge_encoded([stats.encode(stats.histogram_of(first)), "",
                                  stats.encode(stats.histogram_of(second))])
    single = stats.histogram_of(first + second)
    assert stats.same_counts(merged, single)
    assert merged.get_total_count() == 9
    assert not stats.same_counts(merged, stats.histogram_of(first))


def test_record_rounds_and_clamps_into_range():
    histogram = stats.new_histogram()
    stats.record_us(histogram, 0.2)  # below 1 µs: counted as 1 µs, not dropped
    stats.record_us(histogram, 10 * stats.HIGHEST_US)  # beyond an hour: clamped
    assert histogram.get_total_count() == 2
    assert histogram.get_min_value() == 1


def test_window_throughput_and_stability():
    # 3 windows of 0.5 s: 50, 45 and 0 completions (window "2" missing) -> 100, 90, 0 requests/s.
    assert stats.window_counts_to_rps({"0": 50, "1": 45, "7": 3}, 0.5, 3) == [100.0, 90.0, 0.0]
    assert stats.max_consecutive_change([100.0, 90.0, 100.0]) == pytest.approx(0.1)
    assert stats.max_consecutive_change([100.0, 80.0]) == pytest.approx(0.2)
    assert stats.max_consecutive_change([0.0, 0.0]) == 0.0
    assert stats.max_consecutive_change([42.0]) == 0.0
    # Poisson arrivals at 50/s: 50 then 42 in 1 s windows differ by 8 <= 3 * sqrt(92) = 28.8: noise.
    assert stats.max_consecutive_change([50.0, 42.0], 1.0, poisson=True) == 0.0
    assert stats.max_consecutive_change([50.0, 42.0], 1.0, poisson=False) == pytest.approx(0.16)
    # 500 then 400 in 1 s windows: 100 > 3 * sqrt(900) = 90, a real 20% change even for Poisson.
    assert stats.max_consecutive_change([500.0, 400.0], 1.0, poisson=True) == pytest.approx(0.2)


def test_cpu_and_fractions():
    assert stats.cpu_percent(1.5, 2.0) == 75.0
    assert stats.cpu_percent(1.0, 0.0) == 0.0
    assert stats.fraction(3, 200) == 0.015
    assert stats.fraction(3, 0) == 0.0


def _flags(**overrides):
    values = dict(errors=0, requests=1000, errors_by_code={}, late_sends=0, process_cpu_percents=[40.0],
                  total_cpu_percent=40.0, cores=2, window_rps=[100.0, 101.0, 99.0])
    values.update(overrides)
    return stats.validity_flags(**values)


def test_a_clean_cell_has_no_flags():
    assert _flags() == []


def test_each_validity_flag_names_its_reason():
    errors = _flags(errors=3, errors_by_code={"WRONG_ANSWER": 2, "UNAVAILABLE": 1})
    assert errors == [("errors", "3 of 1000 requests failed (UNAVAILABLE=1, WRONG_ANSWER=2)")]
    busy = _flags(process_cpu_percents=[95.0], total_cpu_percent=95.0)
    assert busy == [("saturated", "a load generator process used 95% of a core")]
    all_cores = _flags(process_cpu_percents=[85.0, 85.0, 85.0], total_cpu_percent=255.0, cores=2)
    assert [f for f, _ in all_cores] == ["saturated"] and "255% of 2 cores" in all_cores[0][1]
    late = _flags(late_sends=11)
    assert late == [("saturated", "1.1% of sends left late (limit 1%)")]
    assert _flags(late_sends=10) == []
    assert _flags(late_sends=4, requests=100) == []  # 4%, but a few hiccups in a short cell are not saturation
    assert _flags(late_sends=5, requests=100) == [("saturated", "5.0% of sends left late (limit 1%)")]
    lagging = _flags(dispatch_lag_us=1500.0, dispatch_lag_limit_us=1000.0)
    assert lagging == [("saturated", "dispatch lag p99 1500 µs > 1000 µs: the load generator did not send on time")]
    assert _flags(dispatch_lag_us=1000.0, dispatch_lag_limit_us=1000.0) == []
    assert _flags(dispatch_lag_us=None, dispatch_lag_limit_us=1000.0) == []  # closed loop: nothing scheduled
    short = _flags(dispatch_lag_us=1500.0, dispatch_lag_limit_us=1000.0, dispatch_lag_percentile="p95")
    assert short == [("saturated", "dispatch lag p95 1500 µs > 1000 µs: the load generator did not send on time")]
    pooled = _flags(late_sends=200, pool_waits=40)
    assert pooled == [("saturated", "20.0% of sends left late (limit 1%); 40 waited for a free in-flight slot")]
    unstable = _flags(window_rps=[100.0, 88.0])
    assert unstable == [("unstable", "throughput of consecutive windows changed by 12% (limit 10%)")]
    assert _flags(window_rps=[100.0, 90.0]) == []
    assert ("errors", "no request completed in the measurement window") in _flags(requests=0)


@pytest.mark.parametrize(("sends", "percentile"), [(2000, "p99"), (500, "p99"), (499, "p95"), (100, "p95"),
                                                   (99, "p90"), (50, "p90"), (49, "p50"), (0, "p50")])
def test_the_dispatch_lag_read_has_at_least_five_sends_above_it(sends, percentile):
    """Two hiccups in a 100-send cell are its p99: the rule reads the p95 there, as late sends need 5."""
    assert stats.lag_percentile(sends) == (percentile, f"{percentile}_ms")


def test_schedule_gap_compares_each_window_with_its_own_sends():
    # The H100 run's gpu-gpu cell at 203.6 req/s, 0.5 s windows: the seeded schedule itself sent 95, 99, 65, 122,
    # 94 requests (190, 198, 130, 244, 188 req/s) and the server completed exactly those: no gap at all.
    sent = [190.0, 198.0, 130.0, 244.0, 188.0]
    assert stats.max_consecutive_change(sent, 0.5, poisson=True) == pytest.approx(114 / 244)  # the old rule's 47%
    assert stats.max_schedule_gap(sent, sent, 0.5) == 0.0
    # 61 of 122 scheduled sends completed in window 3: 61 short > 3 * sqrt(122) = 33.1, 50% of the larger.
    assert stats.max_schedule_gap([190.0, 198.0, 130.0, 122.0], sent[:4], 0.5) == pytest.approx(0.5)
    # 110 of 122: 12 short < 33.1, counting noise.
    assert stats.max_schedule_gap([190.0, 198.0, 130.0, 220.0], sent[:4], 0.5) == 0.0
    # Ahead of the schedule (a backlog draining): 2,000 done against 1,500 sent in 1 s windows, 25%.
    assert stats.max_schedule_gap([2000.0], [1500.0], 1.0) == pytest.approx(0.25)


def test_unstable_reads_the_schedule_when_it_was_counted_else_the_old_rule():
    seeded = [190.0, 198.0, 130.0, 244.0, 188.0]
    common = dict(errors=0, requests=475, errors_by_code={}, late_sends=0, process_cpu_percents=[20.0],
                  total_cpu_percent=20.0, cores=4, window_rps=seeded, window_s=0.5, poisson=True)
    assert stats.validity_flags(**common, window_scheduled_rps=seeded) == []
    old = stats.validity_flags(**common)  # an older record, or a closed loop: consecutive windows
    assert [flag for flag, _ in old] == ["unstable"]
    short = stats.validity_flags(**{**common, "window_rps": [190.0, 198.0, 130.0, 122.0, 188.0]},
                                 window_scheduled_rps=seeded)
    assert short == [("unstable", "a window's completions and the sends scheduled in it differed by 50% "
                                  "(limit 10%, beyond counting noise)")]


@pytest.mark.parametrize("values_us", [[1, 2, 3, 2047, 2048, 2049, 10**9, stats.HIGHEST_US],
                                       [int(1.7**k) for k in range(41)] * 3])
def test_recorded_buckets_are_the_librarys_recorded_iterator(values_us):
    # the table of bucket values (built once a layout) gives what HdrHistogram's own iterator yields, edges included
    histogram = stats.histogram_of(values_us)
    expected = [(v.value_iterated_to, v.count_at_value_iterated_to) for v in histogram.get_recorded_iterator()]
    assert stats.recorded_buckets(histogram) == expected
    assert sum(count for _, count in expected) == len(values_us)

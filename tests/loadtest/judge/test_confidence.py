"""MLPerf LoadGen's early-stopping rule (`loadtest.judge.confidence`), against hand-computed numbers and
LoadGen's own `find_min_passing` (its beta-function code, ported, gave the table below)."""

from __future__ import annotations

import math

import pytest

from loadtest.evidence.stats import histogram_of, new_histogram
from loadtest.judge import confidence as conf
from loadtest.judge.confidence import Outcome


def latencies(fast: int, slow: int, fast_us: int = 5_000, slow_us: int = 20_000):
    """A histogram of `fast` latencies at `fast_us` and `slow` at `slow_us` (µs)."""
    histogram = new_histogram()
    if fast:
        histogram.record_value(fast_us, fast)
    if slow:
        histogram.record_value(slow_us, slow)
    return histogram


# (over, percentile, confidence) -> LoadGen's find_min_passing
LOADGEN_MIN_PASSING = {
    (0, 0.99, 0.99): 459, (1, 0.99, 0.99): 661, (2, 0.99, 0.99): 836, (5, 0.99, 0.99): 1302,
    (10, 0.99, 0.99): 2000,
    (0, 0.99, 0.95): 299, (1, 0.99, 0.95): 472, (10, 0.99, 0.95): 1683,
    (0, 0.90, 0.99): 44, (1, 0.90, 0.99): 63, (10, 0.90, 0.99): 187,
    (0, 0.999, 0.99): 4603, (1, 0.999, 0.99): 6635,
}


@pytest.mark.parametrize("over, percentile, confidence", sorted(LOADGEN_MIN_PASSING))
def test_min_passing_matches_loadgen(over, percentile, confidence):
    assert conf.min_passing(over, percentile, confidence) == LOADGEN_MIN_PASSING[(over, percentile, confidence)]
    assert conf.requests_to_pass(over, percentile, confidence) == LOADGEN_MIN_PASSING[
        (over, percentile, confidence)] + over


def test_the_defaults_are_p99_at_99_percent():
    assert conf.min_passing(0) == 459 and conf.min_passing(10) == 2000
    assert conf.requests_to_pass(0) == 459 and conf.requests_to_pass(1) == 662 and conf.requests_to_pass(10) == 2010


def test_none_over_needs_459_requests_by_hand():
    """With none over, a pass needs 0.99^N <= 0.01: N >= ln 0.01 / ln 0.99 = 458.2."""
    assert math.ceil(math.log(0.01) / math.log(0.99)) == 459
    assert 0.99 ** 458 > 0.01 >= 0.99 ** 459
    assert conf.odds(458, 0) > 0.01 >= conf.odds(459, 0)


def test_min_passing_is_the_smallest_that_passes():
    for over in (0, 1, 2, 5, 10):
        within = conf.min_passing(over)
        assert conf.odds(within, over) <= 0.01 < conf.odds(within - 1, over)


def test_most_over_allowed():
    assert conf.most_over_allowed(0) is None
    assert conf.most_over_allowed(458) is None
    assert conf.most_over_allowed(459) == 0
    assert conf.most_over_allowed(661) == 0  # 661 < 661 + 1
    assert conf.most_over_allowed(662) == 1
    assert conf.most_over_allowed(2009) == 9 and conf.most_over_allowed(2010) == 10
    assert conf.most_over_allowed(298, confidence=0.95) is None and conf.most_over_allowed(299, confidence=0.95) == 0


def test_confidently_over_by_hand():
    # P(X >= 1 | n=22, p=0.01) = 1 - 0.99^22 = 0.198: one slow request in 22 proves nothing.
    assert not conf.confidently_over(22, 1)
    # P(X >= 2) = 1 - 0.99^22 - 22 * 0.01 * 0.99^21 = 0.0203 > 0.01
    assert not conf.confidently_over(22, 2)
    # P(X >= 3) = 0.0203 - 231 * 0.01^2 * 0.99^20 = 0.0014 <= 0.01
    assert conf.confidently_over(22, 3)
    assert not conf.confidently_over(100, 0) and not conf.confidently_over(100, -1)
    assert conf.confidently_over(100, 30)
    assert not conf.confidently_over(10_000, 100)  # exactly 1% over: as likely under as over


def test_all_under_with_459_requests_passes_with_the_slowest_as_estimate():
    histogram = histogram_of([1_000 + i for i in range(458)] + [7_000])
    evidence = conf.judge(histogram, objective_ms=10)
    assert evidence.outcome == Outcome.PASS
    assert (evidence.requests, evidence.over, evidence.requests_to_pass) == (459, 0, 459)
    # 7000 µs lies in the bucket [7000, 7003] (4 µs wide from 4096 µs at 3 significant digits)
    assert evidence.estimate_ms == pytest.approx(7.003)
    assert evidence.confidence == 0.99 and evidence.objective_ms == 10
    assert "N=459, k=0 over 10 ms, p99 <= 7.003 ms at 99%" == evidence.describe()


def test_458_requests_all_under_are_inconclusive():
    evidence = conf.judge(histogram_of([1_000] * 458), objective_ms=10)
    assert evidence.outcome == Outcome.INCONCLUSIVE and evidence.estimate_ms is None
    assert evidence.requests_to_pass == 459
    assert evidence.describe().endswith("no p99 estimate at 99%; a pass needs N >= 459")


def test_a_p99_of_22_requests_is_their_maximum_and_says_nothing():
    evidence = conf.judge(latencies(21, 1), objective_ms=10)
    assert (evidence.requests, evidence.over) == (22, 1)
    assert evidence.outcome == Outcome.INCONCLUSIVE and evidence.estimate_ms is None
    assert evidence.requests_to_pass == 662
    assert evidence.over_share == pytest.approx(1 / 22)


def test_30_of_100_over_fails():
    evidence = conf.judge(latencies(70, 30), objective_ms=10)
    assert evidence.outcome == Outcome.FAIL and (evidence.requests, evidence.over) == (100, 30)


def test_one_over_in_662_passes_and_the_estimate_is_the_second_slowest():
    evidence = conf.judge(histogram_of([1_000] * 660 + [3_000, 20_000]), objective_ms=10)
    assert evidence.outcome == Outcome.PASS and evidence.over == 1
    assert evidence.estimate_ms == pytest.approx(3.001)  # [3000, 3001]: 2 µs wide from 2048 µs
    one_short = conf.judge(histogram_of([1_000] * 659 + [3_000, 20_000]), objective_ms=10)
    assert one_short.outcome == Outcome.INCONCLUSIVE and one_short.estimate_ms == pytest.approx(20.015)  # 16 µs wide


@pytest.mark.parametrize("requests, over", [
    (458, 0), (459, 0), (459, 1), (661, 1), (662, 1), (662, 2), (2009, 10), (2010, 10), (2010, 11),
    (22, 1), (100, 30), (5_000, 30), (5_000, 50), (5_000, 80), (30_000, 250),
])
def test_the_estimate_is_within_the_objective_exactly_when_it_passes(requests, over):
    evidence = conf.judge(latencies(requests - over, over), objective_ms=10)
    assert evidence.over == over
    within = evidence.estimate_ms is not None and evidence.estimate_ms <= 10
    assert within == (evidence.outcome == Outcome.PASS)
    assert (evidence.outcome == Outcome.PASS) == (requests >= conf.requests_to_pass(over))


def test_a_bucket_straddling_the_objective_counts_as_over():
    # At 3 significant digits, 8192-16383 µs are counted in buckets 8 µs wide: 10000 µs is in [10000, 10007].
    assert conf.over_count(histogram_of([10_000]), objective_ms=10.004) == 1  # under it, but its bucket is not
    assert conf.over_count(histogram_of([10_000]), objective_ms=10.007) == 0
    assert conf.over_count(histogram_of([9_999]), objective_ms=10) == 0  # [9992, 9999]
    assert conf.over_count(histogram_of([10_000]), objective_ms=10) == 1
    assert conf.over_count(histogram_of([1_000] * 5 + [10_000] * 3 + [50_000] * 2), objective_ms=10.004) == 5


def test_slowest_counts_from_the_slowest():
    histogram = histogram_of([1_000, 2_000, 2_000, 3_000])
    assert conf.slowest(histogram, 1) == pytest.approx(3.001)
    assert conf.slowest(histogram, 2) == conf.slowest(histogram, 3) == 2.0  # under 2048 µs, buckets are 1 µs
    assert conf.slowest(histogram, 4) == pytest.approx(1.0)


@pytest.mark.parametrize("call", [
    lambda: conf.min_passing(-1),
    lambda: conf.min_passing(0, percentile=0.0),
    lambda: conf.min_passing(0, percentile=1.0),
    lambda: conf.min_passing(0, confidence=0.0),
    lambda: conf.min_passing(0, confidence=1.0),
    lambda: conf.requests_to_pass(0, confidence=1.5),
    lambda: conf.most_over_allowed(1_000, percentile=1.0),
    lambda: conf.judge(latencies(500, 0), objective_ms=10, confidence=1.0),
    lambda: conf.slowest(histogram_of([1_000, 2_000]), 0),
    lambda: conf.slowest(new_histogram(), 1),
], ids=["negative over", "percentile 0", "percentile 1", "confidence 0", "confidence 1", "requests_to_pass",
        "most_over_allowed", "judge", "rank 0", "empty histogram"])
def test_bad_arguments_raise(call):
    with pytest.raises(ValueError):
        call()


def test_a_rank_past_the_count_raises():
    with pytest.raises(ValueError):
        conf.slowest(histogram_of([1_000, 2_000]), 3)

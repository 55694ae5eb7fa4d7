"""Verdicts on a latency percentile with stated confidence: MLPerf LoadGen's early-stopping rule.

A window of N requests, k of them slower than the objective L, may claim "p99 <= L" only when, were
the true share of requests over L exactly 1%, seeing k or fewer over L in N would be rarer than
1 - confidence (a one-sided binomial test). LoadGen's `find_min_passing(t, p, d, c)` gives the
fewest requests within L (h) that make t over L pass: N >= h + t. With none over, p99 and 99%
confidence that is 459 requests; a "p99" read from 22 requests is their maximum and says nothing.

- pass: N >= min_passing(k) + k; equivalently the early-stopping estimate of the true p99 (the
  (t+1)-th slowest request, t the most requests over L that N could carry and still pass) is <= L;
- fail: the data say with the same confidence that the true p99 is over L (seeing k or more over L
  in N would be rarer than 1 - confidence were the true share 1%);
- otherwise inconclusive: measure longer, never read it as a pass or a fail.

LoadGen's own SingleStream estimate takes the t-th slowest request (one further out); here the
estimate is the one whose "<= L" is exactly the Server scenario's pass rule.

k and the estimate come from the cell's HdrHistogram (whole µs, 3 significant digits): a bucket
counts as over L when its upper edge is, so k is never under-counted and the estimate is the
bucket's upper edge (at most 0.1% above the exact latency).

Pure functions: no clock, no I/O. Not for: a cell's other validity checks (`loadtest.judge.verdicts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from hdrh.histogram import HdrHistogram
from scipy.stats import binom

from loadtest.evidence.stats import recorded_buckets

DEFAULT_CONFIDENCE = 0.99  # MLPerf's
PERCENTILE = 0.99  # the objective is on p99


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"


def odds(within: int, over: int, percentile: float = PERCENTILE) -> float:
    """P(at most `over` of `within + over` requests are over L) were the true share over L 1 - percentile."""
    return float(binom.cdf(over, within + over, 1.0 - percentile))


@lru_cache(maxsize=4096)
def min_passing(over: int, percentile: float = PERCENTILE, confidence: float = DEFAULT_CONFIDENCE) -> int:
    """LoadGen's find_min_passing: the fewest requests within L that let `over` requests over L pass."""
    if over < 0 or not 0 < percentile < 1 or not 0 < confidence < 1:
        raise ValueError(f"bad arguments: over={over}, percentile={percentile}, confidence={confidence}")
    low = math.ceil(math.log(1 - confidence) / math.log(percentile))  # the answer for over = 0
    high = low
    while odds(high, over, percentile) > 1 - confidence:
        low, high = high, high * 2
    while low < high:  # the smallest `within` in [low, high] whose odds are <= 1 - confidence
        middle = (low + high) // 2
        if odds(middle, over, percentile) <= 1 - confidence:
            high = middle
        else:
            low = middle + 1
    return low


def requests_to_pass(over: int, percentile: float = PERCENTILE, confidence: float = DEFAULT_CONFIDENCE) -> int:
    """N that `over` requests over L need to pass: LoadGen's h + t."""
    return min_passing(over, percentile, confidence) + over


def most_over_allowed(requests: int, percentile: float = PERCENTILE,
                      confidence: float = DEFAULT_CONFIDENCE) -> int | None:
    """The most requests over L that `requests` in all can carry and still pass; None when even none can."""
    if requests < requests_to_pass(0, percentile, confidence):
        return None
    low, high = 0, requests  # requests_to_pass grows with `over`: the last one that fits
    while low < high:
        middle = (low + high + 1) // 2
        if requests_to_pass(middle, percentile, confidence) <= requests:
            low = middle
        else:
            high = middle - 1
    return low


def confidently_over(requests: int, over: int, percentile: float = PERCENTILE,
                     confidence: float = DEFAULT_CONFIDENCE) -> bool:
    """Whether `over` of `requests` over L says, at `confidence`, that the true percentile is over L."""
    if over <= 0:
        return False
    return float(binom.sf(over - 1, requests, 1.0 - percentile)) <= 1 - confidence


@dataclass(frozen=True)
class Evidence:
    """What one window (or several pooled at one rate) says about p99 <= objective."""

    requests: int  # N
    over: int  # k: requests slower than the objective
    objective_ms: float
    confidence: float
    estimate_ms: float | None  # early-stopping estimate of the true p99; None: too few requests for any
    outcome: Outcome
    requests_to_pass: int  # N that k over the objective need to pass (at the dispersion seen)
    dispersion: float = 1.0  # how clustered the slow requests were (`loadtest.judge.dispersion`): N / phi effective

    @property
    def over_share(self) -> float:
        return self.over / self.requests if self.requests else 0.0

    def describe(self) -> str:
        """`N=4210, k=12, p99 <= 8.412 ms at 99%` and, when inconclusive, what a pass needs; where the slow requests
        came in clusters, the effective N they stand for."""
        estimate = f"p99 <= {self.estimate_ms:.3f} ms" if self.estimate_ms is not None else "no p99 estimate"
        effective = (f" (effective {math.floor(self.requests / self.dispersion)}: slow ones clustered "
                     f"×{self.dispersion:.1f})") if self.dispersion > 1 else ""
        text = (f"N={self.requests}{effective}, k={self.over} over {self.objective_ms:g} ms, {estimate} "
                f"at {self.confidence:.0%}")
        if self.outcome == Outcome.INCONCLUSIVE:
            text += f"; a pass needs N >= {self.requests_to_pass}"
        return text


def over_count(histogram: HdrHistogram, objective_ms: float) -> int:
    """Requests whose latency bucket reaches past the objective (a bucket straddling it counts as over)."""
    limit_us = objective_ms * 1000.0
    return sum(count for value, count in recorded_buckets(histogram) if value > limit_us)


def slowest(histogram: HdrHistogram, rank: int) -> float:
    """The `rank`-th slowest latency (1 = the slowest), in ms: its bucket's upper edge."""
    if not 1 <= rank <= histogram.get_total_count():
        raise ValueError(f"rank {rank} outside a histogram of {histogram.get_total_count()} values")
    index = histogram.get_total_count() - rank  # 0-based from the fastest
    seen = 0
    for value, count in recorded_buckets(histogram):
        seen += count
        if seen > index:
            return value / 1000.0
    raise ValueError(f"rank {rank} outside a histogram of {histogram.get_total_count()} values")


def judge(histogram: HdrHistogram, objective_ms: float, confidence: float = DEFAULT_CONFIDENCE,
          percentile: float = PERCENTILE, dispersion: float = 1.0) -> Evidence:
    """The verdict of these latencies on `percentile <= objective_ms` at `confidence`. With the slow requests
    clustered (`dispersion` phi > 1, `loadtest.judge.dispersion`), the rule stands on N / phi requests with k / phi
    over it: rounded down for N, and for k up for a pass and down for a fail, so neither is made easier."""
    phi = max(1.0, dispersion)
    requests = histogram.get_total_count()
    over = over_count(histogram, objective_ms)
    effective = math.floor(requests / phi)
    allowed = most_over_allowed(effective, percentile, confidence)
    rank = min(requests, math.floor(allowed * phi) + 1) if allowed is not None else None
    estimate = slowest(histogram, rank) if rank is not None and rank >= 1 else None
    if allowed is not None and math.ceil(over / phi) <= allowed:
        outcome = Outcome.PASS
    elif confidently_over(effective, math.floor(over / phi), percentile, confidence):
        outcome = Outcome.FAIL
    else:
        outcome = Outcome.INCONCLUSIVE
    needed = math.ceil(requests_to_pass(math.ceil(over / phi), percentile, confidence) * phi)
    return Evidence(requests, over, objective_ms, confidence, estimate, outcome, needed, round(phi, 3))


def needed_requests(requests: int, over: int, confidence: float) -> int | None:
    """Requests in all that would likely settle an inconclusive rate were the share over the objective to
    stay as seen: enough for a pass below 0.8% over, for a fail above 1.25%; None in between (a rate at
    its knee: only the most requests allowed can settle it)."""
    share = over / requests if requests else 0.0
    allowed = 1 - PERCENTILE
    if share < 0.8 * allowed:
        total = requests_to_pass(over, confidence=confidence)
        for _ in range(20):  # more requests bring more over the objective, at the share seen
            more = requests_to_pass(max(over, math.ceil(share * total)), confidence=confidence)
            if more <= total:
                break
            total = more
        return total
    if share > 1.25 * allowed:
        total = max(requests, 1)
        while not confidently_over(total, math.ceil(share * total), confidence=confidence):
            total *= 2
        return total
    return None

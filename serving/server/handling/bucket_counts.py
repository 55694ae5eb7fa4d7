"""Histogram counts kept as plain lists, for the server's own collectors (request phases, GC pauses).

prometheus_client's Histogram scans its buckets in Python and takes two locks per observation; the
embedded server's own histograms keep a list of counts per bucket instead, bisect into it, and hand
prometheus_client's HistogramMetricFamily the cumulative buckets at scrape time. The request phases' histogram
(`serving.server.handling.metrics.PhaseHistograms`) bisects inline instead of calling `bucket_of`: nine calls
a request.

Not for: the metrics themselves (`serving.server.handling.metrics`, `serving.server.handling.gc_pauses`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from prometheus_client.utils import floatToGoString


def empty_counts(bounds: Sequence[float]) -> list[int]:
    """One count per bucket, the last for +Inf."""
    return [0] * (len(bounds) + 1)


def bucket_of(bounds: Sequence[float], value: float) -> int:
    """The index of the first bucket whose upper bound is at least `value` (+Inf's past the last)."""
    return bisect_left(bounds, value)


def cumulative_buckets(bounds: Sequence[float], counts: Sequence[int]) -> list[tuple[str, int]]:
    """(le, cumulative count) pairs, +Inf last, as HistogramMetricFamily.add_metric takes them."""
    limits = [floatToGoString(b) for b in bounds] + ["+Inf"]
    out, running = [], 0
    for limit, count in zip(limits, counts):
        running += count
        out.append((limit, running))
    return out


__all__ = ["bucket_of", "cumulative_buckets", "empty_counts"]

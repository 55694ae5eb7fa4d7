"""Pure statistics of a load test: latency histograms, their exact merge, and validity checks.

Latency lives in HdrHistogram (the `hdrhistogram` package) in whole microseconds with 3
significant digits, so percentiles keep µs precision where Locust's own statistics round to
milliseconds. Histograms travel between processes encoded (compressed, base64) and merge exactly:
a merged histogram equals one histogram of all the samples.

Every function here is pure (no clock, no I/O), so tests check them with hand-computed numbers.
Not for: collecting samples under load (`loadtest.load.collector`), arrival schedules
(`loadtest.load.arrivals`), server-side Prometheus figures (`loadtest.measure.scrape`), or talking to servers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from hdrh.histogram import HdrHistogram

from loadtest.evidence.vocab import Flag

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour: anything slower is clamped, not lost
SIGNIFICANT_DIGITS = 3
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}


def new_histogram() -> HdrHistogram:
    """An empty latency histogram in µs, 3 significant digits (the same layout everywhere)."""
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_us(histogram: HdrHistogram, latency_us: float) -> None:
    """Record one latency, rounded to whole µs and clamped into the histogram's range."""
    histogram.record_value(min(max(int(round(latency_us)), LOWEST_US), HIGHEST_US))


def histogram_of(values_us) -> HdrHistogram:
    histogram = new_histogram()
    for value in values_us:
        record_us(histogram, value)
    return histogram


def encode(histogram: HdrHistogram) -> str:
    """Compressed base64 text (HdrHistogram's standard encoding); "" for an empty histogram."""
    if histogram.get_total_count() == 0:
        return ""
    return histogram.encode().decode("ascii")


def decode(encoded: str) -> HdrHistogram:
    histogram = new_histogram()
    if encoded:
        histogram.decode_and_add(encoded.encode("ascii"))
    return histogram


def recorded_buckets(histogram: HdrHistogram) -> list[tuple[int, int]]:
    """(value, count) of every non-empty bucket in order, the value its bucket's highest equivalent value: what
    `get_recorded_iterator()` yields (`value_iterated_to`, `count_at_value_iterated_to`), without stepping
    through every empty bucket in Python (a report judges hundreds of histograms at several objectives)."""
    length = min(histogram.counts_len, histogram.encoder.payload.counts_len)
    counts = np.ctypeslib.as_array(histogram.counts)[:length]
    nonzero = np.flatnonzero(counts)
    values = _bucket_values(histogram.lowest_trackable_value, histogram.highest_trackable_value,
                            histogram.significant_figures)[nonzero]
    return list(zip(values.tolist(), counts[nonzero].tolist(), strict=True))


@functools.cache
def _bucket_values(lowest: int, highest: int, digits: int) -> np.ndarray:
    """Each bucket index's highest equivalent value for one histogram layout, from the library's own arithmetic, once
    a layout (the per-bucket calls took a third of a report's time)."""
    layout = HdrHistogram(lowest, highest, digits)
    return np.array([layout.get_highest_equivalent_value(layout.get_value_from_index(i))
                     for i in range(layout.counts_len)], dtype=np.int64)


def merge_encoded(encoded_histograms) -> HdrHistogram:
    """One histogram holding every sample of the given encoded histograms (exact: counts add)."""
    merged = new_histogram()
    for encoded in encoded_histograms:
        if encoded:
            merged.decode_and_add(encoded.encode("ascii"))
    return merged


def same_counts(a: HdrHistogram, b: HdrHistogram) -> bool:
    """True when two histograms hold the same count in every bucket."""
    if a.get_total_count() != b.get_total_count():
        return False
    return list(a.counts) == list(b.counts)


@dataclass(frozen=True)
class LatencySummary:
    """Latency of a run in ms with µs precision; every field None when nothing was measured."""

    count: int
    min_ms: float | None
    mean_ms: float | None
    p50_ms: float | None
    p90_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    max_ms: float | None


def summarise(histogram: HdrHistogram, exact_min_us=None, exact_max_us=None, exact_sum_us=None) -> LatencySummary:
    """Percentiles from the histogram; min, max and mean exact when the caller tracked them.

    The histogram reports a bucket's edge for min, max and percentiles (up to 0.1% off); the
    collector keeps the exact extremes and sum, so those are used, and bound the percentiles.
    """
    count = histogram.get_total_count()
    if count == 0:
        return LatencySummary(0, *([None] * 8))
    lo = exact_min_us if exact_min_us is not None else histogram.get_min_value()
    hi = exact_max_us if exact_max_us is not None else histogram.get_max_value()
    # A percentile is its bucket's top edge, which can pass the exact extremes: keep it inside them.
    pct = {name: _ms(min(max(histogram.get_value_at_percentile(p), lo), hi)) for name, p in PERCENTILES.items()}
    mean = exact_sum_us / count if exact_sum_us is not None else histogram.get_mean_value()
    return LatencySummary(count, _ms(lo), _ms(mean), pct["p50"], pct["p90"], pct["p95"], pct["p99"],
                          pct["p999"], _ms(hi))


def _ms(value_us: float) -> float:
    return round(value_us / 1000.0, 3)


def window_counts_to_rps(counts_by_window: dict, window_s: float, windows: int) -> list[float]:
    """Throughput of each of `windows` consecutive windows, from completions counted per window index.

    Keys are window indexes as strings (they cross Locust's message encoding as map keys).
    """
    return [counts_by_window.get(str(index), 0) / window_s for index in range(windows)]


def window_means_ms(sums_by_window: dict, counts_by_window: dict, windows: int) -> list[float | None]:
    """Mean latency (ms) of each of `windows` consecutive windows from summed µs and counts per window index
    (string keys, as `window_counts_to_rps`); None for a window with no call."""
    means: list[float | None] = []
    for index in range(windows):
        count = counts_by_window.get(str(index), 0)
        means.append(_ms(sums_by_window.get(str(index), 0.0) / count) if count else None)
    return means


def max_schedule_gap(window_rps: list[float], window_scheduled_rps: list[float], window_s: float = 1.0) -> float:
    """Largest relative gap between a window's completions and the sends its schedule made in it (0.1 =
    10%, relative to the larger of the two), skipping gaps within Poisson counting noise: 3 standard
    deviations of a count of that size, 3 * sqrt(n).

    An open loop's schedule fluctuates by itself (and a fixed seed repeats the same fluctuation in every
    cell): a server that keeps up completes what was sent, whatever the schedule did, so completions are
    compared with the sends of the same window, never with the neighbouring window's.
    """
    worst = 0.0
    for done, sent in zip(window_rps, window_scheduled_rps):
        top = max(done, sent)
        if top <= 0 or abs(done - sent) * window_s <= 3.0 * math.sqrt(top * window_s):
            continue
        worst = max(worst, abs(done - sent) / top)
    return worst


def max_consecutive_change(window_rps: list[float], window_s: float = 1.0, poisson: bool = False) -> float:
    """Largest relative change between consecutive windows (0.1 = 10%), relative to the larger one.

    With Poisson arrivals the count in a window varies by itself (standard deviation sqrt(n)):
    then a pair whose counts differ by no more than 3 standard deviations of the difference,
    3 * sqrt(a + b), is counting noise, not instability, and is skipped.
    """
    worst = 0.0
    for before, after in zip(window_rps, window_rps[1:]):
        top = max(before, after)
        if top <= 0:
            continue
        if poisson and abs(after - before) * window_s <= 3.0 * math.sqrt((before + after) * window_s):
            continue
        worst = max(worst, abs(after - before) / top)
    return worst


def fraction(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def cpu_percent(cpu_seconds: float, wall_seconds: float) -> float:
    """CPU use in percent of one core (200 = two cores busy) over a wall-clock span."""
    return 100.0 * cpu_seconds / wall_seconds if wall_seconds > 0 else 0.0


# Validity thresholds: fixed rules, not tuned per run.
SATURATED_CPU_SHARE = 0.90  # of a core per load generator process, or of all its cores together
LATE_SEND_LIMIT = 0.01
LATE_SEND_MIN_COUNT = 5  # fewer late sends are scheduler hiccups, not a saturated client (short cells send few)
UNSTABLE_CHANGE = 0.10


def lag_percentile(sends: int) -> tuple[str, str]:
    """Which dispatch-lag percentile the saturation rule reads, as (label, LatencySummary field): the p99,
    or in a cell too short for 5 sends to lie above its p99 the highest percentile that has them (p95 from
    100 sends, p90 from 50, else the median): a few scheduler hiccups do not flag a short cell, as with
    late sends (`LATE_SEND_MIN_COUNT`)."""
    for label, share in (("p99", 0.01), ("p95", 0.05), ("p90", 0.10)):
        if sends * share >= LATE_SEND_MIN_COUNT:
            return label, f"{label}_ms"
    return "p50", "p50_ms"


def unstable_reason(window_rps: list[float], window_s: float, poisson: bool,
                    window_scheduled_rps: list[float] | None = None) -> str:
    """Why the windows' throughput was unstable, or "" (see `validity_flags`)."""
    if window_scheduled_rps:
        gap = max_schedule_gap(window_rps, window_scheduled_rps, window_s)
        if gap > UNSTABLE_CHANGE:
            return (f"a window's completions and the sends scheduled in it differed by {gap:.0%} "
                    f"(limit {UNSTABLE_CHANGE:.0%}, beyond counting noise)")
        return ""
    change = max_consecutive_change(window_rps, window_s, poisson)
    if change > UNSTABLE_CHANGE:
        return f"throughput of consecutive windows changed by {change:.0%} (limit {UNSTABLE_CHANGE:.0%})"
    return ""


def validity_flags(*, errors: int, requests: int, errors_by_code: dict, late_sends: int,
                   process_cpu_percents: list[float], total_cpu_percent: float, cores: int,
                   window_rps: list[float], pool_waits: int = 0, window_s: float = 1.0,
                   poisson: bool = False, dispatch_lag_us: float | None = None,
                   dispatch_lag_limit_us: float = 0.0, dispatch_lag_percentile: str = "p99",
                   window_scheduled_rps: list[float] | None = None) -> list[tuple[Flag, str]]:
    """(flag, reason) pairs for a measured cell; an empty list means the cell is valid.

    Saturated: the load generator, not the server, may be the bottleneck (a process near one
    core, since Python runs one core per process, or all cores near full, or > 1% late sends and at
    least 5 of them; late sends that waited for an in-flight slot point at a stalled server filling
    the pool; or an open loop's dispatch lag above its limit at `dispatch_lag_percentile`, p99 where at
least 5 sends lie above it (`lag_percentile`): the client did not keep its schedule).
    Unstable: an open loop whose sends per window were recorded (`window_scheduled_rps`): some window's
    completions fell short of, or ran ahead of, the sends scheduled in it by more than 10% and beyond
    counting noise (`max_schedule_gap`); otherwise (a closed loop, or a record made before the schedule
    was counted) consecutive measurement windows differ by more than 10% in throughput (beyond counting
    noise when arrivals are Poisson).
    """
    flags: list[tuple[Flag, str]] = []
    if errors:
        codes = ", ".join(f"{code}={n}" for code, n in sorted(errors_by_code.items()))
        flags.append((Flag.ERRORS, f"{errors} of {requests} requests failed ({codes})"))
    busiest = max(process_cpu_percents, default=0.0)
    if busiest >= 100.0 * SATURATED_CPU_SHARE:
        flags.append((Flag.SATURATED, f"a load generator process used {busiest:.0f}% of a core"))
    elif cores and total_cpu_percent >= 100.0 * cores * SATURATED_CPU_SHARE:
        flags.append((Flag.SATURATED, f"load generator used {total_cpu_percent:.0f}% of {cores} cores"))
    late_fraction = fraction(late_sends, requests)
    if late_fraction > LATE_SEND_LIMIT and late_sends >= LATE_SEND_MIN_COUNT:
        cause = f"; {pool_waits} waited for a free in-flight slot" if pool_waits else ""
        flags.append((Flag.SATURATED, f"{late_fraction:.1%} of sends left late (limit {LATE_SEND_LIMIT:.0%}){cause}"))
    if dispatch_lag_us is not None and 0 < dispatch_lag_limit_us < dispatch_lag_us:
        flags.append((Flag.SATURATED, f"dispatch lag {dispatch_lag_percentile} {dispatch_lag_us:.0f} µs > "
                                      f"{dispatch_lag_limit_us:.0f} "
                                      "µs: the load generator did not send on time"))
    unstable = unstable_reason(window_rps, window_s, poisson, window_scheduled_rps)
    if unstable:
        flags.append((Flag.UNSTABLE, unstable))
    if requests == 0:
        flags.append((Flag.ERRORS, "no request completed in the measurement window"))
    return flags

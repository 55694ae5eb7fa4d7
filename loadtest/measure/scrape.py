"""Server-side figures for a cell, from the server's Prometheus page scraped before and after it.

Both TF Serving and the embedded server export TF Serving's metric names (`/` turned into `:`),
so one scraper serves both: batch sizes the server actually processed
(`...batching_session:processed_batch_size`), time requests spent queued for a batch
(`...batching_session:queuing_latency`, µs), and the request count and latency the server saw.
The embedded server also exports where each request's time went (`...embedded:request_phase_latency`,
one histogram per phase, kept apart here) and its device floor (gauges per padded batch size); TF
Serving exports neither. A server without metrics (or with batching off) simply yields None/empty figures.

The Prometheus arithmetic (bucket deltas, means between two scrapes) is here too: it is about
server-side counters, not the client's latency statistics.

Not for: client-side statistics (see `loadtest.evidence.stats`).
"""

from __future__ import annotations

import math
import urllib.request
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from loadtest.evidence.cell_parts import ServerScrape
from serving.protocol.names import DEVICE_FLOOR_IMAGES_SUFFIX as FLOOR_IMAGES
from serving.protocol.names import DEVICE_FLOOR_LATENCY_SUFFIX as FLOOR_LATENCY
from serving.protocol.names import DEVICE_ROUND_TRIP_SUFFIX as ROUND_TRIP
from serving.protocol.names import GC_PAUSE_SUFFIX as GC_PAUSE
from serving.protocol.names import METRICS_PATH
from serving.protocol.names import PROCESSED_BATCH_SIZE_SUFFIX as PROCESSED_BATCH_SIZE
from serving.protocol.names import QUEUING_LATENCY_SUFFIX as QUEUING_LATENCY
from serving.protocol.names import REQUEST_COUNT_SUFFIX as REQUEST_COUNT
from serving.protocol.names import REQUEST_LATENCY_SUFFIX as REQUEST_LATENCY
from serving.protocol.names import REQUEST_PHASE_LATENCY_SUFFIX as PHASE_LATENCY
from serving.protocol.names import SERVER_INFO_SUFFIX as SERVER_INFO


@dataclass(frozen=True)
class HistogramSnapshot:
    buckets: dict = field(default_factory=dict)  # upper bound -> cumulative count, all label sets summed
    sum: float = 0.0
    count: float = 0.0


@dataclass(frozen=True)
class Snapshot:
    """The figures of one scrape that a cell needs; None when the server could not be scraped."""

    histograms: dict  # metric suffix -> HistogramSnapshot
    counters: dict  # metric suffix -> {label text: value} (counters and gauges)
    info: dict  # labels of the embedded server's info gauge, {} for TF Serving
    phases: dict = field(default_factory=dict)  # phase -> HistogramSnapshot; {} when not exported


KNOWN = (PROCESSED_BATCH_SIZE, QUEUING_LATENCY, REQUEST_LATENCY, REQUEST_COUNT, SERVER_INFO, PHASE_LATENCY,
         FLOOR_LATENCY, FLOOR_IMAGES, ROUND_TRIP, GC_PAUSE)


def parse(text: str) -> Snapshot:
    """Pick the known metrics out of a Prometheus text page (any name prefix, labels summed, but the
    request phases kept apart by their `phase` label)."""
    histograms, counters, info, phases = {}, {}, {}, {}
    for family in text_string_to_metric_families(text):
        suffix = _known_suffix(family.name)
        if suffix is None:
            continue
        if suffix == PHASE_LATENCY:
            phases = _by_phase(family)
        elif family.type == "histogram":
            histograms[suffix] = _histogram(family)
        elif suffix == SERVER_INFO:
            info = dict(family.samples[0].labels) if family.samples else {}
        else:
            counters[suffix] = {_label_text(s.labels): s.value for s in family.samples}
    return Snapshot(histograms, counters, info, phases)


def _known_suffix(name: str) -> str | None:
    for suffix in KNOWN:
        if name.endswith(suffix):
            return suffix
    return None


def _by_phase(family) -> dict[str, HistogramSnapshot]:
    """One histogram per value of the `phase` label (other labels summed)."""
    names = sorted({s.labels.get("phase", "") for s in family.samples} - {""})
    return {name: _histogram(family, [s for s in family.samples if s.labels.get("phase") == name])
            for name in names}


def _histogram(family, samples=None) -> HistogramSnapshot:
    buckets: dict[float, float] = {}
    total, count = 0.0, 0.0
    for sample in family.samples if samples is None else samples:
        if sample.name.endswith("_bucket"):
            bound = float(sample.labels["le"])
            buckets[bound] = buckets.get(bound, 0.0) + sample.value
        elif sample.name.endswith("_sum"):
            total += sample.value
        elif sample.name.endswith("_count"):
            count += sample.value
    return HistogramSnapshot(buckets, total, count)


def _label_text(labels: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def scrape(rest_url: str, timeout_s: float = 3.0) -> Snapshot | None:
    """One scrape of `<rest_url>/monitoring/prometheus/metrics`; None if the server has none."""
    if not rest_url:
        return None
    try:
        with urllib.request.urlopen(rest_url.rstrip("/") + METRICS_PATH, timeout=timeout_s) as response:
            return parse(response.read().decode())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class ServerFigures:
    batch_size_mean: float | None
    batch_sizes: dict  # bucket upper bound (as text) -> batches processed in the cell
    queue_delay_mean_us: float | None
    scrape: ServerScrape  # request count and mean latency as the server saw them, its info


def cell_figures(before: Snapshot | None, after: Snapshot | None) -> ServerFigures:
    """What happened on the server between two scrapes (None/empty when not exposed)."""
    if before is None or after is None:
        return ServerFigures(None, {}, None, ServerScrape(scraped=False))
    sizes = _delta(before, after, PROCESSED_BATCH_SIZE)
    queue = _delta(before, after, QUEUING_LATENCY)
    latency = _delta(before, after, REQUEST_LATENCY)
    buckets = {}
    if sizes is not None:
        old = before.histograms.get(PROCESSED_BATCH_SIZE, HistogramSnapshot())
        deltas = histogram_bucket_deltas(old.buckets, after.histograms[PROCESSED_BATCH_SIZE].buckets)
        buckets = {_bound_text(bound): count for bound, count in deltas.items()}
    requests = {key: value - before.counters.get(REQUEST_COUNT, {}).get(key, 0.0)
                for key, value in after.counters.get(REQUEST_COUNT, {}).items()}
    said = ServerScrape(True, {k: v for k, v in requests.items() if v}, latency, after.info)
    return ServerFigures(sizes, buckets, queue, said)


def _delta(before: Snapshot, after: Snapshot, suffix: str) -> float | None:
    if suffix not in after.histograms:
        return None
    old = before.histograms.get(suffix, HistogramSnapshot())
    new = after.histograms[suffix]
    return mean_from_sums(old.sum, new.sum, old.count, new.count)


def _bound_text(bound: float) -> str:
    if math.isinf(bound):
        return "+Inf"
    return str(int(bound)) if bound == int(bound) else str(bound)


def histogram_bucket_deltas(before: dict, after: dict) -> dict:
    """Per-bucket counts during an interval from two cumulative Prometheus histograms.

    `before`/`after` map a bucket's upper bound (float, inf last) to its cumulative count.
    Returns upper bound -> count of observations that fell in that bucket during the interval.
    """
    deltas: dict[float, float] = {}
    below = 0.0
    for bound in sorted(after):
        cumulative = after[bound] - before.get(bound, 0.0)
        count = cumulative - below
        below = cumulative
        if count > 0:
            deltas[bound] = count
    return deltas


def bucket_quantile(deltas: dict, q: float, min_count: float) -> float | None:
    """The upper bound of the bucket holding quantile `q` of an interval's observations (`deltas`: upper
    bound -> count, as `histogram_bucket_deltas` gives them): an upper estimate, as coarse as the buckets.
    None with fewer than `min_count` observations, or when the quantile falls in the +Inf bucket."""
    total = sum(deltas.values())
    if total <= 0 or total < min_count:
        return None
    below = 0.0
    for bound in sorted(deltas):
        below += deltas[bound]
        if below >= q * total - 1e-9:
            return None if math.isinf(bound) else bound
    return None


def mean_from_sums(sum_before: float, sum_after: float, count_before: float, count_after: float) -> float | None:
    """Mean of the observations made between two scrapes of a Prometheus histogram or summary."""
    count = count_after - count_before
    if count <= 0:
        return None
    return (sum_after - sum_before) / count

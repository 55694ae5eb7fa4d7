"""Where a cell's requests spent their time inside the server, from two scrapes of its metrics page.

The embedded server times each request's phases (`serving.protocol.names.REQUEST_PHASES`: decode,
validate, queue, assemble, compute_input, compute_infer, compute_output, deliver, encode), which sum
to its request latency. Per phase and for the request as a whole, over the window between the two
scrapes: the mean, a p99 read from the histogram's buckets (an upper estimate; None with fewer than
`MIN_P99_COUNT` observations) and the count. A TF Serving container exports only its request latency
and, with batching on, its batching queue's latency: the record carries those, with the phases it
does not export named in a note.

Not for: scraping or bucket arithmetic (`loadtest.measure.scrape`) or presenting the split
(`loadtest.report.sections.request_time`).
"""

from __future__ import annotations

from loadtest.evidence.cell_parts import GcPauses, PhaseWindow, ServerLatency, ServerPhases
from loadtest.measure.scrape import (
    HistogramSnapshot,
    Snapshot,
    bucket_quantile,
    histogram_bucket_deltas,
    mean_from_sums,
)
from serving.endpoint import ServerKind
from serving.protocol.names import GC_PAUSE_SUFFIX as GC_PAUSE
from serving.protocol.names import QUEUING_LATENCY_SUFFIX as QUEUING_LATENCY
from serving.protocol.names import REQUEST_LATENCY_SUFFIX as REQUEST_LATENCY
from serving.protocol.names import REQUEST_PHASES

MIN_P99_COUNT = 100  # fewer observations than this: their p99 is their maximum, not a percentile


def window(old: HistogramSnapshot, new: HistogramSnapshot) -> PhaseWindow:
    """The mean, p99 and count of the observations between two scrapes of one histogram."""
    count = new.count - old.count
    deltas = histogram_bucket_deltas(old.buckets, new.buckets)
    return PhaseWindow(mean_from_sums(old.sum, new.sum, old.count, new.count),
                       bucket_quantile(deltas, 0.99, MIN_P99_COUNT), max(count, 0.0))


def _window_of(before: dict, after: dict, name: str) -> PhaseWindow | None:
    if name not in after:
        return None
    return window(before.get(name, HistogramSnapshot()), after[name])


def not_exported_note(kind: str, missing: list[str]) -> str:
    """`not exported by TF Serving: decode, validate, ...` (or by this server, for an older embedded one)."""
    who = "TF Serving" if kind == ServerKind.CONTAINER else "this server"
    return f"not exported by {who}: {', '.join(missing)}"


def server_phases(before: Snapshot | None, after: Snapshot | None, kind: str) -> ServerPhases | None:
    """The record's `server_phases` for one cell: None (written {}) when the server could not be scraped.

    The request latency (None where not exported), the phases' windows in `REQUEST_PHASES` order, the phases
    not exported with a note naming them, and `gc_pauses`: the server process's garbage collections in the window
    (the embedded server's `gc_pause`; None where not exported), `max_us` the upper bound of the slowest one's bucket.
    """
    if before is None or after is None:
        return None
    request = _window_of(before.histograms, after.histograms, REQUEST_LATENCY)
    if after.phases:
        phases = {p: _window_of(before.phases, after.phases, p) for p in REQUEST_PHASES}
        found = {p: w for p, w in phases.items() if w is not None}
        source = "the embedded server's request_phase_latency"
    else:  # TF Serving: its batching queue is the one phase it times
        queue = _window_of(before.histograms, after.histograms, QUEUING_LATENCY)
        found = {"queue": queue} if queue is not None else {}
        source = "the server's request_latency" + (" and its batching queue's queuing_latency" if found else "")
    missing = [p for p in REQUEST_PHASES if p not in found]
    return ServerPhases(source, request, found, tuple(missing), not_exported_note(kind, missing) if missing else "",
                        gc_window(before.histograms.get(GC_PAUSE, HistogramSnapshot()), after.histograms.get(GC_PAUSE)))


def gc_window(old: HistogramSnapshot, new: HistogramSnapshot | None) -> GcPauses | None:
    """The window's garbage-collection pauses: `window()` plus `max_us`, the slowest one's bucket bound
    (None when it fell in +Inf); None when the server does not export them."""
    if new is None:
        return None
    deltas = histogram_bucket_deltas(old.buckets, new.buckets)
    slowest = max(deltas, default=None)
    seen = window(old, new)
    return GcPauses(seen.mean_us, seen.p99_us, seen.count,
                    None if slowest is None or slowest == float("inf") else slowest)


# Fewer observations than this in a window, and the percentile is not read from the buckets (None).
PERCENTILE_MIN_COUNTS = {"p50_us": (0.50, 1), "p90_us": (0.90, 10), "p99_us": (0.99, MIN_P99_COUNT),
                         "p999_us": (0.999, 10 * MIN_P99_COUNT)}


def server_latency(before: Snapshot | None, after: Snapshot | None) -> ServerLatency | None:
    """The record's `server_latency`: the server's own request latency over the cell, from its
    `request_latency` histogram (the embedded server and TF Serving both export it), as
    `{"source", "count", "p50_us", "p90_us", "p99_us", "p999_us", "buckets": [[upper_us, count], ...]}`.
    Percentiles are bucket upper bounds (as coarse as the buckets: 80% apart for this metric); the
    buckets are the window's own counts, every bucket in ascending order, +Inf written as None, so the share over any
    objective can be counted later. None when the server could not be scraped or exports no such histogram."""
    if before is None or after is None or REQUEST_LATENCY not in after.histograms:
        return None
    old, new = before.histograms.get(REQUEST_LATENCY, HistogramSnapshot()), after.histograms[REQUEST_LATENCY]
    deltas = histogram_bucket_deltas(old.buckets, new.buckets)
    percentiles = {name: bucket_quantile(deltas, q, least) for name, (q, least) in PERCENTILE_MIN_COUNTS.items()}
    # Every bucket, empty ones too: a bucket's lower bound is the one before it.
    buckets = tuple((None if bound == float("inf") else bound, deltas.get(bound, 0.0)) for bound in sorted(new.buckets))
    return ServerLatency("the server's request_latency histogram", max(new.count - old.count, 0.0), **percentiles,
                         buckets=buckets)

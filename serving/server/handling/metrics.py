"""Prometheus metrics under TF Serving's own names, so one scraper works against either server.

TF Serving exports its monitoring metrics with '/' turned into ':' (PrometheusExporter), e.g.
`:tensorflow:serving:request_count{model_name,status}` (a counter with no `_total` suffix),
`:tensorflow:serving:request_latency{model_name,API,entrypoint}` (histogram, microseconds) and
`:tensorflow:serving:batching_session:processed_batch_size` (histogram). The buckets follow
TF Serving's `Buckets::Exponential(scale, growth, count)` for each metric. One extra gauge,
`:tensorflow:serving:embedded:server_info`, carries the device, its name and the model runtime as labels (TF
Serving has no such metric; it lets results tell CPU and GPU servers apart). The embedded server's own
explanations sit beside them: per-request phase histograms (`REQUEST_PHASE_LATENCY`) and the device
floor measured at start (`DEVICE_FLOOR_*`, `DEVICE_ROUND_TRIP`; names in `serving.protocol.names`).

What one request records starts here too: a `PhaseClock` starts when a Predict arrives and is one chain of
`time.perf_counter()` stamps; each step ends with `lap(phase)`, which adds the time since the previous stamp
to that phase, so the phases of a request sum to `total_s()` (the latency recorded in `request_latency`) up
to float rounding. Model time comes from the backend's own split (`Computed`); with batching, from the
batch's shared stamps (`BatchTiming`): each request in a batch sees the batch's assemble and compute times,
and its own queue and deliver times. The phase indices below follow `serving.protocol.names.REQUEST_PHASES`.

Not for: load-test statistics (loadtest computes its own from client-side records) or the GC pauses'
collector (`serving.server.handling.gc_pauses`).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import prometheus_client
from prometheus_client.core import HistogramMetricFamily

from serving.endpoint import ServerKind
from serving.protocol.names import (
    DEVICE_FLOOR_IMAGES,
    DEVICE_FLOOR_LATENCY,
    DEVICE_ROUND_TRIP,
    INPUT_BATCH_SIZE,
    PADDING_SIZE,
    PROCESSED_BATCH_SIZE,
    QUEUING_LATENCY,
    REQUEST_COUNT,
    REQUEST_LATENCY,
    REQUEST_PHASE_LATENCY,
    REQUEST_PHASES,
    RUNTIME_LATENCY,
    SERVER_INFO,
    WRAPPED_RUN_COUNT,
)
from serving.server.handling.bucket_counts import cumulative_buckets, empty_counts
from serving.server.handling.gc_pauses import GcPauses
from serving.server.runtimes import DEFAULT_BACKEND, Runtime, runtime_of
from serving.server.runtimes.model_spec import Computed

DECODE, VALIDATE, QUEUE, ASSEMBLE, COMPUTE_INPUT, COMPUTE_INFER, COMPUTE_OUTPUT, DELIVER, ENCODE, HANDOFF = range(10)
assert REQUEST_PHASES[COMPUTE_INFER] == "compute_infer" and REQUEST_PHASES[HANDOFF] == "handoff"


class BatchTiming(NamedTuple):
    """The stamps one batch shares with every request in it (perf_counter seconds)."""

    started: float  # taken off the queue
    assembled: float  # merged and padded; the model call starts
    input_s: float
    infer_s: float
    computed: float  # the model call returned


class PhaseClock:
    """One request's stamps: `durations[i]` is the seconds spent in REQUEST_PHASES[i]."""

    __slots__ = ("started", "last", "durations")

    def __init__(self) -> None:
        self.started = self.last = time.perf_counter()
        self.durations = [0.0] * len(REQUEST_PHASES)

    def lap(self, phase: int) -> float:
        """End the current step: the time since the last stamp goes to `phase`; returns the new stamp."""
        now = time.perf_counter()
        self.durations[phase] += now - self.last
        self.last = now
        return now

    def computed(self, computed: Computed) -> None:
        """End an unbatched model call: the backend's input and inference split, the rest is output."""
        now = time.perf_counter()
        d = self.durations
        d[COMPUTE_INPUT] += computed.input_s
        d[COMPUTE_INFER] += computed.infer_s
        d[COMPUTE_OUTPUT] += (now - self.last) - computed.input_s - computed.infer_s
        self.last = now

    def batched(self, timing: BatchTiming) -> None:
        """End a wait for a batch: queued until it started, its shared phases, then delivery up to now."""
        now = time.perf_counter()
        d = self.durations
        d[QUEUE] += timing.started - self.last
        d[ASSEMBLE] += timing.assembled - timing.started
        d[COMPUTE_INPUT] += timing.input_s
        d[COMPUTE_INFER] += timing.infer_s
        d[COMPUTE_OUTPUT] += (timing.computed - timing.assembled) - timing.input_s - timing.infer_s
        d[DELIVER] += now - timing.computed
        self.last = now

    def remote(self, durations_s: list[float] | tuple[float, ...]) -> None:
        """End a call run in another process (serving.pool's owner): its own phases as it timed them, and the
        rest of the time since the last stamp as the hand-off there and back."""
        now = time.perf_counter()
        d = self.durations
        for i, seconds in enumerate(durations_s):
            d[i] += seconds
        d[HANDOFF] += max(0.0, (now - self.last) - sum(durations_s))
        self.last = now

    def total_s(self) -> float:
        """Seconds from the first stamp to the last: the sum of the phases."""
        return self.last - self.started


@dataclass(frozen=True)
class BatchStats:
    """What one processed batch looked like, for the batching metrics."""

    input_sizes: tuple[int, ...]  # rows of each task slice
    processed_size: int  # rows after padding
    padding: int
    queueing_delays_s: tuple[float, ...]  # per slice: enqueue -> processing start


prometheus_client.disable_created_metrics()

CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST


def exponential_buckets(scale: float, growth: float, count: int) -> list[float]:
    """TF's Buckets::Exponential limits (the last, +Inf, is added by prometheus_client)."""
    return [scale * growth**i for i in range(count)]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _label_text(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


class _Counters:
    """Counters written as TF Serving writes them: `# TYPE name counter`, samples named `name` (no `_total`).

    prometheus_client always appends `_total` to counters, which would break a scraper written for TF
    Serving, so these few lines of exposition are produced here.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[tuple[str, ...], int]] = {}
        self._meta: dict[str, tuple[str, tuple[str, ...]]] = {}

    def declare(self, name: str, documentation: str, labels: tuple[str, ...]) -> None:
        self._meta[name] = (documentation, labels)
        self._values[name] = {}

    def inc(self, name: str, label_values: tuple[str, ...], amount: int = 1) -> None:
        with self._lock:
            cells = self._values[name]
            cells[label_values] = cells.get(label_values, 0) + amount

    def exposition(self) -> str:
        with self._lock:
            snapshot = {name: dict(cells) for name, cells in self._values.items()}
        lines = []
        for name, cells in snapshot.items():
            documentation, labels = self._meta[name]
            lines += [f"# HELP {name} {documentation}", f"# TYPE {name} counter"]
            lines += [f"{name}{_label_text(dict(zip(labels, values)))} {count}"
                      for values, count in sorted(cells.items())]
        return "\n".join(lines) + "\n"


def _child(cache: dict, metric, labels: tuple[str, ...]):
    """The metric's child for these label values, looked up once (`labels()` costs ~3 us a call)."""
    child = cache.get(labels)
    if child is None:
        child = cache[labels] = metric.labels(*labels)
    return child


# Phase buckets (us): 1 us to ~45 s, 25% apart, so a p99 read from them is within ~12% of the true one.
PHASE_BUCKETS_US = exponential_buckets(1, 1.25, 80)


class PhaseHistograms:
    """REQUEST_PHASE_LATENCY{model_name, API, phase}: all nine phases of a request recorded under one lock.

    prometheus_client's Histogram takes two locks and scans its buckets in Python per observation
    (~2.5 us each here with 80 buckets, ~20 us for nine); this bisects plain counts instead
    (~3 us per request) and leaves the exposition format to prometheus_client's HistogramMetricFamily.
    """

    def __init__(self, bounds_us: Sequence[float] = PHASE_BUCKETS_US) -> None:
        self._bounds = list(bounds_us)
        self._lock = threading.Lock()
        self._cells: dict[tuple[str, str], tuple[list[list[int]], list[float]]] = {}

    def observe(self, model_name: str, api: str, durations_s: Sequence[float]) -> None:
        """One OK request's phase durations (seconds, in REQUEST_PHASES order)."""
        cell = self._cells.get((model_name, api))
        if cell is None:
            cell = self._cells.setdefault((model_name, api), ([empty_counts(self._bounds) for _ in REQUEST_PHASES],
                                                              [0.0] * len(REQUEST_PHASES)))
        counts, sums = cell
        bounds = self._bounds
        with self._lock:
            for i, seconds in enumerate(durations_s):
                us = seconds * 1e6
                counts[i][bisect_left(bounds, us)] += 1  # bucket_of, inlined: nine calls a request
                sums[i] += us

    def collect(self) -> Iterator[HistogramMetricFamily]:
        with self._lock:  # copy only; formatting happens after the lock is released
            snapshot = {key: ([list(c) for c in counts], list(sums)) for key, (counts, sums) in self._cells.items()}
        family = HistogramMetricFamily(
            REQUEST_PHASE_LATENCY, "Wall time (in microseconds) of each phase of an OK Predict request in the "
            "embedded server; a request's phases sum to its request_latency.", labels=["model_name", "API", "phase"])
        for (model_name, api), (counts, sums) in sorted(snapshot.items()):
            for phase, phase_counts, total in zip(REQUEST_PHASES, counts, sums):
                family.add_metric([model_name, api, phase], cumulative_buckets(self._bounds, phase_counts), total)
        yield family


class ServerMetrics:
    """All metrics one server exports, in their own registry (tests may build several)."""

    def __init__(self, device: str, device_name: str, batching_profile: str,
                 runtime: Runtime | None = None, grpc_max_threads: int = 0) -> None:
        runtime = runtime or runtime_of(DEFAULT_BACKEND)
        self.registry = prometheus_client.CollectorRegistry()
        self._counters = _Counters()
        self._counters.declare(REQUEST_COUNT, "The total number of requests.", ("model_name", "status"))
        self._counters.declare(WRAPPED_RUN_COUNT, "Total count of run calls on the wrapped session", ())
        r = self.registry
        self.request_latency = prometheus_client.Histogram(
            REQUEST_LATENCY,
            "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
            ["model_name", "API", "entrypoint"], buckets=exponential_buckets(10, 1.8, 33), registry=r)
        self.runtime_latency = prometheus_client.Histogram(
            RUNTIME_LATENCY,
            "Distribution of wall time (in microseconds) for Tensorflow runtime.",
            ["model_name", "API", "runtime"], buckets=exponential_buckets(10, 1.8, 33), registry=r)
        self.queuing_latency = prometheus_client.Histogram(
            QUEUING_LATENCY,
            "Distribution of wall time spent (in microseconds) in queuing",
            ["thread_pool_name"], buckets=exponential_buckets(100, 1.2, 52), registry=r)
        size_buckets = exponential_buckets(1, 2, 14)
        self.input_batch_size = prometheus_client.Histogram(
            INPUT_BATCH_SIZE,
            "Tracks the batch size distribution on the inputs.", buckets=size_buckets, registry=r)
        self.processed_batch_size = prometheus_client.Histogram(
            PROCESSED_BATCH_SIZE,
            "Tracks the batch size distribution on processing.", buckets=size_buckets, registry=r)
        self.padding_size = prometheus_client.Histogram(
            PADDING_SIZE,
            "Tracks the padding size distribution on batches.", ["execution_batch_size"],
            buckets=size_buckets, registry=r)
        info = prometheus_client.Gauge(
            SERVER_INFO,
            "The embedded server's device (cpu/gpu), device model name, batching profile, model runtime and gRPC "
            "request threads; value is 1.",
            ["kind", "device", "device_name", "batching_profile", "runtime", "runtime_versions", "grpc_max_threads"],
            registry=r)
        info.labels(ServerKind.EMBEDDED, device, device_name, batching_profile, runtime.name,
                    runtime.versions(), str(grpc_max_threads)).set(1)
        self._latency_cells: dict[tuple[str, str, str], object] = {}  # labelled children, looked up once
        self._runtime_cells: dict[tuple[str, str, str], object] = {}
        self._padding_cells: dict[tuple[str], object] = {}
        self._queuing_cells: dict[tuple[str], object] = {}
        self.phases = PhaseHistograms()
        r.register(self.phases)
        self.gc_pauses = GcPauses()  # installed by the server process (serving.server.app), not by tests' registries
        r.register(self.gc_pauses)

    def record_ok(self, model_name: str, api: str, entrypoint: str, clock: PhaseClock) -> None:
        """One OK request: its request_latency and its phases, from the same stamps (they sum to it)."""
        self.record_request(model_name, api, entrypoint, "OK", clock.total_s())
        self.phases.observe(model_name, api, clock.durations)

    def record_device_floor(self, floor: dict) -> None:
        """The device floor measured at start (a DeviceFloor.as_dict()): gauges per padded batch size, and
        the round trip only when it was measured."""
        latency = prometheus_client.Gauge(
            DEVICE_FLOOR_LATENCY, "Median latency (in microseconds) of the model alone on its device per padded "
            "batch size, measured once at start after warm-up.", ["batch_size"], registry=self.registry)
        images = prometheus_client.Gauge(
            DEVICE_FLOOR_IMAGES, "Images per second of the model alone on its device per padded batch size "
            "(batch / median latency), measured once at start.", ["batch_size"], registry=self.registry)
        for row in floor["batches"]:
            latency.labels(str(row["batch_size"])).set(row["latency_us"])
            images.labels(str(row["batch_size"])).set(row["images_per_s"])
        if floor["round_trip_us"] is not None:
            prometheus_client.Gauge(
                DEVICE_ROUND_TRIP, "Median latency (in microseconds) of a trivial computation's round trip to the "
                "device and back, measured once at start.", registry=self.registry).set(floor["round_trip_us"])

    def record_request(self, model_name: str, api: str, entrypoint: str, status: str, latency_s: float) -> None:
        """One finished request: counted by status (TF Serving's code name); latency (us) only when OK, as TF
        Serving records it."""
        self._counters.inc(REQUEST_COUNT, (model_name, status))
        if status != "OK":
            return
        _child(self._latency_cells, self.request_latency, (model_name, api, entrypoint)).observe(latency_s * 1e6)

    def record_runtime(self, model_name: str, api: str, runtime: str, latency_s: float) -> None:
        """One model call (a whole batch when batching)."""
        _child(self._runtime_cells, self.runtime_latency, (model_name, api, runtime)).observe(latency_s * 1e6)

    def record_batch(self, stats: BatchStats, thread_pool_name: str) -> None:
        """One processed batch: sizes, padding, and each task's time in the queue."""
        self._counters.inc(WRAPPED_RUN_COUNT, ())
        self.processed_batch_size.observe(stats.processed_size)
        _child(self._padding_cells, self.padding_size, (str(stats.processed_size),)).observe(stats.padding)
        for size in stats.input_sizes:
            self.input_batch_size.observe(size)
        queuing = _child(self._queuing_cells, self.queuing_latency, (thread_pool_name,))
        for delay_s in stats.queueing_delays_s:
            queuing.observe(delay_s * 1e6)

    def exposition(self) -> bytes:
        """The Prometheus text page."""
        return self._counters.exposition().encode() + prometheus_client.generate_latest(self.registry)


__all__ = ["ASSEMBLE", "BatchStats", "BatchTiming", "COMPUTE_INFER", "COMPUTE_INPUT", "COMPUTE_OUTPUT", "CONTENT_TYPE",
           "DECODE", "DELIVER", "ENCODE", "HANDOFF", "PHASE_BUCKETS_US", "PhaseClock", "PhaseHistograms", "QUEUE",
           "ServerMetrics", "VALIDATE", "exponential_buckets"]

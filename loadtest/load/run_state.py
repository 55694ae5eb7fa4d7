"""One Locust process's part of a run: its clients, call threads, collector and counters.

Calls finish on native threads (gRPC, `loadtest.load.threads`) or on greenlets (REST); both hand
their records to `RunState.finished`, which is thread-safe: the collector, counters and raw
latencies are guarded by a native lock, and Locust's `request` event (Locust's own statistics and
web UI, which belong to the gevent hub) is fired for each record by `fire_locust_events`, called
from a greenlet (a pump every 50 ms, and once more when the window is drained).

Import only from the locustfile, after `locust` (gevent's patching comes first).
Not for: the load models (`loadtest.load.locustfile`) or the merge across processes (`loadtest.load.collector`).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from locust import events

from loadtest.evidence.vocab import Protocol
from loadtest.load.client import CLIENTS, input_source
from loadtest.load.collector import Aggregate, CallRecord, Collector
from loadtest.load.inputs import effective_check, options_for, resolve_input_kind
from loadtest.load.threads import CallThreads, native_lock

EVENT_PUMP_S = 0.05


class RunState:
    """This process's part of the run: shared clients, call threads, the collector, in-flight calls."""

    def __init__(self) -> None:
        self.environment: Any = None  # Locust's Environment, once initialised
        self.client = None  # the latest one used: its model version goes into the summary
        self.clients: dict = {}
        self.call_threads: list[CallThreads] = []
        self.collector: Collector | None = None
        self.aggregate = Aggregate()
        self.lock = native_lock()
        self.locust_events: deque = deque()
        self.started_unix_s = 0.0
        self.in_flight = 0
        self.sent = 0
        self.cpu: dict = {}  # pid -> CPU seconds used during the measurement window
        self.done_processes: set = set()
        self.expected_workers = 0
        self.summary_written = False
        self.raw_latencies: list = []
        self.model_version: int | None = None
        self.abandoned = 0
        self.event_pump: Any = None

    @property
    def options(self):
        return self.environment.parsed_options

    def begin(self, environment) -> None:
        self.environment = environment
        options = environment.parsed_options
        self.started_unix_s = time.time()
        start = self.started_unix_s + options.warmup_s
        end = start + options.measure_s if options.measure_s > 0 else float("inf")
        self.collector = Collector(start_unix_s=start, end_unix_s=end, window_s=options.window_s,
                                   late_threshold_s=options.late_threshold_ms / 1000.0)
        self.aggregate, self.in_flight, self.sent = Aggregate(), 0, 0
        self.cpu, self.done_processes, self.summary_written, self.raw_latencies = {}, set(), False, []
        self.model_version, self.abandoned = None, 0
        self.call_threads = []

    @property
    def window(self) -> Collector:
        """The collector of the run under way (only used once a test has started)."""
        if self.collector is None:
            raise RuntimeError("no run under way")
        return self.collector

    def measure_end(self) -> float:
        return self.collector.end_unix_s if self.collector else float("inf")

    def sending_allowed(self, intended_unix_s: float) -> bool:
        return intended_unix_s < self.measure_end() and self.sent < self.options.max_requests_per_process

    def ensure_client(self, protocol: str, host: str):
        """One client per protocol and host in this process (its prepared requests shared by all users)."""
        key = (protocol, host)
        if key not in self.clients:
            options = self.options
            target = host.removeprefix("grpc://") if protocol == "grpc" else host
            kind = resolve_input_kind(options.input_data, options.model_name)
            inputs = options_for(kind, options.input_data, options.input_seed, options.int_range, options.input_shape)
            source = input_source(kind, options.samples, inputs,
                                  options.metadata_target or target, options.model_name, options.signature,
                                  options.request_timeout_s)
            self.clients[key] = CLIENTS[Protocol(protocol)](target, options.model_name, options.signature, source,
                                                            options.batch_size,
                                                            effective_check(options.check, kind),
                                                            options.request_timeout_s)
        self.client = self.clients[key]
        return self.client

    def new_call_threads(self, client, limit: int) -> CallThreads:
        """Native threads for `client`'s gRPC calls, each on a channel of its own."""
        threads = CallThreads(client.fork, self.starting, self.finished, limit, on_pool_wait=self.pool_wait,
                              late_after_s=self.options.late_threshold_ms / 1000.0)
        self.call_threads.append(threads)
        return threads

    def starting(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.sent += 1

    def finished(self, record: CallRecord, client) -> None:
        """One call's record (on any thread): into the window, queued for Locust's `request` event."""
        with self.lock:
            self.in_flight -= 1
            self.window.add(record)
            if self.options.raw_latency_dir and record.ok and self.window.in_window(record.intended_unix_s):
                self.raw_latencies.append(record.latency_us)
        self.locust_events.append((client.protocol, client.batch_size, record))

    def call(self, client, index: int, intended_unix_s: float | None = None) -> None:
        """One request on this greenlet (REST): record it. Never raises."""
        self.starting()
        record = None
        try:
            record = client.call(index, intended_unix_s)
        finally:
            if record is None:
                with self.lock:
                    self.in_flight -= 1
        self.finished(record, client)

    def pool_wait(self, intended_unix_s: float) -> None:
        """An open-loop send held back because every call thread was busy (on any thread)."""
        with self.lock:
            self.window.note_pool_wait(intended_unix_s)

    def take_delta(self) -> dict:
        with self.lock:
            return self.window.take_delta()

    def fire_locust_events(self) -> None:
        """Locust's `request` event for every record finished since the last call (on the hub)."""
        while self.locust_events:
            protocol, batch_size, record = self.locust_events.popleft()
            events.request.fire(request_type=protocol.upper(), name=f"Predict batch={batch_size}",
                                response_time=record.latency_us / 1000.0, response_length=0,
                                exception=None if record.ok else RuntimeError(f"{record.status}: {record.error}"),
                                context={})

    def start_event_pump(self) -> None:
        """A greenlet firing Locust's events for finished calls every 50 ms (one per process)."""
        import gevent

        if self.event_pump is None:
            self.event_pump = gevent.spawn(self._pump_locust_events)

    def _pump_locust_events(self) -> None:
        import gevent

        while True:
            self.fire_locust_events()
            gevent.sleep(EVENT_PUMP_S)

    def stop_call_threads(self, timeout_s: float) -> None:
        for threads in self.call_threads:
            threads.stop(timeout_s)

    def seen_model_version(self) -> int | None:
        versions = [threads.model_version() for threads in self.call_threads]
        versions.append(getattr(self.client, "model_version", None))
        return next((v for v in versions if v), None)


RUN = RunState()

"""Per-process collection of call records during one run, and their exact merge across processes.

Each Locust process (the only one, or every worker) feeds its `CallRecord`s into a `Collector`,
which keeps only the measurement window: a call counts when its intended send time falls in
[start, end). Workers hand their collected data to the master as *deltas* (`take_delta` empties
the collector), so every sample crosses the wire exactly once whatever the report timing, and the
master's `Aggregate` adds them up: the merged histogram equals a histogram of all samples.

No clock and no I/O here: callers pass times in, so the arithmetic is testable.
Not for: sending requests (see `loadtest.load.client`) or summarising into results (see `loadtest.measure.cell_sweep`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram

from loadtest.evidence import stats

WRONG_ANSWER = "WRONG_ANSWER"


@dataclass(frozen=True)
class CallRecord:
    """One client call. Never raised, always returned: failures are data."""

    intended_unix_s: float  # when the load model wanted it sent (closed loop: when it was sent)
    sent_unix_s: float
    latency_us: float  # from the intended send time to the response
    ok: bool
    status: str  # "OK", a gRPC status name, an HTTP code, or WRONG_ANSWER
    error: str  # "" when ok
    images: int
    correct: int  # returned classes equal to the true labels
    checked: int  # images whose class was compared with the true label
    scheduled: bool = False  # open loop: sent by the dispatcher for `intended_unix_s` (its lag is measured)

    @property
    def dispatch_lag_us(self) -> float:
        """How long after its intended time the call left, in whole µs (the resolution of a Unix time in a
        double); 0 when it left early or on time."""
        return float(round(max(0.0, self.sent_unix_s - self.intended_unix_s) * 1e6))


_PER_SENT_WINDOW = ("scheduled_counts", "sent_ok_counts", "sent_latency_sum_us")
_SUMMED = ("requests", "ok_requests", "images", "correct", "checked", "late_sends", "pool_waits", "sum_us")


@dataclass
class Tally:
    """Counts and latencies of calls, merged exactly: the same shape on workers and the master."""

    histogram: HdrHistogram = field(default_factory=stats.new_histogram)
    requests: int = 0
    ok_requests: int = 0
    images: int = 0
    correct: int = 0
    checked: int = 0
    late_sends: int = 0
    pool_waits: int = 0  # open loop: sends that waited for a free slot (max in flight reached)
    sum_us: float = 0.0
    min_us: float | None = None
    max_us: float | None = None
    errors_by_code: dict = field(default_factory=dict)
    error_examples: dict = field(default_factory=dict)
    window_counts: dict = field(default_factory=dict)  # completions per window, by when they completed
    # Per window, by intended send time: the sends the schedule put there (open loop), and the OK calls
    # sent there with their summed latency (a mean that grows window to window is a queue building).
    scheduled_counts: dict = field(default_factory=dict)
    sent_ok_counts: dict = field(default_factory=dict)
    sent_latency_sum_us: dict = field(default_factory=dict)
    lag_histogram: HdrHistogram = field(default_factory=stats.new_histogram)  # open loop: sent - intended, µs
    lag_max_us: float | None = None
    # Per window, by intended send time: the OK calls' latencies (µs), so that how the slow ones cluster in time can
    # be read at any objective (`loadtest.judge.dispersion`).
    sent_histograms: dict = field(default_factory=dict)

    def to_wire(self) -> dict:
        """Plain data (the histograms encoded) that `add_delta` on another process adds exactly."""
        wire = {name: getattr(self, name) for name in (*_SUMMED, "min_us", "max_us", "lag_max_us")}
        return {**wire, "histogram": stats.encode(self.histogram), "errors_by_code": dict(self.errors_by_code),
                "error_examples": dict(self.error_examples), "window_counts": dict(self.window_counts),
                **{name: dict(getattr(self, name)) for name in _PER_SENT_WINDOW},
                "lag_histogram": stats.encode(self.lag_histogram),
                "sent_histograms": {window: stats.encode(h) for window, h in self.sent_histograms.items()}}

    def add_delta(self, delta: dict) -> None:
        if delta["histogram"]:
            self.histogram.decode_and_add(delta["histogram"].encode("ascii"))
        if delta.get("lag_histogram"):
            self.lag_histogram.decode_and_add(delta["lag_histogram"].encode("ascii"))
        self.lag_max_us = _extreme(max, self.lag_max_us, delta.get("lag_max_us"))
        for name in _SUMMED:
            setattr(self, name, getattr(self, name) + delta[name])
        self.min_us = _extreme(min, self.min_us, delta["min_us"])
        self.max_us = _extreme(max, self.max_us, delta["max_us"])
        _add_counts(self.errors_by_code, delta["errors_by_code"])
        _add_counts(self.window_counts, delta["window_counts"])
        for name in _PER_SENT_WINDOW:
            _add_counts(getattr(self, name), delta.get(name, {}))
        for code, text in delta["error_examples"].items():
            self.error_examples.setdefault(code, text)
        for window, encoded in delta.get("sent_histograms", {}).items():
            self.sent_histograms.setdefault(window, stats.new_histogram()).decode_and_add(encoded.encode("ascii"))

    def latency(self) -> stats.LatencySummary:
        return stats.summarise(self.histogram, self.min_us, self.max_us, self.sum_us)

    def dispatch_lag(self) -> stats.LatencySummary | None:
        """How late the open-loop dispatcher sent (ms, µs precision); None when nothing was scheduled."""
        if self.lag_histogram.get_total_count() == 0:
            return None
        return stats.summarise(self.lag_histogram, exact_max_us=self.lag_max_us)


@dataclass(kw_only=True)
class Collector(Tally):
    """Accumulates one process's calls in the measurement window [start_unix_s, end_unix_s)."""

    start_unix_s: float
    end_unix_s: float
    window_s: float
    late_threshold_s: float

    def note_pool_wait(self, intended_unix_s: float) -> None:
        if self.in_window(intended_unix_s):
            self.pool_waits += 1

    def in_window(self, intended_unix_s: float) -> bool:
        return self.start_unix_s <= intended_unix_s < self.end_unix_s

    def add(self, record: CallRecord) -> None:
        if not self.in_window(record.intended_unix_s):
            return
        self.requests += 1
        if record.sent_unix_s - record.intended_unix_s > self.late_threshold_s:
            self.late_sends += 1
        sent_window = self.window_index(record.intended_unix_s)
        if record.scheduled:
            self._add_lag(record.dispatch_lag_us)
            _add_counts(self.scheduled_counts, {sent_window: 1})
        if not record.ok:
            self.errors_by_code[record.status] = self.errors_by_code.get(record.status, 0) + 1
            self.error_examples.setdefault(record.status, record.error[:300])
            return
        self.ok_requests += 1
        self.images += record.images
        self.correct += record.correct
        self.checked += record.checked
        self._add_latency(record.latency_us)
        _add_counts(self.sent_ok_counts, {sent_window: 1})
        _add_counts(self.sent_latency_sum_us, {sent_window: record.latency_us})
        stats.record_us(self.sent_histograms.setdefault(sent_window, stats.new_histogram()), record.latency_us)
        done_window = self.window_index(record.intended_unix_s + record.latency_us / 1e6)
        _add_counts(self.window_counts, {done_window: 1})

    def window_index(self, unix_s: float) -> str:
        """The throughput window `unix_s` falls in, as a string (window indexes cross Locust's messages as
        map keys)."""
        return str(int((unix_s - self.start_unix_s) // self.window_s))

    def _add_lag(self, lag_us: float) -> None:
        stats.record_us(self.lag_histogram, lag_us)
        self.lag_max_us = lag_us if self.lag_max_us is None else max(self.lag_max_us, lag_us)

    def _add_latency(self, latency_us: float) -> None:
        stats.record_us(self.histogram, latency_us)
        self.sum_us += latency_us
        self.min_us = latency_us if self.min_us is None else min(self.min_us, latency_us)
        self.max_us = latency_us if self.max_us is None else max(self.max_us, latency_us)

    def take_delta(self) -> dict:
        """Everything collected since the last call, as plain data, and empty the collector."""
        delta = self.to_wire()
        fresh = Tally()
        for name in fresh.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))
        return delta


@dataclass
class Aggregate(Tally):
    """The sum of any number of deltas from any number of processes."""

    deltas: int = 0

    def add_delta(self, delta: dict) -> None:
        super().add_delta(delta)
        self.deltas += 1


def _extreme(pick, current, new):
    if new is None:
        return current
    return new if current is None else pick(current, new)


def _add_counts(into: dict, counts: dict) -> None:
    for key, count in counts.items():
        into[key] = into.get(key, 0) + count

"""Typed parts of a cell's record (`CellResult`) besides the search's tag: what one replica of the server had,
the server's own latency and where its time went, why device telemetry is missing, the host probe, Locust's own
totals and what the server's metrics page said.

Each part is written as a nested object of the cell's JSON line by `to_dict` and read back by `from_dict`, keys
exactly as the measuring modules write them: a key a part does not have (a probe side that could not run has
only its note) stays absent, so `from_dict(part.to_dict()) == part`. A cell made before a part existed, or
without it, has None (written `{}`), or for `TelemetryNote` an empty note.

Not for: measuring them (`loadtest.measure.resources`, `server_phases`, `telemetry`, `hiccups`, `scrape`) or
judging them (`loadtest.judge.noise`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any


def _present(record: Any) -> dict:
    """A record's fields that are not None, by name (None: the key is not written)."""
    return {f.name: getattr(record, f.name) for f in fields(record) if getattr(record, f.name) is not None}


def _known(cls: Any, raw: dict) -> dict:
    """The keys of `raw` that are fields of `cls`."""
    return {f.name: raw[f.name] for f in fields(cls) if f.name in raw}


@dataclass(frozen=True)
class ServerResources:
    """What one replica of the server had (`loadtest.measure.resources.server_resources`)."""

    cpus: float | None  # cores pinned to, or the container's CPU limit; None where unknown
    cpu_model: str
    gpus: int  # count
    gpu_name: str
    source: str  # where `cpus` comes from ("unknown" for a server on another host)

    def to_dict(self) -> dict:
        return {"cpus": self.cpus, "cpu_model": self.cpu_model, "gpus": self.gpus, "gpu_name": self.gpu_name,
                "source": self.source}

    @classmethod
    def from_dict(cls, raw: dict) -> ServerResources:
        return cls(raw["cpus"], raw["cpu_model"], raw["gpus"], raw["gpu_name"], raw["source"])


@dataclass(frozen=True)
class ServerLatency:
    """The server's own request latency over the cell, from its histogram's buckets
    (`loadtest.measure.server_phases.server_latency`): percentiles are bucket upper bounds, None where the cell
    had too few requests for one."""

    source: str
    count: float
    p50_us: float | None
    p90_us: float | None
    p99_us: float | None
    p999_us: float | None
    buckets: tuple[tuple[float | None, float], ...]  # (upper µs, None for +Inf; count), every bucket in order

    def to_dict(self) -> dict:
        return {"source": self.source, "count": self.count, "p50_us": self.p50_us, "p90_us": self.p90_us,
                "p99_us": self.p99_us, "p999_us": self.p999_us, "buckets": [list(b) for b in self.buckets]}

    @classmethod
    def from_dict(cls, raw: dict) -> ServerLatency:
        return cls(raw["source"], raw["count"], raw["p50_us"], raw["p90_us"], raw["p99_us"], raw["p999_us"],
                   tuple((upper, count) for upper, count in raw["buckets"]))


@dataclass(frozen=True)
class PhaseWindow:
    """One histogram over the cell's window (`loadtest.measure.server_phases.window`): the mean, a p99 read from the
    buckets (None with too few observations) and the count."""

    mean_us: float | None  # None without observations
    p99_us: float | None
    count: float

    def to_dict(self) -> dict:
        return {"mean_us": self.mean_us, "p99_us": self.p99_us, "count": self.count}

    @classmethod
    def from_dict(cls, raw: dict) -> PhaseWindow:
        return cls(raw["mean_us"], raw["p99_us"], raw["count"])


@dataclass(frozen=True)
class GcPauses(PhaseWindow):
    """The server process's garbage collections over the cell (`loadtest.measure.server_phases.gc_window`)."""

    max_us: float | None = None  # the slowest one's bucket bound; None when it fell in +Inf

    def to_dict(self) -> dict:
        return {**super().to_dict(), "max_us": self.max_us}

    @classmethod
    def from_dict(cls, raw: dict) -> GcPauses:
        return cls(raw["mean_us"], raw["p99_us"], raw["count"], raw["max_us"])


@dataclass(frozen=True)
class ServerPhases:
    """Where the cell's requests spent their time inside the server (`loadtest.measure.server_phases`): every key
    is written, request_latency and gc_pauses as null where the server does not export them."""

    source: str  # which of the server's histograms the figures come from
    request_latency: PhaseWindow | None
    phases: dict[str, PhaseWindow]  # by phase, in the order written (`REQUEST_PHASES` order when measured)
    not_exported: tuple[str, ...]  # the phases the server does not time
    note: str  # "" when every phase was timed
    gc_pauses: GcPauses | None

    def to_dict(self) -> dict:
        return {"source": self.source, "request_latency": self.request_latency and self.request_latency.to_dict(),
                "phases": {name: window.to_dict() for name, window in self.phases.items()},
                "not_exported": list(self.not_exported), "note": self.note,
                "gc_pauses": self.gc_pauses and self.gc_pauses.to_dict()}

    @classmethod
    def from_dict(cls, raw: dict) -> ServerPhases:
        request, gc = raw["request_latency"], raw["gc_pauses"]
        return cls(raw["source"], None if request is None else PhaseWindow.from_dict(request),
                   {name: PhaseWindow.from_dict(window) for name, window in raw["phases"].items()},
                   tuple(raw["not_exported"]), raw["note"], None if gc is None else GcPauses.from_dict(gc))


@dataclass(frozen=True)
class TelemetryNote:
    """Why a part of the device telemetry has no figures (`loadtest.measure.telemetry`); None: it has them."""

    server: str | None = None
    gpu: str | None = None

    def to_dict(self) -> dict:
        return _present(self)

    @classmethod
    def from_dict(cls, raw: dict) -> TelemetryNote:
        return cls(raw.get("server"), raw.get("gpu"))


@dataclass(frozen=True)
class ProbeSide:
    """One side of the host probe (`loadtest.measure.hiccups.side_record`): a 1 ms sleep loop's oversleeps on
    the cores it was pinned to, or only why it has none (`note`, with its `cpus` where it ran)."""

    cpus: str | None = None  # a `taskset -c` style list
    samples: int | None = None
    duration_s: float | None = None
    p50_us: int | None = None
    p99_us: int | None = None
    p999_us: int | None = None
    max_us: int | None = None
    histogram: str | None = None  # its oversleeps (µs), an encoded HdrHistogram
    note: str | None = None

    def to_dict(self) -> dict:
        return _present(self)

    @classmethod
    def from_dict(cls, raw: dict) -> ProbeSide:
        return cls(**_known(cls, raw))


@dataclass(frozen=True)
class HostProbe:
    """The host probe of one cell, by side (`loadtest.measure.hiccups`); `note` where it did not run at all."""

    interval_ms: float
    server: ProbeSide | None = None
    loadgen: ProbeSide | None = None
    note: str | None = None

    def side(self, name: str) -> ProbeSide | None:
        """"server" or "loadgen"."""
        return {"server": self.server, "loadgen": self.loadgen}.get(name)

    def with_sides(self, sides: Mapping[str, ProbeSide]) -> HostProbe:
        """This probe with the sides in `sides` ("server" / "loadgen") set."""
        return replace(self, server=sides.get("server", self.server), loadgen=sides.get("loadgen", self.loadgen))

    def to_dict(self) -> dict:
        return {**_present(self), **{name: side.to_dict() for name in ("server", "loadgen")
                                     if (side := self.side(name)) is not None}}

    @classmethod
    def from_dict(cls, raw: dict) -> HostProbe:
        sides = {name: ProbeSide.from_dict(raw[name]) for name in ("server", "loadgen") if name in raw}
        return cls(raw["interval_ms"], note=raw.get("note"), **sides)


@dataclass(frozen=True)
class LocustTotals:
    """Locust's own (ms-rounded) totals (`loadtest.load.locustfile.locust_totals`), kept for comparison with the
    exact figures."""

    requests: int
    failures: int
    p50_ms: float | None
    p99_ms: float | None

    def to_dict(self) -> dict:
        return {"requests": self.requests, "failures": self.failures, "p50_ms": self.p50_ms, "p99_ms": self.p99_ms}

    @classmethod
    def from_dict(cls, raw: dict) -> LocustTotals:
        return cls(raw["requests"], raw["failures"], raw["p50_ms"], raw["p99_ms"])


@dataclass(frozen=True)
class ServerScrape:
    """What the server's metrics page said over the cell besides batching (`loadtest.measure.scrape.cell_figures`):
    its requests and their mean latency as it saw them, and its info gauge's labels; only `scraped`, False, where it
    could not be scraped (a TF Serving container without monitoring, a server on another host without a REST URL)."""

    scraped: bool
    request_count: dict[str, float] = field(default_factory=dict)  # the counter's label text -> requests (nonzero)
    request_latency_mean_us: float | None = None  # None where the server exports no request latency
    server_info: dict[str, str] = field(default_factory=dict)  # the embedded server's info labels; {} for TF Serving

    def to_dict(self) -> dict:
        if not self.scraped:
            return {"scraped": False}
        return {"scraped": True, "request_count": dict(self.request_count),
                "request_latency_mean_us": self.request_latency_mean_us, "server_info": dict(self.server_info)}

    @classmethod
    def from_dict(cls, raw: dict) -> ServerScrape:
        return cls(raw["scraped"], dict(raw.get("request_count", {})), raw.get("request_latency_mean_us"),
                   dict(raw.get("server_info", {})))

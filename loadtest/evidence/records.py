"""Typed records of a sweep: one `CellResult` per measured cell, one JSON line each.

The sweep (`loadtest.measure.cell_sweep`) computes a cell's summary once into a `CellResult` and appends it
to `results/<UTC time>/results.jsonl`; the report and the sizing read the same records back with
`read_results`. Field names carry their units. CSV is a derived view whose columns are declared
once in `CSV_COLUMNS`.

Not for: computing statistics (see `loadtest.evidence.stats`) or talking to servers.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from loadtest.evidence.cell_parts import (
    HostProbe,
    LocustTotals,
    ServerLatency,
    ServerPhases,
    ServerResources,
    ServerScrape,
    TelemetryNote,
)
from loadtest.evidence.floor_record import DeviceFloorRecord
from loadtest.evidence.provenance_record import Provenance
from loadtest.evidence.search_tag import SearchTag
from loadtest.evidence.vocab import Arrival, CellStatus, Check, Flag, LoadMode, Protocol


@dataclass(frozen=True)
class ServerLabel:
    """Exactly what was measured: which server, on which device, with which batching."""

    name: str  # state-file key, e.g. "cpu"
    kind: str  # a serving.endpoint.ServerKind value
    device: str  # a serving.endpoint.Device value, or "unknown" for an address given by hand
    device_name: str  # CPU model or GPU name
    target: str  # host:port the load went to
    protocol: Protocol
    model_name: str
    model_version: int | None  # as reported in responses
    batching_profile: str  # "off" when server-side batching is disabled
    batching: dict = field(default_factory=dict)  # TF Serving batching field names -> values
    versions: dict = field(default_factory=dict)  # server-side versions (tensorflow, image tag, ...)


@dataclass(frozen=True)
class LoadSpec:
    """The cell's load: closed loop (`concurrency`) or open loop (`rate_rps`, `arrival`)."""

    mode: LoadMode
    request_batch_size: int  # images per request
    concurrency: int | None  # closed loop: users sending back to back
    rate_rps: float | None  # open loop: target arrival rate, requests/s
    arrival: Arrival | None  # open loop only
    warmup_s: float
    duration_s: float
    processes: int  # Locust worker processes
    check: Check = Check.CLASSES  # "classes": vs the model's own answers; "shape": null backend
    late_threshold_ms: float = 0.0  # open loop: a send leaving later than this after its intended time is late
    dispatch_lag_limit_ms: float | None = None  # open loop: a p99 dispatch lag above this flags the cell
    window_s: float = 1.0  # throughput windows for the stability check
    arrival_seed: int | None = None  # open loop: the seed of its Poisson schedule (None: older records, seed 1)


@dataclass(frozen=True)
class ValidityFlag:
    flag: Flag
    reason: str


@dataclass(frozen=True)
class CellResult:
    """One cell of a sweep, summarised once. Latencies in ms with µs precision."""

    run_id: str  # the results directory name (UTC time)
    cell_index: int
    utc_time: str
    server: ServerLabel
    load: LoadSpec
    status: CellStatus
    failure_reason: str  # "" when status == "ok"
    requests: int
    ok_requests: int
    errors_by_code: dict[str, int]  # gRPC status name or HTTP code -> count; "WRONG_ANSWER" for mismatches
    wrong_answers: int
    accuracy: float | None  # share of returned classes equal to the true labels
    throughput_rps: float
    throughput_ips: float  # images/s
    latency_min_ms: float | None
    latency_mean_ms: float | None
    latency_p50_ms: float | None
    latency_p90_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None
    latency_p999_ms: float | None
    latency_max_ms: float | None
    histogram_us: str  # HdrHistogram encoded (base64, compressed), values in µs
    late_sends: int  # open loop: sends that left later than their intended time
    late_send_fraction: float
    window_throughput_rps: list[float]  # throughput of consecutive measurement windows
    loadgen_cpu_percent: float  # of all the load generator's cores together (100 = one core busy)
    loadgen_cores: int
    server_batch_size_mean: float | None  # from the server's metrics, when exposed
    server_batch_sizes: dict[str, float]  # processed batch size's bucket bound (as text) -> batches in the cell
    server_queue_delay_mean_us: float | None
    valid: bool
    flags: list[ValidityFlag]
    provenance: Provenance  # code, machine, versions, plan, command, inputs (`loadtest.evidence.provenance_record`)
    # Added by the sweep (additive: records without them read back with the defaults).
    images: int = 0  # images in the successful measured requests
    error_examples: dict[str, str] = field(default_factory=dict)  # status -> first error text seen
    loadgen_process_cpu_percent: list[float] = field(default_factory=list)  # per Locust process, % of one core
    server_metrics: ServerScrape | None = None  # the server's request counts and latency, its info (None: written {})
    locust_stats: LocustTotals | None = None  # Locust's own (ms-rounded) totals, for comparison (None: written {})
    pool_full_waits: int = 0  # open loop: sends held back because max_in_flight calls were outstanding
    search: SearchTag | None = None  # a capacity search's cell: its id, role, objective; else None (written {})
    dispatch_lag_p50_us: float | None = None  # open loop: actual - intended send time; None for closed loop
    dispatch_lag_p99_us: float | None = None
    dispatch_lag_max_us: float | None = None
    # Device telemetry over the measured window (`loadtest.measure.telemetry`); None where not measured,
    # with the reason in telemetry_note ("server" / "gpu" -> why).
    server_cpu_percent: float | None = None  # mean, % of the cores the server may use (100 = all busy)
    server_cpu_percent_max: float | None = None  # the busiest ~150 ms sampling interval
    server_cpu_cores: float | None = None  # cores the server may use: its CPU affinity, or a container's quota
    server_rss_mib: float | None = None  # highest resident memory (a container: its cgroup's memory)
    # The replica's memory, shared pages counted once (what sizing fits onto instances): the highest PSS summed over
    # its processes (a container: its cgroup's memory, as server_rss_mib). None in records made before it.
    server_pss_mib: float | None = None
    gpu_utilization_percent: float | None = None  # mean of NVML's utilisation readings
    gpu_utilization_percent_max: float | None = None
    gpu_memory_mib: float | None = None  # highest GPU memory used
    gpu_power_w: float | None = None  # mean power draw
    telemetry_note: TelemetryNote = field(default_factory=TelemetryNote)
    # Where the server's time went and what the device alone does (None, written {}, in records made before them, or
    # where the server could not be scraped). server_phases: `loadtest.measure.server_phases`, over the cell's scrapes.
    # device_floor: `loadtest.measure.device_floor`, as the server described it (`loadtest.evidence.floor_record`).
    server_phases: ServerPhases | None = None
    device_floor: DeviceFloorRecord | None = None
    # What one replica of this server had (`loadtest.measure.resources`; None, written {}, in records made before
    # it, where sizing falls back on server_cpu_cores and the device).
    server_resources: ServerResources | None = None
    # Noise told apart (`loadtest.judge.noise`; None, written {}, / [] in records made before them):
    # host_probe (`loadtest.measure.hiccups`): a 1 ms sleep loop in its own process on the server's cores and on
    # the load generator's, over the cell. server_latency: the server's own request-latency percentiles over the
    # cell, from its histogram's buckets.
    # window_latency_ms: mean latency of the requests sent in each throughput window, in order: a queue
    # that builds shows as latency growing window to window (`loadtest.judge.overload`).
    host_probe: HostProbe | None = None
    server_latency: ServerLatency | None = None
    window_latency_ms: list[float | None] = field(default_factory=list)  # None: no OK call sent in that window
    window_scheduled_rps: list[float] = field(default_factory=list)  # open loop: sends the schedule put in each window
    # window_histograms_us: per throughput window, by intended send time, its OK calls' latencies (HdrHistogram,
    # µs, encoded; "" where none): how the slow requests cluster in time, at any objective (`judge.dispersion`).
    window_histograms_us: list[str] = field(default_factory=list)
    abandoned_calls: int | None = None  # calls still in flight past the request timeout at the cell's end; None: older

    @property
    def tag(self) -> SearchTag:
        """`search` of a cell a capacity search measured, for readers of a search's cells (ValueError otherwise)."""
        if self.search is None:
            raise ValueError(f"cell {self.cell_index} of run {self.run_id} was not measured by a capacity search")
        return self.search

    def to_json(self) -> str:
        raw = asdict(self)
        for name in _PARTS:
            part = getattr(self, name)
            raw[name] = {} if part is None else part.to_dict()
        raw["provenance"] = self.provenance.to_dict()
        return json.dumps(raw, sort_keys=True)

    @classmethod
    def from_dict(cls, raw: dict) -> CellResult:
        values = dict(raw)
        values["server"] = _server_label(raw["server"])
        values["load"] = _load_spec(raw["load"])
        values["status"] = CellStatus(raw["status"])
        values["flags"] = [ValidityFlag(Flag(flag["flag"]), flag["reason"]) for flag in raw["flags"]]
        values["provenance"] = Provenance.from_dict(raw["provenance"])
        for name, part in _PARTS.items():
            if raw.get(name):
                values[name] = part.from_dict(raw[name])
            else:  # {} (or absent): the field's default, None or an empty note
                values.pop(name, None)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


# The typed parts of a record, by field, each written by its `to_dict` (None as {}).
_PARTS: dict[str, Any] = {"search": SearchTag, "server_resources": ServerResources, "server_latency": ServerLatency,
                          "host_probe": HostProbe, "telemetry_note": TelemetryNote, "server_phases": ServerPhases,
                          "device_floor": DeviceFloorRecord, "server_metrics": ServerScrape,
                          "locust_stats": LocustTotals}


def _server_label(raw: dict) -> ServerLabel:
    return ServerLabel(**{**raw, "protocol": Protocol(raw["protocol"])})


def _load_spec(raw: dict) -> LoadSpec:
    arrival = raw.get("arrival")
    typed: dict[str, Any] = {"mode": LoadMode(raw["mode"]), "arrival": None if arrival is None else Arrival(arrival)}
    if "check" in raw:
        typed["check"] = Check(raw["check"])
    return LoadSpec(**{**raw, **typed})


def append_result(path: Path, result: CellResult) -> None:
    """Append one record and flush it to disk, so an interrupted sweep keeps every finished cell."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(result.to_json() + "\n")
        out.flush()


def read_results(path: Path) -> list[CellResult]:
    """Every record of a results.jsonl; a torn last line (interrupted write) is skipped."""
    results = []
    lines = Path(path).read_text().splitlines()
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            results.append(CellResult.from_dict(json.loads(line)))
        except json.JSONDecodeError:
            if line_no == len(lines):
                continue
            raise ValueError(f"{path}:{line_no}: not a JSON record") from None
    return results


CSV_COLUMNS = (
    "run_id", "cell_index", "server.name", "server.kind", "server.device", "server.device_name",
    "server.batching_profile", "server.protocol", "load.mode", "load.request_batch_size",
    "load.concurrency", "load.rate_rps", "status", "requests", "ok_requests", "wrong_answers",
    "accuracy", "throughput_rps", "throughput_ips", "latency_p50_ms", "latency_p90_ms",
    "latency_p99_ms", "latency_p999_ms", "latency_max_ms", "late_send_fraction",
    "loadgen_cpu_percent", "server_batch_size_mean", "valid",
    "server_cpu_percent", "server_rss_mib", "gpu_utilization_percent", "gpu_memory_mib", "gpu_power_w",
)


def csv_row(result: CellResult) -> list:
    """The record's values for `CSV_COLUMNS` ("server.name" reads a nested field)."""
    raw = asdict(result)
    row = []
    for column in CSV_COLUMNS:
        value = raw
        for part in column.split("."):
            value = value[part]
        row.append("" if value is None else value)
    return row


def append_csv(path: Path, result: CellResult) -> None:
    """Append one CSV row (the header first when the file is new): the CSV view of results.jsonl."""
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as out:
        writer = csv.writer(out)
        if new:
            writer.writerow(CSV_COLUMNS)
        writer.writerow(csv_row(result))

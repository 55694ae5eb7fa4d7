"""The run summary: what one Locust run hands the sweep, written by the locustfile as one JSON file.

`LoadSummary` is the contract between the two processes: the locustfile's master (or single
process) builds it from the merged collector data and writes `to_json()` to `--summary-out`; the
sweep reads it back with `from_dict()` and turns it into a `CellResult`. Field names carry units.

Not for: the recorded result of a cell (`loadtest.evidence.records.CellResult`) or computing statistics.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

from loadtest.evidence.cell_parts import LocustTotals
from loadtest.evidence.stats import LatencySummary


@dataclass(frozen=True)
class LoadSummary:
    """Merged counts, exact latency, throughput windows and CPU per process of one Locust run."""

    complete: bool  # every load process reported before the master's deadline
    processes_reported: int
    processes_expected: int
    measure_s: float
    window_s: float
    requests: int
    ok_requests: int
    images: int
    correct: int  # returned classes equal to the true labels
    checked: int  # images whose class was compared
    late_sends: int
    pool_waits: int
    errors_by_code: dict[str, int]
    error_examples: dict[str, str]
    latency: LatencySummary
    histogram_us: str  # HdrHistogram, encoded
    window_rps: list[float]
    cpu_s_by_pid: dict[str, float]  # CPU seconds each load process used in the measured window
    model_version: int | None
    in_flight_abandoned: int
    locust: LocustTotals | None = field(default=None)
    dispatch_lag: LatencySummary | None = None  # open loop: actual - intended send time, merged over processes
    window_start_unix_s: float | None = None  # when the measured window opened (the master's clock)
    # Per window, by intended send time: open loop's sends scheduled there ([] for a closed loop), and the
    # mean latency (ms; None: no OK call) of the calls sent there.
    window_scheduled_rps: list[float] = field(default_factory=list)
    window_latency_ms: list[float | None] = field(default_factory=list)
    window_histograms_us: list[str] = field(default_factory=list)  # per window: the OK calls sent there ("" none)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, raw: dict) -> LoadSummary:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in raw.items() if k in known}
        values["latency"] = LatencySummary(**raw["latency"])
        values["locust"] = LocustTotals(**raw["locust"]) if raw.get("locust") else None
        values["dispatch_lag"] = LatencySummary(**raw["dispatch_lag"]) if raw.get("dispatch_lag") else None
        return cls(**values)

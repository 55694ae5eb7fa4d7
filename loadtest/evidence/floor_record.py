"""The device floor a cell records (`CellResult.device_floor`): what the model alone did on the serving device, per
padded batch size, as the server described it.

The record is the server's own self-description (`serving.server.handling.floor.DeviceFloor.as_dict()`, its metrics
page's gauges, or `{"source": "unknown", "note": why}`), and its key set varies with the server's version: older
servers wrote no `callers` or device round trip, the metrics page adds `device_name` and writes batches of three
keys, and some keys are written with the value null. So these records are open (`loadtest.evidence.open_record`):
the keys the report reads are typed, every other key is kept as it came, and `from_dict(raw).to_dict() == raw` (null
included). A cell made before floors were recorded has None (written `{}`).

Not for: measuring or asking for a floor (`loadtest.measure.device_floor`, `serving.server.handling.floor`) or judging a
result against it (`loadtest.report.answers.bound`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from loadtest.evidence.open_record import keep_present, split, written


@dataclass(frozen=True)
class FloorBatch:
    """The model alone at one padded batch size (`serving.server.handling.floor.BatchFloor`; from the metrics page:
    batch size, latency and images/s only, the latency null where the page had none)."""

    batch_size: int | None = None
    images_per_s: float | None = None
    latency_us: float | None = None  # per call
    latency_p99_us: float | None = None
    runs: int | None = None
    present: frozenset[str] = frozenset()  # the typed keys written, None ones included
    extra: dict = field(default_factory=dict)  # every other key, as written

    def __post_init__(self) -> None:
        keep_present(self)

    def to_dict(self) -> dict:
        return written(self)

    @classmethod
    def from_dict(cls, raw: dict) -> FloorBatch:
        typed, extra = split(cls, raw)
        return cls(**typed, present=frozenset(typed), extra=extra)


@dataclass(frozen=True)
class DeviceFloorRecord:
    """A cell's device floor: the keys the report reads, typed; None where the record lacks the key (or has it as
    null: `present` tells which)."""

    source: str | None = None  # who measured it ("unknown" where nobody could)
    runtime: str | None = None  # e.g. "jax", "tensorflow"
    batches: tuple[FloorBatch, ...] | None = None  # smallest first as written
    callers: int | None = None  # threads calling the model at once (None: an older server's, one)
    round_trip_us: float | None = None  # the runtime's trivial round trip
    round_trip_note: str | None = None
    device_round_trip_us: float | None = None  # the device's own, by another runtime
    note: str | None = None  # an unknown floor: why
    present: frozenset[str] = frozenset()  # the typed keys written, None ones included
    extra: dict = field(default_factory=dict)  # every other key, as written (device, device_name, budget_s, ...)

    def __post_init__(self) -> None:
        keep_present(self)

    def to_dict(self) -> dict:
        batches = None if self.batches is None else [b.to_dict() for b in self.batches]
        return written(self, batches=batches)

    @classmethod
    def from_dict(cls, raw: dict) -> DeviceFloorRecord:
        typed, extra = split(cls, raw)
        if typed.get("batches") is not None:
            typed["batches"] = tuple(FloorBatch.from_dict(b) for b in typed["batches"])
        return cls(**typed, present=frozenset(typed), extra=extra)

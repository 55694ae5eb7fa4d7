"""What bounded an answer: the model on its device, or the serving path around it.

A capacity is the device's only if the device was what stopped it. Two ways to tell, best first:

- the device floor (`CellResult.device_floor`: the model alone on the serving device, per padded batch
  size, measured by the server at start or, for a TF Serving container, here): served images/s at the
  answer's cell ÷ the floor's images/s at the batch the server ran. Below `SERVED_SHARE` (50%) the
  serving path bounded the answer; so it did where the share is not clear of 50% by more than the machine's
  speed moved over the run (its reference cells, `loadtest.report.answers.movement`): the floor is measured at
  the server's start, the answer minutes later. Clear of it, the model on the device did only if the device was
  busy (`device_use` thresholds) and the floor measured the device: where the floor's per-call latency is
  within `DISPATCH_RATIO` (2×) of its runtime's trivial round trip (`device_floor.round_trip_us`), the
  floor timed the runtime's dispatch (JAX: ~0.6 ms a call on an H100 whose own round trip, PyTorch's, is
  0.044 ms), so the runtime bounded it; a device that was far from busy did not bound it either;
- with no floor (older records, or none measurable): how busy the device was. When every cell measured
  on that device left it far from busy (`loadtest.report.device_use`'s thresholds: GPU < 50%, a CPU
  server < 60% of its cores), the device did not bound the run, so the run measured the serving path.
  Otherwise nothing is said: a busy device is not proof that the device bounded it.

Pure functions over `CellResult`s. Not for: where each request's time went
(`loadtest.report.sections.request_time`) or the findings' other sentences (`loadtest.report.findings`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from loadtest.evidence.floor_record import DeviceFloorRecord
from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import CellStatus
from loadtest.report.answers.answers import DeviceAnswer, lower_bound
from loadtest.report.blocks import device_name
from loadtest.report.configs import Config, config_of
from loadtest.report.device_use import device_busy
from loadtest.report.formatting import number as fmt
from serving.protocol.runtime_names import short_name

SERVED_SHARE = 0.5  # served below this share of the device alone: the serving path bounded the answer
DISPATCH_RATIO = 2.0  # a floor per call within this many times the runtime's trivial round trip timed the runtime


@dataclass(frozen=True)
class FloorEntry:
    """The model alone on its device at one padded batch size."""

    batch_size: int
    images_per_s: float
    latency_us: float | None = None
    callers: int = 1  # calling at once (a CPU: one per core the server was given); images/s is theirs together

    @property
    def at(self) -> str:
        """`batch 8`, or `batch 8, 12 callers at once`."""
        return f"batch {self.batch_size}" + (f", {self.callers} callers at once" if self.callers > 1 else "")


def floor_entries(floor: DeviceFloorRecord | None) -> list[FloorEntry]:
    """A record's `device_floor` batches, smallest first; [] when the floor is unknown or not recorded."""
    if floor is None:
        return []
    entries = []
    callers = int(floor.callers or 1)
    for batch in floor.batches or ():
        images = batch.images_per_s
        if batch.batch_size and images and images > 0:
            entries.append(FloorEntry(int(batch.batch_size), float(images), batch.latency_us, callers))
    return sorted(entries, key=lambda e: e.batch_size)


def padded_batch(cell: CellResult) -> int:
    """The batch the server ran: its processed batch size's mean (rounded up) when exposed, else the request's."""
    mean = cell.server_batch_size_mean
    return max(1, math.ceil(mean - 1e-9)) if mean else cell.load.request_batch_size


def floor_at(floor: DeviceFloorRecord | None, batch: int) -> FloorEntry | None:
    """The floor entry whose batch size covers `batch` (the smallest at least as large), else the largest."""
    entries = floor_entries(floor)
    if not entries:
        return None
    return next((e for e in entries if e.batch_size >= batch), entries[-1])


@dataclass(frozen=True)
class ServedShare:
    """What a cell served against its device alone at the batch the server ran, and how far the machine's speed moved
    over the run (`loadtest.report.answers.movement`; None: not measured, no reference cells)."""

    served_ips: float
    floor: FloorEntry
    moved: float | None = None

    @property
    def share(self) -> float:
        """served ÷ device alone."""
        return self.served_ips / self.floor.images_per_s

    @property
    def clear(self) -> bool:
        """At least `SERVED_SHARE` by more than the machine moved: the floor was measured at the server's start, the
        answer minutes later, so a share inside the movement could be the machine's speed, not the device's. Where
        no reference cell measured the movement (a search outside a paired comparison), nothing says how far the
        machine moved, so no share clears its line (#68: read as no movement, 50.1% was "the device", FOR BUYING)."""
        return self.moved is not None and self.share >= SERVED_SHARE * (1 + self.moved)

    def words(self) -> str:
        """`served 27% of the device alone`; inside the movement, `served 51% of the device alone, within the run's
        38% drift of 50%`; at 50% or more where no reference cell measured it, `…, the run's drift not measured`."""
        text = f"served {self.share:.0%} of the device alone"
        if self.share >= SERVED_SHARE and self.moved is None:
            text += ", the run's drift not measured"
        elif self.share >= SERVED_SHARE and not self.clear:
            text += f", within the run's {self.moved:.0%} drift of {SERVED_SHARE:.0%}"
        return text

    @property
    def times(self) -> float:
        """device alone ÷ served."""
        return self.floor.images_per_s / self.served_ips


def served_share(cell: CellResult, moved: float | None = None) -> ServedShare | None:
    """The cell's served images/s against its recorded floor, `moved` the machine's movement over its run; None
    without a floor or a throughput."""
    entry = floor_at(cell.device_floor, padded_batch(cell))
    if entry is None or cell.throughput_ips <= 0:
        return None
    return ServedShare(cell.throughput_ips, entry, moved)


def idle_ceiling(cells: Sequence[CellResult]) -> float | None:
    """The highest busy % (mean over a cell's window, rounded up) when every finished cell measured its
    device and each left it far from busy; None when any was busy, any was not measured, or none ran."""
    readings = [device_busy(c) for c in cells if c.status == CellStatus.OK]
    if not readings or any(r is None or r[1] >= r[2] for r in readings):
        return None
    return float(math.ceil(max(r[1] for r in readings if r is not None)))


def times_text(times: float) -> str:
    return f"×{times:.1f}" if times < 10 else f"×{times:,.0f}"


def floor_sentence(device: str, label: str, at: str, served: ServedShare) -> str:
    """The lead when the floor is known: the serving path (served < 50% of it) or the model bounded the answer."""
    f = served.floor
    if served.share < SERVED_SHARE:
        return (f"the serving path bounded this answer, not the device: {device} alone runs the model at "
                f"{fmt(f.images_per_s)} images/s at {f.at}, {times_text(served.times)} what {label} "
                f"served ({fmt(served.served_ips)} images/s {at}).")
    if not served.clear:
        return (f"the device is not shown to have bounded this answer, so the serving path is taken to: {label} "
                f"served {fmt(served.served_ips)} images/s {at} = {served.share:.0%} of {device} alone "
                f"({fmt(f.images_per_s)} images/s at {f.at}), {_drift_words(served.moved)}.")
    return (f"the model on the device bounded this answer: {label} served {fmt(served.served_ips)} images/s {at} = "
            f"{served.share:.0%} of {device} alone ({fmt(f.images_per_s)} images/s at {f.at}).")


def _drift_words(moved: float | None) -> str:
    if moved is None:
        return ("and how far the machine's speed drifted over the run was not measured (no reference cells: a search "
                "outside a paired comparison)")
    return (f"within the {moved:.0%} the machine's speed drifted over the run (its reference cells) of "
            f"{SERVED_SHARE:.0%}")


def runtime_name(floor: DeviceFloorRecord | None) -> str:
    runtime = str(floor.runtime or "") if floor else ""
    return short_name(runtime) if runtime else "the runtime"


def dispatch_bound(cell: CellResult, served: ServedShare) -> bool:
    """The floor's per-call latency is within `DISPATCH_RATIO` of its runtime's trivial round trip: the floor
    timed the runtime's dispatch, not the model on the device."""
    trip = float(cell.device_floor.round_trip_us or 0.0) if cell.device_floor else 0.0
    latency = served.floor.latency_us
    return trip > 0 and latency is not None and latency <= DISPATCH_RATIO * trip


def busy_part(cell: CellResult, device: str) -> str:
    """`GPU 4% busy` (the device's use as telemetry recorded it), or `device use not recorded`."""
    busy = device_busy(cell)
    return f"{busy[0]} {busy[1]:.0f}% busy" if busy is not None else "its use not recorded"


def runtime_sentence(device: str, cell: CellResult, served: ServedShare) -> str:
    """The lead when the floor timed the runtime's dispatch: the runtime, not the device, bounded the answer."""
    floor = cell.device_floor
    own = floor.device_round_trip_us if floor else None
    own_text = f", its own round trip {own / 1000:.3f} ms" if own else ""
    trip_us = float(floor.round_trip_us or 0.0) if floor else 0.0
    return (f"the runtime ({runtime_name(floor)}, {trip_us / 1000:.2f} ms per call) bounded "
            f"this answer, not the {device} ({busy_part(cell, device)}{own_text}): {fmt(served.served_ips)} "
            f"images/s served = {served.share:.0%} of the floor, which timed the runtime's own round trip.")


def idle_device_sentence(device: str, label: str, at: str, cell: CellResult, served: ServedShare) -> str:
    """The lead when the served share is high but the device was far from busy (or its use not recorded):
    the model's calls bounded the answer (a delay, a lock, a runtime), not the device's compute."""
    f = served.floor
    return (f"the model's calls bounded this answer, not the {device}'s compute ({busy_part(cell, device)}): "
            f"{label} served {fmt(served.served_ips)} images/s {at} = {served.share:.0%} of the model alone "
            f"({fmt(f.images_per_s)} images/s at {f.at}).")


class Held(StrEnum):
    """What held an answer its device floor measured (`held_by`): the one rule the verdict and the findings read."""

    SERVING_PATH = "serving path"  # served < `SERVED_SHARE` of the device alone, or not clear of it (`clear`)
    RUNTIME = "runtime"  # the floor timed the runtime's dispatch
    IDLE_DEVICE = "idle device"  # the device was far from busy, or its use not recorded
    DEVICE = "device"  # the model on the device, busy


def held_by(cell: CellResult, served: ServedShare) -> Held:
    """What bounded the answer, claiming the device only when the floor measured it, the share cleared its line by
    more than the machine moved (`ServedShare.clear`) and the device was busy."""
    if not served.clear:
        return Held.SERVING_PATH
    if dispatch_bound(cell, served):
        return Held.RUNTIME
    busy = device_busy(cell)
    if busy is None or busy[1] < busy[2]:
        return Held.IDLE_DEVICE
    return Held.DEVICE


def held_sentence(device: str, label: str, at: str, cell: CellResult, served: ServedShare) -> str:
    """`held_by`'s verdict in a sentence."""
    held = held_by(cell, served)
    if held == Held.RUNTIME:
        return runtime_sentence(device, cell, served)
    if held == Held.IDLE_DEVICE:
        return idle_device_sentence(device, label, at, cell, served)
    return floor_sentence(device, label, at, served)


def loadgen_sentence(device: str, label: str, served: ServedShare) -> str:
    """The lead when the load generator, not the server, stopped the search ("at least"): no bound on the server."""
    f = served.floor
    return (f"the load generator bounded this answer, not the device: {label} served at least "
            f"{fmt(served.served_ips)} images/s, {served.share:.0%} of {device} alone ({fmt(f.images_per_s)} images/s "
            f"at {f.at}).")


def idle_sentence(device: str, ceiling: float) -> str:
    return (f"the {device} did not bound this run (it was ≤ {ceiling:.0f}% busy), so what it measured is the "
            "serving path on that machine.")


def device_text(device: str, name: str) -> str:
    return f"{device} ({device_name(name)})"


def device_cells(d: DeviceAnswer, results: Sequence[CellResult]) -> list[CellResult]:
    return [c for c in results if (c.server.device, c.server.device_name) == (d.device, d.device_name)]


def bound_line(d: DeviceAnswer, cell: CellResult | None, at: str, results: Sequence[CellResult],
               labels: Mapping[Config, str], movements: Mapping[str, float]) -> str:
    """The sentence that says what bounded this device's answer, from the `cell` it stands on (`at`: "at its
    capacity 656.6 req/s", "at its peak"; `loadtest.report.figures.device_figures`), with the machine's movement
    over its search (`Answers.movements`); "" when it cannot be said."""
    device = device_text(d.device, d.device_name)
    moved = movements.get(cell.search.id) if cell is not None and cell.search else None
    served = served_share(cell, moved) if cell is not None else None
    if cell is not None and served is not None:
        label = labels.get(config_of(cell), cell.server.name)
        at_least = lower_bound(d.best)
        return loadgen_sentence(device, label, served) if at_least else held_sentence(device, label, at, cell, served)
    ceiling = idle_ceiling(device_cells(d, results))
    return idle_sentence(device, ceiling) if ceiling is not None else ""

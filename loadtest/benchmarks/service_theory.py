"""Queueing theory's capacity for a null server, from what a calibration run measured of it
(`loadtest.benchmarks.calibrate`): its service time S where its range was measured, the client's and the wire's own
time C, and the capacity of an M/D/1 queue with those (`loadtest.benchmarks.queueing`).

- S: the server's own time in its handler per call (its timing of the cells the range stands on: the answer's
  confirmation and its upper end's latest windows), plus its work outside the handler per call (gRPC's), which moves
  with the machine's speed: read from the comparison's reference cells (the first server saturated between rounds:
  1 / throughput less the handler's time), scaled for the other server by how the two compared in the saturated
  service cells (4 users sending back to back: the server never idle);
- C: what one user sending alone waits (no queue) less S, per request.

Not for: running the calibration (`loadtest.benchmarks.calibrate`) or the queue (`loadtest.benchmarks.queueing`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from loadtest.benchmarks.queueing import Queue, constant, empirical
from loadtest.evidence.records import CellResult
from loadtest.evidence.stats import decode, recorded_buckets

SATURATING_USERS = 4  # users sending back to back: the server is never idle



def handler_s(cell: CellResult) -> float | None:
    """The server's own mean time in its handler per call over the cell (D plus the handler's own work), seconds."""
    phases = cell.server_phases
    if phases is None:
        return None
    if phases.request_latency is not None and phases.request_latency.mean_us:
        return phases.request_latency.mean_us / 1e6
    means = [p.mean_us for p in phases.phases.values() if p.mean_us]
    return sum(means) / 1e6 if means else None


@dataclass(frozen=True)
class ServiceCells:
    """One server's service cells of one run: saturated (4 users) and alone (1 user), before and after."""

    saturated: tuple[CellResult, ...]
    alone: tuple[CellResult, ...]

    @property
    def service_s(self) -> tuple[float, ...]:
        """S from each saturated cell: 1 / its throughput."""
        return tuple(1.0 / c.throughput_rps for c in self.saturated if c.throughput_rps > 0)

    @property
    def outside_s(self) -> tuple[float, ...]:
        """Each saturated cell's S less the handler's own time: the gRPC work outside the handler, per call."""
        return tuple(1.0 / c.throughput_rps - h for c in self.saturated if c.throughput_rps > 0 and (h := handler_s(c)))

    def client_samples_s(self, service_s: float) -> np.ndarray:
        """C: each lone request's latency less S (never below 0), every lone cell's requests together."""
        values = []
        for cell in self.alone:
            for value_us, count in recorded_buckets(decode(cell.histogram_us)):
                values.append(np.full(count, max(0.0, value_us / 1e6 - service_s)))
        if not values:
            raise ValueError("no lone requests measured: the client's time is unknown")
        return np.concatenate(values)


@dataclass(frozen=True)
class Outside:
    """The first server's work outside its handler per call over the run, from its reference cells (saturated: 1 /
    throughput less the handler's time), by cell index: the gRPC work, which moves with the machine's speed."""

    points: tuple[tuple[int, float], ...]

    def at(self, index: int) -> float | None:
        """Interpolated between the reference cells around `index` (the nearest one beyond the first or last)."""
        if not self.points:
            return None
        before = [p for p in self.points if p[0] <= index]
        after = [p for p in self.points if p[0] >= index]
        if not before or not after:
            return (before or after)[-1 if before else 0][1]
        (i0, v0), (i1, v1) = before[-1], after[0]
        return v0 if i1 == i0 else v0 + (v1 - v0) * (index - i0) / (i1 - i0)


def outside_of(references: Sequence[CellResult]) -> Outside:
    return Outside(tuple(sorted((c.cell_index, 1.0 / c.throughput_rps - h) for c in references
                                if c.throughput_rps > 0 and (h := handler_s(c)))))


@dataclass(frozen=True)
class Theory:
    """A server's capacity in theory, at S in the minutes its range was measured (the value held against), and at S
    from each saturated cell before and after its capacity run (how far the machine moved)."""

    service_ms: float  # S where the range was measured: the handler's own time there, plus the work outside it
    service_ms_each: tuple[float, ...]  # S from each saturated service cell, before and after
    client_ms_p50: float
    client_ms_p99: float
    capacity_rps: float  # at `service_ms`
    capacity_rps_each: tuple[float, ...]  # at each of `service_ms_each`


def service_at(cells: ServiceCells, first: ServiceCells, outside: Outside, at: Sequence[CellResult]) -> float:
    """S where the range was measured (the cells `at`): the server's own handler time in each, plus the work outside
    its handler at that moment, the first server's (its reference cells) scaled by how the two compared in the
    saturated service cells (the same server: 1). Without either, the mean of the saturated cells' S."""
    scale = [own / ref for own, ref in zip(cells.outside_s, first.outside_s, strict=False) if ref > 0]
    each = []
    for cell in at:
        handler, work = handler_s(cell), outside.at(cell.cell_index)
        if handler is not None and work is not None and scale:
            each.append(handler + statistics.fmean(scale) * work)
    return statistics.fmean(each) if each else statistics.fmean(cells.service_s)


def theory_of(cells: ServiceCells, service_s: float, objective_ms: float) -> Theory:
    """The capacity at `service_s` and at each saturated cell's S, with the client's time of the lone cells."""
    if not cells.service_s:
        raise ValueError("no saturated cell measured: the service time is unknown")
    client = cells.client_samples_s(service_s)

    def capacity(s: float) -> float:
        return Queue(constant(s), s, empirical(client)).capacity_rps(objective_ms / 1000)

    return Theory(round(service_s * 1000, 4), tuple(round(s * 1000, 4) for s in cells.service_s),
                  round(float(np.quantile(client, 0.5)) * 1000, 3), round(float(np.quantile(client, 0.99)) * 1000, 3),
                  round(capacity(service_s), 1), tuple(round(capacity(s), 1) for s in cells.service_s))


def service_cells(results: Sequence[CellResult], server: str) -> ServiceCells:
    own = [c for c in results if c.server.name == server and c.search is None and c.load.concurrency]
    return ServiceCells(tuple(c for c in own if c.load.concurrency == SATURATING_USERS),
                        tuple(c for c in own if c.load.concurrency == 1))


def range_cells(cells: Sequence[CellResult], search_id: str, low: float | None, high: float | None
                ) -> list[CellResult]:
    """The cells a search's range stands on: its answer's confirmation and its upper end's latest windows."""
    own = [(c, c.search) for c in cells if c.search is not None and c.search.id == search_id and c.search.offered_rps]
    confirming = [c for c, tag in own if tag.offered_rps == low and tag.confirming]
    upper = [c for c, tag in own if tag.offered_rps == high and not tag.confirming]
    return confirming[-1:] + upper[-1:]


__all__ = ["SATURATING_USERS", "Outside", "ServiceCells", "Theory", "handler_s", "outside_of", "range_cells",
           "service_at", "service_cells", "theory_of"]

"""Where each request's time went, at each configuration's answer, and what the device alone does there.

One row per configuration and request batch size, at the cell its answer stands on (the capacity a
search confirmed, else its peak valid throughput): the client's mean latency split into the client and
the wire (client mean − server mean), the server's own mean, and the server's phases
(`CellResult.server_phases`: decode … encode, which sum to its request latency); then served images/s
against the device alone at the batch the server ran (`CellResult.device_floor`, `loadtest.analysis.bound`).
A TF Serving container times only its request and batching queue: its other phases read "not exported".

Not for: the verdict on what bounded an answer (`loadtest.analysis.bound`) or the other tables
(`loadtest.analysis.details`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadtest.analysis.answers import Config, SearchAnswer, config_of
from loadtest.analysis.blocks import Table, cell_mark
from loadtest.analysis.bound import padded_batch, served_share
from loadtest.analysis.formatting import MISSING
from loadtest.analysis.formatting import number as fmt
from loadtest.analysis.series import usable
from loadtest.records import CellResult
from serving.protocol.names import REQUEST_PHASES

NOT_EXPORTED = "not exported"


def server_mean_us(cell: CellResult) -> float | None:
    """The server's mean request latency over the cell: from its phases record, else the older field."""
    request = cell.server_phases.get("request_latency") or {}
    if request.get("mean_us") is not None:
        return float(request["mean_us"])
    return cell.server_metrics.get("request_latency_mean_us")


def phase_cells(cell: CellResult) -> tuple[str, ...]:
    """Each phase's mean in ms, "not exported" where the server does not time it, "—" when not recorded."""
    recorded = cell.server_phases.get("phases") or {}
    missing = set(cell.server_phases.get("not_exported") or ())
    out = []
    for phase in REQUEST_PHASES:
        mean = (recorded.get(phase) or {}).get("mean_us")
        out.append(fmt(mean / 1000, 3) if mean is not None else NOT_EXPORTED if phase in missing else MISSING)
    return tuple(out)


def phases_sum_ms(cell: CellResult) -> float | None:
    """The phases' means summed (ms); None unless every phase was timed."""
    recorded = cell.server_phases.get("phases") or {}
    means = [(recorded.get(p) or {}).get("mean_us") for p in REQUEST_PHASES]
    present = [float(m) for m in means if m is not None]
    return sum(present) / 1000 if len(present) == len(means) else None


def answer_cells(results: Sequence[CellResult], searches: Sequence[SearchAnswer]
                 ) -> dict[tuple[Config, int], tuple[CellResult, str]]:
    """Per configuration and request batch: the highest confirmed capacity's cell, else the peak valid cell."""
    out: dict[tuple[Config, int], tuple[CellResult, str]] = {}
    for s in sorted((s for s in searches if s.met), key=lambda s: s.capacity_rps or 0.0):
        capacity = s.conclusion.capacity if s.conclusion else None
        if capacity is not None:
            out[(s.config, s.request_batch_size)] = (capacity.result, f"capacity {fmt(s.capacity_rps)} req/s")
    for c in results:
        key = (config_of(c), c.load.request_batch_size)
        if usable(c) and (key not in out or (out[key][1].startswith("peak") and
                                             c.throughput_ips > out[key][0].throughput_ips)):
            out[key] = (c, "peak")
    return out


def gc_text(cell: CellResult) -> str:
    """The cell's garbage collections in the server: `12 (mean 0.31 ms, slowest ≤ 1.2 ms)`, or — when not exported."""
    gc = cell.server_phases.get("gc_pauses")
    if not gc or gc.get("count") is None:
        return MISSING
    if not gc["count"]:
        return "0"
    slowest = f", slowest ≤ {gc['max_us'] / 1000:.2f} ms" if gc.get("max_us") else ""
    return f"{gc['count']:.0f} (mean {gc['mean_us'] / 1000:.2f} ms{slowest})"


def _floor_cells(cell: CellResult) -> tuple[str, str, str]:
    served = served_share(cell)
    if served is not None:
        return (f"{fmt(served.floor.images_per_s)} (batch {served.floor.batch_size})", f"{served.share:.1%}",
                f"server ran batch {padded_batch(cell)}; floor: {cell.device_floor.get('source', '?')}")
    if cell.device_floor:
        f = cell.device_floor
        return MISSING, MISSING, f"device floor unknown: {f.get('note') or f.get('round_trip_note') or 'no batches'}"
    return MISSING, MISSING, "no device floor in this record (made before floors were recorded)"


def request_time_table(results: Sequence[CellResult], searches: Sequence[SearchAnswer],
                       labels: Mapping[Config, str]) -> Table:
    """One row per configuration and request batch, at its answer's cell."""
    rows, marks = [], []
    for (config, batch), (c, at) in sorted(answer_cells(results, searches).items()):
        server_us = server_mean_us(c)
        client = c.latency_mean_ms
        outside = client - server_us / 1000 if client is not None and server_us is not None else None
        rows.append((labels[config], str(batch), at if at != "peak" else f"peak {fmt(c.throughput_rps)} req/s",
                     fmt(client, 3), fmt(outside, 3), fmt(None if server_us is None else server_us / 1000, 3),
                     *phase_cells(c), fmt(phases_sum_ms(c), 3), gc_text(c), fmt(c.throughput_ips), *_floor_cells(c)))
        marks.append(cell_mark(c))
    return Table("Where each request's time went, and the device alone",
                 "At each configuration's answer (the capacity a search confirmed, else its peak valid throughput): "
                 "the client's mean latency, the part outside the server (client + wire = client mean − server "
                 "mean: the load generator, both gRPC stacks and the network), the server's own mean request "
                 "latency and its phases' means (they sum to it; scraped before and after the cell, warm-up "
                 "included), all in ms. Device alone: the model alone on the serving device at the batch the "
                 "server ran (its processed batch mean, rounded up to a measured size), measured by the server "
                 "at start; served ÷ device alone below 50% means the serving path, not the device, bounded "
                 "the answer. GC pauses: the server process's Python garbage collections during the cell (each "
                 "holds every request thread). \"not exported\": TF Serving does not time that phase; —: not "
                 "recorded.",
                 ("configuration", "request batch", "at", "client mean ms", "client + wire ms", "server mean ms",
                  *(f"{p} ms" for p in REQUEST_PHASES), "phases sum ms", "GC pauses", "served images/s",
                  "device alone images/s", "served ÷ device alone", "note"),
                 tuple(rows), tuple(marks))

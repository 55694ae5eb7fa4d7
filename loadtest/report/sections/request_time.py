"""Where each request's time went, at each configuration's answer, and what the device alone does there.

One row per configuration and request batch size, at the cell its answer stands on (the capacity a
search confirmed, else its peak), from the figures computed once (`loadtest.report.figures`): the
client's mean latency split into the client and
the wire (client mean − server mean), the server's own mean, and the server's phases
(`CellResult.server_phases`: decode … encode, which sum to its request latency); then served images/s
against the device alone at the batch the server ran (`CellResult.device_floor`, `loadtest.report.answers.bound`).
A TF Serving container times only its request and batching queue: its other phases read "not exported".

Not for: the verdict on what bounded an answer (`loadtest.report.answers.bound`) or the other tables
(`loadtest.report.sections.details`).
"""

from __future__ import annotations

from collections.abc import Mapping

from loadtest.evidence.records import CellResult
from loadtest.report.blocks import Table, cell_mark
from loadtest.report.configs import Config
from loadtest.report.figures import IPS_DIGITS, MS_DIGITS, Figures
from loadtest.report.formatting import MISSING
from loadtest.report.formatting import number as fmt
from serving.protocol.names import REQUEST_PHASES

NOT_EXPORTED = "not exported"


def phase_cells(cell: CellResult) -> tuple[str, ...]:
    """Each phase's mean in ms, "not exported" where the server does not time it, "—" when not recorded."""
    recorded = cell.server_phases.phases if cell.server_phases else {}
    missing = set(cell.server_phases.not_exported) if cell.server_phases else set()
    out = []
    for phase in REQUEST_PHASES:
        mean = recorded[phase].mean_us if phase in recorded else None
        out.append(fmt(mean / 1000, 3) if mean is not None else NOT_EXPORTED if phase in missing else MISSING)
    return tuple(out)


def phases_sum_ms(cell: CellResult) -> float | None:
    """The phases' means summed (ms); None unless every phase was timed."""
    recorded = cell.server_phases.phases if cell.server_phases else {}
    means = [recorded[p].mean_us if p in recorded else None for p in REQUEST_PHASES]
    present = [float(m) for m in means if m is not None]
    return sum(present) / 1000 if len(present) == len(means) else None


def gc_text(cell: CellResult) -> str:
    """The cell's garbage collections in the server: `12 (mean 0.31 ms, slowest ≤ 1.2 ms)`, or — when not exported."""
    gc = cell.server_phases.gc_pauses if cell.server_phases else None
    if gc is None or gc.count is None:
        return MISSING
    if not gc.count:
        return "0"
    slowest = f", slowest ≤ {gc.max_us / 1000:.2f} ms" if gc.max_us else ""
    return f"{gc.count:.0f} (mean {(gc.mean_us or 0.0) / 1000:.2f} ms{slowest})"


def floor_source(cell: CellResult) -> str:
    """Who measured the cell's floor, "?" where its record does not say."""
    floor = cell.device_floor
    return "?" if floor is None or "source" not in floor.present else str(floor.source)


def _floor_cells(f: Figures) -> tuple[str, str, str]:
    cell = f.cell
    if f.served is not None:
        return (f.floor_text().replace(" images/s", ""), f"{f.served.share:.1%}",
                f"server ran batch {f.ran_batch}; floor: {floor_source(cell)}")
    if cell.device_floor:
        floor = cell.device_floor
        why = floor.note or floor.round_trip_note or "no batches"
        return MISSING, MISSING, f"device floor unknown: {why}"
    return MISSING, MISSING, "no device floor in this record (made before floors were recorded)"


def request_time_table(figures: Mapping[tuple[Config, int], Figures]) -> Table:
    """One row per configuration and request batch, at its answer's cell (`loadtest.report.figures`)."""
    rows, marks = [], []
    for f in figures.values():
        c = f.cell
        rows.append((f.label, str(f.request_batch), f.at, fmt(f.client_mean_ms, MS_DIGITS),
                     fmt(f.client_wire_ms, MS_DIGITS), fmt(f.server_mean_ms, MS_DIGITS), *phase_cells(c),
                     fmt(phases_sum_ms(c), MS_DIGITS), gc_text(c), fmt(f.served_ips, IPS_DIGITS), *_floor_cells(f)))
        marks.append(cell_mark(c))
    return Table("Where each request's time went, and the device alone",
                 "At each configuration's answer (the cell of the highest capacity a search confirmed, else its "
                 "peak: its highest valid throughput, any load mode): "
                 "the client's mean latency, the part outside the server (client + wire = client mean − server "
                 "mean: the load generator, both gRPC stacks and the network), the server's own mean request "
                 "latency and its phases' means (they sum to it; scraped before and after the cell, warm-up "
                 "included), all in ms. Device alone: the model alone on the serving device at the batch the "
                 "server ran (its processed batch mean, rounded up to a measured size), measured by the server "
                 "at start; served ÷ device alone below 50%, or within the run's drift of 50%, means the serving "
                 "path, not the device, bounded the answer. GC pauses: the server process's Python garbage "
                 "collections during the cell (each holds every request thread). \"not exported\": TF Serving "
                 "does not time that phase; —: not "
                 "recorded. The same figures are in figures.csv and figures.json beside this report.",
                 ("configuration", "request batch", "at", "client mean ms", "client + wire ms", "server mean ms",
                  *(f"{p} ms" for p in REQUEST_PHASES), "phases sum ms", "GC pauses", "served images/s",
                  "device alone images/s", "served ÷ device alone", "note"),
                 tuple(rows), tuple(marks))

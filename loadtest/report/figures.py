"""The figures of each configuration at each request batch, computed once: every place that prints one (the
report's tables and sentences, the console, `figures.csv`, `figures.json` and so the device bundle's
`device-run.json`) prints these values, rounded here, so one quantity reads as one number everywhere.

Per configuration and request batch:

- **the answer's cell**: the cell its highest confirmed capacity stands on (any objective searched), else its
  highest unconfirmed pass's (the cell the card's verdict reads), else its peak; `at` says which ("capacity 656.6
  req/s", "a pass at 1,351.8 req/s", "peak 367.5 req/s");
- **the peak**: its valid cell with the highest images/s, whatever the load mode and the latency; an
  overloaded cell (the server fell behind) is never a peak. Named with its load mode and level;
- at the answer's cell: the client's mean latency, the server's own mean request latency, their
  difference (client + wire), the served images/s, the batch the server ran (its processed batch mean,
  rounded up; `loadtest.report.answers.bound.padded_batch`) and the device alone at that batch (the floor);
- the answer's tool ceiling (`loadtest.report.answers.tool_ceiling`), where a search answered it.

Pure functions over `CellResult`s and `Answers`. Not for: the tables that print them
(`loadtest.report.sections.request_time`, `loadtest.report.sections.details`) or what bounded an answer
(`loadtest.report.answers.bound`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import LoadMode
from loadtest.report.answers.answers import Answers, is_reference, typical
from loadtest.report.answers.bound import ServedShare, padded_batch, served_share
from loadtest.report.answers.tool_ceiling import ToolCeiling, ceiling_for
from loadtest.report.configs import Config, config_of
from loadtest.report.formatting import number as fmt
from loadtest.report.series import load_level, sustained, usable
from serving.endpoint import server_with_runtime

MS_DIGITS, IPS_DIGITS = 3, 1  # every latency in ms and every rate is printed at these


def _ips(cell: CellResult) -> float:
    return cell.throughput_ips


def peak_images(f: Figures) -> float:
    """A configuration's peak images/s, 0 without a peak: the key its device's best is chosen by."""
    return f.peak.images_per_s if f.peak else 0.0


def _ms(us: float | None) -> float | None:
    return None if us is None else round(us / 1000, MS_DIGITS)


def server_mean_us(cell: CellResult) -> float | None:
    """The server's mean request latency over the cell: from its phases record, else the older field."""
    request = cell.server_phases.request_latency if cell.server_phases else None
    if request is not None and request.mean_us is not None:
        return float(request.mean_us)
    return cell.server_metrics.request_latency_mean_us if cell.server_metrics is not None else None


def mean_ms(cell: CellResult) -> tuple[float | None, float | None]:
    """The client's and the server's mean latency over the cell in ms, rounded as every figure is."""
    client = None if cell.latency_mean_ms is None else round(cell.latency_mean_ms, MS_DIGITS)
    return client, _ms(server_mean_us(cell))


def wire_ms(client_ms: float | None, server_ms: float | None) -> float | None:
    """Client + wire: the client's mean minus the server's (the load generator, both gRPC stacks, the network)."""
    return None if client_ms is None or server_ms is None else round(client_ms - server_ms, MS_DIGITS)


def highest_sustained(cells: Sequence[CellResult]) -> CellResult | None:
    """The valid cell with the highest images/s, overloaded cells skipped (never a peak); None when none is."""
    return max((c for c in cells if sustained(c)), key=_ips, default=None)


def load_words(cell: CellResult) -> str:
    """`open loop, 400 req/s offered` or `closed loop, 4 users`: how a cell was loaded."""
    if cell.load.mode == LoadMode.CLOSED:
        users = load_level(cell)
        return f"closed loop, {users:g} user{'' if users == 1 else 's'}"
    return f"open loop, {load_level(cell):,g} req/s offered"


@dataclass(frozen=True)
class Peak:
    """A configuration's highest valid throughput at one request batch, whatever the latency."""

    images_per_s: float
    requests_per_s: float
    load: str  # `load_words` of its cell
    p99_ms: float | None
    cell: CellResult = field(compare=False, repr=False)


@dataclass(frozen=True)
class Figures:
    """One configuration at one request batch: its answer's cell and what was measured there, and its peak."""

    config: Config
    label: str
    request_batch: int
    at: str  # "capacity 656.6 req/s" (the highest a search confirmed), "a pass at 1,351.8 req/s" or "peak 367.5 req/s"
    cell: CellResult = field(compare=False, repr=False)
    client_mean_ms: float | None
    server_mean_ms: float | None
    served_ips: float
    ran_batch: int  # the batch the server ran at the answer's cell
    served: ServedShare | None  # served against the device alone at `ran_batch`; None without a floor
    peak: Peak | None
    ceiling: ToolCeiling | None = None  # the answer's tool ceiling; None where no search answered it

    @property
    def client_wire_ms(self) -> float | None:
        """The client's mean minus the server's: the load generator, both gRPC stacks and the network."""
        return wire_ms(self.client_mean_ms, self.server_mean_ms)

    @property
    def at_words(self) -> str:
        """`at capacity` or `at its peak`: where the answer's figures were measured (the tables give the rate)."""
        return "at its peak" if self.at.startswith("peak") else "at its highest pass" if self.at.startswith("a pass") \
            else "at capacity"

    def floor_text(self) -> str:
        """`12,271.8 images/s (batch 8)`: the device alone at the batch the server ran; "—" when not measured."""
        if self.served is None:
            return fmt(None)
        return f"{fmt(self.served.floor.images_per_s)} images/s ({self.served.floor.at})"

    @property
    def server(self) -> str:
        """What served: "embedded server (TensorFlow 2.21.0, ...)" or "TF Serving container"."""
        return server_with_runtime(self.config.kind, self.config.runtime)

    def as_dict(self) -> dict:
        """The figures as `figures.json` and `device-run.json` carry them (the values the report prints), with
        what was measured: the server and its runtime, the device, the batching profile."""
        floor, recorded = (self.served.floor if self.served else None), self.cell.device_floor
        return {"configuration": self.label, "server": self.server, "device": self.config.device,
                "device_name": self.config.device_name, "batching_profile": self.config.batching_profile,
                "request_batch": self.request_batch, "at": self.at,
                "client_mean_ms": self.client_mean_ms, "server_mean_ms": self.server_mean_ms,
                "client_wire_ms": self.client_wire_ms, "served_images_per_s": self.served_ips,
                "server_ran_batch": self.ran_batch,
                "device_floor": None if floor is None or recorded is None else {
                    "batch": floor.batch_size, "images_per_s": round(floor.images_per_s, IPS_DIGITS),
                    "source": recorded.source, "runtime": recorded.runtime, "callers": floor.callers},
                "served_share_of_floor": None if self.served is None else round(self.served.share, 3),
                "tool_ceiling": None if self.ceiling is None else self.ceiling.as_dict(),
                "phases_mean_ms": {name: _ms(phase.mean_us) for name, phase in
                                   (self.cell.server_phases.phases if self.cell.server_phases else {}).items()},
                "peak": None if self.peak is None else {
                    "images_per_s": self.peak.images_per_s, "requests_per_s": self.peak.requests_per_s,
                    "load": self.peak.load, "p99_ms": self.peak.p99_ms}}


def peak_of(cells: Sequence[CellResult]) -> Peak | None:
    """The peak of `cells`: their `highest_sustained`, rounded and named; None when there is none."""
    top = highest_sustained(cells)
    if top is None:
        return None
    return Peak(round(top.throughput_ips, IPS_DIGITS), round(top.throughput_rps, IPS_DIGITS), load_words(top),
                None if top.latency_p99_ms is None else round(top.latency_p99_ms, MS_DIGITS), top)


def _capacity_cells(answers: Answers) -> dict[tuple[Config, int], tuple[CellResult, str, ToolCeiling]]:
    """Per configuration and request batch: the cell its answer stands on, the one every verdict reads
    (`loadtest.report.answers.verdict.answer_cell`: the confirmation's, else the highest pass's), of its highest
    confirmed capacity at any objective, else of its highest pass (of repeated searches, their `typical` answer's,
    as the decision's), and that search's tool ceiling."""
    out: dict[tuple[Config, int], tuple[CellResult, str, ToolCeiling]] = {}
    answered = [s for s in typical(answers.searches) if s.conclusion and s.conclusion.answer]
    for s in sorted(answered, key=lambda s: (s.met, s.figure_rps or 0.0)):
        step = s.conclusion.answer if s.conclusion else None
        if step is not None:
            at = f"capacity {fmt(s.capacity_rps)} req/s" if s.met else f"a pass at {fmt(step.rate_rps)} req/s"
            out[(s.config, s.request_batch_size)] = (step.result, at, ceiling_for(s.search_id, answers.ceilings))
    return out


def _figures(config: Config, label: str, batch: int, cell: CellResult, at: str, peak: Peak | None,
             ceiling: ToolCeiling | None = None) -> Figures:
    return Figures(config, label, batch, at, cell, *mean_ms(cell),
                   round(cell.throughput_ips, IPS_DIGITS), padded_batch(cell), served_share(cell), peak, ceiling)


def figures_of(results: Sequence[CellResult], answers: Answers, labels: Mapping[Config, str]
               ) -> dict[tuple[Config, int], Figures]:
    """Every configuration and request batch with a valid cell, in configuration and batch order. A paired
    comparison's reference cells measure the machine, not a configuration: left out (else the reference's
    request batch 1 read as a configuration measured there)."""
    groups: dict[tuple[Config, int], list[CellResult]] = {}
    for c in results:
        if usable(c) and not is_reference(c):
            groups.setdefault((config_of(c), c.load.request_batch_size), []).append(c)
    answered = _capacity_cells(answers)
    out = {}
    for key in sorted(groups):
        peak = peak_of(groups[key])
        top = peak.cell if peak else max(groups[key], key=_ips)  # no sustained cell: the highest valid one
        cell, at, ceiling = answered.get(key) or (top, f"peak {fmt(top.throughput_rps)} req/s", None)
        out[key] = _figures(key[0], labels[key[0]], key[1], cell, at, peak, ceiling)
    return out


@dataclass(frozen=True)
class CeilingBar:
    """One configuration at one request batch as the report's first chart draws it: its `Figures.served` share (what
    it served at its answer ÷ the device alone at the batch the server ran), up to where the answer's range ends."""

    config: Config  # whose colour the bar is drawn in
    label: str  # `gpu-off, batch 32`
    share: float | None  # `Figures.served.share`; None where the device alone was not measured
    high_share: float | None  # the answer's upper end × the request batch ÷ the device alone; None without one


def ceiling_bars(figures: Mapping[tuple[Config, int], Figures], answers: Answers) -> list[CeilingBar]:
    """Every configuration and request batch with a capacity search's answer, in figures' order."""
    searched = {(s.config, s.request_batch_size): s for s in typical(answers.searches)}
    bars = []
    for key, f in figures.items():
        search = searched.get(key)
        if search is None:
            continue
        share = f.served.share if f.served else None
        high = search.upper_rps * f.request_batch if search.met and search.upper_rps else None
        high_share = high / f.served.floor.images_per_s if f.served and high is not None else None
        bars.append(CeilingBar(f.config, f"{f.label}, batch {f.request_batch}", share, high_share))
    return bars


def device_figures(figures: Mapping[tuple[Config, int], Figures], device: str, device_name: str, batch: int,
                   best: Config | None) -> Figures | None:
    """The figures a device's answer stands on at `batch`: its best configuration's, else the configuration
    with the highest peak on that device; None when nothing valid was measured there."""
    if best is not None and (best, batch) in figures:
        return figures[(best, batch)]
    here = [f for (c, b), f in figures.items() if b == batch and (c.device, c.device_name) == (device, device_name)]
    return max(here, key=peak_images, default=None)


# ----------------------------------------------------------------------------- printed as text, CSV and JSON

HEADER = ("configuration", "request batch", "at", "client mean ms", "server mean ms", "client + wire ms",
          "served images/s", "server ran batch", "device alone images/s", "device alone at batch",
          "served ÷ device alone", "peak images/s", "peak req/s", "peak load", "tool ceiling")


def plain(value: float | None, digits: int) -> str:
    """A number as a spreadsheet reads it (no thousands separator); empty when not measured."""
    return "" if value is None else f"{value:.{digits}f}"


def row(f: Figures, for_csv: bool = False) -> tuple[str, ...]:
    """The figures as one row of text: the console's table prints these cells, `figures.csv` (`for_csv`) the
    same values with `plain` numbers and the served share as a fraction, as figures.json has it."""
    number = plain if for_csv else fmt
    floor = f.served.floor if f.served else None
    share = f.served.share if f.served else None
    share_text = plain(share, 3) if for_csv else (fmt(None) if share is None else f"{share:.1%}")
    return (f.label, str(f.request_batch), f.at, number(f.client_mean_ms, MS_DIGITS),
            number(f.server_mean_ms, MS_DIGITS), number(f.client_wire_ms, MS_DIGITS), number(f.served_ips, IPS_DIGITS),
            str(f.ran_batch), number(floor.images_per_s if floor else None, IPS_DIGITS),
            str(floor.batch_size) if floor else number(None, 0),
            share_text,
            number(f.peak.images_per_s if f.peak else None, IPS_DIGITS),
            number(f.peak.requests_per_s if f.peak else None, IPS_DIGITS),
            f.peak.load if f.peak else "no sustained valid cell",
            f.ceiling.value() if f.ceiling is not None else ("" if for_csv else fmt(None)))


CSV_HEADER = (*HEADER, "server", "device", "device name")  # a CSV stands alone: it says what was measured


def csv_text(figures: Sequence[Figures]) -> str:
    """`figures.csv`: one row per configuration and request batch (as perf_analyzer's CSV has one per load),
    its numbers plain, then the server, device and device name it measured."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    writer.writerows((*row(f, for_csv=True), f.server, f.config.device, f.config.device_name) for f in figures)
    return out.getvalue()


def console_lines(figures: Sequence[Figures]) -> list[str]:
    """The figures as an aligned text table for a terminal."""
    rows = [HEADER, *(row(f) for f in figures)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]

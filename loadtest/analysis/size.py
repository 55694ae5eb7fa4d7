"""Hardware sizing: how many replicas of which device meet a latency objective at a target load.

Reads the sweep's `results.jsonl` records, groups them into series (one per run × server ×
device × batching profile × request batch size × load mode), finds each series' highest
throughput that meets the p99 objective, then turns that per-replica capacity into replicas,
cost per hour and cost per million inferences from a price file the user edits.

Measured points are the evidence: capacity is interpolated only between two measured points of a
valid monotone series and never extrapolated past the highest one; invalid or failed cells are
never used (they are listed). Where the measurements cannot answer, the answer says so.

Not for: drawing plots or writing the report (`loadtest.analysis.report`), grouping results into
series (`loadtest.analysis.series`), reading prices (`loadtest.analysis.prices`), or measuring.

    mnist-bench size --p99-ms 50 --target-rps 5000 [--headroom 0.2] \
        [--prices loadtest/prices.example.toml] results/*/results.jsonl
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rich.table import Table

from loadtest.analysis.formatting import number
from loadtest.analysis.prices import DEFAULT_PRICES, PriceBook, load_prices
from loadtest.analysis.series import (
    AnalysisError,
    Series,
    SeriesKey,
    group_series,
    level_name,
    load_level,
    read_all,
    unusable_reason,
    usable,
)
from loadtest.records import CellResult
from loadtest.tables import plain_table

UNITS = {"rps": "requests/s", "ips": "images/s"}


# ----------------------------------------------------------------------------- capacity


@dataclass(frozen=True)
class MeasuredPoint:
    level: float
    throughput: float  # in the unit the target is given in
    p99_ms: float


@dataclass(frozen=True)
class Capacity:
    """Per-replica throughput meeting the objective, and how it was found."""

    throughput: float | None  # None when the measurements cannot answer
    method: str  # "interpolated", "measured", "lower-bound", "never-met", "no-valid-cells"
    note: str


def is_monotone(points: Sequence[MeasuredPoint]) -> bool:
    """Throughput and p99 both non-decreasing with load: the shape interpolation assumes."""
    return all(b.throughput >= a.throughput and b.p99_ms >= a.p99_ms
               for a, b in zip(points, points[1:]))


def interpolate(low: MeasuredPoint, high: MeasuredPoint, p99_ms: float) -> float:
    """Throughput where the straight line between two measured points crosses the objective."""
    share = (p99_ms - low.p99_ms) / (high.p99_ms - low.p99_ms)
    return low.throughput + share * (high.throughput - low.throughput)


def capacity_at_objective(points: Sequence[MeasuredPoint], p99_ms: float,
                          level: str = "load level") -> Capacity:
    """Highest throughput with p99 <= objective, from measured points only (never extrapolated).

    `level` names the load axis in the notes ("concurrency", "offered rate (req/s)").
    """
    points = sorted(points, key=lambda p: p.level)
    if not points:
        return Capacity(None, "no-valid-cells", "no valid measured cell")
    meeting = [p for p in points if p.p99_ms <= p99_ms]
    if not meeting:
        low = min(points, key=lambda p: p.p99_ms)
        return Capacity(None, "never-met", f"objective never met: lowest measured p99 is "
                        f"{low.p99_ms:g} ms (at {level} {low.level:g})")
    best = max(meeting, key=lambda p: p.throughput)
    first_fail = next((i for i, p in enumerate(points) if p.p99_ms > p99_ms), None)
    if first_fail is None:
        return Capacity(best.throughput, "lower-bound",
                        f"objective met at every valid measured load (up to {level} "
                        f"{points[-1].level:g}); true capacity may be higher, not extrapolated")
    prefix, later = points[:first_fail + 1], points[first_fail + 1:]
    if first_fail > 0 and is_monotone(prefix) and all(p.p99_ms > p99_ms for p in later):
        low, high = prefix[-2], prefix[-1]
        return Capacity(interpolate(low, high, p99_ms), "interpolated",
                        f"linear between {level} {low.level:g} (p99 {low.p99_ms:g} ms) and "
                        f"{high.level:g} (p99 {high.p99_ms:g} ms)")
    return Capacity(best.throughput, "measured",
                    f"series not monotone, so not interpolated: highest measured point meeting "
                    f"the objective ({level} {best.level:g})")


# ----------------------------------------------------------------------------- arithmetic


def replicas_needed(target: float, capacity: float, headroom: float) -> int:
    """ceil(target / (capacity × (1 − headroom))), rounded first so 5.0000000001 stays 5."""
    return math.ceil(round(target / (capacity * (1.0 - headroom)), 9))


def cost_per_hour(price_per_hour: float, replicas: int) -> float:
    return price_per_hour * replicas


def cost_per_million(hourly_cost: float, inferences_per_s: float) -> float:
    """Cost of one million inferences (images) when serving `inferences_per_s` for an hour."""
    return hourly_cost / (inferences_per_s * 3600.0) * 1e6


# ----------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class Objective:
    p99_ms: float
    target: float
    unit: str  # "rps" or "ips"
    headroom: float

    def describe(self) -> str:
        return (f"p99 <= {self.p99_ms:g} ms at {self.target:g} {UNITS[self.unit]}, "
                f"headroom {self.headroom:.0%}")


@dataclass(frozen=True)
class SizingAnswer:
    """One option: a device × batching profile × request batch size, sized for the objective."""

    series: SeriesKey
    meets: bool  # False: the measurements cannot answer for this option (see note)
    capacity: float | None  # per replica, in the objective's unit, p99 within the objective
    capacity_method: str
    replicas: int | None
    price_per_hour: float | None  # one replica's machine
    cost_per_hour: float | None
    cost_per_million: float | None  # per million inferences (images) at the target load
    note: str
    cells_used: int
    cells_not_used: tuple[str, ...]  # "level L: reason" for each invalid or failed cell
    rank: int | None = None  # 1 = cheapest (then fewest replicas) among options that meet


def measured_points(series: Series, unit: str) -> list[MeasuredPoint]:
    return [MeasuredPoint(load_level(c), c.throughput_rps if unit == "rps" else c.throughput_ips,
                          c.latency_p99_ms) for c in series.cells
            if usable(c) and c.latency_p99_ms is not None]


def size_series(series: Series, objective: Objective, prices: PriceBook) -> SizingAnswer:
    """Capacity, replicas and cost of one option; `meets` False where the data cannot say."""
    points = measured_points(series, objective.unit)
    skipped = tuple(f"{level_name(c.load.mode)} {load_level(c):g}: {unusable_reason(c)}"
                    for c in series.cells if not usable(c))
    key = series.key
    capacity = capacity_at_objective(points, objective.p99_ms, level_name(key.mode))
    price = prices.lookup(key.device, key.device_name)
    if capacity.throughput is None or capacity.throughput <= 0:
        note = capacity.note if capacity.throughput is None else "no throughput measured"
        return SizingAnswer(key, False, None, capacity.method, None, price, None, None, note,
                            len(points), skipped)
    replicas = replicas_needed(objective.target, capacity.throughput, objective.headroom)
    images_per_s = objective.target * (key.request_batch_size if objective.unit == "rps" else 1)
    hourly = cost_per_hour(price, replicas) if price is not None else None
    per_million = cost_per_million(hourly, images_per_s) if hourly is not None else None
    note = capacity.note + ("" if price is not None else
                            f"; no price for {key.device_name!r} or device {key.device!r}")
    return SizingAnswer(key, True, capacity.throughput, capacity.method, replicas, price,
                        hourly, per_million, note, len(points), skipped)


def rank_answers(answers: Sequence[SizingAnswer]) -> list[SizingAnswer]:
    """Priced options that meet, cheapest first; then unpriced ones; then those that cannot."""
    def order(a: SizingAnswer):
        return (not a.meets, a.cost_per_hour is None, a.cost_per_hour or 0.0,
                a.replicas or 0, -(a.capacity or 0.0), a.series.label())
    ranked = sorted(answers, key=order)
    out, rank = [], 0
    for answer in ranked:
        if answer.meets:
            rank += 1
            answer = replace(answer, rank=rank)
        out.append(answer)
    return out


def size(results: Sequence[CellResult], objective: Objective, prices: PriceBook) -> list[SizingAnswer]:
    return rank_answers([size_series(s, objective, prices) for s in group_series(results)])


def cheapest(answers: Sequence[SizingAnswer]) -> SizingAnswer | None:
    priced = [a for a in answers if a.meets and a.cost_per_hour is not None]
    return min(priced, key=lambda a: (a.cost_per_hour, a.replicas)) if priced else None


# ----------------------------------------------------------------------------- text


def answer_table(answers: Sequence[SizingAnswer], unit: str, currency: str, with_run: bool) -> str:
    """The options that meet the objective, ranked, as a plain-text table ("" when none does)."""
    table = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 2, 0, 0))
    for name in ("rank", "option", "device name", *(("run",) if with_run else ()), f"capacity {unit}", "how",
                 "replicas", f"{currency}/h", f"{currency}/M inferences"):
        table.add_column(name, no_wrap=True)
    for a in answers:
        if a.meets:
            table.add_row(str(a.rank), a.series.label(), a.series.device_name or "(not recorded)",
                          *((a.series.run_id,) if with_run else ()), f"{a.capacity:,.1f}", a.capacity_method,
                          str(a.replicas), number(a.cost_per_hour, 2), number(a.cost_per_million, 4))
    if not table.row_count:
        return ""
    return plain_table(table, 10_000)


def format_answers(answers: Sequence[SizingAnswer], objective: Objective, prices: PriceBook) -> str:
    """The plain-text answer: a ranked table, the cheapest option, and what could not be sized."""
    with_run = len({a.series.run_id for a in answers}) > 1
    lines = [f"Sizing for {objective.describe()}: replicas = ceil(target / (capacity x "
             f"{1 - objective.headroom:g})); each replica assumed to perform as the measured one.",
             f"Prices: {prices.source} ({prices.currency} per hour per replica"
             + ("; EXAMPLE prices, not quotes" if prices.example else "") + ")"]
    table = answer_table(answers, UNITS[objective.unit], prices.currency, with_run)
    if table:
        lines += ["", table, "how: interpolated = between two measured points; measured = a measured point; "
                             "lower-bound = objective met at every measured load, capacity may be higher."]
    lines += ["", _verdict(answers, prices.currency, with_run, bool(table))]
    lines += _notes(answers, with_run)
    return "\n".join(lines)


def _verdict(answers: Sequence[SizingAnswer], currency: str, with_run: bool, any_meets: bool) -> str:
    best = cheapest(answers)
    if best is not None:
        return (f"Cheapest meeting the objective: {best.series.label(with_run)} on "
                f"{best.series.device_name}: {best.replicas} replica(s), "
                f"{number(best.cost_per_hour, 2)} {currency}/h, "
                f"{number(best.cost_per_million, 4)} {currency} per million inferences.")
    if any_meets:
        return "Options meet the objective but none has a price in the price file."
    return "No measured option meets the objective: the measurements cannot answer."


def _notes(answers: Sequence[SizingAnswer], with_run: bool) -> list[str]:
    lines = []
    cannot = [a for a in answers if not a.meets]
    if cannot:
        lines += ["", "Cannot answer from these measurements:"]
        lines += [f"  {a.series.label(with_run)} ({a.series.device_name or 'device name not recorded'}): "
                  f"{a.note}" for a in cannot]
    notes = [a for a in answers if a.meets and a.capacity_method != "interpolated"]
    if notes:
        lines += ["", "Notes:"]
        lines += [f"  {a.series.label(with_run)}: {a.note}" for a in notes]
    skipped = [(a, s) for a in answers for s in a.cells_not_used]
    if skipped:
        lines += ["", f"Not used ({len(skipped)} invalid or failed cells):"]
        lines += [f"  {a.series.label(with_run)}, {s}" for a, s in skipped]
    return lines


# ----------------------------------------------------------------------------- entry point


def objective_from(p99_ms: float, target_rps: float | None, target_ips: float | None, headroom: float) -> Objective:
    """The objective the flags describe; AnalysisError names a flag out of range."""
    unit, target = ("rps", target_rps) if target_rps is not None else ("ips", target_ips)
    if target is None:
        raise AnalysisError("one of the arguments --target-rps --target-ips is required")
    if not (math.isfinite(p99_ms) and p99_ms > 0):
        raise AnalysisError(f"--p99-ms must be a positive number of milliseconds, got {p99_ms:g}")
    if not (math.isfinite(target) and target > 0):
        raise AnalysisError(f"--target-{unit} must be positive, got {target:g}")
    if not (0 <= headroom < 1):
        raise AnalysisError(f"--headroom must be in [0, 1), got {headroom:g}")
    return Objective(p99_ms, target, unit, headroom)


def run(results: Sequence[Path], objective: Objective, prices: Path = DEFAULT_PRICES,
        as_json: bool = False) -> tuple[list[SizingAnswer], str]:
    """Read, size; returns the answers and their text (JSON or the table). Raises AnalysisError."""
    book = load_prices(prices)
    answers = size(read_all(results), objective, book)
    if as_json:
        return answers, json.dumps([asdict(a) for a in answers], indent=2)
    return answers, format_answers(answers, objective, book)

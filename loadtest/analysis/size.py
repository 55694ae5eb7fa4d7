"""Hardware sizing: how many replicas of which device meet a latency objective at a target load.

Reads the sweep's `results.jsonl` records, groups them into series (one per run × server ×
device × batching profile × request batch size × load mode), finds each series' highest
throughput that meets the p99 objective, then turns that per-replica capacity into replicas,
cost per hour and cost per million inferences from a price file the user edits.

Measured points are the evidence: capacity is interpolated only between two measured points of a
valid monotone series and never extrapolated past the highest one; invalid or failed cells are
never used (they are listed). Where the measurements cannot answer, the answer says so.

Not for: drawing plots or writing the report (`loadtest.analysis.report`), or measuring anything.

    python -m loadtest.analysis.size --p99_ms 50 --target_rps 5000 [--headroom 0.2] \
        [--prices loadtest/prices.example.toml] results/*/results.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from loadtest.records import CellResult, read_results

DEFAULT_PRICES = Path(__file__).resolve().parents[1] / "prices.example.toml"
PRICE_FIELDS = {"currency", "example", "note", "device", "device_name"}
UNITS = {"rps": "requests/s", "ips": "images/s"}


class SizingError(Exception):
    """Bad input to the sizing: the CLI prints it as one line and exits non-zero."""


# ----------------------------------------------------------------------------- series


@dataclass(frozen=True)
class SeriesKey:
    """What one line of measurements holds fixed; only the load level varies along it."""

    run_id: str
    kind: str
    device: str
    device_name: str
    batching_profile: str
    request_batch_size: int
    mode: str  # "closed" (level = concurrency) or "open" (level = offered requests/s)

    def label(self, with_run: bool = False) -> str:
        text = (f"{self.device} {self.kind}, batching {self.batching_profile}, "
                f"req batch {self.request_batch_size}" + (", open loop" if self.mode == "open" else ""))
        return f"{text}, run {self.run_id}" if with_run else text


@dataclass(frozen=True)
class Series:
    key: SeriesKey
    cells: tuple[CellResult, ...]  # sorted by load level


def load_level(cell: CellResult) -> float:
    """Concurrency for a closed loop, offered rate (requests/s) for an open loop."""
    level = cell.load.concurrency if cell.load.mode == "closed" else cell.load.rate_rps
    return float(level) if level is not None else 0.0


def level_name(mode: str) -> str:
    return "concurrency" if mode == "closed" else "offered rate (req/s)"


def series_key(cell: CellResult) -> SeriesKey:
    s = cell.server
    return SeriesKey(cell.run_id, s.kind, s.device, s.device_name, s.batching_profile,
                     cell.load.request_batch_size, cell.load.mode)


def group_series(results: Sequence[CellResult]) -> list[Series]:
    """Cells grouped into series, in a stable order (device, profile, batch size, mode, run)."""
    groups: dict[SeriesKey, list[CellResult]] = {}
    for cell in results:
        groups.setdefault(series_key(cell), []).append(cell)
    order = sorted(groups, key=lambda k: (k.device, k.kind, k.device_name, k.batching_profile,
                                          k.request_batch_size, k.mode, k.run_id))
    return [Series(k, tuple(sorted(groups[k], key=lambda c: (load_level(c), c.cell_index))))
            for k in order]


def usable(cell: CellResult) -> bool:
    """Only valid, finished cells with a p99 count as evidence."""
    return cell.valid and cell.status == "ok" and cell.latency_p99_ms is not None


def unusable_reason(cell: CellResult) -> str:
    if cell.status != "ok":
        return f"failed: {cell.failure_reason or 'no reason recorded'}"
    if cell.flags:
        return "; ".join(f"{f.flag}: {f.reason}" for f in cell.flags)
    return "invalid (no reason recorded)" if not cell.valid else "no p99 recorded"


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


# ----------------------------------------------------------------------------- prices


@dataclass(frozen=True)
class PriceBook:
    """Cost per hour of one replica's machine, by exact device name, else by device kind."""

    source: str
    currency: str
    example: bool
    note: str
    by_device_name: dict
    by_device: dict

    def lookup(self, device: str, device_name: str) -> float | None:
        if device_name in self.by_device_name:
            return self.by_device_name[device_name]
        return self.by_device.get(device)


def _price_table(raw: dict, name: str, path: Path) -> dict:
    table = raw.get(name, {})
    if not isinstance(table, dict):
        raise SizingError(f"{path}: [{name}] must be a table of name = price per hour")
    for key, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SizingError(f"{path}: [{name}] {key!r} must be a non-negative number, got {value!r}")
    return {key: float(value) for key, value in table.items()}


def load_prices(path: Path) -> PriceBook:
    """Read a price file; unknown fields are errors so a typo cannot silently price nothing."""
    path = Path(path)
    if not path.is_file():
        raise SizingError(f"price file not found: {path}")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise SizingError(f"{path}: not valid TOML: {exc}") from exc
    unknown = sorted(set(raw) - PRICE_FIELDS)
    if unknown:
        raise SizingError(f"{path}: unknown field(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(PRICE_FIELDS))}")
    return PriceBook(source=str(path), currency=str(raw.get("currency", "USD")),
                     example=bool(raw.get("example", False)), note=str(raw.get("note", "")),
                     by_device_name=_price_table(raw, "device_name", path),
                     by_device=_price_table(raw, "device", path))


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
                          c.latency_p99_ms) for c in series.cells if usable(c)]


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


def _money(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def format_answers(answers: Sequence[SizingAnswer], objective: Objective, prices: PriceBook) -> str:
    """The plain-text answer: a ranked table, the cheapest option, and what could not be sized."""
    with_run = len({a.series.run_id for a in answers}) > 1
    unit = UNITS[objective.unit]
    lines = [f"Sizing for {objective.describe()}: replicas = ceil(target / (capacity x "
             f"{1 - objective.headroom:g})); each replica assumed to perform as the measured one.",
             f"Prices: {prices.source} ({prices.currency} per hour per replica"
             + ("; EXAMPLE prices, not quotes" if prices.example else "") + ")"]
    header = ("rank", "option", "device name", *(("run",) if with_run else ()), f"capacity {unit}",
              "how", "replicas",
              f"{prices.currency}/h", f"{prices.currency}/M inferences")
    rows = [(str(a.rank), a.series.label(), a.series.device_name or "(not recorded)",
             *((a.series.run_id,) if with_run else ()), f"{a.capacity:,.1f}",
             a.capacity_method, str(a.replicas), _money(a.cost_per_hour), _money(a.cost_per_million, 4))
            for a in answers if a.meets]
    if rows:
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
        lines += ["", "  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.append("how: interpolated = between two measured points; measured = a measured point; "
                     "lower-bound = objective met at every measured load, capacity may be higher.")
    best = cheapest(answers)
    lines.append("")
    if best is not None:
        lines.append(f"Cheapest meeting the objective: {best.series.label(with_run)} on "
                     f"{best.series.device_name}: {best.replicas} replica(s), "
                     f"{_money(best.cost_per_hour)} {prices.currency}/h, "
                     f"{_money(best.cost_per_million, 4)} {prices.currency} per million inferences.")
    elif rows:
        lines.append("Options meet the objective but none has a price in the price file.")
    else:
        lines.append("No measured option meets the objective: the measurements cannot answer.")
    lines += _notes(answers, with_run)
    return "\n".join(lines)


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


# ----------------------------------------------------------------------------- CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one-line errors, raised so main() formats them
        raise SizingError(message)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="python -m loadtest.analysis.size", description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="results.jsonl files of sweeps")
    parser.add_argument("--p99_ms", type=float, required=True, help="latency objective: p99 <= this")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--target_rps", type=float, help="target load in requests/s")
    target.add_argument("--target_ips", type=float, help="target load in images/s")
    parser.add_argument("--headroom", type=float, default=0.2,
                        help="share of each replica's capacity kept free (default 0.2)")
    parser.add_argument("--prices", type=Path, default=DEFAULT_PRICES, help="price file (TOML)")
    parser.add_argument("--json", action="store_true", help="print the answers as JSON")
    return parser.parse_args(argv)


def objective_from(args: argparse.Namespace) -> Objective:
    unit, target = ("rps", args.target_rps) if args.target_rps is not None else ("ips", args.target_ips)
    if not (math.isfinite(args.p99_ms) and args.p99_ms > 0):
        raise SizingError(f"--p99_ms must be a positive number of milliseconds, got {args.p99_ms:g}")
    if not (math.isfinite(target) and target > 0):
        raise SizingError(f"--target_{unit} must be positive, got {target:g}")
    if not (0 <= args.headroom < 1):
        raise SizingError(f"--headroom must be in [0, 1), got {args.headroom:g}")
    return Objective(args.p99_ms, target, unit, args.headroom)


def read_all(paths: Sequence[Path]) -> list[CellResult]:
    """Every cell of every file; a missing, unreadable or empty file is an error."""
    results = []
    for path in paths:
        if not Path(path).is_file():
            raise SizingError(f"results file not found: {path}")
        try:
            cells = read_results(path)
        except (ValueError, TypeError, KeyError) as exc:
            raise SizingError(f"{path}: not a results file: {exc}") from exc
        if not cells:
            raise SizingError(f"{path}: no cells in this results file")
        results += cells
    return results


def run(argv: Sequence[str] | None = None) -> tuple[list[SizingAnswer], str]:
    """Parse, read, size; returns the answers and their text. Raises SizingError on bad input."""
    args = parse_args(argv)
    objective = objective_from(args)
    prices = load_prices(args.prices)
    answers = size(read_all(args.results), objective, prices)
    if args.json:
        return answers, json.dumps([asdict(a) for a in answers], indent=2)
    return answers, format_answers(answers, objective, prices)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        _, text = run(argv)
    except SizingError as exc:
        print(f"loadtest.analysis.size: error: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

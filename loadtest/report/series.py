"""Series: the results grouped into lines of measurements that differ only in load level.

One series per run × server kind × device × batching profile × request batch size × load mode,
its cells sorted by load level (concurrency for a closed loop, offered rate for an open loop).
Only valid, finished cells are evidence (`usable`); the others say why not (`unusable_reason`).
The report's curves and detail tables group results this way; the answer and the sizing compare
configurations (`loadtest.report.configs.Config`) at one request batch size instead.

Not for: sizing arithmetic (`loadtest.report.sizing.size`) or drawing (`loadtest.report.charts.cells`,
`loadtest.report.charts.answers`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loadtest.evidence.records import CellResult, read_results
from loadtest.evidence.vocab import CellStatus, LoadMode
from loadtest.judge.overload import overloaded_reason


class AnalysisError(Exception):
    """Bad input to the sizing or the report (a results or price file): one line naming the file."""


def read_all(paths: Sequence[Path]) -> list[CellResult]:
    """Every cell of every results file; a missing, unreadable or empty file is an error."""
    results = []
    for path in paths:
        if not Path(path).is_file():
            raise AnalysisError(f"results file not found: {path}")
        try:
            cells = read_results(path)
        except (ValueError, TypeError, KeyError) as exc:
            raise AnalysisError(f"{path}: not a results file: {exc}") from exc
        if not cells:
            raise AnalysisError(f"{path}: no cells in this results file")
        results += cells
    return results


@dataclass(frozen=True)
class SeriesKey:
    """What one line of measurements holds fixed; only the load level varies along it."""

    run_id: str
    kind: str
    device: str
    device_name: str
    batching_profile: str
    request_batch_size: int
    mode: LoadMode  # closed: the level is a concurrency; open: an offered rate, requests/s


@dataclass(frozen=True)
class Series:
    key: SeriesKey
    cells: tuple[CellResult, ...]  # sorted by load level


def load_level(cell: CellResult) -> float:
    """Concurrency for a closed loop, offered rate (requests/s) for an open loop."""
    level = cell.load.concurrency if cell.load.mode == LoadMode.CLOSED else cell.load.rate_rps
    return float(level) if level is not None else 0.0


def level_name(mode: str) -> str:
    return "concurrency" if mode == LoadMode.CLOSED else "offered rate (req/s)"


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
    return cell.valid and cell.status == CellStatus.OK and cell.latency_p99_ms is not None


def sustained(cell: CellResult) -> bool:
    """Usable, and not overloaded (`loadtest.judge.overload`): a rate the server kept up with, so it may be a peak.
    An overloaded cell's throughput is what the server managed while its queue grew."""
    return usable(cell) and overloaded_reason(cell) is None


def overloaded_note(cells: Sequence[CellResult]) -> str:
    """`overloaded, not a peak: offered rate 1,802 req/s (p50 297 ms): <why>; ...` for the usable cells
    among `cells` that were overloaded; "" when none was."""
    notes = []
    for cell in cells:
        reason = overloaded_reason(cell) if usable(cell) else None
        if reason:
            p50 = f", p50 {cell.latency_p50_ms:,.0f} ms" if cell.latency_p50_ms is not None else ""
            notes.append(f"offered rate {load_level(cell):,g} req/s{p50}: {reason}")
    return "overloaded, not a peak: " + "; ".join(notes) if notes else ""


def unusable_reason(cell: CellResult) -> str:
    if cell.status != CellStatus.OK:
        return f"failed: {cell.failure_reason or 'no reason recorded'}"
    if cell.flags:
        return "; ".join(f"{f.flag}: {f.reason}" for f in cell.flags)
    return "invalid (no reason recorded)" if not cell.valid else "no p99 recorded"

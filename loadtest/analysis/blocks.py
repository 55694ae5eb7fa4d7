"""The report's building blocks: a table and a figure, computed once and only formatted afterwards.

Not for: what goes in them (`loadtest.analysis.summary`, `loadtest.analysis.details`) or how they are
written out (`loadtest.analysis.report`).
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtest.analysis.series import usable
from loadtest.records import CellResult
from loadtest.vocab import CellStatus


@dataclass(frozen=True)
class Table:
    title: str
    caption: str  # how to read it; what was measured is in the configurations table, once
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    marks: tuple[str, ...] = ()  # per row: "" or "invalid" / "failed" (styled in HTML)
    in_summary: bool = True  # also in the Markdown summary


@dataclass(frozen=True)
class Figure:
    title: str
    caption: str
    png: bytes | None  # None: nothing to draw, the caption says why


def cell_mark(cell: CellResult) -> str:
    return "failed" if cell.status != CellStatus.OK else ("" if usable(cell) else "invalid")


def device_name(name: str) -> str:
    return name or "(not recorded)"

"""How far the machine's speed moved while a comparison ran, and whether its ratios moved with it.

A comparison's reference cells (its first server's service rate, 4 users back to back) and how far they moved are
`loadtest.report.answers.movement`'s (`Drift`, `drift_of`); `Speeds`: the machine's speed at any cell of the
comparison, interpolated between the reference cells around it. `speed_link`: Pearson's r between ratios (per
repeat, or per run) and the median speed their reference cells read; at |r| >= `SPEED_LINK` over
`SPEED_MEASUREMENTS` or more, the ratio itself moves with the machine's speed (its servers answer a slower machine
differently), which pairing does not cancel.

Not for: the ratios themselves (`loadtest.report.answers.paired`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import CellStatus
from loadtest.report.answers.answers import SearchAnswer
from loadtest.report.answers.movement import Drift, drift_of

SPEED_LINK = 0.8  # |r| between ratios and their reference speeds from which the ratio is said to move with it
SPEED_MEASUREMENTS = 4  # ratios needed before saying so


class Measured(Protocol):
    """A ratio measured beside its reference cells (a repeat's, or a run's comparison)."""

    @property
    def ratio(self) -> float | None: ...

    @property
    def drift(self) -> Drift | None: ...


@dataclass(frozen=True)
class SpeedLink:
    """How ratios went with the reference speed they were measured at: Pearson's r, and the ratio at the slowest
    and at the fastest (reference req/s, ratio)."""

    r: float
    slow: tuple[float, float]
    fast: tuple[float, float]
    over: str = "runs"  # what the ratios are: "runs" or "repeats"

    @property
    def moves(self) -> bool:
        return abs(self.r) >= SPEED_LINK

    def describe(self) -> str:
        (slow, at_slow), (fast, at_fast) = self.slow, self.fast
        text = (f"against each {self.over.removesuffix('s')}'s reference speed: r = {self.r:+.2f} (×{at_slow:.2f} at "
                f"{slow:,.0f} req/s, ×{at_fast:.2f} at {fast:,.0f} req/s)")
        if self.moves:
            text += ("; the ratio moves with the machine's speed: its servers answer a slower machine differently, "
                     "which pairing does not cancel")
        return text


def speed_link(measured: Sequence[Measured], over: str = "runs") -> SpeedLink | None:
    """How the ratios of `measured` (repeats, or one comparison's ratio per run) went with the median speed of each
    one's reference cells; None with fewer than `SPEED_MEASUREMENTS` of both or nothing that varies."""
    pairs = sorted((speed, m.ratio) for m in measured if m.ratio is not None and m.drift is not None
                   and (speed := m.drift.median) is not None)
    if len(pairs) < SPEED_MEASUREMENTS or len({s for s, _ in pairs}) < 2 or len({v for _, v in pairs}) < 2:
        return None
    r = statistics.correlation([s for s, _ in pairs], [v for _, v in pairs])
    return SpeedLink(r, pairs[0], pairs[-1], over)


def answer_index(search: SearchAnswer) -> int | None:
    """The cell index of the cell that answered the search's capacity (its confirmation)."""
    step = search.conclusion.capacity if search.conclusion else None
    return step.result.cell_index if step is not None else None


@dataclass(frozen=True)
class Speeds:
    """A comparison's reference cells: the machine's speed at any cell, interpolated between the two around it."""

    references: Sequence[CellResult]
    uppers: Mapping[str, int] = field(default_factory=dict)  # each search's last cell at its upper end

    def to_upper(self, search: SearchAnswer) -> float:
        """How far the speed moved between the search's answer and its upper end (0 where either is unknown)."""
        return self.between(answer_index(search), self.uppers.get(search.search_id))

    @property
    def drift(self) -> Drift | None:
        return drift_of(self.references)

    @cached_property
    def points(self) -> list[tuple[int, float]]:
        """(cell index, throughput) of every reference cell that measured, in order."""
        return sorted((c.cell_index, c.throughput_rps) for c in self.references
                      if c.status == CellStatus.OK and c.throughput_rps > 0)

    def at(self, index: int) -> float | None:
        points = self.points
        if not points:
            return None
        before = [p for p in points if p[0] <= index]
        after = [p for p in points if p[0] >= index]
        if not before or not after:
            return (before or after)[-1 if before else 0][1]
        (i0, s0), (i1, s1) = before[-1], after[0]
        return s0 if i1 == i0 else s0 + (s1 - s0) * (index - i0) / (i1 - i0)

    def between(self, a: int | None, b: int | None) -> float:
        """How far the speed moved between cells `a` and `b` (0 where either is unknown)."""
        if a is None or b is None:
            return 0.0
        sa, sb = self.at(a), self.at(b)
        return abs(sa - sb) / min(sa, sb) if sa and sb else 0.0

"""How far the machine's speed moved over a run: its reference cells (the service rate of a comparison's first
server), in the order measured, and, per search, the movement over its comparison's.

`Drift` and `drift_of` give one comparison's; `search_movements` gives every paired search's, by search id, which a
verdict reads to say whether a served share clears its line by more than the machine moved
(`loadtest.report.answers.bound.ServedShare.clear`). A search outside a paired comparison has no reference cells:
its movement is not measured (absent), and no served share clears its line there.

Not for: the machine's speed at one cell or how ratios went with it (`loadtest.report.answers.drift`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import CellStatus, Role


@dataclass(frozen=True)
class Drift:
    """The reference cell's throughput (req/s, 4 users back to back: the server's service rate), in the order
    measured."""

    server: str
    speeds: tuple[float, ...]

    @property
    def moved(self) -> float | None:
        """(fastest − slowest) ÷ slowest; None with fewer than two measurements."""
        if len(self.speeds) < 2 or min(self.speeds) <= 0:
            return None
        return max(self.speeds) / min(self.speeds) - 1

    @property
    def median(self) -> float | None:
        return statistics.median(self.speeds) if self.speeds else None


def drift_of(references: Sequence[CellResult]) -> Drift | None:
    """The reference cells' throughput in the order measured; None without any."""
    ok = sorted((c for c in references if c.status == CellStatus.OK and c.throughput_rps > 0),
                key=lambda c: c.cell_index)
    if not ok:
        return None
    return Drift(ok[0].server.name, tuple(c.throughput_rps for c in ok))


def _comparison_id(cell: CellResult) -> str | None:
    return cell.search.comparison.id if cell.search is not None and cell.search.comparison is not None else None


def search_movements(results: Sequence[CellResult]) -> dict[str, float]:
    """How far the machine's speed moved over each paired search's comparison (all its reference cells, from the
    first, which follows the servers' start and so their device floors), by search id."""
    references: dict[str, list[CellResult]] = {}
    searches: dict[str, str] = {}
    for cell in results:
        comparison = _comparison_id(cell)
        if comparison is None or cell.search is None:
            continue
        if cell.search.role == Role.REFERENCE:
            references.setdefault(comparison, []).append(cell)
        else:
            searches.setdefault(cell.search.id, comparison)
    moved = {comparison: drift.moved for comparison, cells in references.items()
             if (drift := drift_of(cells)) is not None}
    return {search: m for search, comparison in searches.items() if (m := moved.get(comparison)) is not None}


__all__ = ["Drift", "drift_of", "search_movements"]

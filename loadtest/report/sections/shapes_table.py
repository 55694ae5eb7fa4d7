"""The report's "Replica shapes" section: per configuration family, request batch and objective, what each replica
shape measured (capacity against cores per replica), beside linear from one core, and the scaling efficiency with
its range. Only where a search has a shape tag (a shape sweep).

Not for: the figure of the same curves (`loadtest.report.charts.assembly.shapes_chart`), the curves' arithmetic
(`loadtest.report.shape_sizing`) or which shape a target is sized on (the card's,
`loadtest.report.shape_sizing.sized_on`).
"""

from __future__ import annotations

from collections.abc import Sequence

from loadtest.report.blocks import Table
from loadtest.report.formatting import number as fmt
from loadtest.report.formatting import ratio_range
from loadtest.report.shape_sizing import SHARED, ShapeCurve, ShapePoint

TITLE = "Replica shapes"
HEADER = ("configuration family", "request batch", "p99 objective ms", "cores per replica", "capacity req/s",
          "linear from 1 core req/s", "scaling efficiency", "note")
CAPTION = ("One configuration measured at several replica shapes (a shape sweep, capacity --shapes): k cores and k "
           "gRPC frontends a replica. Capacity: the highest rate its search confirmed, in brackets the lowest rate "
           "above it shown to fail. Linear from 1 core: k × the 1-core capacity. Scaling efficiency: capacity ÷ "
           "(k × the 1-core capacity), in brackets its range from both brackets (low: capacity ÷ (k × the 1-core "
           "upper end); high: upper end ÷ (k × the 1-core capacity)); an end is open where its bracket is or the "
           "capacity it needs is a lower bound. Sizing prices every shape measured and takes the cheapest; no shape "
           "between or beyond them is priced.")


def capacity_text(p: ShapePoint) -> str:
    """`620.0, upper end 700.0`, `≥ 620.0: the load generator's limit` (or `: the search stopped`), `none met`."""
    if p.capacity_rps is None:
        return "none met"
    if p.at_least:
        return f"≥ {fmt(p.capacity_rps)}: the load generator's limit"
    if p.upper_rps is None:
        return f"≥ {fmt(p.capacity_rps)}: the search stopped"
    return f"{fmt(p.capacity_rps)}, upper end {fmt(p.upper_rps)}"


def efficiency_text(p: ShapePoint) -> str:
    """`×0.76 (×0.74–×0.79)`; an open end: `at least`/`at most`; `×1 (the reference)` for 1 core; `—` without one."""
    if p.efficiency is None:
        return "—" if p.capacity_rps is None else "— (no 1-core capacity)"
    if p.cores == 1:
        return "×1 (the reference)"
    low, high = p.efficiency_low, p.efficiency_high
    value = f"{'≥ ' if p.lower_bound else ''}×{p.efficiency:.2f}"
    return f"{value} ({ratio_range(low, high, 'no range')})"


def _note(p: ShapePoint) -> str:
    notes = [*([SHARED] if p.shares_loadgen else []), *(["lower bound: the load generator was the limit"]
                                                         if p.at_least else [])]
    return "; ".join(notes)


def shapes_table(curves: Sequence[ShapeCurve]) -> Table | None:
    """One row per family, request batch, objective and shape; None without a shape sweep."""
    rows = tuple((p.family, str(p.request_batch), f"{p.p99_objective_ms:g}", str(p.cores), capacity_text(p),
                  fmt(p.linear_rps), efficiency_text(p), _note(p)) for c in curves for p in c.points)
    if not rows:
        return None
    return Table(TITLE, CAPTION, HEADER, rows, tuple("" if p.capacity_rps is not None else "invalid"
                                                     for c in curves for p in c.points))


__all__ = ["TITLE", "capacity_text", "efficiency_text", "shapes_table"]

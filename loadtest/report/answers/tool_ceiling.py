"""The tool ceiling beside an answer: what the load generator and the path to the model sustained, in the same run,
when the model cost nothing (the twin's cells, `loadtest.judge.tool_ceiling`).

Per checked search (its twin's cells carry `SearchTag.checks`), one `ToolCeiling`:

- the twin passed its first cell, at `check_rate` (2× the answer, or the search's upper end where higher):
  "≥ 1,640.0 req/s (2× the answer)": the tool carried at least that;
- the twin's check failed and it searched its own capacity: "930.0 req/s (the load generator stood: a Locust process
  at 96% of a core)": that search's answer concluded from its cells as the search concluded it
  (`loadtest.judge.conclusion`: its confirmed capacity, else its highest unconfirmed pass), the figure the console's
  "the twin's own search:" line gives, "under 400.0 req/s" where none passed; then what stopped the check
  (`who_stood`: the load generator, the twin's own server, or, unsaid, neither). Records whose twin's search cells
  all carry the role `tool_ceiling` (measured before 2026-11-28 13:00Z) hold no search to conclude: their highest
  rate that `twin_passed`;
- the check cell did not run (its cell failed) while the twin's own search did: that search's answer, "1,000.0 req/s
  (the check did not run: <why>)", never "≥ … (2× the answer)": only the check cell is read as the check;
- no twin cell names the search (records from before the twin, or a run that skipped it): "not measured: no twin
  was run"; a twin that could not start (one failed cell): "not measured: <its failure_reason>".

The check's rate (and the older records' every rate) is judged by `twin_passed` at the checked search's objective. A
row compares its own figure with the ceiling (`covers`): the tool did not bound an answer it carried `CHECK_RATIO`
times over.

Pure functions over `CellResult`s. Not for: the twin's rule (`loadtest.judge.tool_ceiling`), measuring it
(`loadtest.search`) or what bounded a row (`loadtest.report.answers.verdict`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loadtest.evidence.objective import Objective
from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import CellStatus, Role
from loadtest.judge.conclusion import conclude
from loadtest.judge.objectives import steps_of
from loadtest.judge.tool_ceiling import CHECK_RATIO, Stood, is_twin, twin_failure, who_stood
from loadtest.report.formatting import number as fmt

NO_TWIN = "no twin was run"
NAME = "tool ceiling"


@dataclass(frozen=True)
class ToolCeiling:
    """The tool ceiling of one checked search: `rps` the highest rate its twin carried (None: not measured, or no
    rate passed); `checked`: it passed at its check rate, so the tool carried at least `rps`."""

    rps: float | None = None
    checked: bool = False
    why_not: str = NO_TWIN  # "" where measured: why no ceiling was measured
    lowest_tried_rps: float | None = None  # where the twin searched and no rate passed
    stood: Stood = Stood.UNKNOWN  # what stopped its failed check (`who_stood`), and how
    stood_how: str = ""
    unchecked: str = ""  # where the check cell did not run: why (the twin's own search answers alone)

    @property
    def measured(self) -> bool:
        return not self.why_not

    def covers(self, answer_rps: float | None) -> bool:
        """The tool carried at least `CHECK_RATIO` × the answer, so it did not bound it."""
        return (self.measured and self.rps is not None and answer_rps is not None
                and self.rps >= CHECK_RATIO * answer_rps * (1 - 1e-9))

    def value(self) -> str:
        """`≥ 1,640.0 req/s (2× the answer)`, `930.0 req/s`, `under 400.0 req/s` or `not measured: why`."""
        if not self.measured:
            return f"not measured: {self.why_not}"
        if self.checked and self.rps is not None:
            return f"≥ {fmt(self.rps)} req/s ({CHECK_RATIO:g}× the answer)"
        if self.rps is None:
            value = f"under {fmt(self.lowest_tried_rps)} req/s" if self.lowest_tried_rps else "none passed"
        else:
            value = f"{fmt(self.rps)} req/s"
        if self.unchecked:
            return f"{value} ({self.unchecked})"
        return f"{value} ({self.stood.value} stood: {self.stood_how})" if self.stood != Stood.UNKNOWN else value

    def text(self) -> str:
        """`tool ceiling ≥ 1,640.0 req/s (2× the answer)`: its name and value."""
        return f"{NAME} {self.value()}"

    def as_dict(self) -> dict:
        """figures.json's record of it."""
        return {"text": self.value(), "rps": self.rps, "at_least": self.checked, "measured": self.measured,
                "why_not": self.why_not, "stood": self.stood.value, "unchecked": self.unchecked}


NOT_MEASURED = ToolCeiling()


def twin_cells(results: Sequence[CellResult]) -> dict[str, list[CellResult]]:
    """The twins' cells by the id of the search each checks, in the order measured."""
    groups: dict[str, list[CellResult]] = {}
    for cell in results:
        if is_twin(cell) and cell.search is not None and cell.search.checks:
            groups.setdefault(cell.search.checks, []).append(cell)
    return {k: sorted(v, key=lambda c: (c.run_id, c.cell_index)) for k, v in groups.items()}


def ceiling_of(cells: Sequence[CellResult]) -> ToolCeiling:
    """One twin's ceiling from its cells, first measured first (see the module)."""
    if not cells:
        return NOT_MEASURED
    ran = [c for c in cells if c.status == CellStatus.OK and c.search is not None and c.search.offered_rps]
    if not ran:
        reason = next((c.failure_reason for c in cells if c.failure_reason), "") or "the twin did not start"
        return ToolCeiling(why_not=reason)
    objective = ran[0].tag.objective
    check = next((c for c in cells if c.search is not None and c.search.role == Role.TOOL_CEILING), None)
    if check is None or not any(c is check for c in ran):  # no check to read: never a later cell read as one
        return _unchecked(ran, objective, _not_run(check))
    if not twin_failure(check, objective.p99_ms):
        return ToolCeiling(check.search.offered_rps if check.search else None, checked=True, why_not="")
    rates = [float(c.search.offered_rps) for c in ran if c.search and c.search.offered_rps]
    stood, how = who_stood(check)  # at the failed check: what stopped the tool at twice the answer
    if _searched(ran):  # the twin's own search, concluded as it concluded itself
        return ToolCeiling(_own_answer(ran, objective), why_not="", lowest_tried_rps=min(rates), stood=stood,
                           stood_how=how)
    passed = [float(c.search.offered_rps) for c in ran if c.search and c.search.offered_rps
              and not twin_failure(c, objective.p99_ms)]
    return ToolCeiling(max(passed) if passed else None, why_not="", lowest_tried_rps=min(rates), stood=stood,
                       stood_how=how)


def _not_run(check: CellResult | None) -> str:
    if check is None:
        return "the check did not run: no check cell was recorded"
    return f"the check did not run: {check.failure_reason or check.status}"


def _searched(ran: Sequence[CellResult]) -> list[CellResult]:
    """The cells of the twin's own search (every cell but its check)."""
    return [c for c in ran if c.search and c.search.role != Role.TOOL_CEILING]


def _own_answer(ran: Sequence[CellResult], objective: Objective) -> float | None:
    """The twin's own search's answer, concluded from its cells as it concluded itself; None where none passed."""
    answered = conclude(steps_of(_searched(ran), objective), objective).answer
    return answered.rate_rps if answered else None


def _unchecked(ran: Sequence[CellResult], objective: Objective, why: str) -> ToolCeiling:
    """Where the check cell did not run: the twin's own search's answer, as it concluded itself, said so; never
    "≥ (2× the answer)" for a rate of its search."""
    if not _searched(ran):
        return ToolCeiling(why_not=why)
    rates = [float(c.search.offered_rps) for c in ran if c.search and c.search.offered_rps]
    return ToolCeiling(_own_answer(ran, objective), why_not="", lowest_tried_rps=min(rates), unchecked=why)


def tool_ceilings(results: Sequence[CellResult]) -> dict[str, ToolCeiling]:
    """Every twin's ceiling, by the id of the search it checks."""
    return {checked: ceiling_of(cells) for checked, cells in twin_cells(results).items()}


def ceiling_for(search_id: str, ceilings: Mapping[str, ToolCeiling]) -> ToolCeiling:
    """The ceiling of the search `search_id`; not measured (no twin was run) where none checked it."""
    return ceilings.get(search_id, NOT_MEASURED)


__all__ = ["NAME", "NOT_MEASURED", "ToolCeiling", "ceiling_for", "ceiling_of", "tool_ceilings", "twin_cells"]

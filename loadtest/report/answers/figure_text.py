"""A capacity as every table and the card print it: one figure, its state, and the reason of any "≥".

The figure is the one rule's (`loadtest.judge.objectives.objective_answer`, carried up the objectives):
`583.0 confirmed`, `583.0 confirmed (874.5 passed)` where a higher rate passed without a confirmation,
`none confirmed (640.7 passed)` where no rate was confirmed, `none` where none passed; a lower bound reads
`≥ 1,218.0 confirmed: the search stopped` (or `: the load generator's limit`). A search's range reads
`between 583.0 and 1,166.0 req/s` (to its upper end), in the same figures (`range_text`).

Pure functions. Not for: the answers themselves (`loadtest.report.answers.answers`).
"""

from __future__ import annotations

from loadtest.judge.objectives import Bound, ObjectiveAnswer
from loadtest.report.answers.answers import SearchAnswer, lower_bound
from loadtest.report.formatting import number as fmt


def bounded(rate: float, bound: Bound) -> str:
    """`1,218.0`, or `≥ 1,218.0` ... with its reason appended by the caller (`reason`)."""
    return f"{'≥ ' if bound != Bound.NONE else ''}{fmt(rate)}"


def reason(bound: Bound) -> str:
    """`: the search stopped`, `: the load generator's limit`, or `` for a bounded figure."""
    return f": {bound.value}" if bound != Bound.NONE else ""


def capacity_text(at: ObjectiveAnswer | None) -> str:
    """The capacity at one objective as every table and the card print it (see the module)."""
    if at is None:
        return "—"
    if at.capacity_rps is None:
        return "none"
    if at.confirmed_rps is None:
        return f"none confirmed ({bounded(at.capacity_rps, at.bound)} passed{reason(at.bound)})"
    if at.passed_rps is None:
        return f"{bounded(at.confirmed_rps, at.bound)} confirmed{reason(at.bound)}"
    return f"{fmt(at.confirmed_rps)} confirmed ({bounded(at.passed_rps, at.bound)} passed{reason(at.bound)})"


def figure_only(at: ObjectiveAnswer | None) -> str:
    """`capacity_text` without a higher pass beside a confirmed capacity: the card's one figure a cell
    (`583.0 confirmed`; the higher pass goes to the table under the card)."""
    if at is None or at.confirmed_rps is None or at.passed_rps is None:
        return capacity_text(at)
    return f"{fmt(at.confirmed_rps)} confirmed"


def search_capacity(s: SearchAnswer) -> str:
    """A search's capacity as the findings and the answer table print it: `675.0`, or `≥ 687.2` where its figure is
    a lower bound (`search_rps` adds why)."""
    return f"{'≥ ' if lower_bound(s) else ''}{fmt(s.capacity_rps)}"


def search_rps(s: SearchAnswer) -> str:
    """`675.0 req/s`, or a lower bound with why: `≥ 687.2 req/s: the search stopped`."""
    return f"{search_capacity(s)} req/s{reason(s.bound) if lower_bound(s) else ''}"


def range_text(rate: float | None, upper_rps: float | None, bound: Bound) -> str:
    """A search's figure and its upper end as the tables print both: `between 583.0 and 1,166.0 req/s`; a lower
    bound `≥ 583.0 req/s: the search stopped`; "" without a figure."""
    if rate is None:
        return ""
    if bound != Bound.NONE or upper_rps is None:
        return f"≥ {fmt(rate)} req/s{reason(bound)}"
    return f"between {fmt(rate)} and {fmt(upper_rps)} req/s"

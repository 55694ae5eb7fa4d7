"""Where a configuration's capacity comes from, at one request batch size and one p99 objective.

In order of preference, each labelled with its source:

1. `capacity search`: the confirmed rate of a search of this configuration at this request batch size,
   answered at the objective asked for by the one rule the report uses (`loadtest.judge.objectives`:
   `conclude` on its steps judged there, carried up from its stricter objectives), never an
   unconfirmed one; a lower bound where the load generator was the limit or the search stopped.
2. `open-loop, measured grid`: the highest offered rate among a plain sweep's open-loop cells that
   passes (finished, valid, p99 within the objective at 99% confidence: `loadtest.judge.verdicts`), never
   interpolated and not confirmed; a lower bound when no higher rate was measured failing.
3. `closed-loop: lower bound`: the highest throughput of a closed-loop cell meeting the objective,
   used only when there is no valid open-loop cell. Closed-loop points are never mixed into one
   series with open-loop ones: a closed loop slows its senders when the server stalls.

Pure functions over `CellResult`s. Not for: replicas and cost (`loadtest.report.sizing.size`) or what a
search answered (`loadtest.report.answers.answers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from loadtest.evidence.objective import Objective
from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import LoadMode
from loadtest.judge.objectives import objective_answers
from loadtest.judge.tool_ceiling import is_twin
from loadtest.judge.verdicts import verdict_of
from loadtest.report.answers.answers import SearchAnswer, best, lower_bound, search_answers, search_at
from loadtest.report.answers.figure_text import capacity_text
from loadtest.report.answers.movement import search_movements
from loadtest.report.answers.tool_ceiling import ToolCeiling, ceiling_for, tool_ceilings
from loadtest.report.answers.verdict import what_bounded
from loadtest.report.configs import Config, config_of
from loadtest.report.formatting import number as fmt
from loadtest.report.series import level_name, load_level, unusable_reason, usable


class Source(StrEnum):
    SEARCH = "capacity search"
    GRID = "open-loop, measured grid"
    CLOSED = "closed-loop: lower bound"


# ----------------------------------------------------------------------------- plain cells


@dataclass(frozen=True)
class Highest:
    """The best passing cell among one configuration's plain (non-search) cells of one load mode."""

    cell: CellResult | None  # None: no cell passed
    rate_rps: float | None  # its offered rate (open loop) or achieved throughput (closed loop)
    lower_bound: bool  # no higher load was measured failing: capacity may be higher
    note: str
    valid_cells: int
    not_used: tuple[str, ...]  # "level: reason" of each invalid or failed cell


def _rate(cell: CellResult) -> float:
    return load_level(cell) if cell.load.mode == LoadMode.OPEN else cell.throughput_rps


def highest_passing(cells: Sequence[CellResult], p99_objective_ms: float, mode: LoadMode) -> Highest:
    """The highest measured load of `mode` meeting p99 <= `p99_objective_ms`; search cells are not a grid."""
    plain = [c for c in cells if not c.search and c.load.mode == mode]
    valid = [c for c in plain if usable(c)]
    level = level_name(mode)
    not_used = tuple(f"{level} {load_level(c):g}: {unusable_reason(c)}" for c in plain if not usable(c))
    passed = {id(c): verdict_of([c], Objective(p99_objective_ms)).passed for c in plain}  # each cell judged once
    passing = [c for c in valid if passed[id(c)]]
    if not passing:
        if not valid:
            return Highest(None, None, False, f"no valid {mode}-loop cell", 0, not_used)
        low = min(valid, key=lambda c: c.latency_p99_ms or 0.0)
        return Highest(None, None, False, f"objective never met: lowest measured p99 is {low.latency_p99_ms:g} ms "
                       f"(at {level} {load_level(low):g})", len(valid), not_used)
    top = max(passing, key=_rate)
    failing = [load_level(c) for c in plain if load_level(c) > load_level(top) and not passed[id(c)]]
    if mode == LoadMode.CLOSED:
        note = (f"highest closed-loop throughput meeting the objective ({level} {load_level(top):g}); "
                "an open loop at this rate may queue more")
    elif failing:
        note = f"highest passing offered rate {load_level(top):g} req/s; {min(failing):g} req/s failed"
    else:
        note = f"passed at every measured rate, up to {load_level(top):g} req/s: capacity may be higher"
    return Highest(top, _rate(top), mode == LoadMode.CLOSED or not failing, note, len(valid), not_used)


# ----------------------------------------------------------------------------- one configuration


@dataclass(frozen=True)
class ConfigCapacity:
    """One configuration's capacity at one request batch size and objective, and where it comes from."""

    config: Config
    request_batch_size: int
    capacity_rps: float | None  # None: these measurements cannot say
    capacity_ips: float | None
    source: Source | None  # the evidence used; None when there was none
    lower_bound: bool  # capacity may be higher
    note: str
    cells_used: int
    cells_not_used: tuple[str, ...]
    bounded: str = ""  # a search's answer: what bounded it (`loadtest.report.answers.verdict`, the card's verdict)
    for_buying: bool | None = None  # that verdict's (None: no search, no verdict); False: the card's "≤" boxes
    search: SearchAnswer | None = field(default=None, compare=False, repr=False)  # the search it comes from
    repeats: tuple[SearchAnswer, ...] = field(default=(), compare=False, repr=False)  # that search's repeats (all)


def search_for(searches: Sequence[SearchAnswer]) -> SearchAnswer | None:
    """The search a configuration is sized on among its searches (each answered at the asked objective,
    `searches_at`): as the card's, their `best` (of repeats, the lower median, one that did not meet counting as 0),
    where it was confirmed; else None."""
    chosen = best(searches)
    return chosen if chosen is not None and chosen.met else None


def _unused_searches(searches: Sequence[SearchAnswer], used: SearchAnswer | None, p99_objective_ms: float) -> str:
    notes = [f"search {s.search_id}: no rate confirmed at p99 <= {p99_objective_ms:g} ms"
             + (f" ({fmt(s.passed_rps)} req/s passed, not confirmed)" if s.passed_rps is not None else "")
             for s in searches if s is not used and not s.met]
    return "".join(f"; {n}" for n in notes)


def _from_search(config: Config, batch: int, search: SearchAnswer, p99_objective_ms: float,
                 ceilings: Mapping[str, ToolCeiling], repeats: Sequence[SearchAnswer] = (),
                 movements: Mapping[str, float] | None = None) -> ConfigCapacity:
    estimate = f"est. p99 {search.estimate_ms:g} ms" if search.estimate_ms is not None else f"p99 {search.p99_ms:g} ms"
    note = (f"search {search.search_id}: {capacity_text(search.at)} at p99 <= {p99_objective_ms:g} ms, {estimate}"
            + (f"; upper end {search.upper_rps:g} req/s" if search.upper_rps is not None else ""))
    moved = (movements or {}).get(search.search_id)
    verdict = what_bounded(search, ceiling_for(search.search_id, ceilings), moved)
    bounded = verdict.text() + ("" if verdict.for_buying else ", not for buying") + f"; {verdict.ceiling.text()}"
    return ConfigCapacity(config, batch, search.capacity_rps, search.capacity_ips, Source.SEARCH, lower_bound(search),
                          note, search.cells, (), bounded, verdict.for_buying, search, tuple(repeats))


def _from_cells(config: Config, batch: int, source: Source, high: Highest) -> ConfigCapacity:
    cell = high.cell
    return ConfigCapacity(config, batch, high.rate_rps, cell.throughput_ips if cell else None, source,
                          high.lower_bound, high.note, high.valid_cells, high.not_used)


def _from_plain(config: Config, batch: int, cells: Sequence[CellResult], p99_objective_ms: float) -> ConfigCapacity:
    grid = highest_passing(cells, p99_objective_ms, LoadMode.OPEN)
    closed = highest_passing(cells, p99_objective_ms, LoadMode.CLOSED)
    if grid.valid_cells:
        found = _from_cells(config, batch, Source.GRID, grid)
        ignored = f"; {closed.valid_cells} closed-loop cell(s) not used (open-loop cells measured)"
        return replace(found, note=found.note + ignored) if closed.valid_cells else found
    if closed.valid_cells:
        return _from_cells(config, batch, Source.CLOSED, closed)
    return ConfigCapacity(config, batch, None, None, None, False, "no valid sweep cell", 0,
                          grid.not_used + closed.not_used)


def capacity_of(config: Config, batch: int, cells: Sequence[CellResult], searches: Sequence[SearchAnswer],
                p99_objective_ms: float, ceilings: Mapping[str, ToolCeiling] | None = None,
                movements: Mapping[str, float] | None = None) -> ConfigCapacity:
    """`config`'s capacity at `batch` from its cells and searches there (see the module docstring); `ceilings`: the
    searches' tool ceilings, by id, and `movements`: how far the machine's speed moved over each paired search
    (`loadtest.report.answers.movement`), for what bounded a search's answer, as the card reads it."""
    search = search_for(searches)
    found = (_from_search(config, batch, search, p99_objective_ms, ceilings or {}, searches, movements) if search
             else _from_plain(config, batch, cells, p99_objective_ms))
    return replace(found, note=found.note + _unused_searches(searches, search, p99_objective_ms))


def searches_at(results: Sequence[CellResult], p99_objective_ms: float) -> list[SearchAnswer]:
    """Every search in `results` answered at `p99_objective_ms` by the one rule the report uses
    (`loadtest.judge.objectives.objective_answers`, carried up from the stricter objectives it was answered at)."""
    cells: dict[str, list[CellResult]] = {}
    for cell in results:
        if cell.search:
            cells.setdefault(cell.search.id, []).append(cell)
    out = []
    for s in search_answers(results):
        objectives = {a.p99_objective_ms for a in s.objectives if a.p99_objective_ms <= p99_objective_ms}
        at = objective_answers(cells[s.search_id], objectives | {p99_objective_ms})[-1]
        out.append(search_at(s, at))
    return out


def request_batches(results: Sequence[CellResult]) -> list[int]:
    return sorted({c.load.request_batch_size for c in results})


def capacities(results: Sequence[CellResult], batch: int, p99_objective_ms: float) -> list[ConfigCapacity]:
    """Every configuration measured at request batch `batch`: its capacity at p99 <= `p99_objective_ms`."""
    measured = [c for c in results if c.load.request_batch_size == batch]
    ceilings = tool_ceilings(measured)
    movements = search_movements(results)
    here = [c for c in measured if not is_twin(c)]  # a twin measures the tool, not a configuration
    searches = searches_at(here, p99_objective_ms)
    by_config: dict[Config, list[CellResult]] = {}
    for cell in here:
        by_config.setdefault(config_of(cell), []).append(cell)
    return [capacity_of(config, batch, cells, [s for s in searches if s.config == config], p99_objective_ms, ceilings,
                        movements) for config, cells in sorted(by_config.items())]

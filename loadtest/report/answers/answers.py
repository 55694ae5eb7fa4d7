"""Answers: what the capacity searches in a set of results say, derived once from the records.

From the records alone (a capacity search tags its cells with `CellResult.search`: id, role, objective, rate):

- per search, its answer: its steps rebuilt with each rate's pooled verdict at the recorded
  confidence, concluded by `loadtest.judge.conclusion.conclude` exactly as the search concluded:
  the highest rate whose confirmation passed, with its uncertainty (the lowest rate above it that
  was shown to fail, the estimate, stalls, a load generator's limit);
- per device × request batch size × objective, the best configuration measured (highest capacity);
- the batching gain there: best batching-enabled capacity ÷ batching-off capacity (None, with the
  reason, when either is missing or batching off did not meet the objective), and its range from
  the two brackets: lowest on ÷ highest off to highest on ÷ lowest off;
- the GPU/CPU ratio of the best capacities at the same request batch size and objective;
- per search, its cells answered at several p99 objectives (`objective_answers`: by default 5, 10, 25,
  50 and 100 ms, besides its own) with the same confidence rule, every window at a rate pooled, and its
  rate table (`rate_table`: per offered rate, what was achieved and the latency percentiles of all its
  windows merged); the best configuration, the batching gain and the GPU/CPU ratio again at each of
  those objectives (`Answers.objective_devices`, `Answers.objective_ratios`).

A configuration (`loadtest.report.configs`) is what was measured, whatever the load: server kind, device,
device name, batching profile and parameters, server versions, the load generator's host and server name
(the name is part of it: two servers of one configuration are compared, not merged).

Pure functions over `CellResult`s: nothing here reads files, prints or draws. Not for: the report's layout
(`loadtest.report.headline`), capacities from plain sweeps (`loadtest.report.answers.sources`), or replicas and cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from loadtest.evidence.records import CellResult
from loadtest.evidence.search_tag import ShapeTag
from loadtest.evidence.vocab import Role
from loadtest.judge.conclusion import AnswerKind, Conclusion, conclude
from loadtest.judge.objectives import (
    Bound,
    ObjectiveAnswer,
    RateRow,
    objective_answers,
    rate_table,
    search_objectives,
    steps_of,
)
from loadtest.judge.tool_ceiling import is_twin
from loadtest.report.answers.movement import search_movements
from loadtest.report.answers.tool_ceiling import ToolCeiling, tool_ceilings
from loadtest.report.configs import Config, config_of
from loadtest.report.formatting import ratio_value

# ----------------------------------------------------------------------------- one search


@dataclass(frozen=True)
class SearchAnswer:
    """One capacity search's answer: capacity None when no confirmation passed (objective not met)."""

    search_id: str
    config: Config
    request_batch_size: int
    p99_objective_ms: float
    capacity_rps: float | None  # the highest rate whose confirmation passed
    capacity_ips: float | None  # images/s the answering cell achieved
    p50_ms: float | None  # at the answering cell
    p99_ms: float | None  # the answering cell's raw p99 (the verdict is on `estimate_ms`)
    lowest_failing_rps: float | None  # the lowest rate above the answer that failed with confidence
    cells: int
    reason: str = ""  # why the objective was not met; "" when it was
    server_cpu_percent: float | None = None  # at the answering cell (device telemetry), when measured
    gpu_utilization_percent: float | None = None
    conclusion: Conclusion | None = field(default=None, compare=False)  # with the uncertainty
    objectives: tuple[ObjectiveAnswer, ...] = field(default=(), compare=False)  # its cells at each objective
    rates: tuple[RateRow, ...] = field(default=(), compare=False)  # its rate table
    shape: ShapeTag | None = None  # its server's replica shape, in a shape sweep (`loadtest.report.shape_sizing`)
    server_cpu_cores: float | None = None  # the cores the server may use, at the answering cell
    at: ObjectiveAnswer | None = field(default=None, compare=False)  # the one rule's answer at p99_objective_ms

    @property
    def met(self) -> bool:
        return self.capacity_rps is not None

    @property
    def kind(self) -> AnswerKind:
        """`confirmed` (capacity_rps), `passed, not confirmed` (only `passed_rps`), or `none`."""
        if self.at is not None:
            return self.at.kind
        return self.conclusion.kind if self.conclusion else (AnswerKind.CONFIRMED if self.met else AnswerKind.NONE)

    @property
    def passed_rps(self) -> float | None:
        """The highest rate above the capacity that passed but was not confirmed (a search cut short)."""
        if self.at is not None:
            return self.at.passed_rps
        best_pass = self.conclusion.best_pass if self.conclusion else None
        return best_pass.rate_rps if best_pass else None

    @property
    def figure_rps(self) -> float | None:
        """The rate compared: the confirmed capacity, else the highest unconfirmed pass (None: nothing passed)."""
        return self.capacity_rps if self.capacity_rps is not None else self.passed_rps

    @property
    def bound(self) -> Bound:
        """Why the figure is only a lower bound (`Bound.NONE`: a rate above it failed)."""
        if self.at is not None:
            return self.at.bound
        return Bound.LOADGEN if self.conclusion is not None and self.conclusion.at_least else Bound.NONE

    @property
    def upper_rps(self) -> float | None:
        """The upper end: the lowest rate above the figure shown to fail; None for a lower bound."""
        if self.at is not None:
            return None if self.at.at_least else self.at.upper_rps
        return None if self.conclusion is None or self.conclusion.at_least else self.conclusion.upper_rps()

    @property
    def estimate_ms(self) -> float | None:
        """The answered step's early-stopping estimate of the true p99 (its confirmation's where confirmed)."""
        if self.at is not None:
            return self.at.evidence.estimate_ms if self.at.evidence else None
        capacity = self.conclusion.capacity if self.conclusion else None
        return capacity.verdict.evidence.estimate_ms if capacity and capacity.verdict.evidence else None

    def uncertainty(self) -> str:
        return self.conclusion.uncertainty() if self.conclusion else ""


def search_answer(cells: Sequence[CellResult]) -> SearchAnswer:
    """The answer of one search's cells, concluded as `loadtest.search.capacity.CapacitySearch` concludes it,
    with its cells answered at each of its objectives (`search_objectives`) and its rate table."""
    first = cells[0]
    objective = first.tag.objective
    steps = steps_of(cells, objective)
    found = conclude(steps, objective)
    cell = found.capacity.result if found.capacity else None
    reason = "" if cell else (found.unmet_reason() if steps else _unmet(cells))
    return SearchAnswer(first.tag.id, config_of(first), first.load.request_batch_size, objective.p99_ms,
                        found.capacity_rps, cell.throughput_ips if cell else None,
                        cell.latency_p50_ms if cell else None, cell.latency_p99_ms if cell else None,
                        found.lowest_failing_rps, len(cells), reason,
                        cell.server_cpu_percent if cell else None, cell.gpu_utilization_percent if cell else None,
                        found, objective_answers(cells, search_objectives(cells)), rate_table(cells),
                        first.tag.shape, cell.server_cpu_cores if cell else None)


def _unmet(cells: Sequence[CellResult]) -> str:
    """Why a search measured no rate at all (its server did not start)."""
    failed = next((c.failure_reason for c in cells if c.failure_reason), "")
    return "no rate measured" + (f": {failed}" if failed else "")


def is_reference(cell: CellResult) -> bool:
    """A paired comparison's reference cell or a twin's (`is_twin`): it measures the machine or the tool, no answer."""
    return cell.search is not None and (cell.search.role == Role.REFERENCE or is_twin(cell))


def search_answers(results: Sequence[CellResult]) -> list[SearchAnswer]:
    """Every search in the results, one answer each, by configuration, batch, objective, id."""
    groups: dict[str, list[CellResult]] = {}
    for cell in results:
        if cell.search and not is_reference(cell):
            groups.setdefault(cell.search.id, []).append(cell)
    answers = [search_answer(cells) for cells in groups.values()]
    return sorted(answers, key=lambda a: (a.config, a.request_batch_size, a.p99_objective_ms, a.search_id))


def capacity(search: SearchAnswer) -> float:
    """A search's figure in requests/s (`SearchAnswer.figure_rps`); 0 when nothing passed (`best` never picks those)."""
    return search.figure_rps if search.figure_rps is not None else 0.0


def typical(searches: Iterable[SearchAnswer]) -> list[SearchAnswer]:
    """One answer per configuration, request batch size and objective. A configuration searched several times
    (a comparison's repeats) answers with its repeats' lower median, one that did not meet counting as 0: the
    lower of two, the middle of three. Sizing on the best of several repeats would size on the luckiest."""
    groups: dict[tuple[Config, int, float], list[SearchAnswer]] = {}
    for s in searches:
        groups.setdefault(_repeat_key(s), []).append(s)
    return [sorted(group, key=capacity)[(len(group) - 1) // 2] for group in groups.values()]


def _repeat_key(s: SearchAnswer) -> tuple[Config, int, float]:
    """What makes two searches repeats of one another: the same configuration, request batch and objective."""
    return s.config, s.request_batch_size, s.p99_objective_ms


def best(searches: Iterable[SearchAnswer]) -> SearchAnswer | None:
    """The highest confirmed capacity, each configuration by its `typical` answer; where none was confirmed, the
    highest unconfirmed pass (a run whose every search ended unconfirmed still answers); None: nothing passed."""
    answers = typical(searches)
    confirmed = [s for s in answers if s.met]
    return max(confirmed or [s for s in answers if s.passed_rps is not None], key=capacity, default=None)


# ----------------------------------------------------------------------------- comparisons


def lower_bound_note(side: str, search: SearchAnswer | None) -> str:
    """`batching's capacity is a lower bound: the search stopped` (the reason of its "≥")."""
    return f"{side}'s capacity is a lower bound: {search.bound.value if search else ''}"


def both_bounds(a: SearchAnswer | None, b: SearchAnswer | None) -> str:
    """Why a ratio of two lower bounds says nothing, with each one's reason."""
    reasons = sorted({s.bound.value for s in (a, b) if s is not None})
    return f"both capacities are lower bounds ({' and '.join(reasons)}), so their ratio says nothing"


def lower_bound(search: SearchAnswer | None) -> bool:
    """The search's figure is "at least" (`SearchAnswer.bound` says why)."""
    return search is not None and search.figure_rps is not None and search.bound != Bound.NONE


def bracket_low(top: SearchAnswer | None, bottom: SearchAnswer | None) -> float | None:
    """The least top ÷ bottom can be given both brackets: top's capacity ÷ bottom's upper end (None without one)."""
    if top is None or bottom is None or bottom.upper_rps is None:
        return None
    return capacity(top) / bottom.upper_rps


def bracket_high(top: SearchAnswer | None, bottom: SearchAnswer | None) -> float | None:
    """The most top ÷ bottom can be: top's upper end ÷ bottom's capacity (None without an upper end)."""
    if top is None or bottom is None or top.upper_rps is None:
        return None
    return top.upper_rps / capacity(bottom)


@dataclass(frozen=True)
class Gain:
    """Best batching-enabled capacity ÷ batching-off capacity; None with the reason when it cannot be said."""

    ratio: float | None
    batching: SearchAnswer | None  # the best batching-enabled answer, when one met the objective
    off: SearchAnswer | None  # the best batching-off answer, when one met the objective
    reason: str  # "" when ratio is set

    @property
    def low(self) -> float | None:
        """The least the gain can be given both brackets: batching's capacity ÷ off's upper end."""
        return bracket_low(self.batching, self.off) if self.ratio is not None else None

    @property
    def high(self) -> float | None:
        """The most the gain can be: batching's upper end ÷ off's capacity (None: no upper end measured)."""
        return bracket_high(self.batching, self.off) if self.ratio is not None else None

    def describe(self) -> str:
        """`×1.56 (×1.40–×1.70)`, the one form every ratio takes (`formatting.ratio_value`); where one capacity is
        a lower bound only the end that still holds, with why (`at least ×1.43 (batching's capacity is a lower
        bound: the search stopped)`)."""
        if self.ratio is None:
            return f"— {self.reason}"
        value = ratio_value(self.ratio, self.low, self.high)
        if lower_bound(self.batching):
            return f"{value} ({lower_bound_note('batching', self.batching)})"
        if lower_bound(self.off):
            return f"{value} ({lower_bound_note('off', self.off)})"
        return value


def batching_gain(searches: Sequence[SearchAnswer]) -> Gain:
    """The gain among searches at one device, request batch size and objective."""
    on = [s for s in searches if s.config.batching_on]
    off = [s for s in searches if not s.config.batching_on]
    best_on, best_off = best(on), best(off)
    if not off:
        reason = "no batching-off search to compare with"
    elif best_off is None:
        reason = "batching off did not meet the objective, so there is no baseline"
    elif not on:
        reason = "no batching-enabled search"
    elif best_on is None:
        reason = "no batching-enabled configuration met the objective"
    elif lower_bound(best_on) and lower_bound(best_off):
        reason = both_bounds(best_on, best_off)
    else:
        return Gain(capacity(best_on) / capacity(best_off), best_on, best_off, "")
    return Gain(None, best_on, best_off, reason)


@dataclass(frozen=True)
class DeviceAnswer:
    """One device at one request batch size and objective: its best configuration and batching gain."""

    device: str
    device_name: str
    request_batch_size: int
    p99_objective_ms: float
    best: SearchAnswer | None  # None: no configuration met the objective
    searches: tuple[SearchAnswer, ...]
    gain: Gain


def device_answers(searches: Sequence[SearchAnswer]) -> list[DeviceAnswer]:
    groups: dict[tuple[str, str, int, float], list[SearchAnswer]] = {}
    for s in searches:
        key = (s.config.device, s.config.device_name, s.request_batch_size, s.p99_objective_ms)
        groups.setdefault(key, []).append(s)
    return [DeviceAnswer(*key, best(group), tuple(group), batching_gain(group))
            for key, group in sorted(groups.items(), key=lambda kv: (kv[0][2], kv[0][3], kv[0][0], kv[0][1]))]


@dataclass(frozen=True)
class DeviceRatio:
    """Best GPU capacity ÷ best CPU capacity at one request batch size and objective."""

    request_batch_size: int
    p99_objective_ms: float
    ratio: float | None
    gpu: SearchAnswer | None
    cpu: SearchAnswer | None
    reason: str  # "" when ratio is set

    @property
    def low(self) -> float | None:
        """The least the ratio can be given both brackets: the GPU's capacity ÷ the CPU's upper end."""
        return bracket_low(self.gpu, self.cpu) if self.ratio is not None else None

    @property
    def high(self) -> float | None:
        """The most it can be: the GPU's upper end ÷ the CPU's capacity (None: no upper end, or a lower bound)."""
        return bracket_high(self.gpu, self.cpu) if self.ratio is not None else None


def device_ratios(devices: Sequence[DeviceAnswer]) -> list[DeviceRatio]:
    """Where both a CPU and a GPU were searched at the same request batch size and objective."""
    keys = sorted({(d.request_batch_size, d.p99_objective_ms) for d in devices})
    out = []
    for batch, objective in keys:
        here = [d for d in devices if (d.request_batch_size, d.p99_objective_ms) == (batch, objective)]
        if not {"cpu", "gpu"} <= {d.device for d in here}:
            continue
        gpu = best(d.best for d in here if d.device == "gpu" and d.best)
        cpu = best(d.best for d in here if d.device == "cpu" and d.best)
        if gpu and cpu and lower_bound(gpu) and lower_bound(cpu):
            out.append(DeviceRatio(batch, objective, None, gpu, cpu, both_bounds(gpu, cpu)))
        elif gpu and cpu:
            out.append(DeviceRatio(batch, objective, capacity(gpu) / capacity(cpu), gpu, cpu, ""))
        else:
            missing = " and ".join(kind.upper() for kind, b in (("cpu", cpu), ("gpu", gpu)) if b is None)
            out.append(DeviceRatio(batch, objective, None, gpu, cpu, f"{missing} did not meet the objective"))
    return out


@dataclass(frozen=True)
class Answers:
    """Every search at its own objective (`searches`, `devices`, `ratios`), and every search at each objective
    its cells were answered at (`objective_*`: `search_at`, so the same `Gain` and `DeviceRatio` there)."""

    searches: tuple[SearchAnswer, ...]
    devices: tuple[DeviceAnswer, ...]
    ratios: tuple[DeviceRatio, ...]
    objective_searches: tuple[SearchAnswer, ...] = ()  # one per search and objective, by objective
    objective_devices: tuple[DeviceAnswer, ...] = ()  # keyed by each objective answered (p99_objective_ms)
    objective_ratios: tuple[DeviceRatio, ...] = ()
    ceilings: Mapping[str, ToolCeiling] = field(default_factory=dict)  # each checked search's tool ceiling, by id
    movements: Mapping[str, float] = field(default_factory=dict)  # the machine's movement over each paired search

    def objectives_ms(self) -> tuple[float, ...]:
        """Every objective some search was answered at, lowest first."""
        return tuple(sorted({s.p99_objective_ms for s in self.objective_searches}))


def answer(results: Sequence[CellResult]) -> Answers:
    """Every search's answer, the best configuration per device, the batching gains and GPU/CPU ratios; and
    the same at every objective the searches' cells were answered at."""
    searches = [own(s) for s in search_answers(results)]
    devices = device_answers(searches)
    at_objectives = [search_at(s, o) for s in searches for o in s.objectives]
    at_objectives.sort(key=lambda a: (a.p99_objective_ms, a.config, a.request_batch_size, a.search_id))
    objective_devices = device_answers(at_objectives)
    return Answers(tuple(searches), tuple(devices), tuple(device_ratios(devices)), tuple(at_objectives),
                   tuple(objective_devices), tuple(device_ratios(objective_devices)), tool_ceilings(results),
                   search_movements(results))


def own(search: SearchAnswer) -> SearchAnswer:
    """`search` at its own objective by the one rule (`search_at`), as every comparison reads it."""
    at = next((a for a in search.objectives if a.p99_objective_ms == search.p99_objective_ms), None)
    return replace(search_at(search, at), objectives=search.objectives) if at else search


def search_at(search: SearchAnswer, at: ObjectiveAnswer) -> SearchAnswer:
    """`search` as answered at an objective (`at`, one of `search.objectives`): its confirmed capacity there, its
    unconfirmed pass above it and that objective's bounds, so `best`, `Gain` and `DeviceRatio` compare searches
    there; the latencies and device use are those of the answered rate's cell."""
    step = at.conclusion.answer if at.conclusion else None
    cell = step.result if step and step.rate_rps == at.capacity_rps else None
    row = next((r for r in search.rates if r.offered_rps == at.capacity_rps), None)
    ips: float | None = cell.throughput_ips if cell else at.capacity_ips
    p50 = cell.latency_p50_ms if cell else row.p50_ms if row else None
    p99 = cell.latency_p99_ms if cell else row.p99_ms if row else None
    return replace(search, p99_objective_ms=at.p99_objective_ms, capacity_rps=at.confirmed_rps, capacity_ips=ips,
                   p50_ms=p50, p99_ms=p99, lowest_failing_rps=at.lowest_failing_rps, reason=at.reason,
                   server_cpu_percent=cell.server_cpu_percent if cell else None,
                   gpu_utilization_percent=cell.gpu_utilization_percent if cell else None,
                   server_cpu_cores=cell.server_cpu_cores if cell else None, conclusion=at.conclusion, objectives=(),
                   at=at)

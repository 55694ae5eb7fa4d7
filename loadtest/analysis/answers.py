"""Answers: what the capacity searches in a set of results say, derived once from the records.

A capacity search (`mnist-bench capacity`) tags every cell it measures with `CellResult.search`
(its id, role, objective, offered rate). From those records alone:

- per search, its answer: its steps rebuilt with each rate's pooled verdict at the recorded
  confidence, concluded by `loadtest.sweep.conclusion.conclude` exactly as the search concluded:
  the highest rate whose confirmation passed, with its uncertainty (the lowest rate above it that
  did not pass, the estimate, stalls, a load generator's limit);
- per device × request batch size × objective, the best configuration measured (highest capacity);
- the batching gain there: best batching-enabled capacity ÷ batching-off capacity (None, with the
  reason, when either is missing or batching off did not meet the objective), and its range from
  the two brackets: lowest on ÷ highest off to highest on ÷ lowest off;
- the GPU/CPU ratio of the best capacities at the same request batch size and objective;
- per search, its cells answered at several p99 objectives (`objective_answers`: recorded with the
  search, by default 5, 10, 25, 50 and 100 ms, besides its own) with the same confidence rule, every
  window at a rate pooled, and its rate table (`rate_table`: per offered rate, what was achieved and
  the latency percentiles of all its windows merged); the best configuration, the batching gain and
  the GPU/CPU ratio again at each of those objectives (`Answers.objective_devices`,
  `Answers.objective_ratios`).

A configuration is what was measured, whatever the load: server kind, device, device name, batching
profile and parameters, server versions, and the load generator's host.

Pure functions over `CellResult`s: nothing here reads files, prints or draws.
Not for: the report's layout (`loadtest.analysis.summary`), capacities from plain sweeps
(`loadtest.analysis.sources`), or replicas and cost (`loadtest.analysis.size`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from loadtest.analysis.formatting import params
from loadtest.confidence import DEFAULT_CONFIDENCE, Evidence
from loadtest.overload import overloaded_reason
from loadtest.records import CellResult
from loadtest.stats import merge_encoded
from loadtest.sweep.conclusion import (
    DEFAULT_OBJECTIVES_MS,
    AnswerKind,
    Conclusion,
    Role,
    Step,
    conclude,
    pooled_verdict,
    step_after,
)
from loadtest.verdicts import Decision, client_limited, verdict_of
from loadtest.vocab import CellStatus
from serving.endpoint import runtime_display_name

OFF = "off"  # the batching profile with server-side batching disabled


@dataclass(frozen=True, order=True)
class Config:
    """One server configuration. `name` (the server's recorded name) labels it but is not part of it."""

    device: str
    device_name: str
    kind: str
    batching_profile: str
    batching: str  # "k=v, ..." of the batching parameters; "" when none were recorded
    versions: str  # "k=v, ..." of the server-side versions
    host: str  # the load generator's host, from the run's provenance
    name: str = field(default="", compare=False)
    runtime: str = ""  # what ran the model, as `serving.endpoint.runtime_display_name` names it

    @property
    def batching_on(self) -> bool:
        return self.batching_profile != OFF and self.batching != ""


def config_of(cell: CellResult) -> Config:
    s = cell.server
    return Config(s.device, s.device_name, s.kind, s.batching_profile, params(s.batching, ""),
                  params(s.versions, ""), str(cell.provenance.get("host", "")), s.name,
                  runtime_display_name(s.kind, s.versions.get("runtime")))


def config_labels(configs: Iterable[Config]) -> dict[Config, str]:
    """A short unique label per configuration: its server name, then `-profile`, then `#n` as needed."""
    unique = sorted(set(configs))
    names = Counter(c.name for c in unique)
    labels = {}
    for c in unique:
        label = c.name or c.device
        if names[c.name] > 1 and not label.endswith(f"-{c.batching_profile}"):
            label = f"{label}-{c.batching_profile}"
        labels[c] = label
    repeated = Counter(labels.values())
    seen: Counter[str] = Counter()
    for c in unique:
        base = labels[c]
        if repeated[base] > 1:
            seen[base] += 1
            labels[c] = f"{base}#{seen[base]}"
    return labels


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

    @property
    def met(self) -> bool:
        return self.capacity_rps is not None

    @property
    def kind(self) -> AnswerKind:
        """`confirmed` (capacity_rps), `passed, not confirmed` (only `passed_rps`), or `none`."""
        if self.conclusion is None:
            return AnswerKind.CONFIRMED if self.met else AnswerKind.NONE
        return self.conclusion.kind

    @property
    def passed_rps(self) -> float | None:
        """The highest rate above the capacity that passed but was not confirmed (a search cut short)."""
        best_pass = self.conclusion.best_pass if self.conclusion else None
        return best_pass.rate_rps if best_pass else None

    @property
    def upper_rps(self) -> float | None:
        """The lowest rate above the capacity that did not pass; None when none was measured (or a lower bound)."""
        if self.conclusion is None or self.conclusion.at_least:
            return None
        return self.conclusion.upper_rps()

    @property
    def estimate_ms(self) -> float | None:
        """The confirmation's early-stopping estimate of the true p99."""
        capacity = self.conclusion.capacity if self.conclusion else None
        return capacity.verdict.evidence.estimate_ms if capacity and capacity.verdict.evidence else None

    def uncertainty(self) -> str:
        return self.conclusion.uncertainty() if self.conclusion else ""


def offered_rps(cell: CellResult) -> float | None:
    """The rate a search offered (None for its closed-loop probe); else the open-loop rate."""
    value = cell.search.get("offered_rps", cell.load.rate_rps) if cell.search else cell.load.rate_rps
    return None if value is None else float(value)


def interrupted(cell: CellResult) -> bool:
    """A cell Ctrl-C (or SIGTERM) stopped: recorded failed, but no evidence on the server."""
    return cell.status != CellStatus.OK and cell.failure_reason.startswith("interrupted")


def rated(cells: Sequence[CellResult]) -> list[CellResult]:
    """A search's cells that measured an offered rate: not its probe, its start, or a cell it was interrupted in."""
    return [c for c in cells if offered_rps(c) is not None and c.search.get("role") not in (Role.PROBE, Role.START)
            and not interrupted(c)]


def steps_of(cells: Sequence[CellResult], objective: float) -> list[Step]:
    """A search's steps rebuilt from its records, each with its rate's pooled verdict, as the search made them."""
    steps: list[Step] = []
    for cell in rated(cells):
        rate = offered_rps(cell)
        assert rate is not None
        role = Role(cell.search["role"])
        confirming = bool(cell.search.get("confirming", role == Role.CONFIRM))
        confidence = float(cell.search.get("confidence", DEFAULT_CONFIDENCE))
        steps.append(step_after(steps, rate, role, cell, confirming, objective, confidence))
    return steps


def search_answer(cells: Sequence[CellResult]) -> SearchAnswer:
    """The answer of one search's cells, concluded as `loadtest.sweep.capacity.CapacitySearch` concludes it,
    with its cells answered at each of its objectives (`search_objectives`) and its rate table."""
    first = cells[0]
    objective = float(first.search["p99_objective_ms"])
    steps = steps_of(cells, objective)
    found = conclude(steps, objective)
    cell = found.capacity.result if found.capacity else None
    reason = "" if cell else (found.unmet_reason() if steps else _unmet(cells))
    return SearchAnswer(str(first.search["id"]), config_of(first), first.load.request_batch_size, objective,
                        found.capacity_rps, cell.throughput_ips if cell else None,
                        cell.latency_p50_ms if cell else None, cell.latency_p99_ms if cell else None,
                        found.lowest_failing_rps, len(cells), reason,
                        cell.server_cpu_percent if cell else None, cell.gpu_utilization_percent if cell else None,
                        found, objective_answers(cells, search_objectives(cells)), rate_table(cells))


def _unmet(cells: Sequence[CellResult]) -> str:
    """Why a search measured no rate at all (its server did not start)."""
    failed = next((c.failure_reason for c in cells if c.failure_reason), "")
    return "no rate measured" + (f": {failed}" if failed else "")


def search_answers(results: Sequence[CellResult]) -> list[SearchAnswer]:
    """Every search in the results, one answer each, by configuration, batch, objective, id."""
    groups: dict[str, list[CellResult]] = {}
    for cell in results:
        if cell.search:
            groups.setdefault(str(cell.search["id"]), []).append(cell)
    answers = [search_answer(cells) for cells in groups.values()]
    return sorted(answers, key=lambda a: (a.config, a.request_batch_size, a.p99_objective_ms, a.search_id))


def capacity(search: SearchAnswer) -> float:
    """A search's capacity in requests/s; 0 when it did not meet its objective (`best` never picks those)."""
    return search.capacity_rps if search.capacity_rps is not None else 0.0


def best(searches: Iterable[SearchAnswer]) -> SearchAnswer | None:
    """The highest capacity among the searches that met their objective."""
    return max((s for s in searches if s.met), key=capacity, default=None)


# ----------------------------------------------------------------------------- comparisons


LOWER_BOUND_NOTE = "%s's capacity is a lower bound: the load generator was the limit"


def lower_bound(search: SearchAnswer | None) -> bool:
    """The search's capacity is "at least": the load generator, not the server, stopped it."""
    return search is not None and search.conclusion is not None and search.conclusion.at_least


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
        if self.ratio is None or self.batching is None or self.off is None or self.off.upper_rps is None:
            return None
        return capacity(self.batching) / self.off.upper_rps

    @property
    def high(self) -> float | None:
        """The most the gain can be: batching's upper end ÷ off's capacity (None: no upper end measured)."""
        if self.ratio is None or self.batching is None or self.off is None or self.batching.upper_rps is None:
            return None
        return self.batching.upper_rps / capacity(self.off)

    def describe(self) -> str:
        """`×1.56, between ×1.40 and ×1.70` (an open end says "at least" / "at most"). Where one capacity is a
        lower bound (the load generator was the limit), only the bound that still holds is given."""
        if self.ratio is None:
            return f"— {self.reason}"
        low, high = self.low, self.high
        if lower_bound(self.batching):  # batching's capacity may be higher: only a least gain holds
            return (f"at least ×{low:.2f}" if low is not None else "unknown") + f" ({LOWER_BOUND_NOTE % 'batching'})"
        if lower_bound(self.off):  # off's capacity may be higher: only a most gain holds
            return (f"at most ×{high:.2f}" if high is not None else "unknown") + f" ({LOWER_BOUND_NOTE % 'off'})"
        if low is not None and high is not None:
            return f"×{self.ratio:.2f}, between ×{low:.2f} and ×{high:.2f}"
        if high is not None:
            return f"×{self.ratio:.2f}, at most ×{high:.2f}"
        if low is not None:
            return f"×{self.ratio:.2f}, at least ×{low:.2f}"
        return f"×{self.ratio:.2f} (no range: neither bracket has an upper end)"


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
        reason = ("both capacities are lower bounds (the load generator was the limit for each), so their ratio "
                  "says nothing")
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
            out.append(DeviceRatio(batch, objective, None, gpu, cpu, "both capacities are lower bounds (the load "
                                   "generator was the limit for each), so their ratio says nothing"))
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

    def objectives_ms(self) -> tuple[float, ...]:
        """Every objective some search was answered at, lowest first."""
        return tuple(sorted({s.p99_objective_ms for s in self.objective_searches}))


def answer(results: Sequence[CellResult]) -> Answers:
    """Every search's answer, the best configuration per device, the batching gains and GPU/CPU ratios; and
    the same at every objective the searches' cells were answered at."""
    searches = search_answers(results)
    devices = device_answers(searches)
    at_objectives = [search_at(s, o) for s in searches for o in s.objectives]
    at_objectives.sort(key=lambda a: (a.p99_objective_ms, a.config, a.request_batch_size, a.search_id))
    objective_devices = device_answers(at_objectives)
    return Answers(tuple(searches), tuple(devices), tuple(device_ratios(devices)), tuple(at_objectives),
                   tuple(objective_devices), tuple(device_ratios(objective_devices)))


# ----------------------------------------------------------------------------- every objective


@dataclass(frozen=True)
class RateRow:
    """One offered rate of a search, every window at it pooled (its confirmation and extensions too)."""

    offered_rps: float
    achieved_rps: float  # completions over the measured seconds of all its windows
    achieved_ips: float
    p50_ms: float | None  # from the windows' merged latency histogram
    p90_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    requests: int  # N: requests in the merged histogram
    windows: int  # cells measured at the rate
    overloaded: bool  # some window's server did not keep up (`loadtest.overload`)
    loadgen_limited: bool  # some window's load generator was the limit


def _by_rate(cells: Sequence[CellResult]) -> dict[float, list[CellResult]]:
    groups: dict[float, list[CellResult]] = {}
    for cell in rated(cells):
        rate = offered_rps(cell)
        assert rate is not None
        groups.setdefault(rate, []).append(cell)
    return dict(sorted(groups.items()))


def _percentile_ms(histogram, percentile: float) -> float | None:
    if histogram.get_total_count() == 0:
        return None
    return round(histogram.get_value_at_percentile(percentile) / 1000.0, 3)


def rate_table(cells: Sequence[CellResult]) -> tuple[RateRow, ...]:
    """Per offered rate of one search's cells, lowest first: achieved req/s and img/s, p50/p90/p99/p99.9 of all
    its windows' requests (histograms merged exactly), N, and whether any window was overloaded."""
    rows = []
    for rate, group in _by_rate(cells).items():
        measured = [c for c in group if c.status == CellStatus.OK]
        seconds = sum(c.load.duration_s for c in measured)
        merged = merge_encoded(c.histogram_us for c in measured)
        achieved = sum(c.throughput_rps * c.load.duration_s for c in measured) / seconds if seconds else 0.0
        images = sum(c.throughput_ips * c.load.duration_s for c in measured) / seconds if seconds else 0.0
        p50, p90, p99, p999 = (_percentile_ms(merged, p) for p in (50.0, 90.0, 99.0, 99.9))
        rows.append(RateRow(rate, round(achieved, 1), round(images, 1), p50, p90, p99, p999,
                            merged.get_total_count(), len(group), any(overloaded_reason(c) for c in group),
                            any(client_limited(c) for c in group)))
    return tuple(rows)


def search_objectives(cells: Sequence[CellResult]) -> tuple[float, ...]:
    """The objectives a search's cells are answered at: those it recorded (else `DEFAULT_OBJECTIVES_MS`) and
    its own, lowest first."""
    tag = next((c.search for c in cells if c.search), {})
    recorded = tag.get("objectives") or DEFAULT_OBJECTIVES_MS
    own = [float(tag["p99_objective_ms"])] if tag.get("p99_objective_ms") is not None else []
    return tuple(sorted({float(o) for o in recorded} | set(own)))


@dataclass(frozen=True)
class ObjectiveAnswer:
    """One search's cells answered at one p99 objective, every window at a rate pooled.

    The capacity is the highest offered rate whose pooled verdict passes at the objective; `kind` says
    what it rests on: `confirmed` when that rate has a confirmation whose own windows pass there, or at
    least two windows that pass separately, else `passed, not confirmed`; `none` when no rate passed."""

    p99_objective_ms: float
    kind: AnswerKind
    capacity_rps: float | None
    capacity_ips: float | None  # achieved img/s at that rate (all its windows)
    evidence: Evidence | None  # the pooled verdict's: N, k over the objective, the p99 estimate
    upper_rps: float | None  # the lowest rate above it that did not pass (failed, inconclusive, or client-limited)
    lowest_failing_rps: float | None  # the lowest rate above it that failed at this objective
    not_monotone: tuple[tuple[float, float], ...] = ()  # (a passing rate, a lower rate that failed here)
    reason: str = ""  # why there is no capacity ("" when there is one)
    conclusion: Conclusion | None = field(default=None, compare=False)  # for `search_at`: bounds, not monotone

    @property
    def at_least(self) -> bool:
        """No rate above the capacity failed at this objective: the search did not go high enough to bound it
        (or only the load generator's limit did)."""
        return self.capacity_rps is not None and self.lowest_failing_rps is None

    def describe(self) -> str:
        """`933 req/s (confirmed: p99 <= 21.3 ms at 99% confidence, N=6192, k=42; between 933 and 1000 req/s)`, or
        `none: ...`."""
        if self.capacity_rps is None:
            return f"none ({self.reason})"
        e = self.evidence
        why = f"p99 <= {e.estimate_ms:.3f} ms at {e.confidence:.0%} confidence, N={e.requests}, k={e.over}" if e \
            else "passed"
        if self.at_least:
            bound = ("at least: no higher rate measured failing" if self.upper_rps is None
                     else f"at least: above it only {self.upper_rps:g} req/s, which did not fail here")
        else:
            bound = f"between {self.capacity_rps:g} and {self.upper_rps:g} req/s"
        odd = "".join(f"; not monotone: passed at {high:g} req/s above a fail at {low:g} req/s"
                      for high, low in self.not_monotone)
        return f"{self.capacity_rps:g} req/s ({self.kind.value}: {why}; {bound}{odd})"

    def line(self) -> str:
        """`p99 <= 25 ms: 933 req/s (confirmed: ...)`."""
        return f"p99 <= {self.p99_objective_ms:g} ms: {self.describe()}"


def _rate_step(rate: float, group: Sequence[CellResult], objective: float, confidence: float) -> Step:
    """A rate's pooled step at `objective`: every window together (represented by its confirmation, if any)."""
    confirming = [c for c in group if c.search.get("confirming")]
    shown = (confirming or list(group))[-1]
    return Step(rate, Role(shown.search.get("role", Role.BRACKET)), shown,
                pooled_verdict(group, objective, confidence), bool(confirming))


def _confirmed_at(group: Sequence[CellResult], objective: float, confidence: float) -> bool:
    confirming = [c for c in group if c.search.get("confirming")]
    if confirming and pooled_verdict(confirming, objective, confidence).passed:
        return True
    return sum(verdict_of([c], objective, confidence).passed for c in group if c.status == CellStatus.OK) >= 2


def objective_answer(cells: Sequence[CellResult], objective: float) -> ObjectiveAnswer:
    """One search's cells at one p99 objective (see `ObjectiveAnswer`)."""
    confidence = float(next((c.search.get("confidence", DEFAULT_CONFIDENCE) for c in cells if c.search),
                            DEFAULT_CONFIDENCE))
    groups = _by_rate(cells)
    steps = {rate: _rate_step(rate, group, objective, confidence) for rate, group in groups.items()}
    passing = [rate for rate, step in steps.items() if step.verdict.passed]
    top = max(passing, default=None)
    above = [step for rate, step in steps.items() if top is None or rate > top]
    failing = min((s.rate_rps for s in above if s.verdict.decision == Decision.FAIL), default=None)
    not_passing = [s.rate_rps for s in above if not s.verdict.passed]
    pairs = tuple((p, f.rate_rps) for p in sorted(passing) for f in steps.values()
                  if f.verdict.decision == Decision.FAIL and f.rate_rps < p)
    conclusion = Conclusion(objective, steps[top] if top is not None else None, failing,
                            tuple(s for s in above if s.verdict.decision == Decision.INCONCLUSIVE),
                            min((s.rate_rps for s in above if s.verdict.decision == Decision.LOADGEN), default=None),
                            tuple((steps[p], steps[f]) for p, f in pairs))
    if top is None:
        reason = conclusion.unmet_reason() if steps else "no rate measured"
        return ObjectiveAnswer(objective, AnswerKind.NONE, None, None, None, min(not_passing, default=None),
                               failing, pairs, reason, conclusion)
    kind = AnswerKind.CONFIRMED if _confirmed_at(groups[top], objective, confidence) else AnswerKind.PASSED
    row = next(r for r in rate_table(groups[top]))
    return ObjectiveAnswer(objective, kind, top, row.achieved_ips, steps[top].verdict.evidence,
                           min(not_passing, default=None), failing, pairs, "", conclusion)


def objective_answers(cells: Sequence[CellResult], objectives: Iterable[float]) -> tuple[ObjectiveAnswer, ...]:
    """One search's cells (`CellResult.search` of one id) answered at each objective, lowest first: pure, for
    the console's and the report's multi-objective tables."""
    return tuple(objective_answer(cells, objective) for objective in sorted(set(objectives)))


def search_at(search: SearchAnswer, at: ObjectiveAnswer) -> SearchAnswer:
    """`search` as answered at another objective (`at`, one of `search.objectives`): its capacity there, confirmed
    or not, with that objective's bounds, so `best`, `Gain` and `DeviceRatio` compare searches there."""
    cell = at.conclusion.capacity.result if at.conclusion and at.conclusion.capacity else None
    row = next((r for r in search.rates if r.offered_rps == at.capacity_rps), None)
    return replace(search, p99_objective_ms=at.p99_objective_ms, capacity_rps=at.capacity_rps,
                   capacity_ips=at.capacity_ips, p50_ms=row.p50_ms if row else None,
                   p99_ms=row.p99_ms if row else None, lowest_failing_rps=at.lowest_failing_rps, reason=at.reason,
                   server_cpu_percent=cell.server_cpu_percent if cell else None,
                   gpu_utilization_percent=cell.gpu_utilization_percent if cell else None,
                   conclusion=at.conclusion, objectives=())

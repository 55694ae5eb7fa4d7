"""Whether measured cells meet a p99 objective: pass, fail, inconclusive, or the load generator's limit.

One verdict for one cell, or for several cells measured at the same offered rate and pooled (their
histograms merge exactly): a window too short for a verdict is measured longer and judged on all
of its requests together.

- `failed`: a cell that did not finish, or whose requests failed, fails (the server erred);
- `loadgen`: a cell whose load generator did not keep up (a process near a full core, all its
  cores near full, or late sends and dispatch lag in a cell where no send waited for a busy
  server's free slot) says nothing about the server: neither a pass nor a fail. Only late sends with the
  load generator's CPU not near full, that sent the rate asked (within counting noise) and whose latencies pass
  anyway, pass: each is timed from its intended send and they reach the server in bursts, so the pass is the
  harder for them, never the easier;
- `overloaded`: an open-loop cell whose server did not keep up with the rate offered
  (`loadtest.judge.overload`) fails, whatever its latencies: what it served is no rate it sustains. Completions
  short of the sends fail at once. Mean latency that grew between a cell's halves fails when the rate's
  newest cell and an earlier one both show it; seen only in the newest, it is measured again
  (inconclusive, `Verdict.again_s`: a burst of arrivals or a moment of the host's can double a short
  cell's latency at a busy rate, a queue building shows again); seen only before, the newest cell
  answered it and the requests of every cell are judged together;
- `unstable`: a cell whose throughput moved between windows beyond counting noise fails (an open
  loop's server that cannot keep its rate falls behind);
- otherwise the p99 evidence decides at the stated confidence (`loadtest.judge.confidence.judge`).

A search's `Step` is one cell with its rate's verdict so far (`step_after`: the cells at its rate pooled).

Pure functions over `CellResult`s. Not for: the search that asks for cells (`loadtest.search.capacity`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from loadtest.evidence.objective import Objective
from loadtest.evidence.records import CellResult
from loadtest.evidence.search_tag import CellEvidence
from loadtest.evidence.stats import merge_encoded
from loadtest.evidence.vocab import CellStatus, Flag, Role
from loadtest.judge import confidence as conf
from loadtest.judge import noise
from loadtest.judge.dispersion import LEND_MAX_RATIO, dispersion
from loadtest.judge.overload import overloaded_reason, queue_growth_reason, shortfall_reason

SHORT_ALLOWED = 0.05  # a late load generator's cell may pass where its throughput is within this share of the rate


class Decision(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"  # too few requests to say either at the stated confidence
    LOADGEN = "loadgen"  # the load generator was the limit: nothing said about the server


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str  # why it did not pass; "" when it did
    evidence: conf.Evidence | None = None  # None where the cells never got that far (failed, errors)
    again_s: float = 0.0  # inconclusive because the latency grew: measure again, at least this many seconds

    @property
    def passed(self) -> bool:
        return self.decision == Decision.PASS

    def describe(self) -> str:
        if self.passed:
            return f"pass ({self.evidence.describe()})" if self.evidence else "pass"
        return f"{self.decision.value}: {self.reason}"


def client_limited(cell: CellResult) -> bool:
    """Whether the load generator, not the server, limited this cell: a `saturated` flag for its CPU, or
    for lateness (late sends, dispatch lag) in a cell where no send waited for a busy server's free slot
    (where some did, the server fell behind and the lateness is its own: counted from the intended send)
    and the host's stalls on the load generator's cores do not explain it (`noise.host_explains_lateness`:
    then the host was the limit, and the latencies, timed from the intended send, count as evidence), nor
    does an overloaded server (`loadtest.judge.overload`: its completions fell short of the sends, or its latency
    grew window to window, while the load generator's CPU was not saturated: the server fell behind)."""
    saturated = [f.reason for f in cell.flags if f.flag == Flag.SATURATED]
    if any("load generator" in reason and "used" in reason for reason in saturated):
        return True
    return (bool(saturated) and not cell.pool_full_waits and not noise.host_explains_lateness(cell)
            and overloaded_reason(cell) is None)


def _sent_on_schedule(cell: CellResult) -> bool:
    """Whether the load generator, late or not, sent the rate asked: no process (nor all its cores) near a full core,
    and the cell's throughput within counting noise of its offered rate (Poisson: 3 standard deviations, at least 5%
    short allowed)."""
    if any(f.flag == Flag.SATURATED and "load generator" in f.reason and "used" in f.reason for f in cell.flags):
        return False
    rate = cell.load.rate_rps
    if not rate or cell.load.duration_s <= 0:
        return False
    expected = rate * cell.load.duration_s
    return cell.throughput_rps >= rate * (1 - max(SHORT_ALLOWED, 3 / expected ** 0.5))


def _flag_reason(cells: Sequence[CellResult], flag: Flag) -> str | None:
    reasons = [f.reason for c in cells for f in c.flags if f.flag == flag]
    return reasons[-1] if reasons else None


def verdict_of(cells: Sequence[CellResult], objective: Objective,
               confidence: float = conf.DEFAULT_CONFIDENCE, above: Sequence[Sequence[CellResult]] = ()) -> Verdict:
    """The verdict of `cells`, measured at one offered rate, on `objective` at `confidence`; `above`, the cells of the
    search's higher rates nearest first, lend their clustering where these cells cannot show theirs
    (`loadtest.judge.dispersion.dispersion`)."""
    if not cells:
        raise ValueError("a verdict needs at least one cell")
    failed = next((c for c in cells if c.status != CellStatus.OK), None)
    if failed is not None:
        return Verdict(Decision.FAIL, f"failed: {failed.failure_reason}")
    errors = _flag_reason(cells, Flag.ERRORS)
    if errors is not None:
        return Verdict(Decision.FAIL, f"errors: {errors}")
    evidence = conf.judge(merge_encoded(c.histogram_us for c in cells), objective.p99_ms, confidence,
                          dispersion=dispersion(cells, objective.p99_ms, above))
    limited = next((c for c in cells if client_limited(c)), None)
    if limited is not None and not (evidence.outcome == conf.Outcome.PASS and all(map(_sent_on_schedule, cells))):
        return Verdict(Decision.LOADGEN, "the load generator was the limit: "
                       + (_flag_reason([limited], Flag.SATURATED) or "its CPU or dispatch lag"))
    overloaded = _overloaded(cells, evidence)
    if overloaded is not None:
        return overloaded
    unstable = _flag_reason(cells, Flag.UNSTABLE)
    if unstable is not None and evidence.outcome != conf.Outcome.FAIL:
        return Verdict(Decision.FAIL, f"unstable: {unstable}", evidence)
    if evidence.outcome == conf.Outcome.PASS:
        return Verdict(Decision.PASS, "", evidence)
    if evidence.outcome == conf.Outcome.FAIL:
        return Verdict(Decision.FAIL, evidence.describe(), evidence)
    return Verdict(Decision.INCONCLUSIVE, evidence.describe(), evidence)


@dataclass(frozen=True)
class Step:
    """One measured cell; `verdict` is its rate's verdict pooled over the cells of its group so far."""

    rate_rps: float
    role: Role
    result: CellResult
    verdict: Verdict
    confirming: bool = False  # the cell belongs to a confirmation (its own, or an extension of one)
    attempt: int = 0  # a confirmation measured again at its rate (a paired comparison's final round): its own verdict

    @property
    def group(self) -> tuple[float, bool, int]:
        """The cells its verdict pools: the rate's windows, or one confirmation's (an attempt's) windows."""
        return (self.rate_rps, self.confirming, self.attempt)

    @property
    def key(self) -> tuple[float, bool]:
        """The rate and whether it is its confirmation: the latest attempt's verdict is the rate's."""
        return (self.rate_rps, self.confirming)


def pooled_verdict(cells: Sequence[CellResult], objective: Objective, confidence: float,
                   above: Sequence[Sequence[CellResult]] = ()) -> Verdict:
    """A rate's verdict on every cell measured at it: cells the load generator limited are left out
    (their latencies are the client's), unless every one was."""
    server_bound = [c for c in cells if not client_limited(c)]
    return verdict_of(server_bound or cells, objective, confidence, above)


def rates_above(steps: Sequence[Step], rate: float) -> list[list[CellResult]]:
    """The cells of each rate of `steps` above `rate` and within `LEND_MAX_RATIO` of it, nearest first, those the load
    generator limited left out: what may lend `rate` its clustering (`loadtest.judge.dispersion.dispersion`)."""
    higher: dict[float, list[CellResult]] = {}
    for step in steps:
        if rate < step.rate_rps <= rate * LEND_MAX_RATIO and not client_limited(step.result):
            higher.setdefault(step.rate_rps, []).append(step.result)
    return [higher[r] for r in sorted(higher)]


def step_after(steps: Sequence[Step], rate: float, role: Role, result: CellResult, confirming: bool,
               objective: Objective, confidence: float, attempt: int = 0) -> Step:
    """The step `result` makes after `steps`: its verdict pools it with the earlier cells of its group, the cells of
    the rates just above it lending their clustering where its own cells cannot show it."""
    group = [s.result for s in steps if s.group == (rate, confirming, attempt)] + [result]
    verdict = pooled_verdict(group, objective, confidence, rates_above(steps, rate))
    return Step(rate, role, result, verdict, confirming, attempt)


def _overloaded(cells: Sequence[CellResult], evidence: conf.Evidence) -> Verdict | None:
    """The rate's verdict where its server did not keep up, or is to be measured again to tell (see the module);
    None where neither holds."""
    short = next((reason for reason in map(shortfall_reason, cells) if reason is not None), None)
    if short is not None:
        return Verdict(Decision.FAIL, f"overloaded: {short}", evidence)
    grew = queue_growth_reason(cells[-1])
    if grew is None:
        return None
    seen = sum(queue_growth_reason(c) is not None for c in cells)
    if seen > 1:
        return Verdict(Decision.FAIL, f"overloaded: {grew} (seen in {seen} of {len(cells)} measurements at this rate)",
                       evidence)
    if evidence.outcome == conf.Outcome.FAIL:
        return Verdict(Decision.FAIL, evidence.describe(), evidence)
    return Verdict(Decision.INCONCLUSIVE, f"{grew.removesuffix(': a queue building')}: measured again to tell a "
                   "queue building from a burst", evidence, again_s=cells[-1].load.duration_s)


def evidence_record(verdict: Verdict) -> CellEvidence:
    """What a search cell records of its own verdict (`CellResult.search.evidence`)."""
    e = verdict.evidence
    if e is None:
        return CellEvidence(verdict.decision.value, verdict.reason)
    return CellEvidence(verdict.decision.value, verdict.reason, e.requests, e.over, e.estimate_ms, e.confidence,
                        e.requests_to_pass, e.dispersion if e.dispersion > 1 else None)

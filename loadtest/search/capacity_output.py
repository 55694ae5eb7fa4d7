"""What a capacity search prints: its trail (every cell in order, with its rate's verdict so far) and its
answer line (the rate, what it rests on, its bounds; or why none).

Not for: the search (`loadtest.search.capacity`) or the report's tables (`loadtest.report`).
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from loadtest.evidence.objective import Objective
from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import Role
from loadtest.judge.conclusion import describe_pair, describe_unsteady
from loadtest.judge.verdicts import Step
from loadtest.search.search_settings import CapacityAnswer


def trail_table(answer: CapacityAnswer) -> Table:
    """Every cell the search measured, in order: its own window, and its rate's verdict so far (pooled)."""
    table = Table(box=None, pad_edge=False)
    for name in ("#", "role", "offered req/s", "req/s", "img/s", "p50 ms", "p99 ms", "N", "k", "est. p99 ms",
                 "verdict"):
        table.add_column(name, justify="left" if name in ("role", "verdict") else "right")
    for number, step in enumerate(answer.steps, 1):
        r, e = step.result, step.verdict.evidence
        role = f"{step.role.value}{' (confirm)' if step.role == Role.EXTEND and step.confirming else ''}"
        table.add_row(str(number), role, f"{step.rate_rps:g}", f"{r.throughput_rps:.1f}", f"{r.throughput_ips:.1f}",
                      _ms(r.latency_p50_ms), _ms(r.latency_p99_ms), str(e.requests) if e else "—",
                      str(e.over) if e else "—", _ms(e.estimate_ms) if e else "—",
                      step.verdict.decision.value if step.verdict.passed else step.verdict.describe())
    return table


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def answer_line(answer: CapacityAnswer, what: str = "") -> str:
    """`capacity: [what: ]...` with the answered rate, what it rests on (`confirmed`, or `passed, not confirmed`),
    img/s, the estimate and the bounds; or `none`/`unmet` and why. An interrupted search says so."""
    prefix = f"capacity: {what + ': ' if what else ''}"
    c = answer.conclusion
    cells = f"{len(answer.steps)} cells, {answer.ended_because}"
    extra = "".join(f"; not monotone: {describe_pair(pair)}" for pair in c.not_monotone)
    step = c.answer
    if step is None:  # the reason names any unsteady rate
        if c.stalls is not None:
            return f"{prefix}unmet at {answer.objective}: {c.stalls.describe(answer.objective)} ({cells}){extra}"
        return f"{prefix}none at {answer.objective}: {c.unmet_reason()} ({cells}){extra}"
    extra = "".join(f"; {describe_unsteady(pair)}" for pair in c.unsteady) + extra
    if c.capacity is not None and c.best_pass is not None:
        extra = f"; higher, passed, not confirmed: {_rests_on(c.best_pass)}" + extra
    r: CellResult = step.result
    bound = "at least " if c.at_least else ""
    return (f"{prefix}{bound}{step.rate_rps:g} req/s ({r.throughput_ips:.1f} img/s), {c.kind.value}: "
            f"{_evidence(step)} <= {answer.objective.p99_ms:g} ms (p50 {r.latency_p50_ms} ms); {c.uncertainty()} "
            f"({cells}){extra}")


def _evidence(step: Step) -> str:
    e = step.verdict.evidence
    return f"p99 <= {e.estimate_ms:.3f} ms at {e.confidence:.0%} confidence (N={e.requests}, k={e.over})" if e \
        else "passed"


def _rests_on(step: Step) -> str:
    return f"{step.rate_rps:g} req/s ({_evidence(step)})"


def outcome_line(outcome: Any, objective: Objective, named: bool) -> str:
    """One search's last word; `named` prefixes the server and batch (several searches in one run)."""
    what = f"{outcome.server}, request batch {outcome.batch_size}" if named else ""
    if outcome.answer is not None:
        return answer_line(outcome.answer, what)
    return f"capacity: {what + ': ' if what else ''}none at {outcome.objective or objective}: {outcome.failure}"


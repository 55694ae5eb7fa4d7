"""What a capacity search prints: its trail (every cell in order, with its rate's verdict so far), its answer line
(the rate, what it rests on, its bounds; or why none), and, while it runs, one line per search as it narrows
(`Progress`): its range (or what it has so far), how wide, and the time its budget has left.

In a terminal the progress lines are live (`rich.live.Live`, redrawn in place); without one (a pipe, a log, CI) each
search's line is printed whenever it changes, at most once every `PLAIN_EVERY_S` seconds, and once more as it ends.
Lines said meanwhile (`Progress.print`) go above the live lines. The cell-by-cell lines are the run's log file's
(`loadtest.measure.cell_sweep.CellRunner.detail`); `--verbose` prints them too.

Not for: the search (`loadtest.search.capacity`) or the report's tables (`loadtest.report`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from loadtest.evidence.objective import Objective
from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import Role
from loadtest.judge.conclusion import conclude, describe_pair, describe_unsteady
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


PLAIN_EVERY_S = 5.0  # without a terminal, a search's line at most this often


def range_text(steps: Sequence[Step], objective: Objective) -> str:
    """What a search's steps say so far: `range 248–283.5 req/s (×1.14)`, `≥ 248 req/s (no rate above shown to fail
    yet)`, or `no rate passed yet`."""
    found = conclude(steps, objective)
    if found.answer is None:
        return "no rate passed yet"
    low = found.answer.rate_rps
    kind = "" if found.capacity is not None else ", not confirmed"
    upper = found.upper_rps()
    if upper is None:
        return f"≥ {low:g} req/s{kind} (no rate above shown to fail yet)"
    return f"range {low:g}–{upper:g} req/s{kind} (×{upper / low:.2f})"


@dataclass
class Progress:
    """The searches' lines, live in a terminal, plain every few seconds elsewhere."""

    out: TextIO
    clock: Callable[[], float] = time.monotonic
    live: bool | None = None  # None: a terminal's
    _lines: dict[str, str] = field(default_factory=dict)
    _printed: dict[str, tuple[float, str]] = field(default_factory=dict)
    _live: Live | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.live is None:
            self.live = bool(getattr(self.out, "isatty", lambda: False)())

    @contextmanager
    def shown(self) -> Iterator[Progress]:
        """The live lines drawn for the block (in a terminal); every line's last state printed where not live."""
        if self.live:
            self._live = Live(Text(""), console=Console(file=self.out), refresh_per_second=4, transient=False,
                              redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        try:
            yield self
        finally:
            if self._live is not None:
                self._live.stop()
                self._live = None
            else:
                self._flush()

    def update(self, key: str, text: str) -> None:
        """Search `key`'s line is now `text`."""
        with self._lock:
            self._lines[key] = text
            if self._live is not None:
                self._live.update(Text("\n".join(self._lines.values())))
                return
            said = self._printed.get(key)
            if said is None or (self.clock() - said[0] >= PLAIN_EVERY_S and said[1] != text):
                self._write(key, text)

    def print(self, text: str) -> None:
        """A line said meanwhile: above the live lines in a terminal, as it is elsewhere."""
        with self._lock:
            if self._live is not None:
                self._live.console.print(Text(text))
            else:
                self.out.write(text + "\n")
                self.out.flush()

    def _flush(self) -> None:
        with self._lock:
            for key, text in self._lines.items():
                if self._printed.get(key, (0.0, ""))[1] != text:
                    self._write(key, text)

    def _write(self, key: str, text: str) -> None:
        self._printed[key] = (self.clock(), text)
        self.out.write(text + "\n")
        self.out.flush()

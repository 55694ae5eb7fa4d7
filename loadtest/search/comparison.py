"""A paired comparison: the servers compared are all up at once, their capacity searches interleaved (one
server loaded at a time, `loadtest.search.interleave`), with a reference cell measured at the start, between
slices and at the end, which shows how far this machine's speed moved while they were measured.

The reference cell is the same every time: the comparison's first server, `REFERENCE_USERS` users sending back to
back (closed loop) at request batch 1 for `REFERENCE_S` seconds, so the server is never idle. Its throughput is the
server's own service rate at that moment: how fast this machine runs it; `loadtest.report.answers.paired` reads the
drift from it. (One request at a time, as before issue #67, read the client's and the wire's time as much as the
server's: on the 2-core build machine it moved 25% where the server's service rate moved 10%, and every ratio's range
widened by the difference.) Every cell of a comparison, searches and
reference alike, records `search.comparison`: its id (one per request batch size), the repeat, whether it
was paired (interleaved) or searched one after the other, and the servers compared.

How many times a comparison runs (`Repeats`): `--repeat` times, then one more, up to `--max-repeats`, while no
ratio lies in the ranges of more than half its repeats (two repeats apart: their median stands on neither); under a
run's time budget (`--budget-min`), a repeat past the first begins only while it fits (`RunBudget.fits`).

Not for: the searches (`loadtest.search.capacity_search`) or reading the ratio (`loadtest.report.answers.paired`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from loadtest.evidence.records import CellResult
from loadtest.evidence.search_tag import ComparisonTag, SearchTag
from loadtest.evidence.vocab import LoadMode
from loadtest.measure import plan as plans
from loadtest.measure.cell_sweep import CellRunner
from loadtest.measure.probe import Prober
from loadtest.search.run_budget import RunBudget
from serving.endpoint import ServedEndpoint

REFERENCE_S = 1.0  # the reference cell's measured seconds (~300 requests on a null server of 3 ms a call)
REFERENCE_USERS = 4  # users sending back to back: the server never idle (2 to 16 read the same rate here)
REFERENCE_WARMUP_S = 0.3
REFERENCE_EVERY = 3  # rounds between reference cells (a round: one cell of each server)


def comparison_tag(comparison_id: str, repeat: int, paired: bool, servers: Sequence[str]) -> ComparisonTag:
    """What every cell of one comparison records (`search.comparison`)."""
    return ComparisonTag(comparison_id, repeat, paired, tuple(servers))


@dataclass
class Reference:
    """The comparison's reference cell on `target`, measured when asked; every one recorded."""

    cells: CellRunner
    prober: Prober
    target: ServedEndpoint
    run: plans.RunSettings
    tag: SearchTag  # search_tag(...) of role `reference`, its comparison included
    every: int = REFERENCE_EVERY

    def measure(self, when: str) -> None:
        """One reference cell (`when`: "start", "between", "end", recorded in its tag)."""
        cell = plans.Cell(LoadMode.CLOSED, 1, REFERENCE_USERS, None)
        run = replace(self.run, measure_s=REFERENCE_S, warmup_s=REFERENCE_WARMUP_S, processes=1)
        self.cells.measure(self.prober, self.target, cell, run, 0, None, search=replace(self.tag, when=when))

    def between(self, round_number: int) -> None:
        """After every `every` rounds of the interleaved searches."""
        if round_number % self.every == 0:
            self.measure("between")


@dataclass(frozen=True)
class Repeats:
    """`at_least` repeats of a comparison, then one more, up to `at_most`, while `disagree(the run's cells, its
    comparison id)` (`loadtest.report.answers.paired.without_majority`, given by the command) finds no majority."""

    at_least: int = 1
    at_most: int = 0  # 0: `at_least`, none more
    disagree: Callable[[Sequence[CellResult], str], bool] | None = None

    def each(self, cells: CellRunner, comparison_ids: Sequence[str], budget: RunBudget | None = None) -> Iterator[int]:
        """Repeat numbers 1, 2, ... for as long as the rule asks for another, said on the console past `at_least`;
        with a `budget`, none begins that does not fit (said on the console too)."""
        done = 0
        took_s: list[float] = []  # each repeat's time, for the budget
        while done < self.at_least or self._apart(cells, comparison_ids, done):
            if budget is not None and not budget.fits(took_s):
                cells.say(f"repeat {done + 1} not started: {max(0.0, budget.left_s()):.0f} s of the run's time budget "
                          f"left, under half a repeat's ({sum(took_s) / len(took_s):.0f} s on average)")
                return
            done += 1
            began = budget.clock() if budget is not None else 0.0
            yield done
            took_s.append(budget.clock() - began if budget is not None else 0.0)

    def _apart(self, cells: CellRunner, comparison_ids: Sequence[str], done: int) -> bool:
        if done >= self.at_most or self.disagree is None:
            return False
        apart = [cid for cid in comparison_ids if self.disagree(cells.results, cid)]
        if apart:
            cells.say(f"{', '.join(apart)}: no ratio lies in the ranges of more than half its {done} repeats; "
                      f"repeat {done + 1} (at most {self.at_most})")
        return bool(apart)

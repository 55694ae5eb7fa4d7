"""The tool ceiling measured in a capacity run: each configuration's twin, checked at 2x each of its answers.

After the searches of a capacity run (paired or one after the other), with the configurations' servers still up,
each configuration with an answer gets its twin (`twin_slot`): the embedded server with the null backend, on the
same cores, with the same frontends, device owner and batching config (the plan's server, its backend swapped).
It is driven by the same Locust processes the answer's cell used, at the same request batch and objective, and
checked for shape, not classes (the null backend answers zeros of the signature's shapes). Per search with an
answer, one open-loop cell at `loadtest.judge.tool_ceiling.check_rate` of the answer and its upper end (read with
`loadtest.judge.conclusion`, as the search concluded them); where the twin does not carry that rate
(`twin_passed`), the twin's own capacity is searched (`CapacityRun`, every cell tagged a twin's) within the time
left to the tool ceiling (`TwinClock`). Every cell goes to results.jsonl like any other, tagged `checks` = the search
checked, id `<search>/tool-ceiling`; the check's role is `Role.TOOL_CEILING`, the twin's own search's cells keep
theirs (bracket, confirm...), so the report concludes that search as its console line did.

A twin that cannot start (a server the tool did not start, cores it cannot have, a start that fails or does not
answer) is one failed cell per search it was to check, its reason recorded: never a crash, never silence.

Not for: the pass rule (`loadtest.judge.tool_ceiling`) or what the report reads from the cells (`loadtest.report`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from loadtest.evidence.records import CellResult
from loadtest.evidence.search_tag import SearchTag
from loadtest.evidence.vocab import Check, LoadMode, Role
from loadtest.judge.tool_ceiling import check_rate, twin_failure
from loadtest.measure import plan as plans
from loadtest.measure.cell_sweep import CellRunner, Interrupted
from loadtest.measure.probe import Prober
from loadtest.measure.servers import Slot, StartFailed, ToStart
from loadtest.search.capacity_output import answer_line
from loadtest.search.capacity_request import CapacityRequest, SearchEnd
from loadtest.search.capacity_run import CapacityRun, search_tag
from serving.deploy.request import LaunchKind
from serving.endpoint import ServedEndpoint

TWIN = "tool-ceiling"  # a twin's search id: `<search checked>/tool-ceiling`; its server: `<configuration>-tool-ceiling`
# Flags that choose or shape the backend: the twin's server drops them (with their values) and runs `--backend null`.
BACKEND_FLAGS = ("--backend", "--gpu_backend", "--null_delay_ms", "--null_stall_ms", "--null_stall_every_s",
                 "--null_cpu_ms")


class NoTwin(Exception):
    """A configuration whose twin cannot be started; the message says why."""


def null_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """The embedded server's flags with its backend swapped for the null backend (its other flags kept)."""
    out: list[str] = []
    skip = False
    for flag in flags:
        if skip:
            skip = False
        elif flag in BACKEND_FLAGS:
            skip = True
        elif not flag.startswith(tuple(f"{name}=" for name in BACKEND_FLAGS)):
            out.append(flag)
    return (*out, "--backend", "null")


def twin_slot(slot: Slot) -> ToStart:
    """The configuration's twin: the embedded server, null backend, same cores, frontends and batching config."""
    if not isinstance(slot, ToStart):
        raise NoTwin(f"{slot.name} was already running, not started by the tool: its cores, frontends and batching "
                     "config are unknown, so no twin was started")
    launch = replace(slot.launch, kind=LaunchKind.EMBEDDED, server_flags=null_flags(slot.launch.server_flags))
    return replace(slot, launch=launch, suffix=f"-{TWIN}")


@dataclass
class TwinClock:
    """The time the tool ceiling may take: until `deadline` (a run budget's share), else `share` of the searches'
    time so far. A twin's check cell always runs; its own search only within what is left."""

    began: float  # when the run's searches began
    share: float  # of their time, where no budget gives a deadline
    deadline: float | None = None
    clock: Callable[[], float] = time.monotonic

    def start(self) -> None:
        """The searches ended: the twins' time starts now."""
        if self.deadline is None:
            self.deadline = self.clock() + self.share * (self.clock() - self.began)

    def left_s(self) -> float:
        return (self.deadline or 0.0) - self.clock()


@dataclass
class ToolCeilings:
    """Twins measured on `cells`, one per configuration, after its searches (`check`)."""

    request: CapacityRequest
    cells: CellRunner
    prober: Prober
    build_dir: Path  # where the twins' servers keep their files and logs
    clock: TwinClock

    def check(self, slot: Slot, outcomes: Sequence[SearchEnd]) -> None:
        """`slot`'s twin checks each outcome with an answer; one failed twin cell per outcome where it cannot."""
        answered = [o for o in outcomes if o.answer is not None and o.answer.conclusion.answer is not None]
        if not answered:
            return
        try:
            twin = twin_slot(slot)
            with twin.serve(self.build_dir, self.cells.say) as target:
                probe = self.prober.probe(target)
                if not probe.ok:
                    raise StartFailed(target, probe.not_answering(target))
                for outcome in answered:
                    self._check_one(target, outcome, probe.model_version)
        except NoTwin as missing:
            self._not_started(slot_endpoint(slot), answered, str(missing))
        except StartFailed as failed:
            self._not_started(failed.planned, answered, failed.reason)

    def _check_one(self, target: ServedEndpoint, outcome: SearchEnd, version: int | None) -> None:
        assert outcome.answer is not None and outcome.objective is not None
        conclusion = outcome.answer.conclusion
        answer = conclusion.answer
        assert answer is not None
        upper = None if conclusion.at_least else conclusion.upper_rps()  # a lower bound has no upper end
        rate = round(check_rate(answer.rate_rps, upper), 1)
        run = self._run(answer.result)
        cell = plans.Cell(LoadMode.OPEN, outcome.batch_size, None, rate)
        tag = self._tag(outcome, rate)
        result, _ = self.cells.measure(self.prober, target, cell, run, 0, version, search=tag)
        why = twin_failure(result, outcome.objective.p99_ms)
        if not why:
            self.cells.say(f"tool ceiling of {outcome.search_id} ({outcome.server}): at least {rate:g} req/s, "
                           f"{rate / answer.rate_rps:.1f}x the answer of {answer.rate_rps:g} req/s")
            return
        self.cells.say(f"tool ceiling of {outcome.search_id} ({outcome.server}): the twin did not carry {rate:g} req/s "
                       f"({why}): searching its own capacity, {max(0.0, self.clock.left_s()):.0f} s left")
        self._search_twin(target, outcome, answer.rate_rps, run, version)

    def _search_twin(self, target: ServedEndpoint, outcome: SearchEnd, start_rps: float, run: plans.RunSettings,
                     version: int | None) -> None:
        left = self.clock.left_s()
        if left <= 0:
            self.cells.say(f"tool ceiling of {outcome.search_id}: no time left to search the twin's own capacity")
            return
        request = replace(self.request, plan=replace(self.request.plan, run=run), start_rps=start_rps,
                          max_s=min(self.request.max_s, left))
        search = CapacityRun(request, self.cells, target, f"{outcome.search_id}/{TWIN}", self.prober,
                             outcome.batch_size, model_version=version, asked=outcome.objective,
                             retag=lambda tag: self._retag(tag, outcome, role=tag.role))
        try:
            answer = search.run()
        except ValueError as exc:  # settings the search refuses: its check cell stands, said so
            self.cells.say(f"tool ceiling of {outcome.search_id}: the twin's own search did not start: {exc}")
            return
        # not a `capacity: ` line: those are the searches' answers (the bundle and the console's end read them)
        self.cells.say(f"tool ceiling of {outcome.search_id} ({outcome.server}), the twin's own search: "
                       + answer_line(answer).removeprefix("capacity: "))
        if answer.interrupted:
            raise Interrupted()

    def _run(self, answered: CellResult) -> plans.RunSettings:
        """The plan's run settings, checked for shape, with the Locust processes the answer was measured with."""
        run = self.request.plan.run
        return replace(run, check=Check.SHAPE, processes=max(run.processes, answered.load.processes))

    def _tag(self, outcome: SearchEnd, rate: float | None) -> SearchTag:
        assert outcome.objective is not None
        tag = search_tag(outcome.search_id, Role.TOOL_CEILING, outcome.objective, rate, self.request.confidence,
                         objectives=self.request.objectives)
        return self._retag(tag, outcome)

    @staticmethod
    def _retag(tag: SearchTag, outcome: SearchEnd, role: Role = Role.TOOL_CEILING) -> SearchTag:
        """A twin's cell: id `<search>/tool-ceiling`, `checks` the search; role `tool_ceiling` for its check, the
        search's own (bracket, confirm...) for its own search's cells, so the report concludes that search as the
        console did. No replica shape: the twin is not a shape searched (its server's name and cores say where)."""
        return replace(tag, id=f"{outcome.search_id}/{TWIN}", role=role, checks=outcome.search_id, shape=None)

    def _not_started(self, planned: ServedEndpoint, outcomes: Sequence[SearchEnd], reason: str) -> None:
        why = f"tool ceiling not measured: {reason}"
        self.cells.say(why)
        for outcome in outcomes:
            cell = plans.Cell(LoadMode.OPEN, outcome.batch_size, None, None)
            self.cells.not_run(planned, cell, replace(self.request.plan.run, check=Check.SHAPE), why, 0,
                               search=self._tag(outcome, None))


def slot_endpoint(slot: Slot) -> ServedEndpoint:
    """What labels a twin's failed cell: the configuration's twin as asked for, or the running server."""
    if isinstance(slot, ToStart):
        return twin_slot(slot).planned()
    return replace(slot.endpoint, name=f"{slot.name}-{TWIN}")

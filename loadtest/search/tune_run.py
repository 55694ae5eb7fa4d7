"""`mnist-bench tune`: the batching tuner (`loadtest.search.tuning`) wired to real servers.

Each configuration the tuner asks about is started by the tool (`loadtest.measure.servers.ToStart`:
the device, the profile, the plan's `[servers.launch]`), searched for its capacity at the request
batch size (`loadtest.search.capacity_search`: every cell recorded in the run's `results.jsonl`,
tagged with its search), and stopped before the next. Paired (the default), each challenger is started beside
the incumbent and both are searched interleaved, so the bar it must clear was measured in the same
minutes. The winner's batching parameters file and the trail (`tune.json`) are written into the same results directory.

Not for: the tuner's decisions or its output format (`loadtest.search.tuning`, `tuning_output`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from loadtest.measure.servers import ToStart, serving_config
from loadtest.search.capacity_search import Capacities, CapacityRequest, SearchEnd
from loadtest.search.run_budget import share_of
from loadtest.search.tuning import Evaluated, TuneAnswer, Tuner, TuneSettings
from loadtest.search.tuning_output import TuneFiles, write_winner
from serving.deploy.config import BatchingProfile


@dataclass(frozen=True)
class TuneRequest:
    capacity: CapacityRequest  # the plan (its [run] and [servers.launch]), the objective, each search's bounds
    settings: TuneSettings  # device, request batch size, ladders, budget
    start_profile: str  # the serving config's profile holding TF Serving's advice for the device
    paired: bool = True  # each challenger searched beside the incumbent (False: each configuration alone, in turn)


@dataclass
class TuneRun:
    request: TuneRequest
    results_root: Path
    out: TextIO = sys.stdout
    plan_path: str = ""

    def __post_init__(self) -> None:
        plan, settings = self.request.capacity.plan, self.request.settings
        self.config = serving_config(plan)
        self.start = self.config.profile(self.request.start_profile)
        self.searches = Capacities(self.request.capacity, [], [settings.batch_size], self.results_root, self.out,
                                   self.plan_path)
        self.run_dir = self.searches.run_dir
        self.deadline = time.monotonic() + settings.max_s  # `run` sets it again as it begins

    def run(self) -> tuple[TuneAnswer, TuneFiles]:
        s = self.request.settings
        self.deadline = time.monotonic() + s.max_s
        self.searches.cells.say(f"tune {self.searches.run_id}: {s.device}, {s.objective}, request batch "
                                f"{s.batch_size}, from profile {self.start.name}; results in {self.run_dir}")
        answer = Tuner(s, self.start, self.evaluate,
                       evaluate_pair=self.evaluate_pair if self.request.paired else None).run()
        return answer, write_winner(self.run_dir, answer)

    def evaluate(self, profile: BatchingProfile, beat_rps: float | None = None) -> Evaluated:
        """Start a server with `profile`, search its capacity (first at `beat_rps`, when given), stop it."""
        slot = ToStart(str(self.request.settings.device), profile, self.config, self.request.capacity.plan.launch)
        self._within_budget(1)
        return evaluated(self.searches.search(slot, self.request.settings.batch_size, beat_rps))

    def evaluate_pair(self, incumbent: BatchingProfile, challenger: BatchingProfile) -> tuple[Evaluated, Evaluated]:
        """Both servers up at once, their searches interleaved (`Capacities.compare`), both stopped after."""
        device, launch = str(self.request.settings.device), self.request.capacity.plan.launch
        slots = [ToStart(device, profile, self.config, launch) for profile in (incumbent, challenger)]
        self._within_budget(2)
        now, challenged = self.searches.compare(slots, self.request.settings.batch_size)
        return evaluated(now), evaluated(challenged)


    def _within_budget(self, searches: int) -> None:
        """The evaluation's searches end by the tuner's deadline: each at most what is left of it (less the reserve
        of `loadtest.search.run_budget`) over its searches. The tuner checks the deadline only before an
        evaluation, so without this one begun near it ran its searches' own --max-minutes past it."""
        self.searches.limit_each(share_of(self.deadline - time.monotonic(), searches, paired=searches > 1))


def evaluated(outcome: SearchEnd) -> Evaluated:
    """A search's outcome as the tuner reads it."""
    if outcome.answer is None:
        return Evaluated(None, note=outcome.failure)
    conclusion = outcome.answer.conclusion
    if conclusion.capacity is None:
        return Evaluated(None, note=outcome.answer.ended_because)
    cell = conclusion.capacity.result
    upper = None if conclusion.at_least else conclusion.upper_rps()
    passed = conclusion.best_pass.rate_rps if conclusion.best_pass else None
    return Evaluated(conclusion.capacity.rate_rps, cell.throughput_ips, cell.latency_p99_ms,
                     conclusion.uncertainty(), upper, conclusion.at_least, passed)

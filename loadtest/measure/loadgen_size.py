"""How many Locust processes a cell gets: sized to the rate it asks for, by the generator's measured cost.

A plan's `[run] processes` is the most the load generator may use (the bundle sets it to the cores it
gave Locust). An open-loop cell at a low rate needs fewer: each process is kept at most `BUSY_SHARE` of a
core busy, by the CPU seconds per request Locust itself measured in the cells before (its processes'
CPU time over the requests they sent). Until a cell has been measured, and for closed loops, the cell
gets the plan's number (a closed loop never more than its users). A cell that needs more than the plan
allows gets the plan's number and the console says so: its rate may be the generator's limit, which the
cell's own checks (late sends, dispatch lag) then report. The record's `load.processes` says how many ran.

Not for: running Locust (`loadtest.measure.locust_run`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from loadtest.evidence.vocab import LoadMode
from loadtest.load.summary import LoadSummary
from loadtest.measure import plan as plans

BUSY_SHARE = 0.5  # of a core, per Locust process: its schedule stays on time well below a full core


def processes_for(rate_rps: float, cpu_s_per_request: float, most: int) -> tuple[int, bool]:
    """(processes, short): enough processes for `rate_rps` at `BUSY_SHARE` of a core each, at most `most`;
    `short` when even `most` is not enough."""
    need = max(1, math.ceil(rate_rps * cpu_s_per_request / BUSY_SHARE))
    return min(need, most), need > most


@dataclass
class LoadgenSizer:
    """The generator's cost per request, learnt from every cell measured so far (the most recent wins)."""

    cpu_s_per_request: float | None = None

    def sized(self, run: plans.RunSettings, cell: plans.Cell) -> tuple[plans.RunSettings, bool]:
        """`run` with the processes this cell needs, and whether it needed more than the plan allows."""
        if cell.mode != LoadMode.OPEN or cell.rate_rps is None or self.cpu_s_per_request is None:
            return run, False
        processes, short = processes_for(cell.rate_rps, self.cpu_s_per_request, run.processes)
        return replace(run, processes=processes), short

    def learn(self, summary: LoadSummary | None) -> None:
        """Take the cost per request of a finished cell (one with requests and CPU readings)."""
        if summary is None or summary.requests <= 0 or not summary.cpu_s_by_pid:
            return
        self.cpu_s_per_request = sum(summary.cpu_s_by_pid.values()) / summary.requests


__all__ = ["BUSY_SHARE", "LoadgenSizer", "processes_for"]

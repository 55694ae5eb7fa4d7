"""One Locust run per cell: how many processes it gets, its command line, running it under a deadline, and
reading its summary.

Locust runs headless in a subprocess on `loadtest/load/locustfile.py`, in a session of its own so
Ctrl-C reaches the sweep, which then stops Locust (and its worker processes) deliberately. The
run's result is the `LoadSummary` the locustfile writes, or the reason there is none.

How many Locust processes a cell gets (`LoadgenSizer`): sized to the rate it asks for, by the generator's
measured cost. A plan's `[run] processes` is the most the load generator may use (the bundle sets it to the
cores it gave Locust). An open-loop cell at a low rate needs fewer: each process is kept at most `BUSY_SHARE`
of a core busy, by the CPU seconds per request Locust itself measured in the cells before (its processes' CPU
time over the requests they sent). Until a cell has been measured, and for closed loops, the cell gets the
plan's number (a closed loop never more than its users). A cell that needs more than the plan allows gets the
plan's number and the console says so: its rate may be the generator's limit, which the cell's own checks
(late sends, dispatch lag) then report. The record's `load.processes` says how many ran.

Not for: turning a summary into a record (`loadtest.measure.cell_results`) or choosing cells.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from loadtest.evidence.vocab import LoadMode, Protocol
from loadtest.load.summary import LoadSummary
from loadtest.measure import plan as plans
from loadtest.measure.targets import load_address
from model_export.provenance import REPO
from serving.deploy.process import pinned, stop_process
from serving.endpoint import ServedEndpoint

LOCUSTFILE = Path(__file__).resolve().parents[1] / "load" / "locustfile.py"
USER_CLASSES = {(Protocol.GRPC, LoadMode.CLOSED): "GrpcClosedUser", (Protocol.GRPC, LoadMode.OPEN): "GrpcOpenUser",
                (Protocol.REST, LoadMode.CLOSED): "RestClosedUser", (Protocol.REST, LoadMode.OPEN): "RestOpenUser"}
STOP_GRACE_S = 5.0  # after SIGINT, before SIGKILL
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


@dataclass(frozen=True)
class LocustRun:
    summary: LoadSummary | None
    failure: str  # "" when the run produced a complete summary
    wall_s: float


def load_processes(run: plans.RunSettings, cell: plans.Cell) -> int:
    """Locust processes for a cell: never more than a closed loop's users, each needs one."""
    if cell.mode == LoadMode.CLOSED and cell.concurrency is not None:
        return min(run.processes, cell.concurrency)
    return run.processes


def locust_command(run: plans.RunSettings, cell: plans.Cell, target: ServedEndpoint, summary_path: Path) -> list[str]:
    """The Locust command line for one cell (closed: C users; open: one arrival stream per process)."""
    processes = load_processes(run, cell)
    users = cell.concurrency if cell.mode == LoadMode.CLOSED and cell.concurrency is not None else processes
    host = f"grpc://{target.grpc_target}" if run.protocol == Protocol.GRPC else load_address(target, run.protocol)
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
               "-u", str(users), "-r", str(users), "--host", host, "--loglevel", "WARNING",
               "--exit-code-on-error", "0",
               "--samples", str(Path(run.samples).resolve()), "--model-name", target.model_name,
               "--signature", run.signature, "--batch-size", str(cell.batch_size),
               "--check", plans.run_check(run), *input_arguments(run, target),
               "--request-timeout-s", str(run.request_timeout_s), "--warmup-s", str(run.warmup_s),
               "--measure-s", str(run.measure_s), "--window-s", str(run.window_s),
               "--late-threshold-ms", str(run.late_threshold_ms), "--max-in-flight", str(run.max_in_flight),
               "--dispatch-spin-share", str(run.dispatch_spin_share),
               "--arrival", run.arrival, "--summary-out", str(summary_path)]
    if cell.mode == LoadMode.OPEN and cell.rate_rps is not None:
        command += ["--rate-per-user", str(cell.rate_rps / users), "--seed", str(run.arrival_seed)]
    if processes > 1:
        command += ["--processes", str(processes)]
    return pinned(command + [USER_CLASSES[(run.protocol, cell.mode)]], run.loadgen_cpus)


def input_arguments(run: plans.RunSettings, target: ServedEndpoint) -> list[str]:
    """Where the load generator's inputs come from; inputs made for a model need its signature, read over
    gRPC (`--metadata-target`) whatever protocol the load goes over."""
    arguments = ["--input-data", plans.input_data(run), "--input-seed", str(run.input_seed),
                 "--int-range", run.int_range, "--metadata-target", target.grpc_target]
    for shape in plans.input_options(run).shapes.items():
        arguments += ["--input-shape", f"{shape[0]}:{','.join(map(str, shape[1]))}"]
    return arguments


def cell_deadline_s(run: plans.RunSettings) -> float:
    """How long a cell's Locust may take in all before it is killed."""
    return run.startup_timeout_s + run.warmup_s + run.measure_s + run.request_timeout_s + 20.0


def run_locust(command: list[str], summary_path: Path, log_path: Path, deadline_s: float) -> LocustRun:
    """Run one Locust cell to completion or its deadline; Ctrl-C stops it and propagates."""
    started = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    with log_path.open("w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                start_new_session=True)
        try:
            proc.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            stop_locust(proc)
            return LocustRun(read_summary(summary_path), f"load generator did not finish within {deadline_s:.0f} s "
                                                         f"(killed; log {log_path.name})", time.monotonic() - started)
        except BaseException:
            stop_locust(proc)
            raise
    return finished_run(proc.returncode, summary_path, log_path, time.monotonic() - started)


def stop_locust(proc: subprocess.Popen) -> None:
    """SIGINT, then SIGKILL after a grace period, to Locust's whole process group (its workers too)."""
    stop_process(proc, STOP_GRACE_S, first_signal=signal.SIGINT, group=True)


def finished_run(returncode: int, summary_path: Path, log_path: Path, wall_s: float) -> LocustRun:
    """A Locust run that exited by itself: its summary, or why it has none or only part of one."""
    summary = read_summary(summary_path)
    if summary is None:
        return LocustRun(None, f"load generator exited with code {returncode} without a summary "
                               f"({log_tail(log_path)})", wall_s)
    if not summary.complete:
        return LocustRun(summary, f"only {summary.processes_reported} of {summary.processes_expected} "
                                  f"load processes reported", wall_s)
    return LocustRun(summary, "", wall_s)


def read_summary(path: Path) -> LoadSummary | None:
    try:
        return LoadSummary.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def log_tail(path: Path, lines: int = 3) -> str:
    try:
        tail = [line for line in path.read_text().splitlines() if line.strip()][-lines:]
    except OSError:
        return "no log"
    return " | ".join(tail)[-400:] or "empty log"

"""The sweep: every cell of a plan against every chosen server, one `CellResult` per cell.

For each server, in order (started by the tool when the plan names configurations to start:
`loadtest.measure.servers`, and stopped before the next): probe it (one real Predict), then for each
cell scrape its Prometheus metrics, run Locust headless (`loadtest.measure.locust_run`: warm-up, then
the measured window, then drain) while sampling the server's CPU, memory and GPU
(`loadtest.measure.telemetry`) and the host's stalls on the server's and the load generator's cores
(`loadtest.measure.hiccups`; `[run] host_probe = false` turns it off), scrape again (the server's own
latency over the cell and where its time went: `loadtest.measure.server_phases`; its device floor:
`loadtest.measure.device_floor`), probe again, and append the cell's record to `results/<UTC time>/results.jsonl`
(plus `results.csv`, a console line, and Locust's log under `logs/`). A server that does not start, or
stops answering, fails its cells with the reason, and its remaining cells are recorded as not run;
Ctrl-C fails the running cell, keeps every earlier record, and ends the sweep.

Not for: generating load itself (`loadtest.load.locustfile`), building a cell's record
(`loadtest.measure.cell_results`) or choosing servers (`loadtest.measure.targets`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from loadtest.evidence.cell_parts import ProbeSide
from loadtest.evidence.records import CellResult, append_csv, append_result
from loadtest.evidence.search_tag import SearchTag
from loadtest.evidence.vocab import CellStatus, Role
from loadtest.judge.confidence import DEFAULT_CONFIDENCE
from loadtest.judge.verdicts import evidence_record, verdict_of
from loadtest.measure import hiccups, scrape, telemetry
from loadtest.measure import plan as plans
from loadtest.measure import server_phases as phases
from loadtest.measure.cell_results import CellContext, collect_provenance, failed_result, load_spec, measured_result
from loadtest.measure.console import console_table, describe, progress_line
from loadtest.measure.device_floor import FloorSource
from loadtest.measure.device_sources import LOCAL_HOSTS, ServerSource
from loadtest.measure.locust_run import LoadgenSizer, cell_deadline_s, locust_command, run_locust
from loadtest.measure.probe import Probe, Prober
from loadtest.measure.resources import server_resources
from loadtest.measure.servers import Running, Slot, StartFailed
from loadtest.measure.targets import SweepError, server_label
from model_export.provenance import cpu_cores
from serving.deploy.process import cpu_list, pinned_cores
from serving.endpoint import ServedEndpoint

PROBE_MARGIN_S = 10.0  # the host probe exits by itself this long after the cell's own deadline


class Interrupted(Exception):
    """Ctrl-C during a sweep, after the running cell was recorded as failed."""


@dataclass
class CellRunner:
    """Measures cells one at a time into one results directory, appending each record as it is made.

    The sweep runs a plan's grid with it, the capacity search the rates it chooses; `search` tags
    a record with the search that asked for it.
    """

    run_dir: Path
    ctx: CellContext
    out: TextIO = sys.stdout
    results: list[CellResult] = field(default_factory=list)
    verbose: bool = True  # each cell's line on the console too (else only in the run's log file, `detail`)
    printer: Callable[[str], None] | None = None  # prints a console line (a live progress display's), else `out`
    floors: FloorSource = field(default_factory=FloorSource)
    loadgen: LoadgenSizer = field(default_factory=LoadgenSizer)  # Locust processes per cell, by measured cost

    @classmethod
    def new_run(cls, results_root: Path, plan: plans.Plan, plan_path: str, out: TextIO) -> CellRunner:
        """A runner writing into a fresh `results_root/<UTC time>/`, the plan recorded beside the cells."""
        run_dir = new_results_dir(results_root, utc_stamp())
        (run_dir / "plan.json").write_text(json.dumps(plan.to_dict(), indent=2))
        cores = pinned_cores(plan.run.loadgen_cpus) or cpu_cores()
        context = CellContext(run_dir.name, plan.run, collect_provenance(plan, plan_path), cores)
        return cls(run_dir, context, out)

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @property
    def jsonl_path(self) -> Path:
        return self.run_dir / "results.jsonl"

    def measure(self, prober: Prober, target: ServedEndpoint, cell: plans.Cell, run: plans.RunSettings,
                total: int, model_version: int | None, search: SearchTag | None = None) -> tuple[CellResult, Probe]:
        """One cell under `run`; the record written and the server's probe after it. `model_version`
        is the one the server last reported (a cell's own responses say it, if it gets any).

        Raises Interrupted (after recording the cell as failed) on Ctrl-C."""
        run, short = self.loadgen.sized(run, cell)
        if short:
            self.say(f"  load generator: {cell.rate_rps:g} req/s needs more than the plan's {run.processes} Locust "
                     "process(es) at the cost measured so far; the cell's checks say whether it kept up")
        index, ctx = len(self.results), replace(self.ctx, run=run)
        label = server_label(target, protocol=run.protocol, model_version=model_version)
        spec = load_spec(run, cell)
        summary_path = self.run_dir / "summaries" / f"cell-{index:03d}.json"
        summary_path.parent.mkdir(parents=True, exist_ok=True)
        command = locust_command(run, cell, target, summary_path)
        before = scrape.scrape(target.rest_url)
        try:
            with telemetry.sampling(target) as sampler:
                cores, unprobed = probe_cores(run, target, sampler.server, sampler.notes.get("server", ""))
                with hiccups.probing(cores, self.run_dir / "probes" / f"cell-{index:03d}",
                                     cell_deadline_s(run) + PROBE_MARGIN_S) as probes:
                    resources = server_resources(target, sampler.server, os.cpu_count() or 1,
                                                 ctx.provenance.cpu_model or "")
                    locust = run_locust(command, summary_path, self.run_dir / "logs" / f"cell-{index:03d}.log",
                                        cell_deadline_s(run))
                    self.loadgen.learn(locust.summary)
                    window = telemetry.measured_window(locust.summary, summary_path, run.measure_s, sampler.clock())
                    host_probe = (probes.record(*window).with_sides(unprobed) if run.host_probe
                                  else hiccups.off_record())
                device = sampler.window(*window)
        except KeyboardInterrupt:
            self.record(failed_result(ctx, index, label, spec, "interrupted (Ctrl-C) during the cell"), total, search)
            raise Interrupted() from None
        after = scrape.scrape(target.rest_url)
        probe = prober.probe(target)
        failure = locust.failure if probe.ok else f"server stopped answering during the cell ({probe.error})"
        if locust.summary is None:
            result = failed_result(ctx, index, label, spec, failure)
        else:
            label = replace(label, model_version=locust.summary.model_version or model_version)
            result = measured_result(ctx, index, label, spec, locust.summary, scrape.cell_figures(before, after),
                                     failure, device, server_phases=phases.server_phases(before, after, target.kind),
                                     device_floor=self.floors.floor_for(target, after))
        result = replace(result, server_resources=resources, host_probe=host_probe,
                         server_latency=phases.server_latency(before, after))
        return self.record(result, total, search), probe

    def not_run(self, target: ServedEndpoint, cell: plans.Cell, run: plans.RunSettings, reason: str,
                total: int, model_version: int | None = None, search: SearchTag | None = None) -> CellResult:
        """The record of a cell skipped because its server did not start or stopped answering."""
        label = server_label(target, protocol=run.protocol, model_version=model_version)
        result = failed_result(self.ctx, len(self.results), label, load_spec(run, cell), f"not run: {reason}")
        return self.record(result, total, search)

    def record(self, result: CellResult, total: int, search: SearchTag | None = None) -> CellResult:
        if search:
            result = replace(result, search=with_evidence(search, result))
        append_result(self.jsonl_path, result)
        append_csv(self.run_dir / "results.csv", result)
        self.results.append(result)
        self.detail(progress_line(result, total))
        return result

    @property
    def log_path(self) -> Path:
        """The run's console, every line of it (each cell's too): `console.log` beside its results."""
        return self.run_dir / "console.log"

    def say(self, text: str) -> None:
        """One line, whole, on the console and in the run's log file: a paired comparison's searches say theirs
        from their own threads (print writes the text and its newline apart, so two lines could run together)."""
        self._log(text)
        if self.printer is not None:
            self.printer(text)
            return
        self.out.write(text + "\n")
        self.out.flush()

    def detail(self, text: str) -> None:
        """A cell-by-cell line: in the run's log file, and on the console where `verbose`."""
        if self.verbose:
            self.say(text)
        else:
            self._log(text)

    def _log(self, text: str) -> None:
        with self.log_path.open("a") as log:
            log.write(text + "\n")


@dataclass
class Sweep:
    """Runs a plan: every cell of its grid against every target, in order."""

    plan: plans.Plan
    targets: Sequence[ServedEndpoint | Slot]  # running servers, or configurations to start
    results_root: Path
    out: TextIO = sys.stdout
    plan_path: str = ""

    def __post_init__(self) -> None:
        self.cells = CellRunner.new_run(self.results_root, self.plan, self.plan_path, self.out)
        self.run_id, self.run_dir = self.cells.run_id, self.cells.run_dir
        self.grid = plans.cells(self.plan.grid)
        self.servers = [Running(t) if isinstance(t, ServedEndpoint) else t for t in self.targets]
        self.total = len(self.grid) * len(self.servers)

    @property
    def results(self) -> list[CellResult]:
        """Every record written, in order."""
        return self.cells.results

    @property
    def jsonl_path(self) -> Path:
        return self.cells.jsonl_path

    def run(self) -> list[CellResult]:
        """Every cell of every target; raises Interrupted after recording the cell Ctrl-C stopped."""
        self.cells.say(f"sweep {self.run_id}: {self.total} cells, ~{self._estimate_s():.0f} s, "
                       f"results in {self.run_dir}")
        prober = Prober(self.plan.run)
        for slot in self.servers:
            try:
                with slot.serve(self.run_dir / "servers", self.cells.say) as target:
                    probe = prober.probe(target)
                    for cell in self.grid:
                        probe = self._cell(prober, probe, target, cell)
            except StartFailed as failed:
                self.cells.say(failed.reason)
                for cell in self.grid:
                    self.cells.not_run(failed.planned, cell, self.plan.run, failed.reason, self.total)
        self.cells.say(console_table(self.results))
        return self.results

    def _cell(self, prober: Prober, probe: Probe, target: ServedEndpoint, cell: plans.Cell) -> Probe:
        """Measure one cell, or record it as not run when the server stopped answering; the latest probe."""
        if not probe.ok:
            reason = f"server {target.name} at {target.grpc_target} is not answering ({probe.error})"
            self.cells.not_run(target, cell, self.plan.run, reason, self.total, probe.model_version)
            return probe
        left_s = (self.total - len(self.results)) * cell_estimate_s(self.plan.run)
        self.cells.say(f"[{len(self.results) + 1}/{self.total}] {target.name} "
                       f"{describe(load_spec(self.plan.run, cell))} ... (~{left_s / 60:.1f} min left)")
        return self.cells.measure(prober, target, cell, self.plan.run, self.total, probe.model_version)[1]

    def _estimate_s(self) -> float:
        return self.total * cell_estimate_s(self.plan.run)


def with_evidence(search: SearchTag, result: CellResult) -> SearchTag:
    """A search cell's tag with the cell's own verdict on the search's objective: N, k over it, the
    early-stopping estimate of its p99 (`loadtest.judge.verdicts`); its rate's pooled verdict is the search's."""
    if result.status != CellStatus.OK or search.role == Role.PROBE:
        return search
    verdict = verdict_of([result], search.objective, search.confidence_or(DEFAULT_CONFIDENCE))
    return replace(search, evidence=evidence_record(verdict))


def probe_cores(run: plans.RunSettings, target: ServedEndpoint, server: ServerSource | None,
                not_found: str = "") -> tuple[dict[str, frozenset[int]], dict[str, ProbeSide]]:
    """The cores each side's host probe is pinned to, and the sides it cannot probe with why: the server's (its
    processes' affinities: the tool's own server, or a local one found by the port it listens on; all of this
    host's cores for a container) and the load generator's (`loadgen_cpus`, else all). A server whose processes
    were not found is not probed: the record says so, and where the load generator's probe ran. None at all
    when `[run] host_probe = false`."""
    if not run.host_probe:
        return {}, {}
    everywhere = frozenset(os.sched_getaffinity(0))
    cores = {"loadgen": frozenset(cpu_list(run.loadgen_cpus)) if run.loadgen_cpus else everywhere}
    unprobed: dict[str, ProbeSide] = {}
    if server is not None:
        cores["server"] = server.cpu_set or frozenset(range(os.cpu_count() or 1))
    elif target.host in LOCAL_HOSTS:
        ran = ",".join(map(str, sorted(cores["loadgen"])))
        unprobed["server"] = ProbeSide(note=f"the server's cores were not probed: its processes were not found "
                                            f"({not_found or 'no process listens on its port'}); the host probe "
                                            f"ran on the load generator's cores ({ran})")
    else:
        unprobed["server"] = ProbeSide(note=f"the server at {target.host} is not on this host")
    return cores, unprobed


def cell_estimate_s(run: plans.RunSettings) -> float:
    """Warm-up, measurement, plus Locust's start-up, drain and the scrapes (~1 s on 2 cores since the Locust
    processes stopped loading TensorFlow's runtime; 2 s allowed)."""
    return run.warmup_s + run.measure_s + 2.0


def utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def new_results_dir(root: Path, name: str) -> Path:
    """A fresh results directory: never reuse (and so never overwrite) an earlier run's."""
    for suffix in [""] + [f"-{i}" for i in range(1, 1000)]:
        path = Path(root) / f"{name}{suffix}"
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise SweepError(f"cannot create a new results directory under {root}")

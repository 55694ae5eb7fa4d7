"""A cell's record, computed once: from a Locust run's summary and the server's figures, or a failure.

Also the provenance every record of a sweep shares (code, machine, library versions, the plan).

Not for: running anything (`loadtest.measure.cell_sweep`) or the record format itself (`loadtest.evidence.records`).
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from loadtest.evidence import stats
from loadtest.evidence.cell_parts import ServerPhases, TelemetryNote
from loadtest.evidence.floor_record import DeviceFloorRecord
from loadtest.evidence.provenance_record import Provenance
from loadtest.evidence.records import CellResult, LoadSpec, ServerLabel, ValidityFlag
from loadtest.evidence.vocab import Arrival, CellStatus, Flag, InputKind, LoadMode
from loadtest.load.collector import WRONG_ANSWER
from loadtest.load.inputs import file_sha256, input_provenance
from loadtest.load.summary import LoadSummary
from loadtest.measure import plan as plans
from loadtest.measure.locust_run import load_processes
from loadtest.measure.scrape import ServerFigures
from loadtest.measure.telemetry import Telemetry
from model_export.provenance import cpu_cores, cpu_model_name, git_revision, machine_cpu, package_versions, utc_now

PACKAGES = ("locust", "grpcio", "tensorflow", "tensorflow-serving-api", "hdrhistogram", "numpy", "psutil")


@dataclass(frozen=True)
class CellContext:
    """What every record of a sweep shares."""

    run_id: str
    run: plans.RunSettings
    provenance: Provenance
    cores: int


def load_spec(run: plans.RunSettings, cell: plans.Cell) -> LoadSpec:
    return LoadSpec(mode=cell.mode, request_batch_size=cell.batch_size, concurrency=cell.concurrency,
                    rate_rps=cell.rate_rps, arrival=run.arrival if cell.mode == LoadMode.OPEN else None,
                    warmup_s=run.warmup_s, duration_s=run.measure_s, processes=load_processes(run, cell),
                    check=plans.run_check(run), late_threshold_ms=run.late_threshold_ms, window_s=run.window_s,
                    dispatch_lag_limit_ms=run.dispatch_lag_limit_ms if cell.mode == LoadMode.OPEN else None,
                    arrival_seed=run.arrival_seed if cell.mode == LoadMode.OPEN else None)


def cell_flags(ctx: CellContext, spec: LoadSpec, summary: LoadSummary, failure: str) -> list[ValidityFlag]:
    """Why the cell is not valid evidence: its failure first, then the validity rules' flags."""
    process_cpu = [stats.cpu_percent(s, ctx.run.measure_s) for s in summary.cpu_s_by_pid.values()]
    percentile = stats.lag_percentile(summary.dispatch_lag.count if summary.dispatch_lag is not None else 0)
    pairs = stats.validity_flags(
        errors=summary.requests - summary.ok_requests, requests=summary.requests,
        errors_by_code=summary.errors_by_code, late_sends=summary.late_sends,
        process_cpu_percents=process_cpu, total_cpu_percent=sum(process_cpu), cores=ctx.cores,
        window_rps=summary.window_rps, pool_waits=summary.pool_waits, window_s=ctx.run.window_s,
        poisson=spec.arrival == Arrival.POISSON, dispatch_lag_us=lag_us(summary, percentile[1]),
        dispatch_lag_limit_us=(spec.dispatch_lag_limit_ms or 0) * 1000, dispatch_lag_percentile=percentile[0],
        window_scheduled_rps=summary.window_scheduled_rps)
    failed = [ValidityFlag(Flag.FAILED, failure)] if failure else []
    return failed + [ValidityFlag(flag, reason) for flag, reason in pairs]


def measured_result(ctx: CellContext, index: int, label: ServerLabel, spec: LoadSpec, summary: LoadSummary,
                    figures: ServerFigures, failure: str, device: Telemetry | None = None, *,
                    server_phases: ServerPhases | None = None,
                    device_floor: DeviceFloorRecord | None = None) -> CellResult:
    """A cell's record from a Locust summary, the device telemetry of its window, where the server's time
    went (`loadtest.measure.server_phases`) and the device's floor (`loadtest.measure.device_floor`): computed once,
    validity flags included."""
    measure_s = ctx.run.measure_s
    process_cpu = [stats.cpu_percent(s, measure_s) for s in summary.cpu_s_by_pid.values()]
    flags = cell_flags(ctx, spec, summary, failure)
    latency = summary.latency
    return CellResult(
        run_id=ctx.run_id, cell_index=index, utc_time=utc_now(), server=label, load=spec,
        status=CellStatus.FAILED if failure else CellStatus.OK, failure_reason=failure,
        requests=summary.requests, ok_requests=summary.ok_requests, errors_by_code=summary.errors_by_code,
        wrong_answers=summary.errors_by_code.get(WRONG_ANSWER, 0),
        accuracy=summary.correct / summary.checked if summary.checked else None,
        throughput_rps=round(summary.ok_requests / measure_s, 3), throughput_ips=round(summary.images / measure_s, 3),
        latency_min_ms=latency.min_ms, latency_mean_ms=latency.mean_ms, latency_p50_ms=latency.p50_ms,
        latency_p90_ms=latency.p90_ms, latency_p95_ms=latency.p95_ms, latency_p99_ms=latency.p99_ms,
        latency_p999_ms=latency.p999_ms, latency_max_ms=latency.max_ms, histogram_us=summary.histogram_us,
        late_sends=summary.late_sends,
        late_send_fraction=round(stats.fraction(summary.late_sends, summary.requests), 6),
        window_throughput_rps=summary.window_rps, loadgen_cpu_percent=round(sum(process_cpu), 1),
        loadgen_cores=ctx.cores, server_batch_size_mean=figures.batch_size_mean,
        server_batch_sizes=figures.batch_sizes, server_queue_delay_mean_us=figures.queue_delay_mean_us,
        valid=not flags, flags=flags, provenance=ctx.provenance,
        images=summary.images, error_examples=summary.error_examples,
        loadgen_process_cpu_percent=[round(c, 1) for c in process_cpu], server_metrics=figures.scrape,
        locust_stats=summary.locust, pool_full_waits=summary.pool_waits,
        dispatch_lag_p50_us=lag_us(summary, "p50_ms"), dispatch_lag_p99_us=lag_us(summary, "p99_ms"),
        dispatch_lag_max_us=lag_us(summary, "max_ms"), **telemetry_fields(device or Telemetry()),
        server_phases=server_phases, device_floor=device_floor,
        window_scheduled_rps=summary.window_scheduled_rps, window_latency_ms=summary.window_latency_ms,
        window_histograms_us=summary.window_histograms_us, abandoned_calls=summary.in_flight_abandoned)


def telemetry_fields(device: Telemetry) -> dict:
    """The record's telemetry fields: the same names, `notes` as telemetry_note."""
    figures = asdict(device)
    figures["telemetry_note"] = TelemetryNote.from_dict(figures.pop("notes"))
    return figures


def lag_us(summary: LoadSummary, name: str) -> float | None:
    """One figure of the run's dispatch lag in µs (None for a closed loop, which schedules nothing)."""
    value = getattr(summary.dispatch_lag, name) if summary.dispatch_lag is not None else None
    return None if value is None else round(value * 1000, 1)


def failed_result(ctx: CellContext, index: int, label: ServerLabel, spec: LoadSpec, reason: str) -> CellResult:
    """A cell that produced no measurement: zero counts, no latency, flagged failed with the reason."""
    return CellResult(
        run_id=ctx.run_id, cell_index=index, utc_time=utc_now(), server=label, load=spec, status=CellStatus.FAILED,
        failure_reason=reason, requests=0, ok_requests=0, errors_by_code={}, wrong_answers=0, accuracy=None,
        throughput_rps=0.0, throughput_ips=0.0, latency_min_ms=None, latency_mean_ms=None, latency_p50_ms=None,
        latency_p90_ms=None, latency_p95_ms=None, latency_p99_ms=None, latency_p999_ms=None, latency_max_ms=None,
        histogram_us="", late_sends=0, late_send_fraction=0.0, window_throughput_rps=[], loadgen_cpu_percent=0.0,
        loadgen_cores=ctx.cores, server_batch_size_mean=None, server_batch_sizes={}, server_queue_delay_mean_us=None,
        valid=False, flags=[ValidityFlag(Flag.FAILED, reason)], provenance=ctx.provenance)


def collect_provenance(plan: plans.Plan, plan_path: str) -> Provenance:
    """Enough to reproduce and to trust a result: code, machine, library versions, the full plan (a key whose value
    is unknown, such as `git_dirty` outside a checkout, written as null)."""
    git = git_revision()
    return Provenance.from_dict({"git_commit": git.commit, "git_dirty": git.dirty,
            "host": socket.gethostname(), "cpu_model": cpu_model_name(), "cpu_count": os.cpu_count(),
            **machine_cpu().provenance(),
            "loadgen_cores": cpu_cores(), "platform": platform.platform(), "python": platform.python_version(),
            "versions": package_versions(PACKAGES), "utc_time": utc_now(),
            "plan_path": plan_path, "plan": json.loads(json.dumps(plan.to_dict())), "command": list(sys.argv),
            "inputs": inputs_provenance(plan.run)})


def inputs_provenance(run: plans.RunSettings) -> dict:
    """Where the requests' inputs came from: the MNIST samples or the user's .npz (path and sha256), or
    how they were made (random with its seed, zeros)."""
    kind = plans.input_kind(run)
    if kind == InputKind.SAMPLES:
        path = Path(run.samples)
        return {"source": "samples", "path": str(path.resolve()), "sha256": file_sha256(path) if path.is_file()
                else None}
    options = plans.input_options(run)
    return input_provenance(options.data, options.seed, options.int_range, options.shapes)

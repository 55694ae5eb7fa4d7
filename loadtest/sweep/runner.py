"""The sweep: every cell of a plan against every chosen server, one `CellResult` per cell.

For each server, in order: probe it (one real Predict), then for each cell scrape its Prometheus
metrics, run Locust headless in a subprocess (`loadtest.load.locustfile`: warm-up, then the measured
window, then drain), scrape again, probe again, and append the cell's record to
`results/<UTC time>/results.jsonl` (plus `results.csv`, a console row, and Locust's log under
`logs/`). Each Locust run is bounded by a deadline and killed past it. A server that stops
answering fails its cell with the reason, and its remaining cells are recorded as not run; Ctrl-C
fails the running cell, keeps every earlier record, and ends the sweep.

Not for: generating load itself (see `loadtest.load.locustfile`) or statistics (see `loadtest.stats`).
"""

from __future__ import annotations

import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from loadtest import stats
from loadtest.records import CellResult, LoadSpec, ServerLabel, ValidityFlag, append_csv, append_result
from loadtest.sweep import plan as plans
from loadtest.sweep import scrape
from model_export.provenance import cpu_model_name, git_revision, package_versions, utc_now
from serving.deploy.state import read_state

LOCUSTFILE = Path(__file__).resolve().parents[1] / "load" / "locustfile.py"
REPO = Path(__file__).resolve().parents[2]
USER_CLASSES = {("grpc", "closed"): "GrpcClosedUser", ("grpc", "open"): "GrpcOpenUser",
                ("rest", "closed"): "RestClosedUser", ("rest", "open"): "RestOpenUser"}
KILL_GRACE_S = 5.0
PACKAGES = ("locust", "grpcio", "tensorflow", "tensorflow-serving-api", "hdrhistogram", "numpy", "psutil")


class SweepError(RuntimeError):
    """A sweep that cannot start (no servers, missing samples); the message says what to do."""


@dataclass(frozen=True)
class Target:
    """A server to measure and its labels."""

    name: str
    kind: str
    device: str
    device_name: str
    grpc: str  # host:port
    rest_url: str  # "" when unknown
    model_name: str
    batching_profile: str
    batching: dict
    versions: dict


def resolve_targets(plan: plans.Plan, state_path: Path | None = None) -> list[Target]:
    """Explicit targets when the plan has them, else the state file's servers (narrowed by name)."""
    if plan.targets:
        targets = [_explicit(t, plan.run.model_name) for t in plan.targets]
        if plan.run.protocol == "rest" and any(not t.rest_url for t in targets):
            raise SweepError("protocol rest needs the REST address of every target (--rest-url http://HOST:PORT)")
        return targets
    state = read_state(state_path)
    if not state:
        raise SweepError("no running servers recorded; start one with `make serve-cpu` or pass --target HOST:PORT")
    names = plan.server_names or tuple(sorted(state))
    missing = [n for n in names if n not in state]
    if missing:
        raise SweepError(f"server(s) {missing} not in the state file (recorded: {sorted(state)})")
    return [Target(s.name, s.kind, s.device, s.device_name, s.grpc_target, s.rest_url, s.model_name,
                   s.batching_profile, dict(s.batching), dict(s.versions)) for s in (state[n] for n in names)]


def _explicit(target: plans.ExplicitTarget, model_name: str) -> Target:
    """An address-only server, labelled from its metrics page when it is the embedded server."""
    info = {}
    snapshot = scrape.scrape(target.rest) if target.rest else None
    if snapshot is not None:
        info = snapshot.info
    return Target(target.name, info.get("kind", target.kind), info.get("device", target.device),
                  info.get("device_name", target.device_name), target.grpc.removeprefix("grpc://"),
                  target.rest, model_name, info.get("batching_profile", target.batching_profile), {}, {})


@dataclass(frozen=True)
class Probe:
    ok: bool
    model_version: int | None
    error: str


class Prober:
    """One real Predict (a single digit), to tell a live server from a dead one between cells."""

    def __init__(self, run: plans.RunSettings):
        from loadtest.load.client import Samples  # imports TensorFlow (slow): only when a sweep runs

        self.run = run
        self.samples = Samples.load(Path(run.samples))

    def probe(self, target: Target, timeout_s: float = 5.0) -> Probe:
        from loadtest.load.client import GrpcPredictClient

        if self.run.protocol == "rest":
            return self._probe_rest(target, timeout_s)
        client = GrpcPredictClient(target.grpc, target.model_name, self.run.signature, self.samples, 1,
                                   check="shape", timeout_s=timeout_s, variants=1)
        try:
            record = client.call(0)
        finally:
            client.close()
        return Probe(record.ok, client.model_version, "" if record.ok else f"{record.status}: {record.error}")

    def _probe_rest(self, target: Target, timeout_s: float) -> Probe:
        import urllib.request

        url = f"{target.rest_url}/v1/models/{target.model_name}"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                body = json.loads(response.read())
            versions = [int(v["version"]) for v in body.get("model_version_status", [])]
            return Probe(True, max(versions) if versions else None, "")
        except (OSError, ValueError, KeyError) as exc:
            return Probe(False, None, f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class LocustRun:
    summary: dict | None
    failure: str  # "" when the run produced a complete summary
    wall_s: float


def locust_command(run: plans.RunSettings, cell: plans.Cell, target: Target, summary_path: Path) -> list[str]:
    """The Locust command line for one cell (closed: C users; open: one arrival stream per process)."""
    processes = min(run.processes, cell.concurrency) if cell.mode == "closed" else run.processes
    users = cell.concurrency if cell.mode == "closed" else processes
    host = f"grpc://{target.grpc}" if run.protocol == "grpc" else target.rest_url
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
               "-u", str(users), "-r", str(users), "--host", host, "--loglevel", "WARNING",
               "--exit-code-on-error", "0",
               "--samples", str(Path(run.samples).resolve()), "--model-name", target.model_name,
               "--signature", run.signature, "--batch-size", str(cell.batch_size), "--check", run.check,
               "--request-timeout-s", str(run.request_timeout_s), "--warmup-s", str(run.warmup_s),
               "--measure-s", str(run.measure_s), "--window-s", str(run.window_s),
               "--late-threshold-ms", str(run.late_threshold_ms), "--max-in-flight", str(run.max_in_flight),
               "--arrival", run.arrival, "--summary-out", str(summary_path)]
    if cell.mode == "open":
        command += ["--rate-per-user", str(cell.rate_rps / users)]
    if processes > 1:
        command += ["--processes", str(processes)]
    return command + [USER_CLASSES[(run.protocol, cell.mode)]]


def run_locust(command: list[str], summary_path: Path, log_path: Path, deadline_s: float) -> LocustRun:
    """Run one Locust cell to completion or its deadline; Ctrl-C kills it and propagates."""
    started = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    with log_path.open("w") as log:
        # A session of its own: Ctrl-C reaches the sweep, which then stops Locust deliberately.
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                start_new_session=True)
        try:
            proc.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
            return LocustRun(_read_summary(summary_path), f"load generator did not finish within {deadline_s:.0f} s "
                                                          f"(killed; log {log_path.name})", time.monotonic() - started)
        except BaseException:
            _stop(proc)
            raise
    summary = _read_summary(summary_path)
    wall = time.monotonic() - started
    if summary is None:
        return LocustRun(None, f"load generator exited with code {proc.returncode} without a summary "
                               f"({_log_tail(log_path)})", wall)
    if not summary.get("complete"):
        return LocustRun(summary, f"only {summary['processes_reported']} of {summary['processes_expected']} "
                                  f"load processes reported", wall)
    return LocustRun(summary, "", wall)


def _stop(proc: subprocess.Popen) -> None:
    """SIGINT, then SIGKILL after a grace period, to Locust's whole process group (its workers too)."""
    for sig, wait_s in ((signal.SIGINT, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _read_summary(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _log_tail(path: Path, lines: int = 3) -> str:
    try:
        tail = [line for line in path.read_text().splitlines() if line.strip()][-lines:]
    except OSError:
        return "no log"
    return " | ".join(tail)[-400:] or "empty log"


def cell_deadline_s(run: plans.RunSettings) -> float:
    return run.startup_timeout_s + run.warmup_s + run.measure_s + run.request_timeout_s + 20.0


@dataclass(frozen=True)
class CellContext:
    """What every record of a sweep shares."""

    run_id: str
    run: plans.RunSettings
    provenance: dict
    cores: int


def server_label(target: Target, run: plans.RunSettings, version: int | None) -> ServerLabel:
    address = target.grpc if run.protocol == "grpc" else target.rest_url
    return ServerLabel(target.name, target.kind, target.device, target.device_name, address, run.protocol,
                       target.model_name, version, target.batching_profile, target.batching, target.versions)


def load_spec(run: plans.RunSettings, cell: plans.Cell) -> LoadSpec:
    processes = min(run.processes, cell.concurrency) if cell.mode == "closed" else run.processes
    return LoadSpec(cell.mode, cell.batch_size, cell.concurrency, cell.rate_rps,
                    run.arrival if cell.mode == "open" else None, run.warmup_s, run.measure_s, processes,
                    run.check, run.late_threshold_ms, run.window_s)


def measured_result(ctx: CellContext, index: int, label: ServerLabel, spec: LoadSpec, summary: dict,
                    figures: scrape.ServerFigures, failure: str) -> CellResult:
    """A cell's record from a Locust summary: computed once, validity flags included."""
    measure_s = ctx.run.measure_s
    requests, ok = summary["requests"], summary["ok_requests"]
    errors = requests - ok
    process_cpu = [stats.cpu_percent(s, measure_s) for s in summary["cpu_s_by_pid"].values()]
    total_cpu = sum(process_cpu)
    late_fraction = stats.fraction(summary["late_sends"], requests)
    flag_pairs = stats.validity_flags(errors=errors, requests=requests, errors_by_code=summary["errors_by_code"],
                                      late_fraction=late_fraction, process_cpu_percents=process_cpu,
                                      total_cpu_percent=total_cpu, cores=ctx.cores,
                                      window_rps=summary["window_rps"], pool_waits=summary["pool_waits"],
                                      window_s=ctx.run.window_s, poisson=spec.arrival == "poisson")
    if failure:
        flag_pairs.insert(0, ("failed", failure))
    latency = summary["latency"]
    accuracy = summary["correct"] / summary["checked"] if summary["checked"] else None
    return CellResult(
        run_id=ctx.run_id, cell_index=index, utc_time=utc_now(), server=label, load=spec,
        status="failed" if failure else "ok", failure_reason=failure, requests=requests, ok_requests=ok,
        errors_by_code=summary["errors_by_code"], wrong_answers=summary["errors_by_code"].get("WRONG_ANSWER", 0),
        accuracy=accuracy, throughput_rps=round(ok / measure_s, 3),
        throughput_ips=round(summary["images"] / measure_s, 3),
        latency_min_ms=latency["min_ms"], latency_mean_ms=latency["mean_ms"], latency_p50_ms=latency["p50_ms"],
        latency_p90_ms=latency["p90_ms"], latency_p95_ms=latency["p95_ms"], latency_p99_ms=latency["p99_ms"],
        latency_p999_ms=latency["p999_ms"], latency_max_ms=latency["max_ms"], histogram_us=summary["histogram_us"],
        late_sends=summary["late_sends"], late_send_fraction=round(late_fraction, 6),
        window_throughput_rps=summary["window_rps"], loadgen_cpu_percent=round(total_cpu, 1),
        loadgen_cores=ctx.cores, server_batch_size_mean=figures.batch_size_mean,
        server_batch_sizes=figures.batch_sizes, server_queue_delay_mean_us=figures.queue_delay_mean_us,
        valid=not flag_pairs, flags=[ValidityFlag(f, r) for f, r in flag_pairs], provenance=ctx.provenance,
        images=summary["images"], error_examples=summary["error_examples"],
        loadgen_process_cpu_percent=[round(c, 1) for c in process_cpu], server_metrics=figures.extra,
        locust_stats=summary.get("locust", {}), pool_full_waits=summary["pool_waits"])


def failed_result(ctx: CellContext, index: int, label: ServerLabel, spec: LoadSpec, reason: str) -> CellResult:
    """A cell that produced no measurement: zero counts, no latency, flagged failed with the reason."""
    return CellResult(
        run_id=ctx.run_id, cell_index=index, utc_time=utc_now(), server=label, load=spec, status="failed",
        failure_reason=reason, requests=0, ok_requests=0, errors_by_code={}, wrong_answers=0, accuracy=None,
        throughput_rps=0.0, throughput_ips=0.0, latency_min_ms=None, latency_mean_ms=None, latency_p50_ms=None,
        latency_p90_ms=None, latency_p95_ms=None, latency_p99_ms=None, latency_p999_ms=None, latency_max_ms=None,
        histogram_us="", late_sends=0, late_send_fraction=0.0, window_throughput_rps=[], loadgen_cpu_percent=0.0,
        loadgen_cores=ctx.cores, server_batch_size_mean=None, server_batch_sizes={}, server_queue_delay_mean_us=None,
        valid=False, flags=[ValidityFlag("failed", reason)], provenance=ctx.provenance)


class Interrupted(Exception):
    """Ctrl-C during a sweep, after the running cell was recorded as failed."""


@dataclass
class Sweep:
    """Runs a plan; `results` holds every record written, in order."""

    plan: plans.Plan
    targets: list
    results_root: Path
    out: object = sys.stdout
    plan_path: str = ""

    def __post_init__(self) -> None:
        self.run_id = utc_stamp()
        self.run_dir = _new_dir(self.results_root, self.run_id)
        self.results: list[CellResult] = []
        provenance = collect_provenance(self.plan, self.plan_path)
        self.ctx = CellContext(self.run_dir.name, self.plan.run, provenance, _cores())
        self.grid = plans.cells(self.plan.grid)
        self.total = len(self.grid) * len(self.targets)

    @property
    def jsonl_path(self) -> Path:
        return self.run_dir / "results.jsonl"

    def run(self) -> list[CellResult]:
        """Every cell of every target; raises Interrupted after recording the cell Ctrl-C stopped."""
        (self.run_dir / "plan.json").write_text(json.dumps(self.plan.to_dict(), indent=2))
        self._say(f"sweep {self.run_id}: {self.total} cells, ~{self._estimate_s():.0f} s, results in {self.run_dir}")
        prober = Prober(self.plan.run)
        index = 0
        for target in self.targets:
            probe = prober.probe(target)
            for cell in self.grid:
                label = server_label(target, self.plan.run, probe.model_version)
                spec = load_spec(self.plan.run, cell)
                if not probe.ok:
                    self._record(failed_result(self.ctx, index, label, spec,
                                               f"not run: server {target.name} at {target.grpc} is not answering "
                                               f"({probe.error})"))
                else:
                    probe = self._measure(prober, index, target, cell, label, spec)
                index += 1
        self._say(console_table(self.results))
        return self.results

    def _measure(self, prober: Prober, index: int, target: Target, cell: plans.Cell, label: ServerLabel,
                 spec: LoadSpec) -> Probe:
        left_s = (self.total - index) * self._cell_estimate_s()
        self._say(f"[{index + 1}/{self.total}] {target.name} {describe(spec)} ... (~{left_s / 60:.1f} min left)")
        summary_path = self.run_dir / "summaries" / f"cell-{index:03d}.json"
        summary_path.parent.mkdir(parents=True, exist_ok=True)
        command = locust_command(self.plan.run, cell, target, summary_path)
        before = scrape.scrape(target.rest_url)
        try:
            locust = run_locust(command, summary_path, self.run_dir / "logs" / f"cell-{index:03d}.log",
                                cell_deadline_s(self.plan.run))
        except KeyboardInterrupt:
            self._record(failed_result(self.ctx, index, label, spec, "interrupted (Ctrl-C) during the cell"))
            raise Interrupted() from None
        after = scrape.scrape(target.rest_url)
        probe = prober.probe(target)
        failure = locust.failure
        if not probe.ok:
            failure = f"server stopped answering during the cell ({probe.error})"
        if locust.summary is None:
            result = failed_result(self.ctx, index, label, spec, failure)
        else:
            label = replace(label, model_version=locust.summary.get("model_version") or label.model_version)
            result = measured_result(self.ctx, index, label, spec, locust.summary,
                                     scrape.cell_figures(before, after), failure)
        self._record(result)
        return probe

    def _record(self, result: CellResult) -> None:
        append_result(self.jsonl_path, result)
        append_csv(self.run_dir / "results.csv", result)
        self.results.append(result)
        self._say(progress_line(result, self.total))

    def _cell_estimate_s(self) -> float:
        """Warm-up, measurement, plus Locust's start-up, drain and the scrapes (~8 s on 2 cores)."""
        return self.plan.run.warmup_s + self.plan.run.measure_s + 8.0

    def _estimate_s(self) -> float:
        return self.total * self._cell_estimate_s()

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def describe(spec: LoadSpec) -> str:
    level = f"users={spec.concurrency}" if spec.mode == "closed" else f"rate={spec.rate_rps:g}/s {spec.arrival}"
    return f"batch={spec.request_batch_size} {spec.mode} {level}"


def progress_line(result: CellResult, total: int) -> str:
    head = f"[{result.cell_index + 1}/{total}] {result.server.name} {describe(result.load)}"
    if result.requests == 0:
        return f"{head}: FAILED {result.failure_reason}"
    flags = "; ".join(f"{f.flag}: {f.reason}" for f in result.flags) or "valid"
    return (f"{head}: {result.throughput_rps:.0f} req/s, p50 {result.latency_p50_ms} ms, "
            f"p99 {result.latency_p99_ms} ms, errors {result.requests - result.ok_requests} ({flags})")


TABLE_COLUMNS = (("#", 3), ("server", 8), ("batch", 5), ("mode", 6), ("level", 9), ("req/s", 8), ("img/s", 9),
                 ("p50 ms", 8), ("p99 ms", 8), ("p99.9 ms", 9), ("errors", 6), ("late%", 6), ("cpu%", 5),
                 ("valid", 12))


def console_table(results: list[CellResult]) -> str:
    header = " ".join(name.rjust(width) for name, width in TABLE_COLUMNS)
    rows = [header, "-" * len(header)]
    for r in results:
        level = str(r.load.concurrency) if r.load.mode == "closed" else f"{r.load.rate_rps:g}/s"
        verdict = "yes" if r.valid else ",".join(sorted({f.flag for f in r.flags}))
        values = (r.cell_index + 1, r.server.name, r.load.request_batch_size, r.load.mode, level,
                  f"{r.throughput_rps:.0f}", f"{r.throughput_ips:.0f}", _num(r.latency_p50_ms),
                  _num(r.latency_p99_ms), _num(r.latency_p999_ms), r.requests - r.ok_requests,
                  f"{100 * r.late_send_fraction:.1f}", f"{r.loadgen_cpu_percent:.0f}", verdict)
        rows.append(" ".join(str(v)[:w].rjust(w) for v, (_, w) in zip(values, TABLE_COLUMNS)))
    return "\n".join(rows)


def _num(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def collect_provenance(plan: plans.Plan, plan_path: str) -> dict:
    """Enough to reproduce and to trust a result: code, machine, library versions, the full plan."""
    git = git_revision()
    return {"git_commit": git.commit, "git_dirty": git.dirty,
            "host": socket.gethostname(), "cpu_model": cpu_model_name(), "cpu_count": os.cpu_count(),
            "loadgen_cores": _cores(), "platform": platform.platform(), "python": platform.python_version(),
            "versions": package_versions(PACKAGES), "utc_time": utc_now(),
            "plan_path": plan_path, "plan": json.loads(json.dumps(plan.to_dict())), "command": list(sys.argv)}


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _new_dir(root: Path, name: str) -> Path:
    """A fresh results directory: never reuse (and so never overwrite) an earlier run's."""
    for suffix in [""] + [f"-{i}" for i in range(1, 1000)]:
        path = Path(root) / f"{name}{suffix}"
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise SweepError(f"cannot create a new results directory under {root}")

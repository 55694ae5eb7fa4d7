"""Locust users for TF Serving's Predict API over gRPC and REST, closed or open loop.

Run headless by the sweep (`loadtest.measure.cell_sweep`), or interactively in Locust's web UI (`make
locust-ui`). Users, by protocol and load model:

- `GrpcClosedUser` / `RestClosedUser`: closed loop, each user sends back to back.
- `GrpcOpenUser` / `RestOpenUser`: open loop, each user is one arrival stream at
  `--rate-per-user` requests/s (constant or Poisson gaps). gRPC: the user's native threads take
  the intended send times in turn and each sends on time itself, more threads starting as calls
  overlap (up to `--max-in-flight`); REST: a greenlet dispatches each request at its time into a
  bounded pool of greenlets. A stalled server does not slow the arrivals (no coordinated omission): latency counts from
  the intended send time, and a send that leaves more than `--late-threshold-ms` after it (pool
  full, or the process too busy) is counted late, and every send's dispatch lag (actual −
  intended send time, µs) goes into its own exact histogram, so a slow client is never mistaken
  for a slow server.

gRPC calls are made on native threads, a channel each (`loadtest.load.threads`: gevent's hand-off
per call cost more than the call), closed-loop users one thread each. Every call yields one
`CallRecord`; each fires Locust's `request` event (Locust's own statistics and UI) and goes into
this process's `Collector` (exact µs HdrHistogram over the measurement window; both in
`loadtest.load.run_state`). Workers ship collector deltas to the master on Locust's worker reports and, once drained,
in a final `mnist_done` message; the master (or the single local process) writes the run's
summary (`loadtest.load.summary.LoadSummary`) to `--summary-out` and quits. `--measure-s 0` means
interactive: no window, no quit.

`import locust` must stay the first import: gevent patches the standard library before anything
pulls in ssl. TensorFlow's runtime is never loaded here: its generated protos are imported on
their own (`serving.protocol.generated`), which saves each Locust process ~5 s of start-up.
"""

from __future__ import annotations

import locust  # noqa: F401  (first: locust's import monkey-patches the standard library with gevent)
from locust import User, constant, events, task
from locust.exception import StopUser
from locust.runners import MasterRunner, WorkerRunner

import itertools
import json
import logging
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import gevent
import gevent.pool
import psutil

# gRPC's EventEngine client path costs this load generator ~35 µs of CPU and ~0.04 ms per call
# (docs/performance.md); read by gRPC when it starts, so set before it is imported. A user's own
# GRPC_EXPERIMENTS wins.
os.environ.setdefault("GRPC_EXPERIMENTS", "-event_engine_client,-event_engine_listener,"
                                          "-event_engine_for_all_other_endpoints,-event_engine_callback_cq")

from serving.protocol.generated import use_protos_without_runtime

use_protos_without_runtime()  # before the TF Serving API imports TensorFlow's protos

from loadtest.evidence import stats
from loadtest.load.arrivals import ARRIVAL_GAPS
from loadtest.load.client import CHECKS
from loadtest.load.collector import Aggregate
from loadtest.load.dispatch import Dispatcher
from loadtest.load.run_state import RUN
from loadtest.evidence.cell_parts import LocustTotals
from loadtest.load.summary import LoadSummary
from loadtest.load.threads import Schedule, Slot, wait_for

log = logging.getLogger("loadtest")
DONE_MESSAGE = "mnist_done"
REPORT_KEY = "mnist_delta"


@events.init_command_line_parser.add_listener
def add_arguments(parser) -> None:
    group = parser.add_argument_group("Predict load on any TF Serving model (loadtest.load.locustfile)")
    group.add_argument("--samples", default="models/mnist-samples.npz", help="sample digits (.npz from the export)")
    group.add_argument("--model-name", default="mnist")
    group.add_argument("--signature", default="serving_default")
    group.add_argument("--batch-size", type=int, default=1, help="images per request")
    group.add_argument("--check", default="classes", choices=sorted(CHECKS),
                       help="classes: compare with the MNIST model's own predictions (outputs for inputs made "
                            "for any model); shape: null backend; outputs: outputs as the signature says")
    group.add_argument("--input-data", default="auto",
                       help="auto (the MNIST digits of --samples for the model mnist, random for any other), "
                            "samples, random, zeros, or PATH.npz")
    group.add_argument("--input-seed", type=int, default=0, help="random inputs")
    group.add_argument("--int-range", default="0,100", help="random integer inputs: LO,HI (HI excluded)")
    group.add_argument("--input-shape", action="append", default=[], metavar="NAME:DIMS",
                       help="dims after the batch dimension of an input with -1 in them (repeatable)")
    group.add_argument("--metadata-target", default="",
                       help="gRPC HOST:PORT to read the model's signature from (default: the gRPC host)")
    group.add_argument("--request-timeout-s", type=float, default=10.0)
    group.add_argument("--rate-per-user", type=float, default=10.0, help="open loop: requests/s per user")
    group.add_argument("--arrival", default="constant", choices=sorted(ARRIVAL_GAPS))
    group.add_argument("--seed", type=int, default=1, help="open loop Poisson arrivals")
    group.add_argument("--max-in-flight", type=int, default=512,
                       help="open loop: calls in flight per user (gRPC: native threads, started as needed)")
    group.add_argument("--late-threshold-ms", type=float, default=2.0)
    group.add_argument("--dispatch-spin-share", type=float, default=0.2,
                       help="open loop: wake early by the oversleep seen so far, then spin (yielding) to each send, "
                            "spinning at most this share of the gap between sends (0: sleep only)")
    group.add_argument("--plant-dispatch-delay-ms", type=float, default=0.0,
                       help="tests only: hold every open-loop send this long after its time (a slow dispatcher)")
    group.add_argument("--warmup-s", type=float, default=0.0)
    group.add_argument("--measure-s", type=float, default=0.0, help="0 = interactive (web UI), no auto quit")
    group.add_argument("--window-s", type=float, default=1.0, help="throughput stability windows")
    group.add_argument("--max-requests-per-process", type=int, default=10_000_000)
    group.add_argument("--summary-out", default="", help="where the master writes the run summary (JSON)")
    group.add_argument("--raw-latency-dir", default="", help="each process also writes its raw latencies here")


_STREAM_NUMBERS = itertools.count()


class _PredictUser(User):
    abstract = True
    protocol = "grpc"
    index = 0
    client = None

    def on_start(self) -> None:
        self.client = RUN.ensure_client(self.protocol, self.host or "")
        self.index = random.randrange(1 << 16)


class _ClosedLoop(_PredictUser):
    abstract = True
    wait_time = constant(0)

    @task
    def predict(self) -> None:
        if self.protocol == "grpc":
            self.calls_on_a_thread()
        if not RUN.sending_allowed(time.time()):
            raise StopUser()
        self.index += 1
        RUN.call(self.client, self.index)

    def calls_on_a_thread(self) -> None:
        """gRPC: this user's calls are made back to back on a native thread; the user waits for it."""
        worker = RUN.new_call_threads(self.client, limit=1).start_back_to_back(
            self.index, lambda: RUN.sending_allowed(time.time()))
        try:
            wait_for(lambda: worker.finished, float("inf"), step_s=0.05)
        finally:
            worker.stopping = True
        raise StopUser()


class _OpenLoop(_PredictUser):
    abstract = True
    wait_time = constant(0)

    @task
    def arrivals(self) -> None:
        """Send requests at their scheduled times until the window ends, then stop."""
        options = RUN.options
        # Reproducible, and different per user and per worker process: streams that add up to Poisson.
        worker = getattr(self.environment.runner, "worker_index", 0)
        rng = random.Random(hash((options.seed, worker, next(_STREAM_NUMBERS))))
        slots = self.slots(rng, options.rate_per_user, ARRIVAL_GAPS[options.arrival])
        if self.protocol == "grpc":
            self.send_from_threads(slots)
        else:
            self.send_from_greenlets(slots)
        raise StopUser()

    def slots(self, rng: random.Random, rate: float, gap) -> Iterator[Slot]:
        """(request index, intended send time, the gap before it) while the window lasts."""
        intended, gap_s = time.time(), 1.0 / rate
        while RUN.sending_allowed(intended):
            self.index += 1
            yield self.index, intended, gap_s
            gap_s = gap(rng, rate)
            intended += gap_s

    def send_from_threads(self, slots: Iterator[Slot]) -> None:
        """gRPC: native threads take the slots in turn and send each on time themselves."""
        options = RUN.options
        threads = RUN.new_call_threads(self.client, limit=options.max_in_flight)
        threads.start_open_loop(Schedule(slots), options.dispatch_spin_share, options.plant_dispatch_delay_ms / 1000)
        try:
            wait_for(threads.all_finished, float("inf"), step_s=0.05)
        finally:
            threads.stop(timeout_s=0.0)

    def send_from_greenlets(self, slots: Iterator[Slot]) -> None:
        """REST: this greenlet waits for each slot and sends it on a greenlet of a bounded pool."""
        options = RUN.options
        pool = gevent.pool.Pool(options.max_in_flight)
        dispatcher = Dispatcher(options.dispatch_spin_share)
        for index, intended, gap_s in slots:
            dispatcher.wait_until(intended, gap_s)
            if options.plant_dispatch_delay_ms > 0:
                gevent.sleep(options.plant_dispatch_delay_ms / 1000.0)
            if pool.full():
                RUN.pool_wait(intended)
                pool.wait_available(timeout=options.request_timeout_s + 1.0)  # calls time out by then
            pool.spawn(RUN.call, self.client, index, intended)


class GrpcClosedUser(_ClosedLoop):
    protocol = "grpc"


class GrpcOpenUser(_OpenLoop):
    protocol = "grpc"


class RestClosedUser(_ClosedLoop):
    protocol = "rest"


class RestOpenUser(_OpenLoop):
    protocol = "rest"


def _process_cpu_s() -> float:
    times = psutil.Process().cpu_times()
    return times.user + times.system


def _watch_window() -> None:
    """Per load process: CPU over the window, then drain in-flight calls and hand the data over."""
    options = RUN.options
    gevent.sleep(max(0.0, RUN.window.start_unix_s - time.time()))
    cpu_start = _process_cpu_s()
    gevent.sleep(max(0.0, RUN.window.end_unix_s - time.time()))
    cpu_used = _process_cpu_s() - cpu_start
    wait_for(lambda: RUN.in_flight == 0, options.request_timeout_s + 1.0, step_s=0.02)
    RUN.stop_call_threads(timeout_s=1.0)
    RUN.fire_locust_events()
    payload = {"pid": os.getpid(), "cpu_s": cpu_used, "in_flight_abandoned": RUN.in_flight,
               "model_version": RUN.seen_model_version(), "delta": RUN.take_delta()}
    _write_raw_latencies()
    runner = RUN.environment.runner
    if isinstance(runner, WorkerRunner):
        runner.send_message(DONE_MESSAGE, payload)
    else:
        _on_done(payload, runner.client_id if hasattr(runner, "client_id") else "local")


def _write_raw_latencies() -> None:
    if RUN.options.raw_latency_dir:
        path = Path(RUN.options.raw_latency_dir) / f"latencies-{os.getpid()}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(RUN.raw_latencies))


def _on_done(payload: dict, client_id: str) -> None:
    RUN.aggregate.add_delta(payload["delta"])
    RUN.cpu[str(payload["pid"])] = payload["cpu_s"]
    RUN.model_version = payload["model_version"] or RUN.model_version
    RUN.abandoned += payload["in_flight_abandoned"]
    RUN.done_processes.add(client_id)
    if len(RUN.done_processes) >= max(1, RUN.expected_workers):
        _finish(complete=True)


def _finish(complete: bool) -> None:
    """Write the summary once and end the run (the sweep waits for the file, then for the exit)."""
    if RUN.summary_written:
        return
    RUN.summary_written = True
    if RUN.options.summary_out:
        Path(RUN.options.summary_out).write_text(run_summary(complete).to_json())
    runner = RUN.environment.runner
    gevent.spawn_later(0.1, runner.quit)


def run_summary(complete: bool) -> LoadSummary:
    """What the sweep needs from a run: merged counts, latency, windows, CPU per process."""
    options, agg = RUN.options, RUN.aggregate
    windows = max(1, int(options.measure_s // options.window_s)) if options.measure_s > 0 else 0
    return LoadSummary(
        complete=complete, processes_reported=len(RUN.done_processes),
        processes_expected=max(1, RUN.expected_workers), measure_s=options.measure_s,
        window_s=options.window_s, requests=agg.requests, ok_requests=agg.ok_requests,
        images=agg.images, correct=agg.correct, checked=agg.checked, late_sends=agg.late_sends,
        pool_waits=agg.pool_waits, errors_by_code=agg.errors_by_code, error_examples=agg.error_examples,
        latency=agg.latency(), histogram_us=stats.encode(agg.histogram),
        window_rps=stats.window_counts_to_rps(agg.window_counts, options.window_s, windows),
        cpu_s_by_pid=RUN.cpu, model_version=RUN.model_version, in_flight_abandoned=RUN.abandoned,
        locust=locust_totals(), dispatch_lag=agg.dispatch_lag(),
        window_start_unix_s=RUN.collector.start_unix_s if RUN.collector else None,
        window_scheduled_rps=(stats.window_counts_to_rps(agg.scheduled_counts, options.window_s, windows)
                              if agg.scheduled_counts else []),
        window_latency_ms=stats.window_means_ms(agg.sent_latency_sum_us, agg.sent_ok_counts, windows),
        window_histograms_us=[stats.encode(agg.sent_histograms[str(i)]) if str(i) in agg.sent_histograms else ""
                              for i in range(windows)])


def locust_totals() -> LocustTotals:
    total = RUN.environment.stats.total
    return LocustTotals(requests=total.num_requests, failures=total.num_failures,
                        p50_ms=total.get_response_time_percentile(0.5),
                        p99_ms=total.get_response_time_percentile(0.99))


@events.init.add_listener
def on_init(environment, **_kwargs) -> None:
    RUN.environment = environment
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        runner.register_message(DONE_MESSAGE, lambda environment, msg, **_: _on_done(msg.data, msg.node_id))
    if environment.web_ui is not None:
        environment.web_ui.app.add_url_rule("/mnist/latency", "mnist_latency", _latency_page)


def _latency_page():
    """The web UI's exact µs percentiles so far (master: from worker reports; local: this process)."""
    snapshot = Aggregate()
    snapshot.add_delta(RUN.aggregate.to_wire())
    if RUN.collector is not None and not isinstance(RUN.environment.runner, MasterRunner):
        collector_copy = RUN.take_delta()
        RUN.aggregate.add_delta(collector_copy)
        snapshot.add_delta(collector_copy)
    return {"requests": snapshot.requests, "errors_by_code": snapshot.errors_by_code,
            "latency": vars(snapshot.latency()), "accuracy": stats.fraction(snapshot.correct, snapshot.checked)}


@events.test_start.add_listener
def on_test_start(environment, **_kwargs) -> None:
    RUN.begin(environment)
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        RUN.expected_workers = runner.worker_count
        if environment.parsed_options.measure_s > 0:
            gevent.spawn(_master_deadline)
        return
    RUN.start_event_pump()
    if environment.parsed_options.measure_s > 0:
        gevent.spawn(_watch_window)


def _master_deadline() -> None:
    """Bound the run even if a worker never reports: write what arrived, marked incomplete."""
    options = RUN.options
    gevent.sleep(options.warmup_s + options.measure_s + options.request_timeout_s + 15.0)
    _finish(complete=False)


@events.report_to_master.add_listener
def on_report_to_master(client_id, data, **_kwargs) -> None:
    if RUN.collector is not None:
        data[REPORT_KEY] = RUN.take_delta()


@events.worker_report.add_listener
def on_worker_report(client_id, data, **_kwargs) -> None:
    if REPORT_KEY in data:
        RUN.aggregate.add_delta(data[REPORT_KEY])


@events.test_stop.add_listener
def on_test_stop(environment, **_kwargs) -> None:
    if environment.parsed_options.measure_s > 0 or RUN.collector is None:
        return
    if not isinstance(environment.runner, MasterRunner):
        RUN.stop_call_threads(timeout_s=1.0)
        RUN.fire_locust_events()
        RUN.aggregate.add_delta(RUN.take_delta())
    latency = RUN.aggregate.latency()
    log.info("exact latency (µs histogram): %d requests, p50 %s ms, p99 %s ms, p99.9 %s ms, max %s ms",
             latency.count, latency.p50_ms, latency.p99_ms, latency.p999_ms, latency.max_ms)
    if environment.parsed_options.summary_out:
        Path(environment.parsed_options.summary_out).write_text(run_summary(complete=True).to_json())

"""Performance check of the embedded server: the three performance ratios (served vs in-process,
batching vs none, model vs null backend), measured in one run.

    python -m loadtest.benchmarks.server --model_base_path models/mnist [--samples models/mnist-samples.npz]

(1) at request batch 64: served images/s / images/s of the same SavedModel called in-process
    (target >= 0.85);
(2) batch-1 requests from 64 concurrent callers: requests/s with batching (max 64, timeout 2 ms)
    / without (target >= 2.0, with p99 latency not worse);
(3) requests/s of the real model / requests/s of the same server with the null backend, both
    batching as in (2) (target >= 0.7).

Beside (1) it prints where the served path's time goes: the null backend at request batch 64
measures the harness alone (gRPC, decoding, validation, encoding) in server CPU per request,
which bounds ratio (1) even if the model ran inside the server exactly as fast as in-process;
and it splits served, in-process and null CPU per request by kind of thread (TensorFlow's pools,
Python's threads, native gRPC threads), which shows where the rest of the gap runs.

Every server (real model without and with batching, null model without and with batching) and
the in-process baseline run under `taskset -c --server_cpu`, one at a time: each round starts a
server, warms it, measures its phases and stops it before the next, so no idle server shares
the measured core. This process, the load client, pins itself to `--client_cpu` before starting
any thread, so the client never steals the server's core. The client is a grpc.aio loop sending
pre-serialized requests, so its own cost per call stays small. Each ratio is the median of its
per-round values (their range is printed too): on a shared machine, neighbouring phases see the
same background load. One JSON line per run is appended to `--output` when given.

Not for: sizing or reports (see loadtest); this checks the server's own overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from serving.deploy.process import process_cpu_s, start_server, thread_cpu_s

REPO = Path(__file__).resolve().parents[2]
PREDICT_METHOD = "/tensorflow.serving.PredictionService/Predict"


@dataclass(frozen=True)
class LoadResult:
    """One timed load phase, as the client saw it."""

    requests: int
    errors: int
    images: int
    elapsed_s: float
    p50_latency_ms: float
    p99_latency_ms: float
    server_cpu_s: float = 0.0  # CPU time the serving process (or the in-process loop) used in the window
    server_batch_mean: float | None = None  # mean processed batch size in the window (batching servers)
    # The same CPU time by kind of thread (serving.deploy.process.thread_cpu_s): TensorFlow's pools, Python's, native
    server_thread_cpu_s: dict[str, float] = field(default_factory=dict)

    @property
    def throughput_rps(self) -> float:
        return _ratio(self.requests, self.elapsed_s)

    @property
    def images_per_s(self) -> float:
        return _ratio(self.images, self.elapsed_s)

    @property
    def requests_per_cpu_s(self) -> float:
        return _ratio(self.requests, self.server_cpu_s)

    @property
    def images_per_cpu_s(self) -> float:
        return _ratio(self.images, self.server_cpu_s)

    @property
    def cpu_us_per_request(self) -> float:
        return 1e6 * _ratio(self.server_cpu_s, self.requests)

    @property
    def thread_cpu_us_per_request(self) -> dict[str, float]:
        return {kind: 1e6 * _ratio(cpu_s, self.requests) for kind, cpu_s in self.server_thread_cpu_s.items()}


@dataclass(frozen=True)
class RoundResult:
    """One round: every phase measured back to back, so the ratios compare like with like."""

    in_process_b64: LoadResult
    served_b64: LoadResult
    b1_no_batching: LoadResult
    b1_batching: LoadResult
    null_b1_batching: LoadResult
    null_b64: LoadResult  # null backend, no batching, request batch 64: the serving harness's own cost

    @property
    def ratios(self) -> tuple[float, float, float]:
        return (_ratio(self.served_b64.images_per_s, self.in_process_b64.images_per_s),
                _ratio(self.b1_batching.throughput_rps, self.b1_no_batching.throughput_rps),
                _ratio(self.b1_batching.throughput_rps, self.null_b1_batching.throughput_rps))

    @property
    def cpu_ratios(self) -> tuple[float, float, float]:
        """The same ratios from work done per CPU-second of the server's core: what the throughput ratios
        would be on a core nobody else uses (a shared machine steals wall time, not CPU time)."""
        return (_ratio(self.served_b64.images_per_cpu_s, self.in_process_b64.images_per_cpu_s),
                _ratio(self.b1_batching.requests_per_cpu_s, self.b1_no_batching.requests_per_cpu_s),
                _ratio(self.b1_batching.requests_per_cpu_s, self.null_b1_batching.requests_per_cpu_s))

    @property
    def harness_b64_cpu_us(self) -> float:
        """Server CPU per batch-64 request with the null backend: everything but the model."""
        return self.null_b64.cpu_us_per_request

    @property
    def ceiling_served_vs_in_process(self) -> float:
        """Ratio (1) if the model cost exactly its in-process CPU inside the server and only the harness
        were added: in-process CPU per call / (that + harness CPU per request)."""
        model = self.in_process_b64.cpu_us_per_request
        return _ratio(model, model + self.harness_b64_cpu_us)


@dataclass(frozen=True)
class BenchSummary:
    """The three ratios (median over rounds) and the figures they come from, all from one run."""

    ratio_served_vs_in_process: float
    ratio_batching_vs_none: float
    ratio_model_vs_null: float
    cpu_ratio_served_vs_in_process: float
    cpu_ratio_batching_vs_none: float
    cpu_ratio_model_vs_null: float
    ratio_ranges: tuple[tuple[float, float], ...]  # (min, max) over rounds of each of the three ratios
    ceiling_served_vs_in_process: float
    harness_b64_cpu_us: float
    served_b64_cpu_us: float  # server CPU per batch-64 request, real model
    model_b64_cpu_us_in_process: float
    # CPU per batch-64 request (per call in-process) by kind of thread: where the served path's excess runs
    served_b64_thread_cpu_us: dict[str, float]
    in_process_b64_thread_cpu_us: dict[str, float]
    null_b64_thread_cpu_us: dict[str, float]
    p99_batching_not_worse: bool
    in_process_b64_images_per_s: float
    served_b64_images_per_s: float
    b1_batching_rps: float
    b1_no_batching_rps: float
    b1_batching_p99_ms: float
    b1_no_batching_p99_ms: float
    null_b1_batching_rps: float
    b1_batching_batch_mean: float | None  # mean processed batch size the batching server reported in (2)
    wrong_answers: int
    errors: int
    rounds: int
    server_cpu: str
    client_cpu: str
    duration_s: float
    server_kind: str  # from the servers' ready lines: always the embedded server here
    device: str
    device_name: str
    utc: str


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def summarize(rounds: list[RoundResult], wrong_answers: int, args: argparse.Namespace,
              server: dict[str, str]) -> BenchSummary:
    """Median of each figure and of each per-round ratio (pure: tested with hand-made rounds)."""
    def median(values) -> float:
        return float(np.median(list(values)))

    ratios = [r.ratios for r in rounds]
    cpu_ratios = [r.cpu_ratios for r in rounds]
    phases = [p for r in rounds
              for p in (r.served_b64, r.b1_no_batching, r.b1_batching, r.null_b1_batching, r.null_b64)]
    return BenchSummary(
        ratio_served_vs_in_process=median(r[0] for r in ratios),
        ratio_batching_vs_none=median(r[1] for r in ratios),
        ratio_model_vs_null=median(r[2] for r in ratios),
        cpu_ratio_served_vs_in_process=median(r[0] for r in cpu_ratios),
        cpu_ratio_batching_vs_none=median(r[1] for r in cpu_ratios),
        cpu_ratio_model_vs_null=median(r[2] for r in cpu_ratios),
        ratio_ranges=tuple((min(r[i] for r in ratios), max(r[i] for r in ratios)) for i in range(3)),
        ceiling_served_vs_in_process=median(r.ceiling_served_vs_in_process for r in rounds),
        harness_b64_cpu_us=median(r.harness_b64_cpu_us for r in rounds),
        served_b64_cpu_us=median(r.served_b64.cpu_us_per_request for r in rounds),
        model_b64_cpu_us_in_process=median(r.in_process_b64.cpu_us_per_request for r in rounds),
        served_b64_thread_cpu_us=_median_by_kind(r.served_b64 for r in rounds),
        in_process_b64_thread_cpu_us=_median_by_kind(r.in_process_b64 for r in rounds),
        null_b64_thread_cpu_us=_median_by_kind(r.null_b64 for r in rounds),
        p99_batching_not_worse=median(r.b1_batching.p99_latency_ms for r in rounds)
        <= median(r.b1_no_batching.p99_latency_ms for r in rounds),
        in_process_b64_images_per_s=median(r.in_process_b64.images_per_s for r in rounds),
        served_b64_images_per_s=median(r.served_b64.images_per_s for r in rounds),
        b1_batching_rps=median(r.b1_batching.throughput_rps for r in rounds),
        b1_no_batching_rps=median(r.b1_no_batching.throughput_rps for r in rounds),
        b1_batching_p99_ms=median(r.b1_batching.p99_latency_ms for r in rounds),
        b1_no_batching_p99_ms=median(r.b1_no_batching.p99_latency_ms for r in rounds),
        null_b1_batching_rps=median(r.null_b1_batching.throughput_rps for r in rounds),
        b1_batching_batch_mean=_median_known(r.b1_batching.server_batch_mean for r in rounds),
        wrong_answers=wrong_answers, errors=sum(p.errors for p in phases), rounds=len(rounds),
        server_cpu=args.server_cpu, client_cpu=args.client_cpu, duration_s=args.duration_s,
        server_kind=server.get("kind", ""), device=server.get("device", ""),
        device_name=server.get("device_name", ""), utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def _median_known(values) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.median(known)) if known else None


def _median_by_kind(results) -> dict[str, float]:
    """Median CPU per request of each kind of thread over the rounds that report it."""
    per_round = [r.thread_cpu_us_per_request for r in results]
    kinds = sorted({kind for figures in per_round for kind in figures})
    return {kind: float(np.median([f[kind] for f in per_round if kind in f])) for kind in kinds}


def _images(samples: str | None, n: int) -> np.ndarray:
    if samples:
        return np.load(samples)["images"][:n].astype(np.float32)
    return np.random.default_rng(0).random((n, 784), dtype=np.float32)


def _batches(batch: int, samples: str | None, count: int = 16) -> list[np.ndarray]:
    """The `count` input batches every phase cycles through, served and in-process alike."""
    images = _images(samples, max(batch * count, 64))
    out = []
    for i in range(count):
        rows = images[(i * batch) % len(images):][:batch]
        out.append(rows if len(rows) == batch else np.resize(images, (batch, images.shape[1])))
    return out


def _payloads(model: str, batch: int, samples: str | None) -> list[bytes]:
    """Serialized PredictRequests (tensor_content, as tf.make_tensor_proto sends), built once."""
    from tensorflow_serving.apis import predict_pb2

    from serving.protocol.tensors import from_numpy

    out = []
    for rows in _batches(batch, samples):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model
        request.inputs["images"].CopyFrom(from_numpy(rows, tensor_content=True))
        out.append(request.SerializeToString())
    return out


async def _load(target: str, payloads: list[bytes], concurrency: int, warmup_s: float,
                duration_s: float, batch: int, server_pid: int | None = None, rest_url: str = "") -> LoadResult:
    import grpc

    channel = grpc.aio.insecure_channel(target, options=[("grpc.max_receive_message_length", 64 << 20),
                                                         ("grpc.max_send_message_length", 64 << 20)])
    call = channel.unary_unary(PREDICT_METHOD)  # bytes in, bytes out: no client-side proto work
    start = time.perf_counter()
    measure_from, stop_at = start + warmup_s, start + warmup_s + duration_s
    latencies: list[float] = []
    errors = 0

    async def worker(i: int) -> None:
        nonlocal errors
        n = i
        while True:
            sent = time.perf_counter()
            if sent >= stop_at:
                return
            try:
                await call(payloads[n % len(payloads)], timeout=30)
                ok = True
            except grpc.aio.AioRpcError:
                ok = False
            done = time.perf_counter()
            if sent >= measure_from and done <= stop_at:
                latencies.append(done - sent)
                errors += not ok
            n += concurrency

    async def server_side() -> tuple[float, float | None, dict[str, float]]:
        """CPU seconds the server process used between measure_from and stop_at (in all and by kind of
        thread), and the mean batch size its metrics page reports for the same window."""
        if server_pid is None:
            return 0.0, None, {}
        from loadtest.sweep import scrape

        await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
        before, threads_before = process_cpu_s(server_pid), thread_cpu_s(server_pid)
        metrics_before = await asyncio.to_thread(scrape.scrape, rest_url) if rest_url else None
        await asyncio.sleep(max(0.0, stop_at - time.perf_counter()))
        after, threads_after = process_cpu_s(server_pid), thread_cpu_s(server_pid)
        metrics_after = await asyncio.to_thread(scrape.scrape, rest_url) if rest_url else None
        batch_mean = scrape.cell_figures(metrics_before, metrics_after).batch_size_mean
        return after - before, batch_mean, _cpu_used(threads_before, threads_after)

    *_, (cpu_s, batch_mean, thread_cpu) = await asyncio.gather(*(worker(i) for i in range(concurrency)), server_side())
    await channel.close()
    lat_ms = np.array(latencies) * 1000 if latencies else np.zeros(1)
    ok_requests = len(latencies) - errors
    return LoadResult(ok_requests, errors, ok_requests * batch, duration_s,
                      float(np.percentile(lat_ms, 50)), float(np.percentile(lat_ms, 99)), cpu_s, batch_mean,
                      thread_cpu)


def _cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Per-kind CPU seconds between two thread_cpu_s readings (threads that ended meanwhile are lost)."""
    return {kind: max(0.0, after[kind] - before.get(kind, 0.0)) for kind in after}


def _in_process(model_dir: str, batch: int, samples: str | None, warmup_s: float, duration_s: float) -> LoadResult:
    """The SavedModel called directly, the way a user would without any server, on the same batches the
    served phases send (in turn, as their callers do)."""
    import tensorflow as tf

    fn = tf.saved_model.load(model_dir).signatures["serving_default"]
    inputs = _batches(batch, samples)
    end_warmup, calls = time.perf_counter() + warmup_s, 0
    while time.perf_counter() < end_warmup:
        fn(images=tf.constant(inputs[calls % len(inputs)]))["classes"].numpy()
        calls += 1
    calls, start, cpu_start, threads_start = 0, time.perf_counter(), time.process_time(), thread_cpu_s(os.getpid())
    while time.perf_counter() - start < duration_s:
        fn(images=tf.constant(inputs[calls % len(inputs)]))["classes"].numpy()
        calls += 1
    elapsed = time.perf_counter() - start
    return LoadResult(calls, 0, calls * batch, elapsed, 0.0, 0.0, time.process_time() - cpu_start,
                      server_thread_cpu_s=_cpu_used(threads_start, thread_cpu_s(os.getpid())))


def _in_process_child(model_dir: str, args: argparse.Namespace) -> LoadResult:
    """The in-process baseline in its own process, pinned to the server's core."""
    cmd = ["taskset", "-c", args.server_cpu, sys.executable, "-m", "loadtest.benchmarks.server", "--_in_process", model_dir,
           "--batch", "64", "--warmup_s", str(args.warmup_s), "--duration_s", str(args.duration_s)]
    if args.samples:
        cmd += ["--samples", args.samples]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if done.returncode != 0:
        raise RuntimeError(f"in-process measurement failed: {done.stderr[-2000:]}")
    return LoadResult(**json.loads(done.stdout.strip().splitlines()[-1]))


def _latest_version_dir(base: str) -> str:
    from serving.server.model_source import versions_on_disk  # imports TensorFlow

    versions = versions_on_disk(Path(base))
    if not versions:
        raise ValueError(f"no version directory with a saved_model.pb under {base}")
    return str(Path(base) / str(versions[-1]))


def _wrong_answers(target: str, samples: str | None) -> int:
    """Rows whose served class differs from the exporter's own prediction (0 when no samples file)."""
    if not samples:
        return 0
    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from serving.protocol.tensors import from_numpy, to_numpy

    data = np.load(samples)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "mnist"
    request.inputs["images"].CopyFrom(from_numpy(data["images"][:64], tensor_content=True))
    with grpc.insecure_channel(target) as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=60)
    return int((to_numpy(response.outputs["classes"]) != data["expected_classes"][:64]).sum())


@dataclass(frozen=True)
class Phase:
    """One timed load against one server: request batch size and concurrent callers."""

    batch: int
    concurrency: int


SERVED_B64 = Phase(64, 2)  # two in flight: the next request is decoded while the model runs the current one
B1_64_CALLERS = Phase(1, 64)


def run_bench(args: argparse.Namespace) -> BenchSummary:
    """Each round: the in-process baseline, then each server alone on the server core with its phases."""
    model_dir = _latest_version_dir(args.model_base_path)
    common = ["--model_name", "mnist", "--model_base_path", args.model_base_path]
    payloads = {b: _payloads("mnist", b, args.samples or None) for b in (1, 64)}
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        params = Path(tmp) / "batching.txt"
        params.write_text(BATCHING_PARAMETERS)
        batching = ("--enable_batching", "--batching_parameters_file", str(params))
        # (server flags, backend, phases measured on it, whether its answers are checked)
        servers = {"plain": ((), "savedmodel", (SERVED_B64, B1_64_CALLERS), True),
                   "batched": (batching, "savedmodel", (B1_64_CALLERS,), True),
                   "null": ((), "null", (SERVED_B64,), False),
                   "null_batched": (batching, "null", (B1_64_CALLERS,), False)}

        def measure_alone(name: str) -> tuple[list[LoadResult], dict[str, str], int]:
            flags, backend, phases, checked = servers[name]
            with start_server(*common, *flags, backend=backend, cpu=args.server_cpu) as server:
                bad = _wrong_answers(server.grpc_target, args.samples) if checked else 0
                results = []
                for phase in phases:
                    # A discarded pass first: a fresh server's first seconds (thread pools growing,
                    # TensorFlow's kernels and caches warming) are slower than its steady state.
                    _measure(server, payloads[phase.batch], phase, args.warmup_s, 1.0)
                    results.append(_measure(server, payloads[phase.batch], phase, args.warmup_s, args.duration_s))
                return results, server.fields, bad

        rounds, served_by = [], {}
        for _ in range(args.rounds):
            in_process = _in_process_child(model_dir, args)
            (served_b64, b1_none), served_by, bad_plain = measure_alone("plain")
            (b1_batching,), _, bad_batched = measure_alone("batched")
            (null_b64,), _, _ = measure_alone("null")
            (null_b1,), _, _ = measure_alone("null_batched")
            wrong += bad_plain + bad_batched
            rounds.append(RoundResult(in_process_b64=in_process, served_b64=served_b64, b1_no_batching=b1_none,
                                      b1_batching=b1_batching, null_b1_batching=null_b1, null_b64=null_b64))
        return summarize(rounds, wrong, args, served_by)


def _measure(server, payloads: list[bytes], phase: Phase, warmup_s: float, duration_s: float) -> LoadResult:
    return asyncio.run(_load(server.grpc_target, payloads, phase.concurrency, warmup_s, duration_s, phase.batch,
                             server.proc.pid, server.rest_url))


BATCHING_PARAMETERS = ("max_batch_size { value: 64 }\nbatch_timeout_micros { value: 2000 }\n"
                       "num_batch_threads { value: 1 }\nmax_enqueued_batches { value: 64 }\n")


def format_summary(s: BenchSummary) -> str:
    return "\n".join([
        f"(1) batch 64: served {s.served_b64_images_per_s:,.0f} img/s / in-process {s.in_process_b64_images_per_s:,.0f}"
        f" img/s -> ratio {s.ratio_served_vs_in_process:.2f}  (target >= 0.85)",
        f"    where (1)'s time goes: served {s.served_b64_cpu_us:,.0f} us of server CPU per batch-64 request "
        f"against {s.model_b64_cpu_us_in_process:,.0f} us per call in-process; the harness alone (null backend) "
        f"costs {s.harness_b64_cpu_us:,.0f} us, so (1) could reach {s.ceiling_served_vs_in_process:.2f} if "
        f"nothing else changed",
        f"    by kind of thread, served / in-process / null backend (us per batch-64 request): "
        f"{_by_kind(s.served_b64_thread_cpu_us, s.in_process_b64_thread_cpu_us, s.null_b64_thread_cpu_us)}",
        f"(2) batch 1 x 64 callers: batching {s.b1_batching_rps:,.0f} req/s (p99 {s.b1_batching_p99_ms:.1f} ms) / "
        f"none {s.b1_no_batching_rps:,.0f} req/s (p99 {s.b1_no_batching_p99_ms:.1f} ms) -> ratio "
        f"{s.ratio_batching_vs_none:.2f}  (target >= 2.0; p99 not worse: {s.p99_batching_not_worse})",
        f"    the batching server's mean processed batch: "
        f"{'not exposed' if s.b1_batching_batch_mean is None else f'{s.b1_batching_batch_mean:.1f}'} rows "
        f"(max 64, timeout 2 ms, one batch thread)",
        f"(3) model {s.b1_batching_rps:,.0f} req/s / null {s.null_b1_batching_rps:,.0f} req/s -> ratio "
        f"{s.ratio_model_vs_null:.2f}  (target >= 0.7)",
        f"range over rounds: (1) {_span(s.ratio_ranges[0])}  (2) {_span(s.ratio_ranges[1])}  "
        f"(3) {_span(s.ratio_ranges[2])}",
        f"per server CPU-second (what the ratios would be on an otherwise idle core): "
        f"(1) {s.cpu_ratio_served_vs_in_process:.2f}  (2) {s.cpu_ratio_batching_vs_none:.2f}  "
        f"(3) {s.cpu_ratio_model_vs_null:.2f}",
        f"median of {s.rounds} round(s) of {s.duration_s:.0f} s phases; server cpu {s.server_cpu} "
        f"({s.server_kind} server, {s.device}: {s.device_name}), client cpu {s.client_cpu}; errors {s.errors}, "
        f"wrong answers {s.wrong_answers}",
    ])


def _by_kind(*columns: dict[str, float]) -> str:
    kinds = sorted({kind for column in columns for kind in column})
    if not kinds:
        return "not measured (no /proc)"
    return ", ".join(f"{kind} " + " / ".join(f"{c.get(kind, 0.0):,.0f}" for c in columns) for kind in kinds)


def _span(bounds) -> str:
    return f"{bounds[0]:.2f}-{bounds[1]:.2f}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m loadtest.benchmarks.server", description=__doc__.splitlines()[0])
    p.add_argument("--model_base_path", default="models/mnist")
    p.add_argument("--samples", default="", help="npz with `images` (default: random pixels)")
    p.add_argument("--server_cpu", default="0")
    p.add_argument("--client_cpu", default="1")
    p.add_argument("--warmup_s", type=float, default=1.0)
    p.add_argument("--duration_s", type=float, default=4.0)
    p.add_argument("--rounds", type=int, default=3, help="rounds of all phases; ratios are their medians")
    p.add_argument("--output", default="", help="append the summary as one JSON line to this file")
    # Internal: one measurement in a pinned child process.
    p.add_argument("--_in_process", default="", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    return p


def run(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args._in_process:
        result = _in_process(args._in_process, args.batch, args.samples or None, args.warmup_s, args.duration_s)
        print(json.dumps(asdict(result)))
        return 0
    if not Path(args.model_base_path).is_dir():
        raise ValueError(f"--model_base_path {args.model_base_path} is not a directory (run `make export` first)")
    # The load client is this process: pin it (and every thread it starts later) to the client core.
    os.sched_setaffinity(0, {int(c) for c in args.client_cpu.split(",")})
    summary = run_bench(args)
    print(format_summary(summary), flush=True)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        with open(args.output, "a") as out:
            out.write(json.dumps(asdict(summary)) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(argv)
    except (ValueError, RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"loadtest.benchmarks.server: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The server bench's load client: timed gRPC load on one server, and a check of its answers.

`load` runs `concurrency` callers on one grpc.aio loop, sending pre-serialized requests as raw
bytes (no client-side proto work), and reads the server's CPU time (in all and by kind of thread)
and its metrics page around the measured window.

Not for: the load test's client (`loadtest.load.client`, used by Locust) or choosing phases
(`loadtest.benchmarks.serving_path.overhead`).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np

from loadtest.benchmarks.serving_path.bench_records import LoadResult, cpu_used
from serving.deploy.process import ServerHandle, process_cpu_s, thread_cpu_s
from serving.protocol.names import PREDICT_METHOD

MAX_MESSAGE_BYTES = 64 << 20
CALL_TIMEOUT_S = 30
CHECKED_ROWS = 64  # rows of the samples file whose served classes are compared


def measure(server: ServerHandle, payloads: list[bytes], concurrency: int, batch: int, warmup_s: float,
            duration_s: float) -> LoadResult:
    """One phase against `server`: warm-up, then `duration_s` measured."""
    return asyncio.run(load(server.grpc_target, payloads, concurrency, warmup_s, duration_s, batch,
                            server.proc.pid, server.rest_url))


async def load(target: str, payloads: list[bytes], concurrency: int, warmup_s: float,
               duration_s: float, batch: int, server_pid: int | None = None, rest_url: str = "") -> LoadResult:
    """`concurrency` callers cycling through `payloads`; latencies of the calls inside the window count."""
    import grpc

    channel = grpc.aio.insecure_channel(target, options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                                                         ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)])
    call = channel.unary_unary(PREDICT_METHOD)  # bytes in, bytes out: no client-side proto work
    start = time.perf_counter()
    window = (start + warmup_s, start + warmup_s + duration_s)
    latencies: list[float] = []
    outcomes: list[bool] = []
    callers = (_caller(call, payloads, i, concurrency, window, latencies, outcomes) for i in range(concurrency))
    server_side = asyncio.create_task(_server_side(server_pid, rest_url, window))
    await asyncio.gather(*callers)
    cpu_s, batch_mean, thread_cpu = await server_side
    await channel.close()
    return _result(latencies, outcomes.count(False), batch, duration_s, cpu_s, batch_mean, thread_cpu)


async def _caller(call, payloads: list[bytes], first: int, stride: int, window: tuple[float, float],
                  latencies: list[float], outcomes: list[bool]) -> None:
    """Send back to back until the window ends; record the calls that began and ended inside it."""
    import grpc

    measure_from, stop_at = window
    n = first
    while (sent := time.perf_counter()) < stop_at:
        try:
            await call(payloads[n % len(payloads)], timeout=CALL_TIMEOUT_S)
            ok = True
        except grpc.aio.AioRpcError:
            ok = False
        done = time.perf_counter()
        if sent >= measure_from and done <= stop_at:
            latencies.append(done - sent)
            outcomes.append(ok)
        n += stride


async def _server_side(server_pid: int | None, rest_url: str,
                       window: tuple[float, float]) -> tuple[float, float | None, dict[str, float]]:
    """CPU seconds the server process used inside the window (in all and by kind of thread), and the
    mean batch size its metrics page reports for the same window."""
    if server_pid is None:
        return 0.0, None, {}
    from loadtest.measure import scrape

    measure_from, stop_at = window
    await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
    before, threads_before = process_cpu_s(server_pid), thread_cpu_s(server_pid)
    metrics_before = await asyncio.to_thread(scrape.scrape, rest_url) if rest_url else None
    await asyncio.sleep(max(0.0, stop_at - time.perf_counter()))
    after, threads_after = process_cpu_s(server_pid), thread_cpu_s(server_pid)
    metrics_after = await asyncio.to_thread(scrape.scrape, rest_url) if rest_url else None
    batch_mean = scrape.cell_figures(metrics_before, metrics_after).batch_size_mean
    return after - before, batch_mean, cpu_used(threads_before, threads_after)


def _result(latencies: list[float], errors: int, batch: int, duration_s: float, cpu_s: float,
            batch_mean: float | None, thread_cpu: dict[str, float]) -> LoadResult:
    lat_ms = np.array(latencies) * 1000 if latencies else np.zeros(1)
    ok_requests = len(latencies) - errors
    return LoadResult(ok_requests, errors, ok_requests * batch, duration_s,
                      float(np.percentile(lat_ms, 50)), float(np.percentile(lat_ms, 99)), cpu_s, batch_mean,
                      thread_cpu)


def wrong_answers(target: str, samples: Path | None, model: str = "mnist") -> int:
    """Rows whose served class differs from the exporter's own prediction (0 when no samples file)."""
    if not samples:
        return 0
    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from serving.protocol.tensors import from_numpy, to_numpy

    data = np.load(samples)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.inputs["images"].CopyFrom(from_numpy(data["images"][:CHECKED_ROWS], tensor_content=True))
    with grpc.insecure_channel(target) as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=60)
    return int((to_numpy(response.outputs["classes"]) != data["expected_classes"][:CHECKED_ROWS]).sum())

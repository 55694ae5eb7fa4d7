"""Per-request phases: the clock's arithmetic, the phase histograms, and a real server whose phases sum to the
request latency it records, with batching off and on."""

from __future__ import annotations

import json
import re
import threading
import urllib.request

import numpy as np
import pytest

from serving.deploy.process import start_server
from serving.protocol.names import REQUEST_LATENCY, REQUEST_PHASE_LATENCY, REQUEST_PHASES
from serving.server.handling.batching import BatchScheduler
from serving.server.handling.batching_options import BatchingOptions
from serving.server.handling.metrics import (
    COMPUTE_INFER,
    COMPUTE_INPUT,
    DECODE,
    DELIVER,
    ENCODE,
    QUEUE,
    VALIDATE,
    BatchTiming,
    PhaseClock,
    PhaseHistograms,
)
from serving.server.runtimes.model_spec import Computed
from tests.support.batching import write_batching_file
from tests.support.grpc import predict_request, stub_for
from tests.support.metrics import metrics_page


def test_phases_sum_to_the_clocks_total_unbatched():
    clock = PhaseClock()
    clock.lap(DECODE)
    clock.lap(VALIDATE)
    clock.computed(Computed({}, 1e-6, 2e-6, 0.0))
    clock.lap(ENCODE)
    d = clock.durations
    assert d[COMPUTE_INPUT] == 1e-6 and d[COMPUTE_INFER] == 2e-6
    assert d[QUEUE] == d[DELIVER] == 0.0
    assert sum(d) == pytest.approx(clock.total_s(), abs=1e-12)


def test_a_batch_timing_splits_into_queue_assemble_compute_and_deliver():
    clock = PhaseClock()
    clock.last = clock.started + 1.0  # decode + validate took 1 s
    clock.durations[VALIDATE] = 1.0
    timing = BatchTiming(started=clock.started + 3.0, assembled=clock.started + 3.5, input_s=0.25, infer_s=1.0,
                         computed=clock.started + 5.0)
    clock.batched(timing)
    d = dict(zip(REQUEST_PHASES, clock.durations))
    assert d["queue"] == pytest.approx(2.0) and d["assemble"] == pytest.approx(0.5)
    assert d["compute_input"] == 0.25 and d["compute_infer"] == 1.0 and d["compute_output"] == pytest.approx(0.25)
    assert d["deliver"] == pytest.approx(clock.last - (clock.started + 5.0))
    assert sum(clock.durations) == pytest.approx(clock.total_s(), abs=1e-9)


def test_phase_histograms_count_every_phase_and_sum_in_microseconds():
    histograms = PhaseHistograms([1.0, 10.0, 100.0])
    histograms.observe("m", "Predict", [5e-6] * len(REQUEST_PHASES))
    histograms.observe("m", "Predict", [50e-6] * len(REQUEST_PHASES))
    family = next(histograms.collect())
    samples = {(s.name, s.labels["phase"], s.labels.get("le")): s.value for s in family.samples}
    name = REQUEST_PHASE_LATENCY
    assert samples[(name + "_bucket", "decode", "1.0")] == 0
    assert samples[(name + "_bucket", "decode", "10.0")] == 1
    assert samples[(name + "_bucket", "encode", "+Inf")] == 2
    assert samples[(name + "_count", "queue", None)] == 2
    assert samples[(name + "_sum", "queue", None)] == pytest.approx(55.0)


def test_the_scheduler_hands_each_task_its_batchs_compute_phases():
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, batch_timeout_micros=1000, num_batch_threads=1),
                               lambda inputs: Computed({"y": inputs["x"] * 2}, 0.001, 0.002, 0.0))
    try:
        task = scheduler.submit({"x": np.ones((2, 1), np.float32)}, 2)
        assert task.result(timeout=5)["y"].tolist() == [[2.0], [2.0]]
        timing = task.timing
        assert timing is not None and timing.input_s == 0.001 and timing.infer_s == 0.002
        assert task.enqueued_s <= timing.started <= timing.assembled <= timing.computed
    finally:
        scheduler.stop()


# --- a real server (null backend): the page's phase sums against its request_latency sums -------------------

def sample_sum(page: str, name: str, labels: dict[str, str]) -> float:
    """Sum of the `name` samples whose labels include `labels`."""
    total = 0.0
    for line in page.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line[len(name):line.rindex("}")]))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def phase_sums(page: str, api: str) -> dict[str, float]:
    return {p: sample_sum(page, REQUEST_PHASE_LATENCY + "_sum", {"API": api, "phase": p}) for p in REQUEST_PHASES}


def send_requests(server, images: np.ndarray, count: int, threads: int = 4) -> None:
    """`count` gRPC Predicts from `threads` callers, and `count` REST predicts from one."""
    stub = stub_for(server)

    def grpc_caller() -> None:
        for _ in range(count // threads):
            stub.Predict(predict_request(images), timeout=30)

    callers = [threading.Thread(target=grpc_caller) for _ in range(threads)]
    for caller in callers:
        caller.start()
    body = json.dumps({"instances": images.tolist()}).encode()
    for _ in range(count):
        request = urllib.request.Request(f"{server.rest_url}/v1/models/mnist:predict", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            assert reply.status == 200
    for caller in callers:
        caller.join()


def assert_phases_sum_to_request_latency(page: str) -> dict[str, dict[str, float]]:
    sums = {}
    for api, entrypoint in (("Predict", "GRPC"), ("predict", "REST")):
        latency = sample_sum(page, REQUEST_LATENCY + "_sum", {"API": api, "entrypoint": entrypoint})
        count = sample_sum(page, REQUEST_LATENCY + "_count", {"API": api, "entrypoint": entrypoint})
        phases = phase_sums(page, api)
        assert latency > 0 and sum(phases.values()) == pytest.approx(latency, rel=0.02), (api, phases, latency)
        for phase in REQUEST_PHASES:  # every OK request observes every phase
            assert sample_sum(page, REQUEST_PHASE_LATENCY + "_count", {"API": api, "phase": phase}) == count
        sums[api] = phases
    return sums


@pytest.mark.integration
def test_phases_sum_to_request_latency_without_batching(exported_model, samples):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--device_floor_s", "0.2", backend="null") as server:
        send_requests(server, samples["images"][:3], 20)
        sums = assert_phases_sum_to_request_latency(metrics_page(server))
    for phases in sums.values():
        assert phases["queue"] == phases["assemble"] == phases["deliver"] == 0.0
        assert phases["decode"] > 0 and phases["validate"] > 0 and phases["encode"] > 0
        assert phases["compute_infer"] > 0


@pytest.mark.integration
def test_phases_sum_to_request_latency_with_batching(exported_model, samples, tmp_path):
    params = write_batching_file(tmp_path / "batching.txt", max_batch_size=8, batch_timeout_micros=2000,
                                 num_batch_threads=1, max_enqueued_batches=100, allowed_batch_sizes=[4, 8])
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--enable_batching", "--batching_parameters_file", str(params), "--device_floor_s", "0.2",
                      backend="null") as server:
        send_requests(server, samples["images"][:1], 20)
        sums = assert_phases_sum_to_request_latency(metrics_page(server))
    for phases in sums.values():
        assert phases["queue"] > 0 and phases["assemble"] > 0 and phases["deliver"] > 0

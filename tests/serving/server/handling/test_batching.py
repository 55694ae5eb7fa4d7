"""Batch scheduler semantics (TF Serving's), first on the scheduler itself, then on a running server."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest

from serving.deploy.process import start_server
from serving.protocol.tensors import to_numpy
from serving.server.handling.batching import QUEUE_FULL_MESSAGE, BatchScheduler, padded_size
from serving.server.handling.batching_options import BatchingOptions, check_options
from serving.server.handling.errors import ServingError
from tests.support.batching import write_batching_file
from tests.support.grpc import predict_request, rpc_error, stub_for
from tests.support.metrics import metric_value, metrics_page
from tests.support.waiting import wait_for

pytestmark = pytest.mark.untimed  # end-to-end where marked, and times nothing


class Recorder:
    """A fake model: doubles its input, remembers every batch it was given, optionally blocks."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.batches: list[np.ndarray] = []
        self.gate = gate

    def __call__(self, inputs):
        if self.gate is not None:
            assert self.gate.wait(10)
        self.batches.append(inputs["x"].copy())
        return {"y": inputs["x"] * 2}


def rows(start: int, count: int) -> dict[str, np.ndarray]:
    return {"x": np.arange(start, start + count, dtype=np.float32).reshape(count, 1)}


@pytest.fixture
def make_scheduler():
    made = []

    def make(recorder, **options):
        scheduler = BatchScheduler(BatchingOptions(**{"num_batch_threads": 1, **options}), recorder)
        made.append(scheduler)
        return scheduler

    yield make
    for scheduler in made:
        scheduler.stop()


def test_concurrent_tasks_merge_into_one_call_and_split_back(make_scheduler):
    model = Recorder()
    scheduler = make_scheduler(model, max_batch_size=8, batch_timeout_micros=200_000)
    futures = [scheduler.submit(rows(10 * i, 1 + i % 2), 1 + i % 2) for i in range(5)]
    results = [f.result(timeout=5) for f in futures]
    assert [len(b) for b in model.batches] == [7]
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result["y"], rows(10 * i, 1 + i % 2)["x"] * 2)


def test_batch_is_padded_to_next_allowed_size_with_first_row_of_last_task(make_scheduler):
    model = Recorder()
    scheduler = make_scheduler(model, max_batch_size=8, batch_timeout_micros=20_000, allowed_batch_sizes=(4, 8))
    futures = [scheduler.submit(rows(10 * i, 1), 1) for i in range(3)]
    results = [f.result(timeout=5) for f in futures]
    assert [len(b) for b in model.batches] == [4]
    assert model.batches[0][3, 0] == 20.0  # padding: first row of the last task
    assert [r["y"][0, 0] for r in results] == [0.0, 20.0, 40.0]
    assert padded_size(5, (4, 8)) == 8 and padded_size(3, ()) == 3


def test_full_batch_runs_without_waiting_for_the_timeout(make_scheduler):
    scheduler = make_scheduler(Recorder(), max_batch_size=4, batch_timeout_micros=30_000_000)
    started = time.monotonic()
    scheduler.submit(rows(0, 4), 4).result(timeout=5)
    assert time.monotonic() - started < 5


def test_open_batch_runs_after_the_timeout(make_scheduler):
    model = Recorder()
    scheduler = make_scheduler(model, max_batch_size=100, batch_timeout_micros=30_000)
    started = time.monotonic()
    scheduler.submit(rows(0, 1), 1).result(timeout=5)
    assert time.monotonic() - started >= 0.025
    assert [len(b) for b in model.batches] == [1]


def test_large_task_is_split_across_batches_and_reassembled(make_scheduler):
    model = Recorder()
    scheduler = make_scheduler(model, max_batch_size=10, enable_large_batch_splitting=True,
                               max_execution_batch_size=4, allowed_batch_sizes=(2, 4))
    result = scheduler.submit(rows(0, 10), 10).result(timeout=5)
    assert sorted(len(b) for b in model.batches) == [2, 4, 4]
    np.testing.assert_array_equal(result["y"], rows(0, 10)["x"] * 2)


def test_task_over_max_batch_size_is_invalid_argument_without_splitting(make_scheduler):
    scheduler = make_scheduler(Recorder(), max_batch_size=8)
    with pytest.raises(ServingError) as info:
        scheduler.submit(rows(0, 9), 9)
    assert info.value.code == "INVALID_ARGUMENT"
    assert info.value.message == "Task size 9 is larger than maximum input batch size 8"


def test_full_queue_is_unavailable_and_queued_tasks_still_finish(make_scheduler):
    gate = threading.Event()
    model = Recorder(gate)
    scheduler = make_scheduler(model, max_batch_size=2, max_enqueued_batches=2)
    running = scheduler.submit(rows(0, 2), 2)  # taken by the only batch thread, which blocks
    wait_for(lambda: not scheduler._batches, 5, "the batch thread to take the first batch", poll_s=0.01)
    queued = [scheduler.submit(rows(10, 2), 2), scheduler.submit(rows(20, 2), 2)]
    with pytest.raises(ServingError) as info:
        scheduler.submit(rows(30, 1), 1)
    assert info.value.code == "UNAVAILABLE" and info.value.message.startswith(QUEUE_FULL_MESSAGE)
    gate.set()
    assert [f.result(timeout=5)["y"][0, 0] for f in [running, *queued]] == [0.0, 20.0, 40.0]


def test_model_error_reaches_every_task_of_the_batch(make_scheduler):
    def broken(inputs):
        raise RuntimeError("model broke")

    scheduler = make_scheduler(broken, max_batch_size=4, batch_timeout_micros=20_000)
    futures = [scheduler.submit(rows(i, 1), 1) for i in range(2)]
    for future in futures:
        with pytest.raises(RuntimeError, match="model broke"):
            future.result(timeout=5)


def test_stop_processes_what_is_queued():
    model = Recorder()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, batch_timeout_micros=30_000_000,
                                               num_batch_threads=1), model)
    future = scheduler.submit(rows(0, 3), 3)
    scheduler.stop()
    assert future.result(timeout=1)["y"].shape == (3, 1)
    with pytest.raises(ServingError, match="shutting down"):
        scheduler.submit(rows(0, 1), 1)


@pytest.mark.parametrize("options, message", [
    (dict(max_batch_size=8, allowed_batch_sizes=(2, 4)), "must match max_batch_size; last entry was 4; expected 8"),
    (dict(max_batch_size=8, allowed_batch_sizes=(4, 2, 8)), "monotonically increasing"),
    (dict(max_batch_size=8, enable_large_batch_splitting=True, max_execution_batch_size=4,
          allowed_batch_sizes=(2, 8)), "equal to max_execution_batch_size"),
    (dict(num_batch_threads=0), "num_batch_threads must be positive"),
    (dict(max_enqueued_batches=0), "max_enqueued_batches must be positive"),
])
def test_parameters_tf_serving_refuses_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        check_options(BatchingOptions(**options))


# --- against a running server -------------------------------------------------------------------


@pytest.mark.integration
def test_server_merges_concurrent_requests_and_pads_to_allowed_sizes(batching_server, samples):
    stub = stub_for(batching_server)
    images, expected = samples["images"][:24], samples["expected_classes"][:24]
    before = metrics_page(batching_server)
    runs_before = metric_value(before, ":tensorflow:serving:batching_session:processed_batch_size_count")

    def one(i):
        response = stub.Predict(predict_request(images[i:i + 1]), timeout=30)
        return int(to_numpy(response.outputs["classes"])[0])

    with ThreadPoolExecutor(24) as pool:
        answers = list(pool.map(one, range(24)))
    assert answers == expected.tolist()
    page = metrics_page(batching_server)
    runs = metric_value(page, ":tensorflow:serving:batching_session:processed_batch_size_count") - runs_before
    assert 1 <= runs < 24, "24 concurrent one-row requests should share model calls"
    padded_sizes = {line.split('execution_batch_size="')[1].split('"')[0]
                    for line in page.splitlines()
                    if line.startswith(":tensorflow:serving:batching_session:padding_size_count")}
    assert padded_sizes and padded_sizes <= {"4", "8", "16", "32"}
    assert "queuing_latency_count" in page


@pytest.mark.integration
def test_server_refuses_request_larger_than_max_batch_size(batching_server, samples):
    error = rpc_error(stub_for(batching_server).Predict, predict_request(samples["images"][:33]), timeout=30)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Task size 33 is larger than maximum input batch size 32" in error.details()


@pytest.mark.integration
def test_server_splits_large_requests(exported_model, samples, tmp_path):
    params = write_batching_file(tmp_path / "split.txt", max_batch_size=64, batch_timeout_micros=1000,
                                 enable_large_batch_splitting=True, max_execution_batch_size=16,
                                 allowed_batch_sizes=[8, 16], num_batch_threads=1)
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--enable_batching", "--batching_parameters_file", str(params), "--tensor_content") as server:
        response = stub_for(server).Predict(predict_request(samples["images"][:40]), timeout=30)
        assert response.outputs["classes"].tensor_content  # --tensor_content encoding
        np.testing.assert_array_equal(to_numpy(response.outputs["classes"]), samples["expected_classes"][:40])
        page = metrics_page(server)
    assert metric_value(page, ":tensorflow:serving:batching_session:processed_batch_size_count") == 3
    assert metric_value(page, ":tensorflow:serving:batching_session:processed_batch_size_sum") == 16 + 16 + 8


@pytest.mark.integration
def test_server_sheds_with_unavailable_when_queue_is_full(exported_model, tmp_path):
    params = write_batching_file(tmp_path / "shed.txt", max_batch_size=1, batch_timeout_micros=0,
                                 num_batch_threads=1, max_enqueued_batches=1)
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--enable_batching", "--batching_parameters_file", str(params), "--null_delay_ms", "300",
                      backend="null") as server:
        stub = stub_for(server)

        def one(_):
            try:
                stub.Predict(predict_request(np.zeros((1, 784), np.float32)), timeout=30)
                return "OK", ""
            except grpc.RpcError as exc:
                return exc.code().name, exc.details()

        with ThreadPoolExecutor(6) as pool:
            outcomes = list(pool.map(one, range(6)))
        page = metrics_page(server)
    codes = [code for code, _ in outcomes]
    assert "OK" in codes and "UNAVAILABLE" in codes, outcomes
    assert set(codes) <= {"OK", "UNAVAILABLE"}
    assert all(details.startswith(QUEUE_FULL_MESSAGE) for code, details in outcomes if code == "UNAVAILABLE")
    assert metric_value(page, ":tensorflow:serving:request_count", 'model_name="mnist",status="UNAVAILABLE"') == \
        codes.count("UNAVAILABLE")


def test_variable_length_inputs_are_padded_only_when_asked(make_scheduler):
    model = Recorder()
    padded = make_scheduler(model, max_batch_size=8, batch_timeout_micros=50_000, pad_variable_length_inputs=True)
    short = {"x": np.full((1, 2), 7, np.float32)}
    long = {"x": np.arange(3, dtype=np.float32).reshape(1, 3) + 1}
    a, b = padded.submit(short, 1), padded.submit(long, 1)
    assert a.result(timeout=5)["y"].tolist() == [[14, 14, 14]]  # padded with its own first element
    assert b.result(timeout=5)["y"].tolist() == [[2, 4, 6]]
    strict = make_scheduler(Recorder(), max_batch_size=8, batch_timeout_micros=50_000)
    c, d = strict.submit(short, 1), strict.submit(long, 1)
    for future in (c, d):
        with pytest.raises(ServingError, match="different shapes and padding is turned off"):
            future.result(timeout=5)

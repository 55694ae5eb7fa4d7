"""The device floor: its arithmetic and schema, and the null backend's planted floors as a real server reports
them (gRPC metadata, REST metadata, the metrics page), or says it did not measure one."""

from __future__ import annotations

import json
import os
import threading
import urllib.request

import grpc
import pytest
from google.protobuf import json_format, struct_pb2
from tensorflow_serving.apis import get_model_metadata_pb2, prediction_service_pb2_grpc

from serving.deploy.process import start_server
from serving.protocol.names import DEVICE_FLOOR_IMAGES, DEVICE_FLOOR_LATENCY, DEVICE_ROUND_TRIP
from serving.server.handling.batching_options import BatchingOptions
from serving.server.handling.floor import (
    NO_BATCHING_SIZES,
    BatchFloor,
    DeviceFloor,
    batch_floor,
    callers_for,
    floor_batch_sizes,
    floor_of,
    measure_floor,
    time_calls_at_once,
)
from serving.server.runtimes import load_model, runtime_of
from serving.server.runtimes.model_spec import BackendOptions
from tests.support import timing
from tests.support.metrics import metric_value, metrics_page

SCHEMA_KEYS = {"source", "device", "runtime", "batches", "round_trip_us", "round_trip_note", "budget_s",
               "device_round_trip_us", "device_round_trip_note", "callers"}
BATCH_KEYS = {"batch_size", "latency_us", "latency_p99_us", "images_per_s", "runs"}


def test_batch_sizes_follow_the_batching_configuration():
    assert floor_batch_sizes(None) == NO_BATCHING_SIZES == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    assert floor_batch_sizes(BatchingOptions(max_batch_size=32, allowed_batch_sizes=(4, 8, 32))) == (4, 8, 32)
    assert floor_batch_sizes(BatchingOptions(max_batch_size=16)) == (1, 2, 4, 8, 16)
    assert floor_batch_sizes(BatchingOptions(max_batch_size=12)) == (1, 2, 4, 8, 12)


def test_a_batch_floor_is_median_p99_and_images_per_second():
    row = batch_floor(4, [0.002, 0.001, 0.003, 0.001, 0.010])
    assert row == BatchFloor(4, 2000.0, 10_000.0, 2000.0, 5)


class CallsOnCoresOfTheirOwn:
    """Calls that each take `call_s` on their own thread's clock (a clock per thread: callers at once, each as on a
    core of its own, however this machine runs them). With `meet`, each call first waits until that many threads
    are in a call, so callers run one after the other would never meet (a 60 s deadline breaks the wait)."""

    def __init__(self, call_s: float, meet: int = 1) -> None:
        self.call_s, self.local = call_s, threading.local()
        self.meeting = threading.Barrier(meet, timeout=60) if meet > 1 else None

    def clock(self) -> float:
        return getattr(self.local, "now", 0.0)

    def call(self) -> None:
        if self.meeting is not None:
            self.meeting.wait()
        self.local.now = self.clock() + self.call_s


def test_callers_at_once_give_their_images_together_over_the_wall_time():
    # four callers, all in their calls at once, 0.25 s a call: each makes 4 calls in its 1 s, 16 over 1 s of wall
    calls = CallsOnCoresOfTheirOwn(0.25, meet=4)
    times, wall = time_calls_at_once(calls.call, 4, 1.0, clock=calls.clock)
    assert times == [0.25] * 16 and wall == 1.0
    calls = CallsOnCoresOfTheirOwn(0.25)
    row = floor_of(2, calls.call, 4, 2.0, clock=calls.clock)  # half the budget alone, half with all four at once
    # latency: one caller's (4 calls of 0.25 s); images/s: all four's (2 images x 16 calls over 1 s); runs: 4 + 16
    assert row == BatchFloor(2, 250_000.0, 250_000.0, 32.0, 20)


def test_a_cpu_has_a_caller_per_core_of_its_affinity_a_gpu_one():
    assert callers_for("cpu") == len(os.sched_getaffinity(0)) and callers_for("gpu") == 1


def test_the_dict_form_has_the_agreed_schema_and_reads_back():
    floor = DeviceFloor("embedded server at start, after warm-up", "cpu", "jax", (BatchFloor(2, 10.0, 12.0, 2e5, 9),),
                        3.5, "jax: ...", 2.0)
    data = floor.as_dict()
    assert set(data) == SCHEMA_KEYS and set(data["batches"][0]) == BATCH_KEYS
    assert DeviceFloor.from_dict(json.loads(json.dumps(data))) == floor


@pytest.mark.integration
def test_measure_floor_in_process_on_the_null_backend(exported_model):
    model = load_model("null", "mnist", 1, exported_model.model_dir, BackendOptions(null_delay_ms=2))
    trip, note = runtime_of("null").round_trip("cpu")
    assert trip is None and note.startswith("not applicable")
    floor = measure_floor(model, "serving_default", (1, 8), 0.2, trip, runtime="none (null backend)",
                          round_trip_note=note)
    assert [b.batch_size for b in floor.batches] == [1, 8] and all(b.runs >= 1 for b in floor.batches)
    # 2 ms +- 10%: never under it (the delay is a hold to its deadline); over it where a slow host wakes it late
    assert all(b.latency_us >= 1800 for b in floor.batches), floor.batches
    timing.at_most("floor latency (us)", max(b.latency_us for b in floor.batches), 2200, floor.batches)
    assert floor.round_trip_us is None and floor.round_trip_note == note


def rest_server_info(server) -> dict:
    with urllib.request.urlopen(f"{server.rest_url}/v1/models/mnist/metadata", timeout=30) as reply:
        return json.loads(reply.read())["server_info"]


def served_floor(server) -> tuple[dict, dict]:
    """The device floor from REST metadata and from gRPC GetModelMetadata's server_info."""
    stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(server.grpc_target))
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["server_info"])
    request.model_spec.name = "mnist"
    info = struct_pb2.Struct()
    stub.GetModelMetadata(request, timeout=30).metadata["server_info"].Unpack(info)
    return rest_server_info(server)["device_floor"], json_format.MessageToDict(info)["device_floor"]


@pytest.mark.integration
def test_null_backend_with_a_10_ms_delay_has_a_10_ms_floor_everywhere(exported_model):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--null_delay_ms", "10", backend="null") as server:
        rest_floor, grpc_floor = served_floor(server)
        page = metrics_page(server)
    assert DeviceFloor.from_dict(grpc_floor) == DeviceFloor.from_dict(rest_floor)
    assert set(rest_floor) == SCHEMA_KEYS and rest_floor["source"] == "embedded server at start, after warm-up"
    assert rest_floor["runtime"] == "none (null backend)" and rest_floor["device"] == "cpu"
    assert rest_floor["round_trip_us"] is None and "not applicable" in rest_floor["round_trip_note"]
    assert [b["batch_size"] for b in rest_floor["batches"]][:3] == [1, 2, 4]
    callers = rest_floor["callers"]
    assert callers == len(os.sched_getaffinity(0))  # one per core the server was given, all at once
    for row in rest_floor["batches"]:  # the null backend is one device: its callers queue for it
        # 10 ms and 100 calls/s +- 10%: a 10 ms delay is never shorter, nor its calls more; a slow host wakes the
        # delay late, making the call longer and the calls fewer
        assert row["latency_us"] >= 9000 and row["images_per_s"] <= 110 * row["batch_size"], row
        timing.at_most("floor latency (us)", row["latency_us"], 11_000, row)
        timing.at_least("floor images/s", row["images_per_s"], 90 * row["batch_size"], row)
        label = f'batch_size="{row["batch_size"]}"'
        assert metric_value(page, DEVICE_FLOOR_LATENCY, label) == pytest.approx(row["latency_us"])
        assert metric_value(page, DEVICE_FLOOR_IMAGES, label) == pytest.approx(row["images_per_s"])
    assert f"\n{DEVICE_ROUND_TRIP} " not in page  # not measured: absent, not zero


@pytest.mark.integration
def test_null_backend_without_delay_has_a_floor_of_microseconds(exported_model):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--device_floor_s", "0.5", backend="null") as server:
        floor = rest_server_info(server)["device_floor"]
    assert floor["budget_s"] == 0.5 and len(floor["batches"]) == 10
    batch_1 = floor["batches"][0]
    assert batch_1["batch_size"] == 1
    # a call that does nothing: its time is this machine's speed alone
    timing.holds("batch 1 floor latency < 500 us", batch_1["latency_us"] < 500, batch_1)
    timing.holds("batch 1 floor images/s > 2000", batch_1["images_per_s"] > 2000, batch_1)


@pytest.mark.untimed
@pytest.mark.integration
def test_device_floor_s_0_measures_nothing_and_says_so(exported_model):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--device_floor_s", "0", backend="null") as server:
        floor = rest_server_info(server)["device_floor"]
        page = metrics_page(server)
    assert floor["batches"] == [] and floor["round_trip_us"] is None and floor["budget_s"] == 0
    assert floor["round_trip_note"] == "not measured: --device_floor_s 0"
    assert f"{DEVICE_FLOOR_LATENCY}{{" not in page and f"\n{DEVICE_ROUND_TRIP} " not in page


def test_the_device_round_trip_comes_from_the_bundle_environment():
    from serving.server.handling.floor import DEVICE_ROUND_TRIP_ENV, DEVICE_ROUND_TRIP_NOTE_ENV, device_round_trip_given

    given = {DEVICE_ROUND_TRIP_ENV: "42.9", DEVICE_ROUND_TRIP_NOTE_ENV: "PyTorch 2.11: ones + 1"}
    assert device_round_trip_given(given) == (42.9, "PyTorch 2.11: ones + 1")
    assert device_round_trip_given({}) == (None, "")
    assert device_round_trip_given({DEVICE_ROUND_TRIP_ENV: "n/a"}) == (None, "")
    from loadtest.bundle import machine

    assert (machine.DEVICE_ROUND_TRIP_ENV, machine.DEVICE_ROUND_TRIP_NOTE_ENV) == (
        DEVICE_ROUND_TRIP_ENV, DEVICE_ROUND_TRIP_NOTE_ENV)
    assert machine.round_trip_env({"median_us": 42.9, "torch": "2.11", "what": "ones + 1"}) == given | {
        DEVICE_ROUND_TRIP_NOTE_ENV: "PyTorch 2.11: ones + 1"}
    assert machine.round_trip_env({"note": "no CUDA"}) == {}

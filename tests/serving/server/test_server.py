"""Server lifecycle: ready line, model config file, new versions, graceful shutdown, start-up errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

from serving.deploy.process import REPO, start_server
from serving.server.handling.model_source import ModelEntry, aspired_versions
from tests.support.batching import write_batching_file
from tests.support.grpc import predict_request, stub_for
from tests.support.waiting import wait_for

pytestmark = pytest.mark.untimed  # end-to-end where marked, and times nothing

READY = re.compile(r'^serving ready kind=embedded grpc=127\.0\.0\.1:\d+ rest=127\.0\.0\.1:\d+ model=\S+ version=\d+ '
                   r'device=(cpu|gpu) device_name="[^"]+" batching=(on|off) runtime="tensorflow" '
                   r'runtime_versions=tensorflow=\S+ workers=1$')


@pytest.mark.integration
def test_ready_line_has_the_agreed_form(plain_server, exported_model):
    assert READY.match(plain_server.ready_line), plain_server.ready_line
    assert plain_server.fields["model"] == "mnist" and plain_server.fields["version"] == str(exported_model.version)
    assert plain_server.fields["batching"] == "off" and plain_server.fields["device"] == "cpu"


def test_version_policies():
    on_disk = [1, 2, 5]
    assert aspired_versions(ModelEntry("m", REPO), on_disk) == [5]
    assert aspired_versions(ModelEntry("m", REPO, num_versions=2), on_disk) == [2, 5]
    assert aspired_versions(ModelEntry("m", REPO, policy="all"), on_disk) == [1, 2, 5]
    assert aspired_versions(ModelEntry("m", REPO, policy="specific", specific_versions=(2, 9)), on_disk) == [2]


def served_version(stub, images) -> int:
    return stub.Predict(predict_request(images), timeout=30).model_spec.version.value


@pytest.mark.integration
def test_config_file_and_new_version_picked_up_while_running(exported_model, samples, tmp_path):
    base = tmp_path / "mnist"
    shutil.copytree(exported_model.model_dir, base / "1")
    config = tmp_path / "models.config"
    config.write_text('model_config_list {\n  config {\n    name: "mnist"\n'
                      f'    base_path: "{base}"\n    model_platform: "tensorflow"\n'
                      '    version_labels { key: "stable" value: 1 }\n  }\n}\n')
    images = samples["images"][:2]
    with start_server("--model_config_file", str(config), "--file_system_poll_wait_seconds", "0.2") as server:
        stub = stub_for(server)
        assert served_version(stub, images) == 1
        labelled = predict_request(images)
        labelled.model_spec.version_label = "stable"
        assert stub.Predict(labelled, timeout=30).model_spec.version.value == 1
        with urllib.request.urlopen(server.rest_url + "/v1/models/mnist/labels/stable", timeout=10) as answer:
            assert json.load(answer)["model_version_status"][0]["version"] == "1"
        shutil.copytree(exported_model.model_dir, tmp_path / "staging")
        os.rename(tmp_path / "staging", base / "2")  # appears whole, as model_export writes versions
        wait_for(lambda: served_version(stub, images) == 2, 60, "version 2 to be picked up", poll_s=0.2)
        request = predict_request(images)
        request.model_spec.version.value = 1
        deadline = time.monotonic() + 30
        while True:  # version 1 is unloaded once 2 serves (latest-1 policy)
            try:
                stub.Predict(request, timeout=30)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.NOT_FOUND
                break
            assert time.monotonic() < deadline
            time.sleep(0.2)
        models = model_service_pb2_grpc.ModelServiceStub(grpc.insecure_channel(server.grpc_target))
        status_request = get_model_status_pb2.GetModelStatusRequest()
        status_request.model_spec.name = "mnist"
        versions = [s.version for s in models.GetModelStatus(status_request, timeout=30).model_version_status]
        assert versions == [2]


@pytest.mark.integration
def test_sigterm_finishes_in_flight_requests_and_exits_zero(exported_model):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--null_delay_ms", "250", backend="null") as server:
        stub = stub_for(server)
        calls = [stub.Predict.future(predict_request(np.zeros((1, 784), np.float32)), timeout=60) for _ in range(8)]
        calls[0].result()  # the first answer: all 8, sent before it, are in the server (one per 250 ms)
        server.proc.send_signal(signal.SIGTERM)
        try:
            late = wait_for(lambda: refusal(stub), 30, "the draining server to refuse new requests")
        except AssertionError as exc:  # what the server said, for a failure that a clean clone saw once
            raise AssertionError(f"{exc}; its log: {server.stderr_path.read_text()[-3000:]}") from exc
        results = [call.result() for call in calls]  # raises if any in-flight request was lost
        assert server.proc.wait(timeout=60) == 0
    assert all(r.outputs["scores"].float_val or r.outputs["scores"].tensor_content for r in results)
    assert late.code() in NOT_SERVED, late


# How a request sent to a draining server may end: refused, cancelled, or never answered. A clean clone's CI saw the
# third once (stop 74): a probe sent around the SIGTERM ran out its 10 s deadline while the 8 in-flight calls were
# answered and the server exited 0. Which of the three it gets depends on where gRPC's shutdown found it, a race of
# the host's timing, so the test asks only that it was not served.
NOT_SERVED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED)


def refusal(stub) -> grpc.RpcError | None:
    """The error a new Predict gets, or None if it is still served."""
    try:
        stub.Predict(predict_request(np.zeros((1, 784), np.float32)), timeout=10)
    except grpc.RpcError as exc:
        return exc
    return None


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "serving.server", "--port", "0", "--rest_api_port", "0", *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


@pytest.mark.integration
@pytest.mark.skipif(bool(tf.config.list_physical_devices("GPU")), reason="a GPU is visible here")
def test_gpu_without_gpu_fails_at_start_with_a_clear_message(exported_model):
    done = run_cli("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--device", "gpu")
    assert done.returncode == 2 and "serving ready" not in done.stdout
    assert last_line(done.stderr).startswith("serving: error: --device gpu: TensorFlow sees no GPU")


@pytest.mark.integration
def test_bad_batching_parameters_fail_at_start(exported_model, tmp_path):
    params = write_batching_file(tmp_path / "bad.txt", max_batch_size=64, allowed_batch_sizes=[8, 32])
    done = run_cli("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                   "--enable_batching", "--batching_parameters_file", str(params))
    assert done.returncode == 2
    assert last_line(done.stderr) == ("serving: error: Last entry in allowed_batch_sizes must match max_batch_size; "
                                      "last entry was 32; expected 64")


@pytest.mark.integration
def test_missing_model_fails_at_start(tmp_path):
    done = run_cli("--model_name", "mnist", "--model_base_path", str(tmp_path / "nothing"))
    assert done.returncode == 2
    assert "no servable version for model(s) mnist" in last_line(done.stderr)

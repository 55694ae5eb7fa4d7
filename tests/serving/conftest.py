"""Fixtures for the serving tests: real server processes on free ports, and gRPC helpers.

Servers are session-scoped where tests only read from them, so the whole set starts a
handful of processes (each costs a TensorFlow import) rather than one per test.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest
from google.protobuf import text_format
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from loadtest.sweep.scrape import METRICS_PATH
from serving.deploy.config import BatchingProfile
from serving.deploy.process import start_server
from serving.protocol.tensors import from_numpy


@pytest.fixture(scope="session")
def samples(exported_model) -> dict[str, np.ndarray]:
    with np.load(exported_model.samples_path) as data:
        return {k: data[k] for k in data.files}


def write_batching_file(path: Path, **fields) -> Path:
    """A BatchingParameters text proto, as TF Serving reads it, written by the project's own config code."""
    fields["allowed_batch_sizes"] = tuple(fields.get("allowed_batch_sizes", ()))
    profile = BatchingProfile(name=path.stem, enable_batching=True, **fields)
    path.write_text(text_format.MessageToString(profile.to_proto()))
    return path


@pytest.fixture(scope="session")
def plain_server(exported_model):
    """The real SavedModel, no batching."""
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path)) as server:
        yield server


@pytest.fixture(scope="session")
def batching_server(exported_model, tmp_path_factory):
    """The real SavedModel, batching with a long timeout and allowed sizes so merging is observable."""
    params = write_batching_file(tmp_path_factory.mktemp("batching") / "batching.txt",
                                 max_batch_size=32, batch_timeout_micros=50_000, num_batch_threads=1,
                                 max_enqueued_batches=100, allowed_batch_sizes=[4, 8, 16, 32])
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--enable_batching", "--batching_parameters_file", str(params)) as server:
        yield server


def stub_for(server) -> prediction_service_pb2_grpc.PredictionServiceStub:
    channel = grpc.insecure_channel(server.grpc_target, options=[("grpc.max_send_message_length", 256 << 20)])
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


def predict_request(images: np.ndarray, model: str = "mnist", signature: str = "", alias: str = "images",
                    tensor_content: bool = True) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    if signature:
        request.model_spec.signature_name = signature
    request.inputs[alias].CopyFrom(from_numpy(images, tensor_content=tensor_content))
    return request


def rpc_error(fn, *args, **kwargs) -> grpc.RpcError:
    """The RpcError a call raises (fails the test if it succeeds)."""
    with pytest.raises(grpc.RpcError) as info:
        fn(*args, **kwargs)
    return info.value


def metrics_page(server) -> str:
    """The server's Prometheus metrics page (`server` is anything with a `rest_url`)."""
    with urllib.request.urlopen(server.rest_url + METRICS_PATH, timeout=10) as reply:
        assert reply.status == 200
        return reply.read().decode()


def metric_value(page: str, name: str, labels: str = "") -> float:
    """Value of one sample line `name{labels} value` (labels as written, or none) on a metrics page."""
    prefix = f"{name}{{{labels}}} " if labels else f"{name} "
    for line in page.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {prefix.strip()!r} on the metrics page")

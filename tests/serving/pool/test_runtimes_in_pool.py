"""Every runtime starts with several frontends, TensorFlow installed, whatever `KERAS_BACKEND` says.

Each spawned child (a frontend, or the device owner when batching is on) is readied for its role before
anything in it imports TensorFlow, which imports Keras as it loads (`serving.pool.roles`). Real processes:
`--workers 2` with and without an owner, with no `KERAS_BACKEND` and with one that names another runtime;
every sample digit answered as the export's reference outputs say (classes exact, scores within 1e-4).
"""

from __future__ import annotations

import concurrent.futures as cf

import grpc
import numpy as np
import pytest
from tensorflow_serving.apis import prediction_service_pb2_grpc

from model_export.export import REFERENCE_FILE
from serving.deploy.process import start_server
from serving.protocol.tensors import to_numpy
from tests.support.grpc import predict_request

pytestmark = [pytest.mark.integration, pytest.mark.untimed]

ROWS_PER_REQUEST = 25
# A KERAS_BACKEND that names another runtime than the server's own.
CONFLICTING = {"savedmodel": "jax", "jax": "torch", "torch": "jax"}
RUNTIME_NAMES = {"savedmodel": "tensorflow", "jax": "jax", "torch": "keras-torch"}


def _answers(server, images: np.ndarray) -> dict[str, np.ndarray]:
    """Every image answered, in requests of ROWS_PER_REQUEST over two connections of their own (both frontends)."""
    stubs = [prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(server.grpc_target, options=[("grpc.use_local_subchannel_pool", 1)]))
        for _ in range(2)]
    starts = range(0, len(images), ROWS_PER_REQUEST)

    def ask(index: int, start: int):
        reply = stubs[index % 2].Predict(predict_request(images[start:start + ROWS_PER_REQUEST]), timeout=60)
        return {name: to_numpy(reply.outputs[name]) for name in ("classes", "scores")}

    with cf.ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(ask, range(len(starts)), starts))
    return {name: np.concatenate([p[name] for p in parts]) for name in ("classes", "scores")}


@pytest.mark.parametrize("keras_env", ["unset", "conflicting"])
@pytest.mark.parametrize("batching", [False, True], ids=["frontends-run-it", "owner-runs-it"])
@pytest.mark.parametrize("backend", ["savedmodel", "jax", "torch"])
def test_each_runtime_serves_every_sample_digit_from_two_frontends(exported_model, monkeypatch, backend, batching,
                                                                     keras_env):
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    env = {"KERAS_BACKEND": CONFLICTING[backend]} if keras_env == "conflicting" else {}
    flags = ["--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--workers", "2",
             "--device_floor_s", "0"] + (["--enable_batching"] if batching else [])
    reference = np.load(exported_model.model_dir / REFERENCE_FILE)
    images = reference["input.images"]
    assert len(images) == 500  # every sample digit the export wrote
    with start_server(*flags, backend=backend, env=env, timeout_s=240) as server:
        assert server.fields["runtime"] == RUNTIME_NAMES[backend] and server.fields["workers"] == "2"
        assert server.fields["batching"] == ("on" if batching else "off")
        got = _answers(server, images)
        log = server.stderr_path.read_text()
    assert np.array_equal(got["classes"], reference["output.classes"])
    assert np.abs(got["scores"] - reference["output.scores"]).max() <= 1e-4
    assert "Keras with the" not in log and "Traceback" not in log, log[-3000:]

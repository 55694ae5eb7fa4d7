"""A runtime is one module and one registry line: a fifth, trivial runtime registered in this process serves a
Predict from a real single-process server (gRPC on a real port), and the server names it.

The runtime, `first-pixels`, reads the signatures from the SavedModel and answers each image's first ten pixels
as its scores and their argmax as its class, so the answer is known exactly from the request."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from serving.protocol.runtime_names import RuntimeName
from serving.protocol.tensors import to_numpy
from serving.server.runtimes import RUNTIMES, Runtime, register, runtime_of
from tests.support.grpc import predict_request, stub_for

pytestmark = [pytest.mark.integration, pytest.mark.untimed]


def _load(name: str, version: int, path: Path, options):
    from serving.server.runtimes.model_spec import LoadedModel, read_signature_defs, signature_specs

    defs = read_signature_defs(path)

    def run(signature: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        scores = next(iter(inputs.values()))[:, :10].astype(np.float32)
        answer = {"scores": scores, "classes": scores.argmax(axis=1).astype(np.int64)}
        return {k: answer[k] for k in outputs}

    return LoadedModel(name, version, path, defs, signature_specs(defs), run)


FIRST_PIXELS = Runtime(RuntimeName("first-pixels", "first-pixels", "the first ten pixels", "first pixels",
                                   "first-pixels"),
                       _load, device_name=lambda device: "no device (first pixels)",
                       round_trip=lambda device: (None, "not applicable: first pixels run on nothing"))


@pytest.fixture
def fifth_runtime():
    register(FIRST_PIXELS)
    try:
        yield FIRST_PIXELS
    finally:
        RUNTIMES.pop(FIRST_PIXELS.backend)


def test_a_fifth_runtime_registered_in_process_serves_a_predict(fifth_runtime, exported_model):
    from serving.server.app import ready_line, served_version, start_protocols, start_up
    from serving.server.handling.core import ServerConfig
    from serving.server.handling.model_source import ModelEntry

    assert runtime_of("first-pixels") is fifth_runtime
    config = ServerConfig(models=(ModelEntry("mnist", exported_model.base_path),), grpc_port=0, rest_port=0,
                          backend="first-pixels", device_name="no device (first pixels)", gc_freeze=False,
                          device_floor_s=0.2)
    core = start_up(config)
    protocols = start_protocols(core)
    try:
        line = ready_line(config, protocols.grpc_port, protocols.rest.port, served_version(core))
        assert 'runtime="first-pixels"' in line
        images = np.random.default_rng(5).random((3, 784), dtype=np.float32)

        class Target:
            grpc_target = f"127.0.0.1:{protocols.grpc_port}"

        reply = stub_for(Target).Predict(predict_request(images), timeout=10)
        np.testing.assert_array_equal(to_numpy(reply.outputs["scores"]), images[:, :10])
        np.testing.assert_array_equal(to_numpy(reply.outputs["classes"]), images[:, :10].argmax(axis=1))
        assert core.device_floor is not None and core.device_floor["runtime"] == "first-pixels"
    finally:
        protocols.drain(core)


def test_a_runtime_name_taken_is_refused():
    with pytest.raises(ValueError, match="already registered as --backend savedmodel"):
        register(runtime_of("savedmodel"))

"""The null backend on a machine without TensorFlow's runtime, as on the device bundle's machines: its
generated protos import (`serving.protocol.generated`), nothing else of TensorFlow does."""

from __future__ import annotations

import numpy as np
import pytest

from serving.deploy.process import REPO, start_server
from serving.protocol.tensors import to_numpy
from tests.support.grpc import predict_request, stub_for

pytestmark = [pytest.mark.integration, pytest.mark.untimed]

# Loaded at interpreter start: TensorFlow's protos without its runtime, and any runtime module refused.
SITECUSTOMIZE = '''
import importlib.abc
import sys

from serving.protocol.generated import use_protos_without_runtime

use_protos_without_runtime()


class _NoRuntime(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.startswith(("tensorflow.python", "tensorflow._api", "tensorflow.lite",
                            "tensorflow.keras", "keras", "tf_keras")):
            raise ImportError(f"{name}: TensorFlow's runtime is not installed here (test shim)")
        return None


sys.meta_path.insert(0, _NoRuntime())
'''


def test_null_backend_answers_without_tensorflow(exported_model, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}"}
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      backend="null", env=env, timeout_s=60.0) as server:
        reply = stub_for(server).Predict(predict_request(np.zeros((2, 784), np.float32)), timeout=10.0)
        log = server.stderr_path.read_text()
    assert reply.model_spec.name == "mnist"
    assert {name: to_numpy(t).shape[0] for name, t in reply.outputs.items()}, reply
    assert all(to_numpy(t).shape[0] == 2 for t in reply.outputs.values())
    assert "test shim" not in log  # nothing tried to load the runtime and swallowed the refusal

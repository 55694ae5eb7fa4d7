"""The null backend on a machine without TensorFlow's runtime, as on the device bundle's machines: its
generated protos import (`serving.protocol.generated`), nothing else of TensorFlow does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psutil
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


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_null_server_loads_none_of_tensorflows_runtime_where_tensorflow_is_installed(exported_model, workers):
    """Here TensorFlow is installed, and a null server still starts on its protos alone: its runtime's libraries
    cost a process ~4 s and ~500 MB to load, and the tool ceiling's twins are null servers."""
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--workers", workers, backend="null", timeout_s=60.0) as server:
        stub_for(server).Predict(predict_request(np.zeros((1, 784), np.float32)), timeout=10.0)
        processes = [server.proc.pid, *(p.pid for p in psutil.Process(server.proc.pid).children(recursive=True))]
        loaded = {pid: runtime_libraries(pid) for pid in processes}
    assert len(processes) >= int(workers) + (workers != "1"), processes  # the server; or a supervisor and frontends
    assert not any(loaded.values()), loaded


def runtime_libraries(pid: int) -> set[str]:
    """TensorFlow's runtime libraries mapped into process `pid`."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {line.rsplit("/", 1)[-1] for line in maps.splitlines()
            if "_pywrap_tensorflow_internal" in line or "libtensorflow_framework" in line}

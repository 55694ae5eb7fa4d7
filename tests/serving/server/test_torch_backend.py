"""The torch backend (model.keras on Keras-torch): TensorFlow's answers on every sample digit, a served Predict,
the padding code around the CUDA graph run on this CPU, and a model that is not the MNIST convnet.

The torch side always runs in a child process: Keras's backend is fixed at its first import, and this pytest
process imports TensorFlow (and may import Keras with it) for the other tests. Capturing and replaying CUDA
graphs needs a GPU: here the same replayers call the model directly, and they say so (`graphs` False).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from model_export.export import REFERENCE_FILE
from serving.deploy.process import REPO, start_server
from tests.support.export import quiet_tf_env
from tests.support.grpc import predict_request, stub_for

pytestmark = pytest.mark.untimed  # end-to-end where marked, and times nothing

pytest.importorskip("torch")
PARITY_BATCH_SIZES = (1, 7, 64)

# Runs in a fresh process, as the server does: ready the process for torch, load, answer every reference input
# at each batch size, and say whether TensorFlow's runtime was ever imported and whether graphs were used.
_TORCH_OUTPUTS = """
import sys
import numpy as np
from serving.server.runtimes import prepare_process
prepare_process("torch")
from serving.server.runtimes.model_spec import BackendOptions
from serving.server.runtimes import load_model
from serving.server.runtimes.torch_model import load_torch_model
from serving.server.runtimes.model_spec import read_signature_defs, signature_specs
model_dir, out_path, signature, *sizes = sys.argv[1:]
model = load_model("torch", "m", 1, model_dir, BackendOptions(device="cpu"))
reference = np.load(f"{model_dir}/reference_outputs.npz")
inputs = {k[len("input."):]: reference[k] for k in reference.files if k.startswith("input.")}
outputs = sorted(k[len("output."):] for k in reference.files if k.startswith("output."))
rows = len(next(iter(inputs.values())))
results = {}
for size in map(int, sizes):
    parts = [model.run(signature, {k: v[i:i + size] for k, v in inputs.items()}, outputs) for i in range(0, rows, size)]
    for name in outputs:
        results[f"{name}_{size}"] = np.concatenate([p[name] for p in parts])
timed = model.run_timed(signature, {k: v[:3] for k, v in inputs.items()}, outputs)
results["timed_phases_s"] = np.array(timed[1:])
loaded = load_torch_model(f"{model_dir}/model.keras", signature_specs(read_signature_defs(model_dir)), "cpu",
                          padded_sizes=(1, 2))
import keras
np.savez(out_path, tensorflow_runtime_loaded=np.bool_("tensorflow.python" in sys.modules),
         keras_backend=np.str_(keras.config.backend()), graphs=np.bool_(loaded.graphs),
         padded_sizes=np.array(sorted(loaded.replayers)), **results)
"""


def run_torch_child(model_dir: Path, out_path: Path, signature: str, *sizes: int) -> dict:
    done = subprocess.run([sys.executable, "-c", _TORCH_OUTPUTS, str(model_dir), str(out_path), signature,
                           *map(str, sizes)], capture_output=True, text=True, timeout=600, cwd=REPO,
                          env=quiet_tf_env())
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out_path) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.integration
def test_same_answers_as_the_saved_model_on_every_sample_digit(exported_model, tmp_path):
    got = run_torch_child(exported_model.model_dir, tmp_path / "out.npz", "predict_images", *PARITY_BATCH_SIZES)
    reference = np.load(exported_model.model_dir / REFERENCE_FILE)
    assert len(reference["output.classes"]) == 500  # every sample digit the export wrote
    for size in PARITY_BATCH_SIZES:
        assert np.array_equal(got[f"classes_{size}"], reference["output.classes"]), size
        assert np.abs(got[f"scores_{size}"] - reference["output.scores"]).max() <= 1e-4, size
    assert got["classes_1"].dtype == np.int64 and got["scores_1"].dtype == np.float32
    assert not got["tensorflow_runtime_loaded"] and str(got["keras_backend"]) == "torch"
    assert not got["graphs"] and got["padded_sizes"].tolist() == [1, 2]  # no CUDA here: called, not replayed
    assert (got["timed_phases_s"] >= 0).all() and got["timed_phases_s"][1] > 0


@pytest.mark.integration
def test_a_model_that_is_not_mnist_serves_through_it(keras_ranker_model, tmp_path):
    got = run_torch_child(keras_ranker_model.version_dir, tmp_path / "out.npz", "serving_default", 1, 5)
    reference = np.load(keras_ranker_model.version_dir / REFERENCE_FILE)
    for size in (1, 5):
        assert np.abs(got[f"score_{size}"] - reference["output.score"]).max() <= 1e-4
        assert np.array_equal(got[f"label_{size}"], reference["output.label"])


@pytest.mark.integration
def test_a_served_predict_names_the_runtime(exported_model, samples):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--device_floor_s", "0.5", backend="torch") as server:
        assert server.fields["runtime"] == "keras-torch" and "torch=" in server.fields["runtime_versions"]
        answer = stub_for(server).Predict(predict_request(samples["images"][:7]), timeout=30)
        assert list(answer.outputs["classes"].int64_val) == samples["expected_classes"][:7].tolist()
        import urllib.request

        with urllib.request.urlopen(server.rest_url + "/v1/models/mnist", timeout=10) as reply:
            assert json.load(reply)["model_version_status"][0]["state"] == "AVAILABLE"


def test_a_version_without_model_keras_is_refused(tmp_path):
    from serving.server.runtimes import load_model
    from serving.server.runtimes.model_spec import BackendOptions

    (tmp_path / "1").mkdir()
    with pytest.raises(FileNotFoundError, match="model.keras"):
        load_model("torch", "m", 1, tmp_path / "1", BackendOptions())

"""The jax backend: same answers as the SavedModel on every sample digit, padded batch sizes, a served Predict,
no TensorFlow runtime in its process, and clear errors for a missing GPU or a missing model.keras.

The jax side always runs in a child process: Keras's backend is fixed at its first import, and this
pytest process imports TensorFlow (and may import Keras with it) for the other tests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from serving.deploy.process import REPO, start_server
from serving.server.runtimes import RUNTIMES, load_model, runtime_of
from serving.server.runtimes.jax_model import (
    MAX_PADDED_SIZE,
    PADDED_SIZES,
    Chunk,
    chunks,
    classes_of,
    pad_rows,
    padded_size_for,
    run_padded,
)
from serving.server.runtimes.model_spec import BackendOptions
from tests.support.export import quiet_tf_env
from tests.support.grpc import predict_request, stub_for

pytestmark = pytest.mark.untimed  # end-to-end where marked, and times nothing

PARITY_BATCH_SIZES = (1, 7, 64)

# Runs in a fresh process, as the server does: ready the process for jax, load, answer every sample digit
# at each batch size, and report whether TensorFlow's runtime (tensorflow.python) was ever imported.
_JAX_OUTPUTS = """
import sys
import numpy as np
from serving.server.runtimes import prepare_process
prepare_process("jax")
from serving.server.runtimes.model_spec import BackendOptions
from serving.server.runtimes import load_model
model_dir, samples_path, out_path, *sizes = sys.argv[1:]
model = load_model("jax", "mnist", 1, model_dir, BackendOptions(device="cpu"))
images = np.load(samples_path)["images"]
results = {}
for size in map(int, sizes):
    parts = [model.run("predict_images", {"images": images[i:i + size]}, ["scores", "classes"])
             for i in range(0, len(images), size)]
    results[f"scores_{size}"] = np.concatenate([p["scores"] for p in parts])
    results[f"classes_{size}"] = np.concatenate([p["classes"] for p in parts])
# The device path before the lean one: classes argmaxed on the device, two transfers back, padding by concatenation.
import jax, jax.numpy as jnp
from serving.server.runtimes.jax_model import chunks, compiled_forward, import_keras_on_jax, jax_device
keras_model = import_keras_on_jax().saving.load_model(f"{model_dir}/model.keras", compile=False)
device = jax_device("cpu")
weights = [jax.device_put([v.value for v in vs], device)
           for vs in (keras_model.trainable_variables, keras_model.non_trainable_variables)]
image_shape = tuple(keras_model.input_shape[1:])
@jax.jit
def before(trainable, non_trainable, x):
    scores, _ = keras_model.stateless_call(trainable, non_trainable, x.reshape((-1,) + image_shape), training=False)
    return scores, jnp.argmax(scores, axis=1)
parts = []
for chunk in chunks(len(images)):
    rows = images[chunk.start:chunk.stop]
    padded = np.concatenate([rows, np.zeros((chunk.padded_size - len(rows), 784), np.float32)])
    scores, classes = before(*weights, jax.device_put(padded, device))
    parts.append((np.asarray(scores, np.float32)[:len(rows)], np.asarray(classes).astype(np.int64)[:len(rows)]))
results["before_scores"] = np.concatenate([p[0] for p in parts])
results["before_classes"] = np.concatenate([p[1] for p in parts])
timed = model.run_timed("predict_images", {"images": images}, ["scores", "classes"])
results["after_scores"], results["after_classes"] = timed.outputs["scores"], timed.outputs["classes"]
results["timed_phases_s"] = np.array(timed[1:])
one_chunk = compiled_forward(keras_model, device)(np.zeros((4, 784), np.float32))
results["forward_returns"] = np.array([type(x).__name__ for x in one_chunk])
import keras
np.savez(out_path, tensorflow_runtime_loaded=np.bool_("tensorflow.python" in sys.modules),
         keras_backend=np.str_(keras.config.backend()), **results)
"""


def run_jax_child(model_dir: Path, samples_path: Path, out_path: Path, *sizes: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _JAX_OUTPUTS, str(model_dir), str(samples_path), str(out_path),
                           *map(str, sizes)], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env=quiet_tf_env())


def test_padded_sizes_are_powers_of_two_up_to_the_largest():
    assert PADDED_SIZES[0] == 1 and PADDED_SIZES[-1] == MAX_PADDED_SIZE == 512 and len(PADDED_SIZES) == 10
    assert [padded_size_for(n) for n in (1, 2, 3, 7, 64, 65, 512)] == [1, 2, 4, 8, 64, 128, 512]


def test_large_batches_run_as_full_chunks_and_a_padded_rest():
    assert chunks(7) == [Chunk(0, 7, 8)]
    assert chunks(512) == [Chunk(0, 512, 512)]
    assert chunks(1100) == [Chunk(0, 512, 512), Chunk(512, 1024, 512), Chunk(1024, 1100, 128)]


def test_padding_appends_zero_rows_only():
    padded = pad_rows(np.ones((3, 4), np.float32), 8)
    assert padded.shape == (8, 4) and padded.dtype == np.float32
    assert padded[:3].all() and not padded[3:].any()
    same = np.ones((4, 4), np.float32)
    assert pad_rows(same, 4) is same


def test_every_backend_names_its_runtime():
    assert set(RUNTIMES) == {"savedmodel", "jax", "torch", "null"}
    assert runtime_of("savedmodel").name == "tensorflow"
    assert runtime_of("jax").name == "jax" and runtime_of("jax").packages == ("jax", "jaxlib")
    assert runtime_of("null").name == "none (null backend)" and runtime_of("null").versions() == ""
    assert "jaxlib=" in runtime_of("jax").versions()
    with pytest.raises(ValueError, match="unknown backend"):
        runtime_of("onnx")


@pytest.fixture(scope="module")
def jax_outputs(exported_model, tmp_path_factory) -> dict[str, np.ndarray]:
    out = tmp_path_factory.mktemp("jax") / "outputs.npz"
    done = run_jax_child(exported_model.model_dir, exported_model.samples_path, out, *PARITY_BATCH_SIZES)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def savedmodel_outputs(exported_model, samples) -> dict[str, np.ndarray]:
    model = load_model("savedmodel", "mnist", 1, exported_model.model_dir, BackendOptions())
    return model.run("predict_images", {"images": samples["images"]}, ["scores", "classes"])


@pytest.mark.integration
@pytest.mark.parametrize("batch_size", PARITY_BATCH_SIZES)
def test_jax_matches_the_savedmodel_on_every_sample_digit(jax_outputs, savedmodel_outputs, samples, batch_size):
    scores, classes = jax_outputs[f"scores_{batch_size}"], jax_outputs[f"classes_{batch_size}"]
    assert len(classes) == len(samples["images"])  # every digit of the samples file, padding sliced off
    assert scores.dtype == np.float32 and classes.dtype == np.int64
    np.testing.assert_array_equal(classes, savedmodel_outputs["classes"])
    np.testing.assert_array_equal(classes, samples["expected_classes"])
    np.testing.assert_allclose(scores, savedmodel_outputs["scores"], rtol=0, atol=1e-4)


@pytest.mark.integration
def test_lean_device_path_answers_exactly_as_before_on_every_sample_digit(jax_outputs):
    np.testing.assert_array_equal(jax_outputs["after_scores"], jax_outputs["before_scores"])
    np.testing.assert_array_equal(jax_outputs["after_classes"], jax_outputs["before_classes"])
    assert jax_outputs["after_classes"].dtype == np.int64


@pytest.mark.integration
def test_one_transfer_back_per_chunk_and_three_timed_phases(jax_outputs):
    # compiled_forward: one host array (scores) back, then input, infer and output seconds
    assert jax_outputs["forward_returns"].tolist() == ["ndarray", "float", "float", "float"]
    phases = jax_outputs["timed_phases_s"]
    assert len(phases) == 3 and (phases >= 0).all() and phases[1] > 0


def test_run_padded_pads_each_chunk_and_sums_its_phases():
    seen = []

    def forward(images):
        seen.append(len(images))
        return np.repeat(images[:, :1], 10, axis=1), 1.0, 2.0, 3.0

    images = np.arange(600, dtype=np.float32).reshape(600, 1)
    scores, input_s, infer_s, output_s = run_padded(forward, images)
    assert seen == [512, 128] and scores.shape == (600, 10) and (input_s, infer_s, output_s) == (2.0, 4.0, 6.0)
    np.testing.assert_array_equal(scores[:, 0], images[:, 0])
    scores, *phases = run_padded(forward, images[:3])
    assert seen[-1] == 4 and scores.shape == (3, 10) and phases == [1.0, 2.0, 3.0]


def test_classes_are_the_first_maximum_as_int64():
    scores = np.array([[0.1, 0.7, 0.7], [0.9, 0.0, 0.1]], np.float32)
    classes = classes_of(scores)
    assert classes.tolist() == [1, 0] and classes.dtype == np.int64


_PREPARE = """
from serving.server.runtimes import prepare_process
prepare_process("jax")
import os
print(os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"])
"""


@pytest.mark.parametrize("given, expected", [(None, "false"), ("true", "true")])
def test_prepare_process_turns_gpu_memory_preallocation_off_unless_set(given, expected):
    env = {k: v for k, v in quiet_tf_env().items() if k != "XLA_PYTHON_CLIENT_PREALLOCATE"}
    if given is not None:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = given
    done = subprocess.run([sys.executable, "-c", _PREPARE], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == expected


@pytest.mark.integration
def test_jax_process_never_loads_tensorflows_runtime(jax_outputs):
    assert not jax_outputs["tensorflow_runtime_loaded"]
    assert str(jax_outputs["keras_backend"]) == "jax"


def mapped_libraries(pid: int) -> str:
    """The shared objects a live process has mapped (Linux)."""
    return Path(f"/proc/{pid}/maps").read_text()


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


@pytest.mark.integration
def test_server_on_jax_answers_predict_and_names_its_runtime(exported_model, samples):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--device", "cpu", backend="jax") as server:
        response = stub_for(server).Predict(predict_request(samples["images"][:64]), timeout=30)
        classes = np.array(response.outputs["classes"].int64_val)
        np.testing.assert_array_equal(classes, samples["expected_classes"][:64])
        assert len(response.outputs["scores"].float_val) == 64 * 10
        assert server.fields["runtime"] == "jax" and "jaxlib=" in server.fields["runtime_versions"]
        info = get_json(f"{server.rest_url}/v1/models/mnist/metadata")["server_info"]
        assert info["backend"] == "jax" and info["runtime"] == "jax"
        floor = info["device_floor"]  # measured at start: the model alone per padded size, and a device round trip
        assert floor["runtime"] == "jax" and floor["batches"][0]["batch_size"] == 1
        assert floor["round_trip_us"] > 0 and floor["round_trip_note"].startswith("jax: device_put")
        with urllib.request.urlopen(f"{server.rest_url}/monitoring/prometheus/metrics", timeout=30) as page:
            assert 'runtime="jax"' in page.read().decode()
        if Path("/proc/self/maps").exists():
            assert "tensorflow" not in mapped_libraries(server.proc.pid)  # no libtensorflow*, no _pywrap_tensorflow


def run_server_until_exit(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "serving.server", "--port", "0", "--rest_api_port", "0", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO, env=quiet_tf_env())


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU may be visible here")
def test_jax_on_gpu_without_one_fails_saying_what_is_missing(exported_model):
    done = run_server_until_exit("--backend", "jax", "--device", "gpu", "--model_name", "mnist",
                                 "--model_base_path", str(exported_model.base_path))
    assert done.returncode == 2
    assert "serving: error: --device gpu: JAX sees no GPU" in done.stderr and "--device cpu" in done.stderr


def version_without_keras_file(exported_model, tmp_path: Path) -> Path:
    base = tmp_path / "mnist"
    shutil.copytree(exported_model.model_dir, base / "1")
    (base / "1" / "model.keras").unlink()
    return base


@pytest.mark.integration
def test_missing_keras_file_is_named(exported_model, tmp_path):
    base = version_without_keras_file(exported_model, tmp_path)
    with pytest.raises(FileNotFoundError, match="re-run make export: version 1 has no model.keras"):
        load_model("jax", "mnist", 1, base / "1", BackendOptions())


@pytest.mark.integration
def test_server_on_jax_refuses_a_version_without_its_keras_file(exported_model, tmp_path):
    base = version_without_keras_file(exported_model, tmp_path)
    done = run_server_until_exit("--backend", "jax", "--model_name", "mnist", "--model_base_path", str(base))
    assert done.returncode == 2
    assert "re-run make export: version 1 has no model.keras" in done.stderr

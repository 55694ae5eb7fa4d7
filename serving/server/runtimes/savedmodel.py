"""The `savedmodel` runtime: the SavedModel itself, run by TensorFlow on the chosen device (TF Serving's own).

Its latency metrics carry TF Serving's runtime label, `TF2`. A process serving it grows TensorFlow's GPU
memory as needed (so servers compared paired share one GPU) and keeps Keras, which TensorFlow imports as it
loads, on TensorFlow's own backend (not JAX or PyTorch loaded for nothing).

Not for: the registry (`serving.server.runtimes`) or the signatures (`serving.server.runtimes.model_spec`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from model_export.provenance import cpu_model_name
from serving.protocol.runtime_names import names_of
from serving.server.runtimes.keras_process import keras_backend_in_use
from serving.server.runtimes.runtime import GpuProbe, RoundTrip, Runtime

if TYPE_CHECKING:
    from serving.server.runtimes.model_spec import BackendOptions, Computed, LoadedModel

_GPU_PROBE = """
import json, tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
names = [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus]
print(json.dumps({"version": tf.__version__, "cuda": tf.test.is_built_with_cuda(), "gpus": names}))
"""


def prepare() -> None:
    os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")  # TF takes nearly all a GPU's memory otherwise
    if keras_backend_in_use() is None:
        os.environ["KERAS_BACKEND"] = "tensorflow"


def load(name: str, version: int, path: Path, options: BackendOptions) -> LoadedModel:
    import tensorflow as tf

    from serving.server.runtimes.model_spec import (
        SERVE_TAG,
        Computed,
        LoadedModel,
        read_signature_defs,
        signature_specs,
    )

    device = _tf_device(options.device)
    with tf.device(device):
        loaded = tf.saved_model.load(str(path), tags=[SERVE_TAG])
    functions = dict(loaded.signatures)
    defs = read_signature_defs(path)
    # Eager ops on the CPU return when done; on a GPU they return once queued, so each phase waits for it.
    sync = tf.test.experimental.sync_devices if options.device == "gpu" else _nothing

    def run_timed(signature: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> Computed:
        started = time.perf_counter()
        with tf.device(device):
            tensors = {k: tf.constant(v) for k, v in inputs.items()}
            sync()
            placed = time.perf_counter()
            result = functions[signature](**tensors)
            sync()
        inferred = time.perf_counter()
        arrays = {k: result[k].numpy() for k in outputs}
        return Computed(arrays, placed - started, inferred - placed, time.perf_counter() - inferred)

    def run(signature: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        return run_timed(signature, inputs, outputs).outputs

    return LoadedModel(name, version, path, defs, signature_specs(defs), run,
                       unload=lambda: functions.clear(), run_timed=run_timed)


def _nothing() -> None:
    return None


def _tf_device(device: str) -> str:
    return "/GPU:0" if device == "gpu" else "/CPU:0"


def device_name(device: str) -> str:
    """Pin TensorFlow to the device: on the CPU, no GPU visible to it even on a GPU machine."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if device == "cpu":
        if gpus:
            tf.config.set_visible_devices([], "GPU")  # keep the model on the CPU even on a GPU machine
        return cpu_model_name()
    if not gpus:
        raise RuntimeError("--device gpu: TensorFlow sees no GPU (tf.config.list_physical_devices('GPU') is empty); "
                           "install a CUDA-enabled TensorFlow on a GPU machine, or use --device cpu")
    details = tf.config.experimental.get_device_details(gpus[0])
    return details.get("device_name", gpus[0].name)


def round_trip(device: str) -> RoundTrip:
    import tensorflow as tf

    x = np.ones(16, np.float32)
    name = _tf_device(device)

    def tf_trip() -> None:
        with tf.device(name):
            tf.add(tf.constant(x), 1.0).numpy()

    return tf_trip, f"tensorflow: tf.constant 16 float32 on {name}, tf.add, .numpy()"


RUNTIME = Runtime(names_of("savedmodel"), load, device_name, round_trip, prepare, packages=("tensorflow",),
                  gpu_probe=GpuProbe(_GPU_PROBE, "TensorFlow", "make setup GPU=1 installs tensorflow[and-cuda]"),
                  reads_savedmodel=True)

__all__ = ["RUNTIME", "device_name", "load", "round_trip"]

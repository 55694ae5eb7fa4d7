"""The `jax` runtime's model: the export's own weights (`<version>/model.keras`), run by Keras 3 on JAX (XLA).

The Keras model is loaded with Keras's JAX backend and called through `model.stateless_call` inside
one `jax.jit` function of (weights, images), so XLA compiles the whole forward pass. XLA compiles
once per input shape, so every batch is padded up to a fixed size (1, 2, 4, ... `MAX_PADDED_SIZE`
rows; larger batches run as `MAX_PADDED_SIZE`-row chunks) and the outputs are sliced back; all padded sizes
are compiled at load time, so no request pays for a compilation. Per chunk, one copy goes to the
device and one comes back (the scores; the classes are argmaxed on the host), each waited for, so
the backend reports the device's own input, inference and output times (docs/jax-path.md).

It serves the export's contract (`images` [-1, 784] float32 -> `scores` float32, `classes` int64)
and reads the signatures from the version's `saved_model.pb`, like the other backends, so
validation and metadata are identical. The process must have run
`serving.server.runtimes.prepare_process("jax")` before importing Keras (`keras_jax` is the
runtime's record; this module is what it does with a model).

Not for: choosing a runtime (`serving.server.runtimes`) or naming it (`serving.protocol.runtime_names`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from model_export.export import CLASSES_KEY, INPUT_KEY, KERAS_FILE, SCORES_KEY
from model_export.provenance import cpu_model_name
from serving.server.runtimes.keras_process import prepare_jax
from serving.server.runtimes.model_spec import (
    BackendOptions,
    Computed,
    LoadedModel,
    SignatureSpec,
    read_signature_defs,
    signature_specs,
)
from serving.server.runtimes.padded_batches import (
    MAX_PADDED_SIZE,
    PADDED_SIZES,
    Chunk,
    chunks,
    pad_rows,
    padded_size_for,
)


def import_keras_on_jax() -> Any:
    """Keras on its JAX backend; RuntimeError when this process already runs Keras on another backend."""
    prepare_jax()
    import keras

    return keras


def jax_device(device: str) -> Any:
    """The JAX device for --device cpu|gpu; RuntimeError saying what is missing when JAX sees no GPU."""
    import jax

    if device == "cpu":
        if not os.environ.get("JAX_PLATFORMS"):  # keep JAX off any GPU or TPU, as TensorFlow is kept off the GPU
            jax.config.update("jax_platforms", "cpu")
        return jax.devices("cpu")[0]
    try:
        return jax.devices("gpu")[0]
    except RuntimeError as exc:
        raise RuntimeError(f"--device gpu: JAX sees no GPU (jax.devices('gpu') failed: {exc}); the jax backend "
                           "needs jax's CUDA plugin (pip install 'jax[cuda12]' at the pinned jax version) on a GPU "
                           "machine, or use --device cpu") from None


def device_name(device: str) -> str:
    """What the server reports as its device name on the jax backend: the CPU model or the GPU's kind."""
    found = jax_device(device)
    return cpu_model_name() if device == "cpu" else str(found.device_kind)


def check_contract(specs: dict[str, SignatureSpec], path: Path) -> None:
    """Every signature must be the export's images -> scores, classes (what the compiled function computes)."""
    for spec in specs.values():
        if set(spec.inputs) != {INPUT_KEY} or set(spec.outputs) != {SCORES_KEY, CLASSES_KEY}:
            raise ValueError(f"{path}: the jax backend serves the export's signature ({INPUT_KEY} -> {SCORES_KEY}, "
                             f"{CLASSES_KEY}); signature {spec.name!r} has {sorted(spec.inputs)} -> "
                             f"{sorted(spec.outputs)}")


# One chunk through the device: (scores [padded size, 10] float32 on the host, input_s, infer_s, output_s).
Forward = Callable[[np.ndarray], tuple[np.ndarray, float, float, float]]


def compiled_forward(model: Any, device: Any) -> Forward:
    """images [n, 784] float32 -> scores [n, 10] float32 and the three phases' seconds, jitted, weights on
    `device`: one transfer to the device and one back, each waited for, so the phases are the device's."""
    import jax
    from jax.sharding import SingleDeviceSharding

    trainable = jax.device_put([v.value for v in model.trainable_variables], device)
    non_trainable = jax.device_put([v.value for v in model.non_trainable_variables], device)
    image_shape = tuple(model.input_shape[1:])
    # The host -> device copy through jit's C++ argument path: ~11 us a call on CPU where jax.device_put's
    # Python path costs ~70 us (measured on the build machine, docs/jax-path.md).
    to_device = jax.jit(lambda images: images, out_shardings=SingleDeviceSharding(device))

    @jax.jit
    def forward(trainable, non_trainable, images):
        scores, _ = model.stateless_call(trainable, non_trainable, images.reshape((-1,) + image_shape),
                                         training=False)
        return scores

    def run(images: np.ndarray) -> tuple[np.ndarray, float, float, float]:
        started = time.perf_counter()
        placed = to_device(images).block_until_ready()
        moved = time.perf_counter()
        scores = forward(trainable, non_trainable, placed).block_until_ready()
        inferred = time.perf_counter()
        host = np.asarray(scores)
        return host, moved - started, inferred - moved, time.perf_counter() - inferred

    return run


def classes_of(scores: np.ndarray) -> np.ndarray:
    """The predicted class per row, int64, computed on the host: the same first-maximum rule as jnp.argmax,
    and one device -> host transfer per batch instead of two."""
    return scores.argmax(axis=1).astype(np.int64, copy=False)


def run_padded(forward: Forward, images: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """`forward` over `images`, each chunk padded to its size and the padding sliced off; the phases summed."""
    rows = len(images)
    if rows <= MAX_PADDED_SIZE:  # one chunk: no chunk list, no concatenation
        scores, input_s, infer_s, output_s = forward(pad_rows(images, padded_size_for(rows)))
        return scores[:rows], input_s, infer_s, output_s
    parts, input_s, infer_s, output_s = [], 0.0, 0.0, 0.0
    for chunk in chunks(len(images)):
        scores, moved_s, ran_s, back_s = forward(pad_rows(images[chunk.start:chunk.stop], chunk.padded_size))
        parts.append(scores[:chunk.stop - chunk.start])
        input_s, infer_s, output_s = input_s + moved_s, infer_s + ran_s, output_s + back_s
    return (parts[0] if len(parts) == 1 else np.concatenate(parts)), input_s, infer_s, output_s


def load_jax(name: str, version: int, path: Path, options: BackendOptions) -> LoadedModel:
    """One version's model.keras on JAX, every padded size compiled; signatures from its saved_model.pb."""
    keras_file = Path(path) / KERAS_FILE
    if not keras_file.is_file():
        raise FileNotFoundError(f"re-run make export: version {version} has no {KERAS_FILE} ({keras_file})")
    defs = read_signature_defs(path)
    specs = signature_specs(defs)
    check_contract(specs, path)
    keras = import_keras_on_jax()
    keras_model = keras.saving.load_model(keras_file, compile=False)
    forward = compiled_forward(keras_model, jax_device(options.device))
    width = int(np.prod(keras_model.input_shape[1:]))
    for size in PADDED_SIZES:  # compile every shape now, not on a live request
        forward(np.zeros((size, width), np.float32))

    def run_timed(signature: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> Computed:
        scores, input_s, infer_s, output_s = run_padded(forward, np.asarray(inputs[INPUT_KEY], np.float32))
        started = time.perf_counter()  # host-side post-processing counts as the output phase
        result = {SCORES_KEY: scores}
        if CLASSES_KEY in outputs:
            result[CLASSES_KEY] = classes_of(scores)
        arrays = {k: result[k] for k in outputs}
        return Computed(arrays, input_s, infer_s, output_s + time.perf_counter() - started)

    def run(signature: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        return run_timed(signature, inputs, outputs).outputs

    return LoadedModel(name, version, path, defs, specs, run, run_timed=run_timed)


__all__ = ["KERAS_FILE", "MAX_PADDED_SIZE", "PADDED_SIZES", "Chunk", "Forward", "chunks", "classes_of",
           "compiled_forward", "device_name", "jax_device", "load_jax", "pad_rows", "padded_size_for", "run_padded"]

"""Readying a process for a runtime that runs Keras 3 (`jax`, `torch`): Keras on that backend, TensorFlow's
protos without its runtime.

Keras picks its backend once, when first imported, from `KERAS_BACKEND`; TensorFlow imports Keras as it
loads. So a process must be readied before anything imports either: `prepare_keras` sets `KERAS_BACKEND`
whatever the environment said and loads TensorFlow's generated protos on their own.

Not for: the runtimes themselves (`keras_jax`, `keras_torch` beside this module).
"""

from __future__ import annotations

import os
import sys

from serving.protocol.generated import use_protos_without_runtime


def keras_backend_in_use() -> str | None:
    """The backend Keras was imported with in this process, or None when Keras is not imported yet."""
    keras = sys.modules.get("keras")
    if keras is None:
        return None
    return str(keras.config.backend())


def prepare_keras(keras_backend: str) -> None:
    """Keras on `keras_backend` and TensorFlow's protos without its runtime; RuntimeError when Keras was already
    imported with another backend (it cannot be switched afterwards)."""
    in_use = keras_backend_in_use()
    if in_use not in (None, keras_backend):
        raise RuntimeError(f"the {keras_backend} backend needs Keras on {keras_backend}, but this process already "
                           f"imported Keras with the {in_use} backend; start it with KERAS_BACKEND={keras_backend} "
                           "or in a fresh process")
    os.environ["KERAS_BACKEND"] = keras_backend
    use_protos_without_runtime()


def prepare_jax() -> None:
    """Keras on JAX, and no GPU memory preallocated: JAX takes 75% of a GPU's memory at its first use unless told
    not to; off, the memory a GPU shows in use is the model's own (a user's own setting wins)."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    prepare_keras("jax")


def prepare_torch() -> None:
    """Keras on PyTorch."""
    prepare_keras("torch")


__all__ = ["keras_backend_in_use", "prepare_jax", "prepare_keras", "prepare_torch"]

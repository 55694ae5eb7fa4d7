"""Which runtime executes the model for each backend, how the server names it, and how a process gets ready for it.

Every backend runs on one runtime: `savedmodel` on TensorFlow, `jax` on Keras 3's JAX backend
(XLA-compiled), `torch` on Keras 3's PyTorch backend (CUDA graphs on a GPU), `null` on none. The server
reports that name (and the runtime's package versions) in its ready line, its `server_info` and its
Prometheus info gauge, so a result can say which runtime produced it.

`prepare_process` must run before anything in the process imports TensorFlow or Keras: a `jax`
server reads TensorFlow's generated protos without loading TensorFlow's runtime, and imports
Keras with the JAX backend. This module therefore imports nothing heavy itself.

Not for: loading or running models (`serving.server.backends`, `serving.server.jax_backend`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from enum import StrEnum
from importlib import metadata

from serving.protocol.generated import use_protos_without_runtime


class Backend(StrEnum):
    SAVEDMODEL = "savedmodel"
    JAX = "jax"
    TORCH = "torch"
    NULL = "null"


@dataclass(frozen=True)
class Runtime:
    """What executes a backend's model: a name and the packages whose versions identify it."""

    name: str
    packages: tuple[str, ...] = ()

    def versions(self) -> str:
        """`package=version` pairs, comma-separated ("" for no runtime); read from package metadata, not imports."""
        return ",".join(f"{p}={_installed_version(p)}" for p in self.packages)


def _installed_version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "missing"


RUNTIMES: dict[Backend, Runtime] = {
    Backend.SAVEDMODEL: Runtime("tensorflow", ("tensorflow",)),
    Backend.JAX: Runtime("jax", ("jax", "jaxlib")),
    Backend.TORCH: Runtime("keras-torch", ("torch", "keras")),
    Backend.NULL: Runtime("none (null backend)"),
}


def runtime_of(backend: str) -> Runtime:
    """The runtime a backend runs on; ValueError naming the choices for an unknown backend."""
    try:
        return RUNTIMES[Backend(backend)]
    except ValueError:
        raise ValueError(f"unknown backend {backend!r}; choose one of {sorted(b.value for b in Backend)}") from None


def keras_backend_in_use() -> str | None:
    """The backend Keras was imported with in this process, or None when Keras is not imported yet."""
    keras = sys.modules.get("keras")
    if keras is None:
        return None
    return str(keras.config.backend())


def prepare_process(backend: str) -> None:
    """Ready this process for `backend`, before anything imports TensorFlow or Keras.

    For `jax`: TensorFlow's protos without its runtime, Keras on JAX, and no GPU memory preallocation
    (XLA_PYTHON_CLIENT_PREALLOCATE=false unless set); for `torch`: Keras on PyTorch. `KERAS_BACKEND` is set
    whatever the environment said. For `savedmodel`: TensorFlow's GPU memory grown as needed
    (TF_FORCE_GPU_ALLOW_GROWTH=true unless set), so servers compared paired share one GPU, and Keras (which
    TensorFlow imports) on TensorFlow. RuntimeError
    when Keras was already imported with another backend (it cannot be switched afterwards)."""
    if Backend(backend) == Backend.SAVEDMODEL:
        os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")  # TF takes nearly all a GPU's memory otherwise
        # TensorFlow imports Keras as it loads: on the backend the environment names unless told; the SavedModel
        # needs none, so Keras stays on TensorFlow's own (not JAX or PyTorch loaded for nothing).
        if keras_backend_in_use() is None:
            os.environ["KERAS_BACKEND"] = "tensorflow"
    if Backend(backend) not in (Backend.JAX, Backend.TORCH):
        return
    keras_backend = str(Backend(backend))
    in_use = keras_backend_in_use()
    if in_use not in (None, keras_backend):
        raise RuntimeError(f"the {keras_backend} backend needs Keras on {keras_backend}, but this process already "
                           f"imported Keras with the {in_use} backend; start it with KERAS_BACKEND={keras_backend} "
                           "or in a fresh process")
    os.environ["KERAS_BACKEND"] = keras_backend
    if Backend(backend) == Backend.TORCH:
        use_protos_without_runtime()
        return
    # JAX takes 75% of a GPU's memory at its first use unless told not to; off, the memory a GPU shows in
    # use is the model's own. A user's own setting wins.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    use_protos_without_runtime()


__all__ = ["Backend", "RUNTIMES", "Runtime", "keras_backend_in_use", "prepare_process", "runtime_of"]

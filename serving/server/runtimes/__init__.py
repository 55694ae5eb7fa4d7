"""The runtimes a server can run its model on, by `--backend`: the registry, and the one place that picks one.

Each runtime is one module beside this one filling in a `Runtime` record (`runtime.py`): `savedmodel`
(TensorFlow), `jax` (Keras on JAX), `torch` (Keras on PyTorch), `null` (zeros, no model). Adding one is a
module and a line in `RUNTIMES`; `register` adds one at run time (a test's). Reading this registry imports no
runtime: each runtime's heavy imports happen in its functions, after `prepare_process` readied the process.

Not for: a runtime's names in reports (`serving.protocol.runtime_names`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from serving.server.runtimes import keras_jax, keras_torch, null, savedmodel
from serving.server.runtimes.runtime import GpuProbe, Runtime

if TYPE_CHECKING:
    from serving.server.runtimes.model_spec import BackendOptions, LoadedModel

RUNTIMES: dict[str, Runtime] = {r.backend: r for r in (
    savedmodel.RUNTIME, keras_jax.RUNTIME, keras_torch.RUNTIME, null.RUNTIME,
)}
DEFAULT_BACKEND = savedmodel.RUNTIME.backend  # `--backend` unless told: TF Serving's own


def register(runtime: Runtime) -> None:
    """Add a runtime to this process's registry (ValueError when its `--backend` is taken)."""
    if runtime.backend in RUNTIMES:
        raise ValueError(f"a runtime is already registered as --backend {runtime.backend}")
    RUNTIMES[runtime.backend] = runtime


def runtime_of(backend: str) -> Runtime:
    """The runtime `--backend` names; ValueError naming the choices for an unknown one."""
    try:
        return RUNTIMES[str(backend)]
    except KeyError:
        raise ValueError(f"unknown backend {backend!r}; choose one of {sorted(RUNTIMES)}") from None


def prepare_process(backend: str) -> None:
    """Ready this process for `backend`'s runtime, before anything imports TensorFlow or Keras (RuntimeError when
    Keras was already imported on another backend)."""
    runtime_of(backend).prepare()


def load_model(backend: str, name: str, version: int, path: Path, options: BackendOptions) -> LoadedModel:
    """Load `path` (one version directory) on `backend`'s runtime."""
    return runtime_of(backend).load(name, version, Path(path), options)


__all__ = ["DEFAULT_BACKEND", "GpuProbe", "RUNTIMES", "Runtime", "load_model", "prepare_process", "register",
           "runtime_of"]

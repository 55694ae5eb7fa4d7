"""What a runtime must provide to serve a model: the `Runtime` record every runtime module fills in.

A runtime is what turns a batch of input arrays into output arrays (MLPerf's backend: load, run, name,
version). Its record says how it loads a model version, which device it runs on and that device's name,
the trivial round trip to that device (the device floor's), how a process must be readied before the runtime
is imported, how a child process asks it which GPUs it sees, and its names (`serving.protocol.runtime_names`).
Heavy imports (TensorFlow, JAX, PyTorch, Keras) happen inside the functions, never when the record is read.

Not for: the registry (`serving.server.runtimes`) or any one runtime (its own module beside this one).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from serving.protocol.runtime_names import RuntimeName

if TYPE_CHECKING:  # model_spec imports TensorFlow's protos: only after the process was readied
    from serving.server.runtimes.model_spec import BackendOptions, LoadedModel

Loader = Callable[[str, int, Path, "BackendOptions"], "LoadedModel"]
RoundTrip = tuple[Callable[[], None] | None, str]  # the call (None: not applicable) and what it does


@dataclass(frozen=True)
class GpuProbe:
    """How a child process asks a runtime which GPUs it sees: a script printing one JSON line
    `{"version", "cuda", "gpus"}` (`serving.deploy.gpus`), and what to install where it sees none."""

    script: str
    label: str  # "TensorFlow"
    install_hint: str


def _nothing() -> None:
    return None


def deferred(module: str, function: str) -> Callable:
    """`module.function`, imported when first called: a runtime's heavy module loads only in a process that uses
    it (and only after that process was readied)."""
    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    call.__name__ = function
    return call


@dataclass(frozen=True)
class Runtime:
    """One runtime: its names and what it does. `load`, `device_name` and `round_trip` import the runtime."""

    names: RuntimeName
    load: Loader  # one version directory -> a LoadedModel on options.device
    device_name: Callable[[str], str]  # pins the runtime to --device cpu|gpu; its name (RuntimeError: no GPU)
    round_trip: Callable[[str], RoundTrip]  # the trivial device round trip on --device (the device floor's)
    prepare: Callable[[], None] = _nothing  # before anything imports TensorFlow or Keras in the process
    packages: tuple[str, ...] = ()  # whose versions identify it
    gpu_probe: GpuProbe | None = None  # None: it runs nothing on a GPU (TensorFlow's view is asked instead)
    reads_savedmodel: bool = False  # TensorFlow loads the SavedModel itself (a version gap matters)
    runs_model: bool = True  # False: answers without running the model (the null runtime)

    @property
    def backend(self) -> str:
        """Its `--backend`."""
        return self.names.backend

    @property
    def name(self) -> str:
        """As the ready line, server_info and the device floor report it."""
        return self.names.runtime

    def versions(self) -> str:
        """`package=version` pairs, comma-separated ("" for no runtime); read from package metadata, not imports."""
        return ",".join(f"{p}={_installed_version(p)}" for p in self.packages)


def _installed_version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "missing"


__all__ = ["GpuProbe", "Loader", "RoundTrip", "Runtime", "deferred"]

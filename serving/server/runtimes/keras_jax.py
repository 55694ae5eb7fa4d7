"""The `jax` runtime: the export's own weights (`<version>/model.keras`) on Keras 3's JAX backend, XLA-compiled.

What it does with a model is `jax_model` (imported only when a model loads); this module is what the server
needs to know of it before then: readying the process, the device, the device floor's round trip, the GPU probe.

Not for: the registry (`serving.server.runtimes`).
"""

from __future__ import annotations

import numpy as np

from serving.protocol.runtime_names import names_of
from serving.server.runtimes.keras_process import prepare_jax
from serving.server.runtimes.runtime import GpuProbe, RoundTrip, Runtime, deferred

_MODEL = "serving.server.runtimes.jax_model"  # what it does with a model: imported when one loads
_GPU_PROBE = """
import json, importlib.metadata as md, jax
try:
    gpus = [d.device_kind for d in jax.devices("gpu")]
except RuntimeError:
    gpus = []
plugins = [d.metadata["Name"] for d in md.distributions() if "cuda" in (d.metadata["Name"] or "") and
           (d.metadata["Name"] or "").startswith("jax")]
print(json.dumps({"version": jax.__version__, "cuda": bool(plugins or gpus), "gpus": gpus}))
"""


def round_trip(device: str) -> RoundTrip:
    import jax

    from serving.server.runtimes.jax_model import jax_device

    target = jax_device(device)
    x = np.ones(16, np.float32)

    def jax_trip() -> None:
        np.asarray(jax.device_put(x, target) + 1)

    return jax_trip, "jax: device_put 16 float32, add 1, fetch back (np.asarray)"


RUNTIME = Runtime(names_of("jax"), deferred(_MODEL, "load_jax"), deferred(_MODEL, "device_name"), round_trip,
                  prepare_jax, packages=("jax", "jaxlib"),
                  gpu_probe=GpuProbe(_GPU_PROBE, "JAX", "make setup GPU=1 installs jax[cuda12]"))

__all__ = ["RUNTIME"]

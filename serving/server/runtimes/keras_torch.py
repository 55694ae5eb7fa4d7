"""The `torch` runtime: the export's own `model.keras` on Keras 3's PyTorch backend, one CUDA graph per padded size
on a GPU.

What it does with a model is `torch_model` (imported only when a model loads); this module is what the server
needs to know of it before then: readying the process, the device, the device floor's round trip, the GPU probe.

Not for: the registry (`serving.server.runtimes`).
"""

from __future__ import annotations

import numpy as np

from serving.protocol.runtime_names import names_of
from serving.server.runtimes.keras_process import prepare_torch
from serving.server.runtimes.runtime import GpuProbe, RoundTrip, Runtime, deferred

_MODEL = "serving.server.runtimes.torch_model"  # what it does with a model: imported when one loads
_GPU_PROBE = """
import json, torch
gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda is not None, "gpus": gpus}))
"""


def round_trip(device: str) -> RoundTrip:
    import torch

    from serving.server.runtimes.torch_model import torch_device

    place = torch_device(device)
    host = torch.from_numpy(np.ones(16, np.float32))

    def torch_trip() -> None:
        (host.to(place) + 1).cpu().numpy()

    return torch_trip, f"torch: 16 float32 to {place}, add 1, back to the host (.cpu().numpy())"


RUNTIME = Runtime(names_of("torch"), deferred(_MODEL, "load_torch"), deferred(_MODEL, "device_name"), round_trip,
                  prepare_torch, packages=("torch", "keras"),
                  gpu_probe=GpuProbe(_GPU_PROBE, "PyTorch", "install a CUDA build of torch"))

__all__ = ["RUNTIME"]

"""Which GPUs the embedded server's runtime would see, asked in a child process.

The embedded server runs its model on TensorFlow (`--backend savedmodel`) or on JAX (`--backend
jax`), and each sees GPUs through its own CUDA build: a GPU server is only started where the
chosen runtime sees one, and the refusal names what is missing (`describe_missing_gpu`).

Not for: choosing the launcher (`serving.deploy.launcher`) or the server's own device selection
(`serving.server`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from serving.deploy.docker import DockerProbe


@dataclass(frozen=True)
class RuntimeGpus:
    """What one runtime reports about GPUs: its version, whether it has CUDA, the GPUs it sees."""

    version: str
    built_with_cuda: bool
    gpu_names: tuple[str, ...]
    problem: str = ""  # set when the runtime could not even be asked
    runtime: str = "TensorFlow"
    install_hint: str = "make setup GPU=1 installs tensorflow[and-cuda]"


_TF_GPU_PROBE = """
import json, tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
names = [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus]
print(json.dumps({"version": tf.__version__, "cuda": tf.test.is_built_with_cuda(), "gpus": names}))
"""

_JAX_GPU_PROBE = """
import json, importlib.metadata as md, jax
try:
    gpus = [d.device_kind for d in jax.devices("gpu")]
except RuntimeError:
    gpus = []
plugins = [d.metadata["Name"] for d in md.distributions() if "cuda" in (d.metadata["Name"] or "") and
           (d.metadata["Name"] or "").startswith("jax")]
print(json.dumps({"version": jax.__version__, "cuda": bool(plugins or gpus), "gpus": gpus}))
"""


_TORCH_GPU_PROBE = """
import json, torch
gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda is not None, "gpus": gpus}))
"""


def _probe(script: str, runtime: str, hint: str, timeout_s: float) -> RuntimeGpus:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout_s,
                              env=env)
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return RuntimeGpus("unknown", False, (), problem=f"{runtime} GPU probe failed: {exc}", runtime=runtime,
                           install_hint=hint)
    return RuntimeGpus(found["version"], bool(found["cuda"]), tuple(found["gpus"]), runtime=runtime,
                       install_hint=hint)


def probe_tensorflow_gpus(timeout_s: float = 180) -> RuntimeGpus:
    """Ask TensorFlow, in a child process, which GPUs it sees (the savedmodel backend's view)."""
    return _probe(_TF_GPU_PROBE, "TensorFlow", "make setup GPU=1 installs tensorflow[and-cuda]", timeout_s)


def probe_jax_gpus(timeout_s: float = 180) -> RuntimeGpus:
    """Ask JAX, in a child process, which GPUs it sees (the jax backend's view)."""
    return _probe(_JAX_GPU_PROBE, "JAX", "make setup GPU=1 installs jax[cuda12]", timeout_s)


def probe_torch_gpus(timeout_s: float = 180) -> RuntimeGpus:
    """Ask PyTorch, in a child process, which GPUs it sees (the torch backend's view)."""
    return _probe(_TORCH_GPU_PROBE, "PyTorch", "install a CUDA build of torch", timeout_s)


PROBES: dict[str, Callable[[], RuntimeGpus]] = {"savedmodel": probe_tensorflow_gpus, "jax": probe_jax_gpus,
                                                "torch": probe_torch_gpus}


def _flag(flags: list[str], name: str) -> str | None:
    for index, flag in enumerate(flags):
        if flag == name and index + 1 < len(flags):
            return flags[index + 1]
        if flag.startswith(name + "="):
            return flag.partition("=")[2]
    return None


def backend_of(server_flags: Sequence[str], device: str = "cpu") -> str:
    """The backend embedded-server flags choose on `device`: `--gpu_backend` on a GPU when given, else
    `--backend` ("savedmodel" when none is given)."""
    flags = list(server_flags)
    if device == "gpu" and (gpu := _flag(flags, "--gpu_backend")):
        return gpu
    return _flag(flags, "--backend") or "savedmodel"


def describe_missing_gpu(docker: DockerProbe, gpus: RuntimeGpus) -> str:
    """Why nothing can serve on a GPU here: the container's side and the runtime's, in one line."""
    docker_part = (f"no usable Docker engine ({docker.problem})" if not docker.usable
                   else "the Docker engine has no NVIDIA runtime (install nvidia-container-toolkit)")
    if gpus.problem:
        runtime_part = gpus.problem
    elif not gpus.built_with_cuda:
        runtime_part = f"{gpus.runtime} {gpus.version} is a build without CUDA and sees no GPU ({gpus.install_hint})"
    else:
        runtime_part = f"{gpus.runtime} {gpus.version} sees no GPU (no NVIDIA driver/device visible)"
    return f"cannot serve on GPU: {docker_part}, and {runtime_part}. Nothing was started."

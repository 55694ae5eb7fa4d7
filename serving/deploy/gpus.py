"""Which GPUs the embedded server's runtime would see, asked in a child process.

The embedded server runs its model on the runtime `--backend` names (`serving.server.runtimes`), and each
sees GPUs through its own CUDA build: a GPU server is only started where the chosen runtime sees one (its
`GpuProbe`), and the refusal names what is missing (`describe_missing_gpu`).

Not for: choosing the launcher (`serving.deploy.launcher`) or the server's own device selection
(`serving.server`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

from serving.deploy.docker import DockerProbe
from serving.server.runtimes import DEFAULT_BACKEND, runtime_of


@dataclass(frozen=True)
class RuntimeGpus:
    """What one runtime reports about GPUs: its version, whether it has CUDA, the GPUs it sees."""

    version: str
    built_with_cuda: bool
    gpu_names: tuple[str, ...]
    problem: str = ""  # set when the runtime could not even be asked
    runtime: str = "TensorFlow"
    install_hint: str = "make setup GPU=1 installs tensorflow[and-cuda]"


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


DRIVER_GPUS = "/proc/driver/nvidia/gpus"  # the NVIDIA driver's directory: one entry per GPU it drives


def driver_gpus(root: str = DRIVER_GPUS) -> RuntimeGpus:
    """The GPUs the NVIDIA driver drives (one directory each under `root`), asked without any runtime: what a backend
    that runs nothing on a GPU (the null backend of a tool-ceiling twin) checks, where TensorFlow may be absent (a
    device bundle)."""
    try:
        names = tuple(sorted(os.listdir(root)))
    except OSError:
        names = ()
    problem = "" if names else f"the NVIDIA driver drives no GPU here ({root} is absent or empty)"
    return RuntimeGpus("driver", bool(names), names, problem=problem, runtime="the NVIDIA driver",
                       install_hint="install the NVIDIA driver")


def probe_gpus(backend: str, timeout_s: float = 180) -> RuntimeGpus:
    """Ask `backend`'s runtime, in a child process, which GPUs it sees (TensorFlow's view for a runtime that
    runs nothing on a GPU)."""
    probe = runtime_of(backend).gpu_probe or runtime_of(DEFAULT_BACKEND).gpu_probe
    assert probe is not None  # the default runtime (TensorFlow) has one
    return _probe(probe.script, probe.label, probe.install_hint, timeout_s)


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

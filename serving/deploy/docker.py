"""The TF Serving container: probe Docker, run docker/compose.yaml's service, describe what serves.

`probe_docker` asks `docker info` what this host's engine can do (a docker CLI that fails is
reported, never taken as working). `ContainerLauncher` starts the official tensorflow/serving
image for one device through Compose v2, waits until gRPC GetModelStatus says AVAILABLE, and
labels the run with the device TF Serving's own log shows. Pinned image versions come from
docker/.env, overridable from the environment as compose does. A request pinned to cores
(`StartRequest.cpus`) runs the container on them: its cpuset (`compose_environment`).

Not for: choosing between the container and the embedded server (`serving.deploy.launcher`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dotenv import dotenv_values

from model_export.provenance import REPO, cpu_model_name, utc_now
from serving.deploy.process import log_tail
from serving.deploy.readiness import wait_available
from serving.deploy.request import LaunchError, StartRequest
from serving.deploy.tfs_files import compose_variables
from serving.endpoint import Device, ServedEndpoint, ServerKind

COMPOSE_FILE = REPO / "docker" / "compose.yaml"
COMPOSE_ENV_FILE = REPO / "docker" / ".env"
LOG_TAIL_LINES = 40
CPUSET_VARIABLE = "TFS_CPUSET"  # docker/compose.yaml's `cpuset`: the cores the container runs on
LIVE_STATES = ("created", "running", "restarting")
# TensorFlow logs this when TF Serving creates a GPU device, e.g. "Created device
# /job:localhost/replica:0/task:0/device:GPU:0 with 79078 MB memory:  -> device: 0, name: NVIDIA
# H100 80GB HBM3, pci bus id: 0000:00:05.0, compute capability: 9.0" (older releases: "physical GPU
# (device: 0, name: ..., pci bus id: ...)").
TF_GPU_LOG_RE = re.compile(r"device: (?P<index>\d+), name: (?P<name>[^,]+), pci bus id")


@dataclass(frozen=True)
class DockerProbe:
    """What this host's Docker can do; `problem` says why it cannot serve ("" when it can)."""

    compose: tuple[str, ...] = ()
    nvidia_runtime: bool = False
    server_version: str = ""
    problem: str = ""

    @property
    def usable(self) -> bool:
        return not self.problem


def first_line(text: str) -> str:
    """The last non-blank line of a command's output (where tools put their error)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def probe_docker() -> DockerProbe:
    """`docker info` decides: a docker CLI that fails is reported, never taken as working."""
    if not shutil.which("docker"):
        return DockerProbe(problem="`docker` not found on PATH")
    try:
        info = subprocess.run(["docker", "info", "--format", "{{json .}}"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return DockerProbe(problem=f"`docker info` failed: {exc}")
    if info.returncode != 0:
        return DockerProbe(problem=f"`docker info` failed (exit {info.returncode}): "
                                   f"{first_line(info.stderr or info.stdout)}")
    try:
        details = json.loads(info.stdout)
    except ValueError:
        return DockerProbe(problem=f"`docker info` printed no JSON: {first_line(info.stdout)}")
    return _probe_from_info(details)


def _probe_from_info(details: object) -> DockerProbe:
    if not isinstance(details, dict) or details.get("ServerErrors") or not details.get("ServerVersion"):
        errors = details.get("ServerErrors") if isinstance(details, dict) else None
        return DockerProbe(problem=f"Docker engine not reachable: {errors or 'no server version'}")
    compose = compose_command()
    nvidia = "nvidia" in (details.get("Runtimes") or {}) or "nvidia.com/gpu" in json.dumps(
        details.get("DiscoveredDevices") or [])
    problem = "" if compose else "Docker engine reachable but the Compose v2 plugin (`docker compose`) is missing"
    return DockerProbe(compose=compose, nvidia_runtime=nvidia,
                       server_version=str(details.get("ServerVersion")), problem=problem)


def compose_command() -> tuple[str, ...]:
    """Compose v2 (`docker compose`): docker/compose.yaml uses the Compose Specification."""
    try:
        done = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return ("docker", "compose") if done.returncode == 0 else ()


def compose_defaults(path: Path = COMPOSE_ENV_FILE) -> dict[str, str]:
    """The pinned variables of docker/.env (comments and blanks skipped, quotes removed)."""
    return {key: value for key, value in dotenv_values(path).items() if value is not None}


def image_reference(device: str, env: dict[str, str]) -> str:
    """The pinned image: docker/.env, overridable from the environment as compose does."""
    pinned = {**compose_defaults(), **{k: v for k, v in env.items() if k.startswith("TFS_")}}
    return f"{pinned['TFS_IMAGE']}:{pinned['TFS_VERSION']}{'-gpu' if device == Device.GPU else ''}"


def publish_host() -> str:
    """The host address compose publishes the server ports on."""
    return os.environ.get("TFS_PUBLISH_HOST") or compose_defaults().get("TFS_PUBLISH_HOST", "127.0.0.1")


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise LaunchError(f"`docker {' '.join(args)}` did not finish in {timeout:.0f} s") from exc


def container_logs(container: str) -> str:
    done = _docker("logs", "--tail", str(LOG_TAIL_LINES), container)
    if done.returncode != 0:
        return f"(docker logs failed: {first_line(done.stderr)})"
    return log_tail(done.stdout + done.stderr, LOG_TAIL_LINES)


def container_state(container: str | None) -> str:
    done = _docker("inspect", "--format", "{{.State.Status}}", container or "")
    if done.returncode != 0:
        raise LaunchError(f"`docker inspect {container}` failed: {first_line(done.stderr or done.stdout)}")
    return done.stdout.strip()


def compose_environment(request: StartRequest, environ: Mapping[str, str]) -> dict[str, str]:
    """What `docker compose` runs with: `environ`, the generated files' variables, and the cpuset.

    TFS_CPUSET is always the request's cores ("" = unpinned), never a value left in `environ`: the
    request says where the server runs, as it does for the embedded server's `taskset`. It is not in
    compose.env because the cores are not the profile's: one set of files serves any shape."""
    return {**environ, **compose_variables(request.config, request.files), CPUSET_VARIABLE: request.cpus}


class ContainerLauncher:
    """The official tensorflow/serving image through docker/compose.yaml."""

    kind = ServerKind.CONTAINER

    def __init__(self, docker: DockerProbe):
        self.docker = docker

    def _compose(self, request: StartRequest, *args: str, timeout: float) -> subprocess.CompletedProcess:
        env = compose_environment(request, os.environ)
        command = [*self.docker.compose, "-f", str(COMPOSE_FILE), "--env-file", str(COMPOSE_ENV_FILE),
                   "--profile", str(request.device), *args]
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                                  cwd=REPO)
        except subprocess.TimeoutExpired as exc:
            raise LaunchError(f"`{' '.join(command)}` did not finish in {timeout:.0f} s") from exc

    def start(self, request: StartRequest) -> ServedEndpoint:
        deadline = time.monotonic() + request.timeout_s
        container = self._compose_up(request)
        try:
            return self._wait_and_describe(request, container, deadline)
        except LaunchError as exc:
            logs = container_logs(container)
            _docker("rm", "--force", container)
            raise LaunchError(f"{exc}\nlast log lines of container {container} (now removed):\n{logs}") from None

    def _compose_up(self, request: StartRequest) -> str:
        """`docker compose up -d` the device's service; returns its container id."""
        service = f"tfserving-{request.device}"
        up = self._compose(request, "up", "-d", service, timeout=max(request.timeout_s, 600))
        if up.returncode != 0:
            raise LaunchError(f"`docker compose up {service}` failed (exit {up.returncode}):\n"
                              f"{log_tail(up.stderr + up.stdout, LOG_TAIL_LINES)}")
        listed = self._compose(request, "ps", "-q", service, timeout=60)
        container = listed.stdout.strip().splitlines()[0] if listed.returncode == 0 and listed.stdout.strip() else ""
        if not container:
            raise LaunchError(f"`docker compose up` reported success but no {service} container is listed: "
                              f"{first_line(listed.stderr or listed.stdout)}")
        return container

    def _wait_and_describe(self, request: StartRequest, container: str, deadline: float) -> ServedEndpoint:
        def problem() -> str | None:
            state = container_state(container)
            return None if state in LIVE_STATES else f"container {container} is {state}"

        target = f"127.0.0.1:{request.grpc_port}"
        version = wait_available(target, request.config.model.name, deadline, problem)
        device_name = self._device_name(request.device, container)
        image = image_reference(request.device, dict(os.environ))
        image_id = _docker("inspect", "--format", "{{.Image}}", container).stdout.strip()
        return ServedEndpoint(
            name=request.name, kind=ServerKind.CONTAINER, device=request.device, device_name=device_name,
            host="127.0.0.1", grpc_port=request.grpc_port, rest_port=request.rest_port,
            model_name=request.config.model.name, batching_profile=request.files.profile.name,
            batching=request.files.profile.parameters(),
            versions={"image": image, "image_id": image_id, "docker": self.docker.server_version,
                      "model_version": str(version)},
            container=container, started_utc=utc_now())

    def _device_name(self, device: str, container: str) -> str:
        if device == Device.CPU:
            return cpu_model_name()
        logs = _docker("logs", container)
        found = TF_GPU_LOG_RE.search(logs.stderr + logs.stdout)
        if not found:  # TF Serving fell back to CPU: refuse to call it a GPU run
            raise LaunchError("the GPU container serves, but TF Serving's log shows no GPU device "
                              "(it is running on CPU)")
        return found["name"].strip()

    def alive(self, endpoint: ServedEndpoint) -> bool:
        return container_state(endpoint.container) in LIVE_STATES

    def stop(self, endpoint: ServedEndpoint) -> None:
        container = endpoint.container or ""
        stopped = _docker("stop", "--time", "30", container, timeout=90)
        if stopped.returncode != 0 and "No such container" not in stopped.stderr:
            raise LaunchError(f"`docker stop {container}` failed: {first_line(stopped.stderr)}")
        _docker("rm", "--force", container)

"""The embedded server as a launcher: `python -m serving.server` in the background, on the generated files.

It serves the very files the containers mount, on the device's ports, with its output appended
to `<state dir>/<name>-server.log`. It is up once its ready line appears and gRPC
GetModelStatus says AVAILABLE; the device and its name are what the server itself reports, so a
CPU run is never labelled GPU. Which GPUs its runtime would see: `serving.deploy.gpus`.

Not for: choosing between the container and the embedded server (`serving.deploy.launcher`) or
the server itself (`serving.server`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from model_export.provenance import REPO, package_versions, utc_now
from serving.deploy.process import ServerNotReady, log_tail, pinned, read_from, stop_process, wait_ready_line
from serving.deploy.readiness import wait_available
from serving.deploy.request import LaunchError, StartRequest
from serving.deploy.state import state_file_path
from serving.endpoint import ServedEndpoint, ServerKind
from serving.protocol.names import parse_ready_line

FAILED_START_STOP_S = 10.0


def embedded_command(request: StartRequest) -> list[str]:
    """`python -m serving.server` on the generated files: the same files the containers mount."""
    files, config = request.files, request.config
    command = [sys.executable, "-m", "serving.server",
               "--host", config.host, "--port", str(request.grpc_port),
               "--rest_api_port", str(request.rest_port),
               "--model_config_file", str(files.model_config_file),
               "--monitoring_config_file", str(files.monitoring_config_file),
               "--file_system_poll_wait_seconds", str(config.file_system_poll_wait_seconds),
               "--device", str(request.device), "--batching_profile", files.profile.name]
    if files.batching_parameters_file:
        command += ["--enable_batching", "--batching_parameters_file", str(files.batching_parameters_file)]
    return pinned(command + list(request.server_flags), request.cpus)


def server_env() -> dict[str, str]:
    """The environment a server process runs in: unbuffered, the repository importable."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def server_log_path(name: str) -> Path:
    """Background servers' output, appended next to the state file."""
    return state_file_path().parent / f"{name}-server.log"


def library_versions() -> dict[str, str]:
    return {"python": sys.version.split()[0], **package_versions(("tensorflow", "tensorflow-serving-api", "grpcio"))}


def server_versions(ready: dict) -> dict[str, str]:
    """What a result records of the server's software: the runtime its ready line named ("tensorflow",
    "jax", ...; older servers omit it) and that runtime's packages. TensorFlow's version is recorded
    only where TensorFlow ran the model, so a JAX or null server's results never carry it."""
    versions = {**library_versions(), "model_version": ready["version"]}
    runtime = ready.get("runtime")
    if runtime is None:
        return versions
    if runtime != "tensorflow":
        versions.pop("tensorflow", None)
    pairs = (pair.partition("=") for pair in (ready.get("runtime_versions") or "").split(",") if pair)
    return {**versions, "runtime": runtime, **{name: version for name, _, version in pairs}}


def endpoint_from_ready(request: StartRequest, ready_line: str, pid: int) -> ServedEndpoint:
    """The state record of a server from its ready line; refuses a server on the wrong device."""
    ready = parse_ready_line(ready_line)
    if ready["device"] != request.device:  # never label one device's run as the other's
        raise LaunchError(f"asked for device {request.device} but the server reports device {ready['device']}")
    versions = server_versions(ready)
    return ServedEndpoint(
        name=request.name, kind=ServerKind.EMBEDDED, device=ready["device"], device_name=ready["device_name"],
        host=request.config.host, grpc_port=request.grpc_port, rest_port=request.rest_port,
        model_name=request.config.model.name, batching_profile=request.files.profile.name,
        batching=request.files.profile.parameters(), versions=versions, pid=pid, started_utc=utc_now())


def is_our_embedded_server(endpoint: ServedEndpoint) -> bool:
    """The recorded pid is still our server (not a reused pid)."""
    if not endpoint.pid:
        return False
    try:
        cmdline = psutil.Process(endpoint.pid).cmdline()
    except psutil.Error:
        return False
    return "serving.server" in cmdline and str(endpoint.grpc_port) in cmdline


class EmbeddedLauncher:
    """`python -m serving.server` as a background process."""

    kind = ServerKind.EMBEDDED

    def start(self, request: StartRequest) -> ServedEndpoint:
        log = request.log_path or server_log_path(request.name)
        log.parent.mkdir(parents=True, exist_ok=True)
        offset = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as out:
            proc = subprocess.Popen(embedded_command(request), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=REPO, env=server_env(),
                                    start_new_session=True)  # outlives `make`; Ctrl-C there leaves it
        deadline = time.monotonic() + request.timeout_s
        try:
            return self._wait_served(request, proc, log, offset, deadline)
        except BaseException:
            stop_process(proc, FAILED_START_STOP_S)
            raise

    @staticmethod
    def _wait_served(request: StartRequest, proc: subprocess.Popen, log: Path, offset: int,
                     deadline: float) -> ServedEndpoint:
        try:
            line = wait_ready_line(proc, log, offset, deadline - time.monotonic())
        except ServerNotReady as exc:
            raise LaunchError(str(exc)) from None
        endpoint = endpoint_from_ready(request, line, proc.pid)
        wait_available(endpoint.grpc_target, endpoint.model_name, deadline, lambda: (
            f"the embedded server exited with code {proc.returncode}; last lines of {log}:\n"
            f"{log_tail(read_from(log, offset))}" if proc.poll() is not None else None))
        return endpoint

    def alive(self, endpoint: ServedEndpoint) -> bool:
        return is_our_embedded_server(endpoint)

    def stop(self, endpoint: ServedEndpoint) -> None:
        if endpoint.pid and is_our_embedded_server(endpoint):
            stop_process(endpoint.pid)

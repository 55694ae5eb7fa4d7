"""Start, stop and report the model servers behind `make serve`, `make serve-cpu|gpu`, `make stop`.

`start --device cpu|gpu --batching PROFILE` generates TF Serving's files for the profile
(`serving.deploy.config`) and serves them on the device's ports:

- with a reachable Docker engine (and, for GPU, its NVIDIA runtime): the official TF Serving
  container from docker/compose.yaml, waited on until gRPC `GetModelStatus` says AVAILABLE;
- otherwise the embedded server (`python -m serving.server`) in the background on the same ports and
  files; for GPU only when TensorFlow sees a GPU, else a clear error naming what is missing.

Whatever started is recorded in the state file (`serving.deploy.state`) that `make loadtest` reads;
`stop` stops it and clears the record. A CPU run is never labelled GPU: the device and its name
come from what the server itself reports.

`run` is `make serve`: the embedded server in the foreground, recorded while it runs.

Not for: serving requests (see `python -m serving.server`) or generating files (see `serving.deploy.config`).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from model_export.provenance import cpu_model_name, package_versions, utc_now
from serving.deploy.config import (
    DEVICES,
    REPO_ROOT,
    ServingConfig,
    ServingFiles,
    add_config_arguments,
    batching_overrides,
    cli_layer,
    compose_variables,
    generate,
    load_config,
)
from serving.deploy.process import READY_RE
from serving.deploy.state import (
    read_state,
    state_file_path,
    write_state,
)
from serving.endpoint import ServedEndpoint, ServerKind, kind_display_name

COMPOSE_FILE = REPO_ROOT / "docker" / "compose.yaml"
COMPOSE_ENV_FILE = REPO_ROOT / "docker" / ".env"
KINDS = ("auto", "container", "embedded")
LOG_TAIL_LINES = 40
# TensorFlow logs this when TF Serving creates a GPU device, e.g. "Created device
# /job:localhost/replica:0/task:0/device:GPU:0 with 79078 MB memory:  -> device: 0, name: NVIDIA
# H100 80GB HBM3, pci bus id: 0000:00:05.0, compute capability: 9.0" (older releases: "physical GPU
# (device: 0, name: ..., pci bus id: ...)").
TF_GPU_LOG_RE = re.compile(r"device: (?P<index>\d+), name: (?P<name>[^,]+), pci bus id")


class LaunchError(Exception):
    """A start/stop that cannot go ahead; the message is the one line the user sees."""


@dataclass(frozen=True)
class StartRequest:
    device: str  # "cpu" or "gpu"
    kind: str  # one of KINDS
    config: ServingConfig
    files: ServingFiles
    timeout_s: float

    @property
    def name(self) -> str:
        return self.device

    @property
    def grpc_port(self) -> int:
        return self.config.ports(self.device).grpc_port

    @property
    def rest_port(self) -> int:
        return self.config.ports(self.device).rest_port


def tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


# ---------------------------------------------------------------- probes

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


def _first_line(text: str) -> str:
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
                                   f"{_first_line(info.stderr or info.stdout)}")
    try:
        details = json.loads(info.stdout)
    except ValueError:
        return DockerProbe(problem=f"`docker info` printed no JSON: {_first_line(info.stdout)}")
    if not isinstance(details, dict) or details.get("ServerErrors") or not details.get("ServerVersion"):
        errors = details.get("ServerErrors") if isinstance(details, dict) else None
        return DockerProbe(problem=f"Docker engine not reachable: {errors or 'no server version'}")
    compose = _compose_command()
    nvidia = "nvidia" in (details.get("Runtimes") or {}) or "nvidia.com/gpu" in json.dumps(
        details.get("DiscoveredDevices") or [])
    problem = "" if compose else "Docker engine reachable but the Compose v2 plugin (`docker compose`) is missing"
    return DockerProbe(compose=compose, nvidia_runtime=nvidia,
                       server_version=str(details.get("ServerVersion")), problem=problem)


def _compose_command() -> tuple[str, ...]:
    """Compose v2 (`docker compose`): docker/compose.yaml uses the Compose Specification."""
    try:
        done = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return ("docker", "compose") if done.returncode == 0 else ()


@dataclass(frozen=True)
class TensorFlowGpus:
    version: str
    built_with_cuda: bool
    gpu_names: tuple[str, ...]
    problem: str = ""  # set when TensorFlow could not even be asked


_TF_GPU_PROBE = """
import json, tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
names = [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus]
print(json.dumps({"version": tf.__version__, "cuda": tf.test.is_built_with_cuda(), "gpus": names}))
"""


def probe_tensorflow_gpus(timeout_s: float = 180) -> TensorFlowGpus:
    """Ask TensorFlow, in a child process, which GPUs it sees (the embedded server's view)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    try:
        done = subprocess.run([sys.executable, "-c", _TF_GPU_PROBE], capture_output=True, text=True,
                              timeout=timeout_s, env=env)
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return TensorFlowGpus("unknown", False, (), problem=f"TensorFlow GPU probe failed: {exc}")
    return TensorFlowGpus(found["version"], bool(found["cuda"]), tuple(found["gpus"]))


def describe_missing_gpu(docker: DockerProbe, tf_gpus: TensorFlowGpus) -> str:
    docker_part = (f"no usable Docker engine ({docker.problem})" if not docker.usable
                   else "the Docker engine has no NVIDIA runtime (install nvidia-container-toolkit)")
    if tf_gpus.problem:
        tf_part = tf_gpus.problem
    elif not tf_gpus.built_with_cuda:
        tf_part = f"TensorFlow {tf_gpus.version} is a build without CUDA and sees no GPU"
    else:
        tf_part = f"TensorFlow {tf_gpus.version} sees no GPU (no NVIDIA driver/device visible)"
    return f"cannot serve on GPU: {docker_part}, and {tf_part}. Nothing was started."


# ---------------------------------------------------------------- ports and liveness

def port_holder(port: int) -> str:
    """Who listens on `port`, for the error message ("" when unknown)."""
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return f"pid {conn.pid} ({psutil.Process(conn.pid).name()})"
    except (psutil.Error, OSError):
        pass
    return ""


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            holder = port_holder(port)
            raise LaunchError(f"port {port} on {host} is already in use{' by ' + holder if holder else ''} "
                              f"({exc.strerror}); stop that process or choose other ports "
                              f"(--grpc_port/--rest_port or SERVING_<DEVICE>_GRPC_PORT)") from None


def is_our_embedded_server(endpoint: ServedEndpoint) -> bool:
    """The recorded pid is still our server (not a reused pid)."""
    if not endpoint.pid:
        return False
    try:
        cmdline = psutil.Process(endpoint.pid).cmdline()
    except psutil.Error:
        return False
    return "serving.server" in cmdline and str(endpoint.grpc_port) in cmdline


@contextmanager
def quiet_native_stderr():
    """Silence file descriptor 2 while TensorFlow loads: its C++ start-up lines (oneDNN, CUDA
    stubs) ignore TF_CPP_MIN_LOG_LEVEL and would bury the launcher's one-line answer. Python
    exceptions are unaffected: they are raised after the descriptor is restored."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def wait_available(target: str, model: str, deadline: float,
                   problem: Callable[[], str | None]) -> int:
    """Poll gRPC GetModelStatus until a version is AVAILABLE; returns that version.

    `problem()` reports a server that died meanwhile, so the wait ends at once instead of at
    the deadline.
    """
    reason = problem()  # before the slow import below (it loads all of TensorFlow)
    if reason:
        raise LaunchError(reason)
    import grpc

    with quiet_native_stderr():
        from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc
        from tensorflow_serving.apis.get_model_status_pb2 import ModelVersionStatus

    last = "no answer yet"
    with grpc.insecure_channel(target) as channel:
        stub = model_service_pb2_grpc.ModelServiceStub(channel)
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = model
        while time.monotonic() < deadline:
            reason = problem()
            if reason:
                raise LaunchError(reason)
            try:
                reply = stub.GetModelStatus(request, timeout=5)
                available = [s.version for s in reply.model_version_status
                             if s.state == ModelVersionStatus.AVAILABLE]
                if available:
                    return max(available)
                last = ", ".join(f"v{s.version} {ModelVersionStatus.State.Name(s.state)}"
                                 for s in reply.model_version_status) or "no versions"
            except grpc.RpcError as exc:
                last = f"{exc.code().name}: {exc.details()}"
            time.sleep(0.5)
    raise LaunchError(f"model {model!r} not AVAILABLE at {target} in time (last GetModelStatus: {last})")


def library_versions() -> dict[str, str]:
    return {"python": sys.version.split()[0], **package_versions(("tensorflow", "tensorflow-serving-api", "grpcio"))}


# ---------------------------------------------------------------- the embedded server

def embedded_command(request: StartRequest) -> list[str]:
    """`python -m serving.server` on the generated files: the same files the containers mount."""
    files, config = request.files, request.config
    command = [sys.executable, "-m", "serving.server",
               "--host", config.host, "--port", str(request.grpc_port),
               "--rest_api_port", str(request.rest_port),
               "--model_config_file", str(files.model_config_file),
               "--monitoring_config_file", str(files.monitoring_config_file),
               "--file_system_poll_wait_seconds", str(config.file_system_poll_wait_seconds),
               "--device", request.device, "--batching_profile", files.profile.name]
    if files.batching_parameters_file:
        command += ["--enable_batching", "--batching_parameters_file", str(files.batching_parameters_file)]
    return command


def server_log_path(name: str) -> Path:
    """Background servers' output, appended next to the state file."""
    return state_file_path().parent / f"{name}-server.log"


def _server_env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}


def _read_from(path: Path, offset: int) -> str:
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read().decode(errors="replace")


def wait_ready_line(proc: subprocess.Popen, log: Path, offset: int, deadline: float) -> re.Match:
    """The server's one ready line, or an error with the log's last lines if it died or hung."""
    while time.monotonic() < deadline:
        text = _read_from(log, offset)
        match = READY_RE.search(text)
        if match:
            return match
        if proc.poll() is not None:
            raise LaunchError(f"the embedded server exited with code {proc.returncode} before it was ready; "
                              f"last lines of {log}:\n{tail(text)}")
        time.sleep(0.1)
    raise LaunchError(f"the embedded server printed no ready line in time; last lines of {log}:\n"
                      f"{tail(_read_from(log, offset))}")


def endpoint_from_ready(request: StartRequest, ready: re.Match, pid: int) -> ServedEndpoint:
    if ready["device"] != request.device:  # never label one device's run as the other's
        raise LaunchError(f"asked for device {request.device} but the server reports device {ready['device']}")
    versions = {**library_versions(), "model_version": ready["version"]}
    return ServedEndpoint(
        name=request.name, kind=ServerKind.EMBEDDED, device=ready["device"], device_name=ready["device_name"],
        host=request.config.host, grpc_port=request.grpc_port, rest_port=request.rest_port,
        model_name=request.config.model.name, batching_profile=request.files.profile.name,
        batching=request.files.profile.parameters(), versions=versions, pid=pid, started_utc=utc_now())


def terminate(proc_pid: int, timeout_s: float = 30) -> None:
    """SIGTERM (the server drains in-flight calls), then SIGKILL if it does not exit in time."""
    try:
        process = psutil.Process(proc_pid)
        process.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs([process], timeout=timeout_s)
        for leftover in alive:
            leftover.kill()
    except psutil.NoSuchProcess:
        pass


class EmbeddedLauncher:
    """`python -m serving.server` as a background process."""

    kind = ServerKind.EMBEDDED

    def start(self, request: StartRequest) -> ServedEndpoint:
        log = server_log_path(request.name)
        log.parent.mkdir(parents=True, exist_ok=True)
        offset = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as out:
            proc = subprocess.Popen(embedded_command(request), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=REPO_ROOT, env=_server_env(),
                                    start_new_session=True)  # outlives `make`; Ctrl-C there leaves it
        deadline = time.monotonic() + request.timeout_s
        try:
            ready = wait_ready_line(proc, log, offset, deadline)
            endpoint = endpoint_from_ready(request, ready, proc.pid)
            wait_available(endpoint.grpc_target, endpoint.model_name, deadline, lambda: (
                f"the embedded server exited with code {proc.returncode}; last lines of {log}:\n"
                f"{tail(_read_from(log, offset))}" if proc.poll() is not None else None))
        except BaseException:
            terminate(proc.pid, timeout_s=10)
            raise
        return endpoint

    def alive(self, endpoint: ServedEndpoint) -> bool:
        return is_our_embedded_server(endpoint)

    def stop(self, endpoint: ServedEndpoint) -> None:
        if is_our_embedded_server(endpoint):
            terminate(endpoint.pid)


# ---------------------------------------------------------------- the TF Serving container

def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a compose env file (comments and blanks skipped)."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip().strip("'\"")
    return values


def image_reference(device: str, env: dict[str, str]) -> str:
    """The pinned image: docker/.env, overridable from the environment as compose does."""
    pinned = {**read_env_file(COMPOSE_ENV_FILE), **{k: v for k, v in env.items() if k.startswith("TFS_")}}
    return f"{pinned['TFS_IMAGE']}:{pinned['TFS_VERSION']}{'-gpu' if device == 'gpu' else ''}"


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise LaunchError(f"`docker {' '.join(args)}` did not finish in {timeout:.0f} s") from exc


def container_logs(container: str) -> str:
    done = _docker("logs", "--tail", str(LOG_TAIL_LINES), container)
    if done.returncode != 0:
        return f"(docker logs failed: {_first_line(done.stderr)})"
    return tail(done.stdout + done.stderr)


def container_state(container: str) -> str:
    done = _docker("inspect", "--format", "{{.State.Status}}", container)
    if done.returncode != 0:
        raise LaunchError(f"`docker inspect {container}` failed: {_first_line(done.stderr or done.stdout)}")
    return done.stdout.strip()


class ContainerLauncher:
    """The official tensorflow/serving image through docker/compose.yaml."""

    kind = ServerKind.CONTAINER

    def __init__(self, docker: DockerProbe):
        self.docker = docker

    def _compose(self, request: StartRequest, *args: str, timeout: float) -> subprocess.CompletedProcess:
        env = {**os.environ, **compose_variables(request.config, request.files)}
        command = [*self.docker.compose, "-f", str(COMPOSE_FILE), "--env-file", str(COMPOSE_ENV_FILE),
                   "--profile", request.device, *args]
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                                  cwd=REPO_ROOT)
        except subprocess.TimeoutExpired as exc:
            raise LaunchError(f"`{' '.join(command)}` did not finish in {timeout:.0f} s") from exc

    def start(self, request: StartRequest) -> ServedEndpoint:
        service = f"tfserving-{request.device}"
        deadline = time.monotonic() + request.timeout_s
        up = self._compose(request, "up", "-d", service, timeout=max(request.timeout_s, 600))
        if up.returncode != 0:
            raise LaunchError(f"`docker compose up {service}` failed (exit {up.returncode}):\n"
                              f"{tail(up.stderr + up.stdout)}")
        listed = self._compose(request, "ps", "-q", service, timeout=60)
        container = listed.stdout.strip().splitlines()[0] if listed.returncode == 0 and listed.stdout.strip() else ""
        if not container:
            raise LaunchError(f"`docker compose up` reported success but no {service} container is listed: "
                              f"{_first_line(listed.stderr or listed.stdout)}")
        try:
            return self._wait_and_describe(request, container, deadline)
        except LaunchError as exc:
            logs = container_logs(container)
            _docker("rm", "--force", container)
            raise LaunchError(f"{exc}\nlast log lines of container {container} (now removed):\n{logs}") from None

    def _wait_and_describe(self, request: StartRequest, container: str, deadline: float) -> ServedEndpoint:
        def problem() -> str | None:
            state = container_state(container)
            return None if state in ("created", "running", "restarting") else f"container {container} is {state}"

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
        if device == "cpu":
            return cpu_model_name()
        logs = _docker("logs", container)
        found = TF_GPU_LOG_RE.search(logs.stderr + logs.stdout)
        if not found:  # TF Serving fell back to CPU: refuse to call it a GPU run
            raise LaunchError("the GPU container serves, but TF Serving's log shows no GPU device "
                              "(it is running on CPU)")
        return found["name"].strip()

    def alive(self, endpoint: ServedEndpoint) -> bool:
        return container_state(endpoint.container) in ("created", "running", "restarting")

    def stop(self, endpoint: ServedEndpoint) -> None:
        stopped = _docker("stop", "--time", "30", endpoint.container, timeout=90)
        if stopped.returncode != 0 and "No such container" not in stopped.stderr:
            raise LaunchError(f"`docker stop {endpoint.container}` failed: {_first_line(stopped.stderr)}")
        _docker("rm", "--force", endpoint.container)


def launcher_for(kind: str, docker: DockerProbe | None = None):
    """The registry: server kind -> launcher (a container launcher needs the Docker probe)."""
    if kind == ServerKind.CONTAINER:
        return ContainerLauncher(docker or probe_docker())
    if kind == ServerKind.EMBEDDED:
        return EmbeddedLauncher()
    raise LaunchError(f"unknown server kind {kind!r} in the state file")


# ---------------------------------------------------------------- choosing and orchestrating

def choose_launcher(device: str, kind: str, docker: DockerProbe,
                    tf_gpus: Callable[[], TensorFlowGpus] = probe_tensorflow_gpus):
    """Container when Docker can do it, else the embedded server; returns (launcher, note).

    The note says, in one line, why the embedded server was chosen; it is empty otherwise.
    """
    docker_fits = docker.usable and (device == "cpu" or docker.nvidia_runtime)
    if kind == "container" or (kind == "auto" and docker_fits):
        if not docker.usable:
            raise LaunchError(f"cannot start the TF Serving container: {docker.problem}")
        if not docker_fits:
            raise LaunchError("cannot start the TF Serving GPU container: the Docker engine has no NVIDIA "
                              "runtime (install nvidia-container-toolkit)")
        return ContainerLauncher(docker), ""
    note = ""
    if kind == "auto":
        note = (f"no usable Docker engine ({docker.problem})" if not docker.usable
                else "the Docker engine has no NVIDIA runtime")
    if device == "gpu":
        gpus = tf_gpus()
        if not gpus.gpu_names:
            raise LaunchError(describe_missing_gpu(docker, gpus))
    return EmbeddedLauncher(), note


def already_serving(request: StartRequest, existing: ServedEndpoint) -> bool:
    """True when the same server is up; raises when something different holds the name."""
    if not launcher_for(existing.kind).alive(existing):
        return False
    if existing.batching_profile != request.files.profile.name or existing.grpc_port != request.grpc_port:
        raise LaunchError(f"a {existing.device} server is already running ({existing.kind}, profile "
                          f"{existing.batching_profile}, grpc {existing.grpc_target}); run `make stop` first")
    return True


def describe(endpoint: ServedEndpoint) -> str:
    where = f"pid {endpoint.pid}" if endpoint.pid else f"container {(endpoint.container or '?')[:12]}"
    kind = kind_display_name(endpoint.kind)
    version = endpoint.versions.get("model_version", "?")
    return (f"{kind} on {endpoint.device} ({endpoint.device_name}), {where}, grpc {endpoint.grpc_target}, "
            f"rest {endpoint.rest_url}, batching profile {endpoint.batching_profile}, "
            f"model {endpoint.model_name} v{version}")


def check_model_exists(config: ServingConfig) -> None:
    base = config.model.base_path
    versions = [p for p in base.glob("*") if p.is_dir() and p.name.isdigit()] if base.is_dir() else []
    if not versions:
        raise LaunchError(f"no model versions under {base}; run `make export` (or pass --models_dir)")


@contextmanager
def state_lock():
    """One launcher at a time per state file, so two `make serve-cpu` cannot start two servers."""
    path = state_file_path().with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def start(request: StartRequest, docker: DockerProbe | None = None) -> tuple[ServedEndpoint, str]:
    """Start (or find running) the server for `request.device`; returns its record and a note."""
    with state_lock():
        return _start_locked(request, docker)


def _start_locked(request: StartRequest, docker: DockerProbe | None) -> tuple[ServedEndpoint, str]:
    state = read_state()
    existing = state.get(request.name)
    if existing and already_serving(request, existing):
        launcher = launcher_for(existing.kind)
        wait_available(existing.grpc_target, existing.model_name, time.monotonic() + min(request.timeout_s, 30),
                       lambda: None if launcher.alive(existing) else f"the recorded {existing.name} server died")
        return existing, "already running"
    if existing:  # a stale record of a server that is gone
        del state[request.name]
        write_state(state)
    check_model_exists(request.config)
    launcher, note = choose_launcher(request.device, request.kind, docker or probe_docker())
    publish_host = request.config.host if launcher.kind == ServerKind.EMBEDDED else _publish_host()
    for port in (request.grpc_port, request.rest_port):
        check_port_free(publish_host, port)
    endpoint = launcher.start(request)
    write_state({**read_state(), request.name: endpoint})
    return endpoint, note


def _publish_host() -> str:
    return os.environ.get("TFS_PUBLISH_HOST") or read_env_file(COMPOSE_ENV_FILE).get("TFS_PUBLISH_HOST", "127.0.0.1")


def stop(names: list[str] | None = None) -> list[str]:
    """Stop the recorded servers (all, or those named) and drop their records."""
    state = read_state()
    stopped = []
    for name in list(names or state):
        endpoint = state.get(name)
        if endpoint is None:
            continue
        launcher_for(endpoint.kind).stop(endpoint)
        del state[name]
        write_state(state)
        stopped.append(f"stopped {name}: {endpoint.kind} ({endpoint.pid or endpoint.container})")
    return stopped


def run_foreground(request: StartRequest) -> int:
    """`make serve`: the embedded server in this terminal, recorded in the state file while it runs."""
    existing = read_state().get(request.name)
    if existing and launcher_for(existing.kind).alive(existing):
        raise LaunchError(f"a {existing.device} server is already running ({existing.kind}, grpc "
                          f"{existing.grpc_target}); run `make stop` first")
    check_model_exists(request.config)
    for port in (request.grpc_port, request.rest_port):
        check_port_free(request.config.host, port)
    proc = subprocess.Popen(embedded_command(request), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=REPO_ROOT, env=_server_env())
    recorded = False
    try:
        for line in proc.stdout:
            print(line, end="", flush=True)
            ready = READY_RE.search(line)
            if ready and not recorded:
                write_state({**read_state(), request.name: endpoint_from_ready(request, ready, proc.pid)})
                recorded = True
        return proc.wait()
    except KeyboardInterrupt:  # the server got the same Ctrl-C and drains; wait for it
        return proc.wait()
    finally:
        if proc.poll() is None:
            terminate(proc.pid)
        state = read_state()
        if recorded and state.get(request.name) and state[request.name].pid == proc.pid:
            del state[request.name]
            write_state(state)


def status_lines() -> list[str]:
    lines = []
    for name, endpoint in sorted(read_state().items()):
        try:
            alive = launcher_for(endpoint.kind).alive(endpoint)
        except LaunchError as exc:
            alive, endpoint = False, replace(endpoint, device_name=f"{endpoint.device_name}; {exc}")
        lines.append(f"{name}: {'up' if alive else 'GONE'}: {describe(endpoint)}")
    return lines or ["no servers recorded (start one with make serve-cpu / make serve-gpu)"]


# ---------------------------------------------------------------- CLI

def build_request(args: argparse.Namespace) -> StartRequest:
    cli = cli_layer(args)
    ports = {key: value for key, value in (("grpc_port", args.grpc_port), ("rest_port", args.rest_port)) if value}
    if ports:
        cli["devices"] = {args.device: ports}
    config = load_config(args.config, cli=cli)
    files = generate(config, args.batching, args.build_dir, batching_overrides(os.environ, args.set))
    return StartRequest(device=args.device, kind=getattr(args, "kind", ServerKind.EMBEDDED), config=config, files=files,
                        timeout_s=args.timeout_s)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m serving.deploy.launcher", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("start", "start a server in the background (make serve-cpu / serve-gpu)"),
                            ("run", "run the embedded server in the foreground (make serve)")):
        sub = commands.add_parser(name, help=help_text)
        add_config_arguments(sub)
        sub.add_argument("--device", choices=DEVICES, default="cpu")
        sub.add_argument("--batching", default="off", help="batching profile from the serving config")
        sub.add_argument("--grpc_port", type=int, help="host gRPC port (default: the device's from the config)")
        sub.add_argument("--rest_port", type=int, help="host REST port (default: the device's from the config)")
        sub.add_argument("--timeout_s", type=float,
                         default=float(os.environ.get("SERVING_START_TIMEOUT_S", 300)),
                         help="bounded wait for the model to be AVAILABLE")
        if name == "start":
            sub.add_argument("--kind", choices=KINDS, default=os.environ.get("SERVING_KIND", "auto"),
                             help="auto: container when Docker can, else embedded")
    stop_parser = commands.add_parser("stop", help="stop what was started and clear the state file")
    stop_parser.add_argument("names", nargs="*", help="server names (cpu, gpu); default all")
    commands.add_parser("status", help="list recorded servers")
    return parser.parse_args(argv)


def run(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "stop":
        print("\n".join(stop(args.names) or ["nothing to stop"]))
        return 0
    if args.command == "status":
        print("\n".join(status_lines()))
        return 0
    request = build_request(args)
    if args.command == "run":
        return run_foreground(request)
    endpoint, note = start(request)
    prefix = f"{note}: started the " if note and note != "already running" else (
        "already running: " if note else "started ")
    print(f"serve-{request.device}: {prefix}{describe(endpoint)} AVAILABLE", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(argv)
    except (LaunchError, ValueError) as exc:
        print(f"serving.deploy.launcher: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

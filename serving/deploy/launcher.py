"""Start, stop and report the model servers behind `mnist-bench serve start|run|stop|status`.

`start(request)` serves the request's generated TF Serving files on the device's ports:

- with a reachable Docker engine (and, for GPU, its NVIDIA runtime): the official TF Serving
  container (`serving.deploy.docker`), waited on until gRPC `GetModelStatus` says AVAILABLE;
- otherwise the embedded server (`serving.deploy.embedded`) in the background on the same ports
  and files; for GPU only when TensorFlow sees a GPU, else a clear error naming what is missing.

Before it starts a server, `start` warns in one line when the model version it will serve was written
by a newer TensorFlow than the server runs (`serving.deploy.versions`), and the record carries the
TensorFlow that wrote the version it serves (`model_tensorflow` among its versions) for the report.

Whatever started is recorded in the state file (`serving.deploy.state`) that the load test reads;
`stop` stops it and clears the record. `run_foreground` is `make serve`: the embedded server in
this terminal, recorded while it runs. One launcher at a time per state file (`state_lock`).

Not for: serving requests (`serving.server`), generating files (`serving.deploy.tfs_files`) or
the command line (`serving.cli`).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from model_export.metadata import latest_version_dir, tensorflow_version
from model_export.provenance import REPO, package_versions
from serving.deploy.config import ServingConfig
from serving.deploy.docker import ContainerLauncher, DockerProbe, image_reference, probe_docker, publish_host
from serving.deploy.embedded import EmbeddedLauncher, embedded_command, endpoint_from_ready, server_env
from serving.deploy.gpus import RuntimeGpus, describe_missing_gpu, driver_gpus, probe_gpus
from serving.deploy.process import stop_process
from serving.deploy.readiness import check_port_free, wait_available
from serving.deploy.request import LaunchError, LaunchKind, StartRequest
from serving.deploy.state import read_state, state_file_path, write_state
from serving.deploy.versions import (
    MODEL_TENSORFLOW,
    embedded_server,
    gap_warning,
    image_tensorflow_version,
    major_minor,
)
from serving.endpoint import Device, ServedEndpoint, ServerKind, kind_display_name, runtime_display_name
from serving.protocol.names import READY_RE
from serving.server.flags import backend_in
from serving.server.runtimes import runtime_of

Launcher = ContainerLauncher | EmbeddedLauncher
ALREADY_RUNNING = "already running"


def warn_on_stderr(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


def launcher_for(kind: str, docker: DockerProbe | None = None) -> Launcher:
    """The registry: recorded server kind -> launcher (a container launcher needs the Docker probe)."""
    if kind == ServerKind.CONTAINER:
        return ContainerLauncher(docker or probe_docker())
    if kind == ServerKind.EMBEDDED:
        return EmbeddedLauncher()
    raise LaunchError(f"unknown server kind {kind!r} in the state file")


def choose_launcher(device: str, kind: str, docker: DockerProbe,
                    tf_gpus: Callable[[], RuntimeGpus] | None = None,
                    server_flags: tuple[str, ...] = ()) -> tuple[Launcher, str]:
    """Container when Docker can do it, else the embedded server; returns (launcher, note).

    The note says, in one line, why the embedded server was chosen; it is empty otherwise. A GPU
    server is refused where the chosen backend's runtime (TensorFlow or JAX) sees no GPU; the null backend, which runs
    nothing on a device (a tool-ceiling twin's), is not (it would ask TensorFlow, absent from a device bundle).
    Embedded-server flags mean the embedded server: the container does not take them. Pinned cores
    (`StartRequest.cpus`) do not decide: either server takes them, the embedded server as its `taskset`,
    the container as its cpuset (a replica shape of k cores is the same on both, issue #52).
    """
    if server_flags:
        if kind == LaunchKind.CONTAINER:
            raise LaunchError(f"embedded-server settings {' '.join(server_flags)} cannot go to a TF Serving container")
        kind = LaunchKind.EMBEDDED
    docker_fits = docker.usable and (device == Device.CPU or docker.nvidia_runtime)
    if kind == LaunchKind.CONTAINER or (kind == LaunchKind.AUTO and docker_fits):
        if not docker.usable:
            raise LaunchError(f"cannot start the TF Serving container: {docker.problem}")
        if not docker_fits:
            raise LaunchError("cannot start the TF Serving GPU container: the Docker engine has no NVIDIA "
                              "runtime (install nvidia-container-toolkit)")
        return ContainerLauncher(docker), ""
    note = ""
    if kind == LaunchKind.AUTO:
        note = (f"no usable Docker engine ({docker.problem})" if not docker.usable
                else "the Docker engine has no NVIDIA runtime")
    backend = backend_in(server_flags, device)
    if device == Device.GPU:
        # the null backend runs nothing on the GPU: the driver is asked, not a runtime (TensorFlow is absent from a
        # device bundle), so a GPU configuration is still refused where no GPU is there
        runs_model = runtime_of(backend).runs_model
        gpus = (tf_gpus() if tf_gpus else probe_gpus(backend)) if runs_model else driver_gpus()
        if not gpus.gpu_names:
            raise LaunchError(describe_missing_gpu(docker, gpus))
    return EmbeddedLauncher(), note


def already_serving(request: StartRequest, existing: ServedEndpoint) -> bool:
    """True when the same server is up; raises when something different holds the name."""
    if not launcher_for(existing.kind).alive(existing):
        return False
    if existing.batching_profile != request.files.profile.name or existing.grpc_port != request.grpc_port:
        raise LaunchError(f"a {existing.device} server is {ALREADY_RUNNING} ({existing.kind}, profile "
                          f"{existing.batching_profile}, grpc {existing.grpc_target}); run `make stop` first")
    return True


def describe(endpoint: ServedEndpoint) -> str:
    """One line naming a server: kind, device, where it runs and what it serves."""
    where = f"pid {endpoint.pid}" if endpoint.pid else f"container {(endpoint.container or '?')[:12]}"
    runtime = endpoint.versions.get("runtime")
    kind = kind_display_name(endpoint.kind) + (f" ({runtime_display_name(endpoint.kind, runtime)})" if runtime else "")
    version = endpoint.versions.get("model_version", "?")
    return (f"{kind} on {endpoint.device} ({endpoint.device_name}), {where}, grpc {endpoint.grpc_target}, "
            f"rest {endpoint.rest_url}, batching profile {endpoint.batching_profile}, "
            f"model {endpoint.model_name} v{version}")


def check_model_exists(config: ServingConfig) -> None:
    base = config.model.base_path
    versions = [p for p in base.glob("*") if p.is_dir() and p.name.isdigit()] if base.is_dir() else []
    if not versions:
        raise LaunchError(f"no model versions under {base}; run `make export` (or pass --models-dir)")


def launched_server_tensorflow(kind: str, request: StartRequest) -> tuple[str, str | None] | None:
    """(name, TensorFlow) of the server a launch of `kind` starts: the pinned image's release, or the
    installed TensorFlow for the embedded server; None where no TensorFlow loads the SavedModel."""
    if kind == ServerKind.CONTAINER:
        image = image_reference(request.device, dict(os.environ))
        return image, image_tensorflow_version(image)
    if not runtime_of(backend_in(request.server_flags, request.device)).reads_savedmodel:  # JAX, torch, null
        return None
    installed = package_versions(("tensorflow",))["tensorflow"]
    return (embedded_server(installed), installed) if major_minor(installed) else None


def version_warning(request: StartRequest, kind: str) -> str | None:
    """One line when the version the server will load (the latest) was written by a newer TensorFlow."""
    server = launched_server_tensorflow(kind, request)
    version_dir = latest_version_dir(request.config.model.base_path)
    if server is None or version_dir is None:
        return None
    return gap_warning(request.config.model.name, version_dir.name, tensorflow_version(version_dir), *server)


def with_model_tensorflow(endpoint: ServedEndpoint, request: StartRequest) -> ServedEndpoint:
    """The record, with the TensorFlow that wrote the model version it serves where its metadata says."""
    version = endpoint.versions.get("model_version")
    written_by = tensorflow_version(request.config.model.base_path / str(version)) if version else None
    return replace(endpoint, versions={**endpoint.versions, MODEL_TENSORFLOW: written_by}) if written_by else endpoint


@contextmanager
def state_lock() -> Iterator[None]:
    """One launcher at a time per state file, so two `make serve-cpu` cannot start two servers."""
    path = state_file_path().with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def start(request: StartRequest, docker: DockerProbe | None = None,
          warn: Callable[[str], None] = warn_on_stderr) -> tuple[ServedEndpoint, str]:
    """Start (or find running) the server for `request.device`; returns its record and a note.
    `warn` gets the one-line version warning, when there is one, before the server starts."""
    with state_lock():
        running = _running_match(request)
        if running is not None:
            return running, ALREADY_RUNNING
        check_model_exists(request.config)
        launcher, note = choose_launcher(request.device, request.kind, docker or probe_docker(),
                                         server_flags=request.server_flags)
        host = request.config.host if launcher.kind == ServerKind.EMBEDDED else publish_host()
        for port in (request.grpc_port, request.rest_port):
            check_port_free(host, port)
        warning = version_warning(request, launcher.kind)
        if warning:
            warn(warning)
        endpoint = with_model_tensorflow(launcher.start(request), request)
        write_state({**read_state(), request.name: endpoint})
        return endpoint, note


def _running_match(request: StartRequest) -> ServedEndpoint | None:
    """The recorded server for the request when it is up and the same; a stale record is dropped."""
    state = read_state()
    existing = state.get(request.name)
    if existing and already_serving(request, existing):
        launcher = launcher_for(existing.kind)
        wait_available(existing.grpc_target, existing.model_name, time.monotonic() + min(request.timeout_s, 30),
                       lambda: None if launcher.alive(existing) else f"the recorded {existing.name} server died")
        return existing
    if existing:  # a stale record of a server that is gone
        del state[request.name]
        write_state(state)
    return None


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


def run_foreground(request: StartRequest, warn: Callable[[str], None] = warn_on_stderr) -> int:
    """`make serve`: the embedded server in this terminal, recorded in the state file while it runs."""
    existing = read_state().get(request.name)
    if existing and launcher_for(existing.kind).alive(existing):
        raise LaunchError(f"a {existing.device} server is {ALREADY_RUNNING} ({existing.kind}, grpc "
                          f"{existing.grpc_target}); run `make stop` first")
    check_model_exists(request.config)
    for port in (request.grpc_port, request.rest_port):
        check_port_free(request.config.host, port)
    warning = version_warning(request, ServerKind.EMBEDDED)
    if warning:
        warn(warning)
    proc = subprocess.Popen(embedded_command(request), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=REPO, env=server_env())
    try:
        return _echo_and_record(request, proc)
    except KeyboardInterrupt:  # the server got the same Ctrl-C and drains; wait for it
        return proc.wait()
    finally:
        stop_process(proc)
        _forget(request.name, proc.pid)


def _echo_and_record(request: StartRequest, proc: subprocess.Popen) -> int:
    """Copy the server's output to this terminal; record it in the state file once it is ready."""
    recorded = False
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", flush=True)
        ready = READY_RE.search(line)
        if ready and not recorded:
            endpoint = with_model_tensorflow(endpoint_from_ready(request, ready.group(0), proc.pid), request)
            write_state({**read_state(), request.name: endpoint})
            recorded = True
    return proc.wait()


def _forget(name: str, pid: int) -> None:
    """Drop the state record of server `name` if it is the process `pid`."""
    state = read_state()
    if state.get(name) and state[name].pid == pid:
        del state[name]
        write_state(state)


def status_lines() -> list[str]:
    """One line per recorded server, saying whether it is still up."""
    lines = []
    for name, endpoint in sorted(read_state().items()):
        try:
            alive = launcher_for(endpoint.kind).alive(endpoint)
        except LaunchError as exc:
            alive, endpoint = False, replace(endpoint, device_name=f"{endpoint.device_name}; {exc}")
        lines.append(f"{name}: {'up' if alive else 'GONE'}: {describe(endpoint)}")
    return lines or ["no servers recorded (start one with make serve-cpu / make serve-gpu)"]


def start_message(request: StartRequest, endpoint: ServedEndpoint, note: str) -> str:
    """The one line `serve start` prints."""
    if note == ALREADY_RUNNING:
        prefix = f"{ALREADY_RUNNING}: "
    elif note:
        prefix = f"{note}: started the "
    else:
        prefix = "started "
    return f"serve-{request.device}: {prefix}{describe(endpoint)} AVAILABLE"

"""The embedded TF-Serving-compatible server process: start both protocols, print the ready line, drain.

`serve` names the device, runs the start-up every server process shares (`start_up`: the models loaded,
the device floor measured (`serving.server.handling.floor`), the heap frozen; a pool's frontends and owner
run it too), starts gRPC (`serving.server.api.grpc_api`) and REST (`serving.server.api.rest`) over one `ServingCore`,
prints the one ready line harnesses wait for, and on SIGTERM/SIGINT stops taking requests, drains the
in-flight ones and exits.

Not for: command-line parsing (`serving.server.__main__`), request handling (`serving.server.handling.core`)
or the ready line's format (`serving.protocol.names`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import grpc
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from serving.endpoint import ServerKind
from serving.protocol.names import format_ready_line
from serving.server.api.grpc_api import ModelServicer, PredictionServicer
from serving.server.api.rest import RestServer
from serving.server.handling.core import ServerConfig, ServingCore, select_device
from serving.server.handling.floor import callers_for, floor_batch_sizes, measure_floor, not_measured
from serving.server.handling.gc_pauses import freeze_start_up_heap
from serving.server.handling.metrics import ServerMetrics
from serving.server.handling.model_source import ModelEntry, ModelSource, Version
from serving.server.handling.runner import Runner, runner_for
from serving.server.lifecycle import stop_requested, wait_for_stop
from serving.server.runtimes.model_spec import DEFAULT_SIGNATURE, ModelVersion, described
from serving.server.warmup import load_and_warm

log = logging.getLogger("serving")


def ready_line(config: ServerConfig, grpc_port: int, rest_port: int, version: int) -> str:
    """The one stdout line harnesses wait for and parse; `version`: the first model's newest (`served_version`)."""
    return format_ready_line(
        kind=ServerKind.EMBEDDED, grpc=f"{config.host}:{grpc_port}", rest=f"{config.host}:{rest_port}",
        model=config.models[0].name, version=version, device=config.device,
        device_name=config.device_name, batching="on" if config.batching else "off",
        runtime=config.runtime.name, runtime_versions=config.runtime.versions(), workers=config.frontends)


def served_version(core: ServingCore) -> int:
    """The newest version of the first model the core serves (0: none), as the ready line names it."""
    versions = core.source.versions(core.config.models[0].name)
    return max(versions) if versions else 0


def load_models(config: ServerConfig, load: Callable[[ModelEntry, int], Version] | None = None) -> ModelSource:
    """Every configured model's versions loaded (by `load`; default: the backend's, warmed); an error when one
    has none to serve."""
    source = ModelSource(list(config.models), load or (lambda entry, version: load_and_warm(config, entry, version)),
                         config.poll_wait_s)
    source.refresh()
    missing = [e for e in config.models if not source.versions(e.name)]
    if missing:
        details = "; ".join(f"{e.name}: {source.failures(e.name) or 'no version directory under ' + str(e.base_path)}"
                            for e in missing)
        raise RuntimeError(f"no servable version for model(s) {', '.join(e.name for e in missing)} ({details})")
    return source


def device_floor(config: ServerConfig, source: ModelSource) -> dict:
    """The first model's newest version alone on its device (DeviceFloor.as_dict()); a failure is logged and
    reported as not measured rather than stopping the server."""
    runtime = config.runtime.name
    if config.device_floor_s <= 0:
        return not_measured("--device_floor_s 0", device=config.device, runtime=runtime).as_dict()
    versions = source.versions(config.models[0].name)
    model = versions[max(versions)]
    signature = DEFAULT_SIGNATURE if DEFAULT_SIGNATURE in model.signatures else next(iter(model.signatures))
    try:
        trip, note = config.runtime.round_trip(config.device)
        floor = measure_floor(model, signature, floor_batch_sizes(config.batching), config.device_floor_s, trip,
                              device=config.device, runtime=runtime, round_trip_note=note,
                              callers=callers_for(config.device))
    except Exception as exc:  # the floor explains the server; it must not keep it from serving
        log.warning("device floor not measured: %s: %s", type(exc).__name__, exc)
        return not_measured(f"failed: {type(exc).__name__}: {exc}", device=config.device, runtime=runtime).as_dict()
    log.info("device floor (%s, %.1f s budget, %d caller(s)): %s; round trip %s us", model.path,
             config.device_floor_s, floor.callers,
             ", ".join(f"batch {b.batch_size}: {b.latency_us:.0f} us, {b.images_per_s:,.0f} img/s"
                       for b in floor.batches), "n/a" if floor.round_trip_us is None else f"{floor.round_trip_us:.0f}")
    return floor.as_dict()


def grpc_server(core: ServingCore, reuse_port: bool = False) -> tuple[grpc.Server, int]:
    """The gRPC server with both TF Serving services, bound (not started); returns it and its port.

    SO_REUSEPORT only when asked (a pool's frontends share one port): gRPC Python's default would let a second
    server join a port already taken, silently."""
    config = core.config
    options = [("grpc.max_receive_message_length", config.max_message_bytes),
               ("grpc.max_send_message_length", config.max_message_bytes),
               ("grpc.so_reuseport", 1 if reuse_port else 0)]
    server = grpc.server(ThreadPoolExecutor(max_workers=config.grpc_max_threads, thread_name_prefix="grpc"),
                         options=options)
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionServicer(core), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelServicer(core), server)
    return server, server.add_insecure_port(f"{config.host}:{config.grpc_port}")


def server_metrics(config: ServerConfig) -> ServerMetrics:
    return ServerMetrics(config.device, config.device_name, config.batching_profile, runtime=config.runtime,
                         grpc_max_threads=config.grpc_max_threads)


def on_device(config: ServerConfig) -> ServerConfig:
    """The config with its device named, once `select_device` pinned this process's runtime to it: each process
    that runs the model does this first."""
    return replace(config, device_name=select_device(config.device, config.backend))


def core_of(config: ServerConfig, owner: Runner[ModelVersion] | None = None) -> ServingCore:
    """This process's core: its models loaded, warmed and run here (alone or batched); with `owner` (a frontend
    with a device owner: the runner serving.pool built to it) only described, their signatures read (it never
    loads the model's runtime, nor touches the GPU), and run there."""
    metrics = server_metrics(config)
    source: ModelSource = load_models(config) if owner is None else load_models(
        config, lambda entry, version: described(entry.name, version, entry.base_path / str(version)))
    runner = runner_for(config.batching, metrics, config.runtime.names.metric, source.versions, owner)
    return ServingCore(config, source, metrics, runner)


def start_up(config: ServerConfig, known_floor: dict | None = None,
             owner: Runner[ModelVersion] | None = None) -> ServingCore:
    """What every server process does before it serves, whatever its role: its core made (`core_of`; `owner`: the
    runner to the device owner, where one runs the model), then the device floor measured before anything else
    runs on the device (`known_floor`, another process's of the same server, instead where given), the start-up
    heap frozen and GC pauses exported."""
    core = core_of(config, owner)
    core.device_floor = device_floor(core.config, core.source) if known_floor is None else known_floor
    core.metrics.record_device_floor(core.device_floor)
    if core.config.gc_freeze:
        log.info("garbage collector: %d start-up objects frozen", freeze_start_up_heap())
    core.metrics.gc_pauses.install()
    return core


@dataclass
class Protocols:
    """gRPC and REST, started over one core."""

    grpc: grpc.Server
    grpc_port: int
    rest: RestServer

    def drain(self, core: ServingCore) -> None:
        """No new requests; the in-flight ones answered (up to the config's grace), then the core stopped."""
        log.info("stopping: no new requests; draining in-flight ones (up to %.0f s)", core.config.grace_s)
        drained = self.grpc.stop(core.config.grace_s)
        self.rest.stop()
        drained.wait()
        core.shutdown()
        core.source.stop()
        log.info("stopped")


def start_protocols(core: ServingCore, *, reuse_port: bool = False, rest_host: str | None = None,
                    rest_port: int | None = None) -> Protocols:
    """gRPC on the config's port (shared when `reuse_port`), REST on `rest_host:rest_port` (default: the
    config's), and the model source's polling; returns once both serve."""
    config = core.config
    server, grpc_port = grpc_server(core, reuse_port)
    rest = RestServer(core, rest_host or config.host, config.rest_port if rest_port is None else rest_port)
    server.start()
    rest.start()
    core.source.start()
    return Protocols(server, grpc_port, rest)


def serve(config: ServerConfig) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code (0 after a graceful drain)."""
    config = on_device(config)
    log.info("starting: device=%s (%s) backend=%s runtime=%s batching=%s models=%s", config.device, config.device_name,
             config.backend, config.runtime.name, config.batching.as_dict() if config.batching else "off",
             ", ".join(f"{m.name}@{m.base_path}" for m in config.models))
    core = start_up(config)
    stop = stop_requested()
    protocols = start_protocols(core)
    line = ready_line(config, protocols.grpc_port, protocols.rest.port, served_version(core))
    log.info("%s", line)
    print(line, flush=True)
    wait_for_stop(stop)
    protocols.drain(core)
    return 0


__all__ = ["Protocols", "core_of", "device_floor", "load_models", "on_device", "ready_line", "serve",
           "served_version", "server_metrics", "start_protocols", "start_up", "stop_requested"]

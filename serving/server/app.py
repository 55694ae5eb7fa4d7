"""The embedded TF-Serving-compatible server process: start both protocols, print the ready line, drain.

`serve` loads the models, measures the device floor (`serving.server.floor`), starts gRPC
(`serving.server.grpc_api`) and REST (`serving.server.rest`) over one `ServingCore`, prints the one
ready line harnesses wait for, and on SIGTERM/SIGINT stops taking requests, drains the in-flight ones
and exits.

Not for: command-line parsing (`serving.server.__main__`), request handling (`serving.server.core`)
or the ready line's format (`serving.protocol.names`).
"""

from __future__ import annotations

import logging
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from serving.endpoint import ServerKind
from serving.protocol.names import format_ready_line
from serving.server.backends import DEFAULT_SIGNATURE
from serving.server.core import ServerConfig, ServingCore
from serving.server.floor import floor_batch_sizes, measure_floor, not_measured, round_trip_for
from serving.server.gc_pauses import freeze_start_up_heap
from serving.server.grpc_api import ModelServicer, PredictionServicer
from serving.server.metrics import ServerMetrics
from serving.server.model_source import ModelSource
from serving.server.rest import RestServer
from serving.server.warmup import load_and_warm

log = logging.getLogger("serving")


def ready_line(config: ServerConfig, grpc_port: int, rest_port: int, source: ModelSource) -> str:
    """The one stdout line harnesses wait for and parse."""
    first = config.models[0].name
    versions = source.versions(first)
    return format_ready_line(
        kind=ServerKind.EMBEDDED, grpc=f"{config.host}:{grpc_port}", rest=f"{config.host}:{rest_port}",
        model=first, version=max(versions) if versions else 0, device=config.device,
        device_name=config.device_name, batching="on" if config.batching else "off",
        runtime=config.runtime.name, runtime_versions=config.runtime.versions())


def load_models(config: ServerConfig) -> ModelSource:
    """Every configured model's versions loaded and warmed; an error when one has none to serve."""
    source = ModelSource(list(config.models), lambda entry, version: load_and_warm(config, entry, version),
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
        trip, note = round_trip_for(config.backend, config.device)
        floor = measure_floor(model, signature, floor_batch_sizes(config.batching), config.device_floor_s, trip,
                              device=config.device, runtime=runtime, round_trip_note=note)
    except Exception as exc:  # the floor explains the server; it must not keep it from serving
        log.warning("device floor not measured: %s: %s", type(exc).__name__, exc)
        return not_measured(f"failed: {type(exc).__name__}: {exc}", device=config.device, runtime=runtime).as_dict()
    log.info("device floor (%s, %.1f s budget): %s; round trip %s us", model.path, config.device_floor_s,
             ", ".join(f"batch {b.batch_size}: {b.latency_us:.0f} us, {b.images_per_s:,.0f} img/s"
                       for b in floor.batches), "n/a" if floor.round_trip_us is None else f"{floor.round_trip_us:.0f}")
    return floor.as_dict()


def grpc_server(core: ServingCore) -> tuple[grpc.Server, int]:
    """The gRPC server with both TF Serving services, bound (not started); returns it and its port."""
    config = core.config
    options = [("grpc.max_receive_message_length", config.max_message_bytes),
               ("grpc.max_send_message_length", config.max_message_bytes),
               ("grpc.so_reuseport", 0)]
    server = grpc.server(ThreadPoolExecutor(max_workers=config.grpc_max_threads, thread_name_prefix="grpc"),
                         options=options)
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionServicer(core), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelServicer(core), server)
    return server, server.add_insecure_port(f"{config.host}:{config.grpc_port}")


def stop_requested() -> threading.Event:
    """An event SIGTERM and SIGINT set."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def serve(config: ServerConfig) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code (0 after a graceful drain)."""
    source = load_models(config)
    metrics = ServerMetrics(config.device, config.device_name, config.batching_profile, runtime=config.runtime,
                            grpc_max_threads=config.grpc_max_threads)
    core = ServingCore(config, source, metrics)
    core.device_floor = device_floor(config, source)  # before the ready line: nothing else runs on the device
    core.metrics.record_device_floor(core.device_floor)
    if config.gc_freeze:
        log.info("garbage collector: %d start-up objects frozen", freeze_start_up_heap())
    core.metrics.gc_pauses.install()
    server, grpc_port = grpc_server(core)
    rest = RestServer(core, config.host, config.rest_port)
    stop = stop_requested()
    server.start()
    rest.start()
    source.start()
    line = ready_line(config, grpc_port, rest.port, source)
    log.info("%s", line)
    print(line, flush=True)
    stop.wait()
    log.info("stopping: no new requests; draining in-flight ones (up to %.0f s)", config.grace_s)
    drained = server.stop(config.grace_s)
    rest.stop()
    drained.wait()
    core.shutdown()
    source.stop()
    log.info("stopped")
    return 0


__all__ = ["device_floor", "ready_line", "serve"]

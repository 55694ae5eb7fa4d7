"""The embedded TF-Serving-compatible server: request core, gRPC services, process lifecycle.

`ServingCore` is what both protocols call: resolve the model version, check the signature and
inputs (before TensorFlow sees anything), then run alone or through the batch scheduler. The
gRPC layer (`PredictionService`, `ModelService` from tensorflow-serving-api) and the REST layer
(`serving.server.rest`) only convert to and from arrays and status codes.

gRPC uses grpc's synchronous server: each in-flight request holds one thread of a pool of
`--grpc_max_threads` (measured here, a Python sync server costs about half the CPU per call of
grpc.aio). Without batching the model runs on that thread, as TF Serving runs it on its RPC
thread; with batching the thread enqueues and waits while batch threads run the model.

Not for: command-line parsing (`serving.server.__main__`) or tensor encoding (`serving.protocol.tensors`).
"""

from __future__ import annotations

import logging
import signal
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import numpy as np
from google.protobuf import any_pb2, struct_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from model_export.provenance import cpu_model_name
from serving.protocol.tensors import TensorConversionError, to_numpy, write_tensor
from serving.server.backends import DEFAULT_SIGNATURE, BackendOptions, LoadedModel, load_model
from serving.server.batching import BatchingOptions, BatchScheduler
from serving.server.errors import ServingError
from serving.server.metrics import ServerMetrics
from serving.server.model_source import ModelEntry, ModelSource
from serving.server.validation import check_inputs, check_outputs

log = logging.getLogger("serving")

DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class ServerConfig:
    """Everything one server process needs, resolved from flags and files."""

    models: tuple[ModelEntry, ...]
    host: str = "127.0.0.1"
    grpc_port: int = 8500
    rest_port: int = 8501
    backend: str = "savedmodel"
    backend_options: BackendOptions = field(default_factory=BackendOptions)
    batching: BatchingOptions | None = None  # None: every request runs alone
    batching_profile: str = "off"
    tensor_content: bool = False
    poll_wait_s: float = 1.0
    device_name: str = ""
    monitoring_path: str | None = "/monitoring/prometheus/metrics"  # None: metrics page disabled
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    grpc_max_threads: int = 256  # in-flight gRPC requests; batching can only merge requests that hold one
    grace_s: float = 30.0

    @property
    def device(self) -> str:
        return self.backend_options.device


def select_device(device: str, backend: str) -> str:
    """Pin TensorFlow to the device and return its name; `gpu` without a visible GPU is an error."""
    if device not in ("cpu", "gpu"):
        raise ValueError(f"--device must be cpu or gpu, not {device!r}")
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if device == "cpu":
        if gpus and backend == "savedmodel":
            tf.config.set_visible_devices([], "GPU")  # keep the model on the CPU even on a GPU machine
        return cpu_model_name()
    if not gpus:
        raise RuntimeError("--device gpu: TensorFlow sees no GPU (tf.config.list_physical_devices('GPU') is empty); "
                           "install a CUDA-enabled TensorFlow on a GPU machine, or use --device cpu")
    details = tf.config.experimental.get_device_details(gpus[0])
    return details.get("device_name", gpus[0].name)


class ServingCore:
    """Request handling shared by gRPC and REST: resolve, validate, run (alone or batched)."""

    def __init__(self, config: ServerConfig, source: ModelSource, metrics: ServerMetrics) -> None:
        self.config = config
        self.source = source
        self.metrics = metrics
        self._schedulers: dict[tuple, BatchScheduler] = {}
        self._lock = threading.Lock()
        self._runtime = "TF2" if config.backend == "savedmodel" else config.backend

    def resolve(self, name: str, version: int | None, label: str | None, signature_name: str):
        """Model version and signature a request names: NOT_FOUND / FAILED_PRECONDITION as TF Serving."""
        model = self.source.resolve(name, version, label)
        signature_name = signature_name or DEFAULT_SIGNATURE
        spec = model.signatures.get(signature_name)
        if spec is None:
            raise ServingError("FAILED_PRECONDITION", f'Serving signature key "{signature_name}" not found.')
        return model, spec

    def predict(self, model: LoadedModel, spec, inputs: dict[str, np.ndarray],
                output_filter: list[str]) -> dict[str, np.ndarray]:
        """Validated inputs -> outputs, on the calling (request) thread."""
        rows = check_inputs(spec, inputs)
        outputs = check_outputs(spec, output_filter)
        if self.config.batching is None:
            return self._run(model, spec.name, inputs, outputs)
        return self._scheduler(model, spec.name, outputs).submit(inputs, rows).result()

    def _run(self, model: LoadedModel, signature: str, inputs: dict[str, np.ndarray],
             outputs: list[str]) -> dict[str, np.ndarray]:
        started = time.perf_counter()
        try:
            return model.run(signature, inputs, outputs)
        except ServingError:
            raise
        except Exception as exc:  # TensorFlow's own refusal of something validation let through
            raise ServingError("INTERNAL", f"{type(exc).__name__}: {exc}") from exc
        finally:
            self.metrics.record_runtime(model.name, "Predict", self._runtime, time.perf_counter() - started)

    def _scheduler(self, model: LoadedModel, signature: str, outputs: list[str]) -> BatchScheduler:
        """One queue per model version, signature and output set (TF Serving's TensorSignature)."""
        key = (model.name, model.version, signature, tuple(outputs))
        scheduler = self._schedulers.get(key)
        if scheduler is not None:
            return scheduler
        with self._lock:
            if key not in self._schedulers:
                self._stop_unloaded_schedulers()
                options = self.config.batching
                self._schedulers[key] = BatchScheduler(
                    options, lambda merged: self._run(model, signature, merged, outputs),
                    on_batch=lambda stats: self.metrics.record_batch(stats, options.thread_pool_name),
                    name=f"batch-{model.name}-{model.version}")
            return self._schedulers[key]

    def _stop_unloaded_schedulers(self) -> None:
        for key in list(self._schedulers):
            if key[1] not in self.source.versions(key[0]):
                self._schedulers.pop(key).stop()

    def shutdown(self) -> None:
        """Finish every queued batch and stop the batch threads."""
        with self._lock:
            schedulers, self._schedulers = list(self._schedulers.values()), {}
        for scheduler in schedulers:
            scheduler.stop()


def _status_name(exc: BaseException) -> str:
    return exc.code if isinstance(exc, ServingError) else "INTERNAL"


def decode_inputs(request: predict_pb2.PredictRequest, max_bytes: int | None = None) -> dict[str, np.ndarray]:
    """Request TensorProtos -> arrays; undecodable tensors, or typed values that would expand past
    `max_bytes` (the request size limit), are INVALID_ARGUMENT."""
    try:
        return {alias: to_numpy(proto, max_bytes) for alias, proto in request.inputs.items()}
    except TensorConversionError as exc:
        raise ServingError("INVALID_ARGUMENT", str(exc)) from exc


def requested_version(model_spec) -> tuple[int | None, str | None]:
    """(version, label) from a ModelSpec's version choice."""
    choice = model_spec.WhichOneof("version_choice")
    if choice == "version":
        return model_spec.version.value, None
    if choice == "version_label":
        return None, model_spec.version_label
    return None, None


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """tensorflow.serving.PredictionService: Predict and GetModelMetadata; the rest UNIMPLEMENTED."""

    def __init__(self, core: ServingCore) -> None:
        self.core = core

    def Predict(self, request, context):
        started = time.perf_counter()
        name = request.model_spec.name
        try:
            version, label = requested_version(request.model_spec)
            model, spec = self.core.resolve(name, version, label, request.model_spec.signature_name)
            inputs = decode_inputs(request, self.core.config.max_message_bytes)
            outputs = self.core.predict(model, spec, inputs, list(request.output_filter))
            response = predict_pb2.PredictResponse()
            response.model_spec.name = name
            response.model_spec.version.value = model.version
            response.model_spec.signature_name = spec.name
            tensor_content = self.core.config.tensor_content
            for alias, array in outputs.items():
                write_tensor(response.outputs[alias], array, tensor_content)
        except Exception as exc:
            status = _status_name(exc)
            self.core.metrics.record_request(name, "Predict", "GRPC", status, time.perf_counter() - started)
            _abort(context, exc)
        self.core.metrics.record_request(name, "Predict", "GRPC", "OK", time.perf_counter() - started)
        return response

    def GetModelMetadata(self, request, context):
        try:
            return model_metadata(self.core, request)
        except Exception as exc:
            _abort(context, exc)

    def Classify(self, request, context):
        _unimplemented(context, "Classify")

    def Regress(self, request, context):
        _unimplemented(context, "Regress")

    def MultiInference(self, request, context):
        _unimplemented(context, "MultiInference")


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    """tensorflow.serving.ModelService: GetModelStatus; HandleReloadConfigRequest UNIMPLEMENTED."""

    def __init__(self, core: ServingCore) -> None:
        self.core = core

    def GetModelStatus(self, request, context):
        try:
            return model_status(self.core.source, request)
        except Exception as exc:
            _abort(context, exc)

    def HandleReloadConfigRequest(self, request, context):
        _unimplemented(context, "HandleReloadConfigRequest")


def _abort(context, exc: BaseException):
    if isinstance(exc, ServingError):
        context.abort(getattr(grpc.StatusCode, exc.code), exc.message)
    log.exception("internal error", exc_info=exc)
    context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")


def _unimplemented(context, method: str):
    context.abort(grpc.StatusCode.UNIMPLEMENTED,
                        f"{method} is not implemented by the embedded server (it serves Predict, GetModelMetadata "
                        "and GetModelStatus only)")


def server_info(config: ServerConfig) -> dict:
    """What the server reports about itself besides TF Serving's metadata (device, batching)."""
    return {
        "kind": "embedded",
        "device": config.device,
        "device_name": config.device_name,
        "backend": config.backend,
        "batching": "on" if config.batching else "off",
        "batching_profile": config.batching_profile,
        "batching_parameters": config.batching.as_dict() if config.batching else {},
    }


SERVER_INFO_FIELD = "server_info"  # our extension: ask for it in metadata_field to get server_info()


def model_metadata(core: ServingCore, request) -> get_model_metadata_pb2.GetModelMetadataResponse:
    """GetModelMetadata: the signature_def map (TF Serving's only field) and, on request, server_info."""
    fields = list(request.metadata_field)
    if not fields:
        raise ServingError("INVALID_ARGUMENT", "GetModelMetadataRequest must specify at least one metadata_field")
    for field_name in fields:
        if field_name not in ("signature_def", SERVER_INFO_FIELD):
            raise ServingError("INVALID_ARGUMENT", f"Metadata field {field_name} is not supported")
    version, label = requested_version(request.model_spec)
    model = core.source.resolve(request.model_spec.name, version, label)
    response = get_model_metadata_pb2.GetModelMetadataResponse()
    response.model_spec.name = model.name
    response.model_spec.version.value = model.version
    if "signature_def" in fields:
        sig_map = get_model_metadata_pb2.SignatureDefMap()
        for key, sig in model.signature_defs.items():
            sig_map.signature_def[key].CopyFrom(sig)
        response.metadata["signature_def"].Pack(sig_map)
    if SERVER_INFO_FIELD in fields:
        info = struct_pb2.Struct()
        info.update(server_info(core.config))
        packed = any_pb2.Any()
        packed.Pack(info)
        response.metadata[SERVER_INFO_FIELD].CopyFrom(packed)
    return response


def model_status(source: ModelSource, request) -> get_model_status_pb2.GetModelStatusResponse:
    """GetModelStatus with TF Serving's NOT_FOUND wording; failed loads show as END with their error."""
    if not request.HasField("model_spec"):
        raise ServingError("INVALID_ARGUMENT", "Missing ModelSpec")
    name = request.model_spec.name
    version, _ = requested_version(request.model_spec)
    states = {v: None for v in source.versions(name)}
    states.update(source.failures(name))
    if version is not None:
        if version not in states:
            raise ServingError("NOT_FOUND", f"Could not find version {version} of model {name}")
        states = {version: states[version]}
    if not states:
        raise ServingError("NOT_FOUND", f"Could not find any versions of model {name}")
    response = get_model_status_pb2.GetModelStatusResponse()
    for v in sorted(states):
        status = response.model_version_status.add(version=v)
        status.status.SetInParent()  # error_code OK is reported explicitly, as TF Serving does
        if states[v] is None:
            status.state = get_model_status_pb2.ModelVersionStatus.AVAILABLE
        else:
            status.state = get_model_status_pb2.ModelVersionStatus.END
            status.status.error_code = 2  # UNKNOWN
            status.status.error_message = states[v]
    return response


WARMUP_FILE = Path("assets.extra") / "tf_serving_warmup_requests"
MAX_WARMUP_RECORDS = 1000  # TF Serving's WarmupConsts::kMaxNumRecords


def tfrecords(path: Path):
    """Payloads of a TFRecord file (length, length CRC, data, data CRC); CRCs are not checked."""
    data = path.read_bytes()
    offset = 0
    while offset + 12 <= len(data):
        length = struct.unpack_from("<Q", data, offset)[0]
        start = offset + 12
        if start + length + 4 > len(data):
            raise ValueError(f"{path}: truncated TFRecord at byte {offset}")
        yield data[start:start + length]
        offset = start + length + 4


def warm_up(model: LoadedModel) -> int:
    """Replay the version's warmup PredictRequests (TF Serving's model warmup); returns how many ran.

    Every record goes through the same validation as a live request, so a bad record fails the
    load instead of reaching TensorFlow.
    """
    from tensorflow_serving.apis import prediction_log_pb2

    path = model.path / WARMUP_FILE
    if not path.is_file():
        return 0
    count = 0
    for payload in tfrecords(path):
        count += 1
        if count > MAX_WARMUP_RECORDS:
            raise ValueError(f"Number of warmup records exceeds the maximum ({MAX_WARMUP_RECORDS}) at {path}")
        log_record = prediction_log_pb2.PredictionLog.FromString(payload)
        if log_record.WhichOneof("log_type") != "predict_log":
            raise ValueError(f"{path}: only predict_log warmup records are supported by the embedded server")
        request = log_record.predict_log.request
        spec = model.signatures.get(request.model_spec.signature_name or DEFAULT_SIGNATURE)
        if spec is None:
            raise ValueError(f"{path}: warmup record names unknown signature {request.model_spec.signature_name!r}")
        inputs = decode_inputs(request)
        check_inputs(spec, inputs)
        model.run(spec.name, inputs, check_outputs(spec, list(request.output_filter)))
    return count


def load_and_warm(config: ServerConfig, entry: ModelEntry, version: int) -> LoadedModel:
    """Load one version with the configured backend and replay its warmup requests."""
    model = load_model(config.backend, entry.name, version, entry.base_path / str(version), config.backend_options)
    try:
        replayed = warm_up(model)
    except ServingError as exc:
        raise ValueError(f"warmup of {model.path} failed: {exc}") from exc
    if replayed:
        log.info("model %s: version %d warmed up with %d request(s)", entry.name, version, replayed)
    return model


def ready_line(config: ServerConfig, grpc_port: int, rest_port: int, source: ModelSource) -> str:
    """The one stdout line harnesses wait for and parse."""
    first = config.models[0].name
    versions = source.versions(first)
    version = max(versions) if versions else 0
    return (f"serving ready kind=embedded grpc={config.host}:{grpc_port} rest={config.host}:{rest_port} "
            f"model={first} version={version} device={config.device} device_name=\"{config.device_name}\" "
            f"batching={'on' if config.batching else 'off'}")


def serve(config: ServerConfig) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code (0 after a graceful drain)."""
    from serving.server.rest import RestServer

    metrics = ServerMetrics(config.device, config.device_name, config.batching_profile)
    source = ModelSource(list(config.models), lambda entry, version: load_and_warm(config, entry, version),
                         config.poll_wait_s)
    source.refresh()
    missing = [e.name for e in config.models if not source.versions(e.name)]
    if missing:
        details = "; ".join(f"{e.name}: {source.failures(e.name) or 'no version directory under ' + str(e.base_path)}"
                            for e in config.models if e.name in missing)
        raise RuntimeError(f"no servable version for model(s) {', '.join(missing)} ({details})")
    core = ServingCore(config, source, metrics)
    options = [("grpc.max_receive_message_length", config.max_message_bytes),
               ("grpc.max_send_message_length", config.max_message_bytes),
               ("grpc.so_reuseport", 0)]
    server = grpc.server(ThreadPoolExecutor(max_workers=config.grpc_max_threads, thread_name_prefix="grpc"),
                         options=options)
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionServicer(core), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelServicer(core), server)
    grpc_port = server.add_insecure_port(f"{config.host}:{config.grpc_port}")
    rest = RestServer(core, config.host, config.rest_port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
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


__all__ = ["ServerConfig", "ServingCore", "serve", "select_device", "cpu_model_name", "server_info"]

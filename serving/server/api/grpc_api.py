"""The gRPC face of the server: TF Serving's PredictionService and ModelService over `ServingCore`.

gRPC uses grpc's synchronous server: each in-flight request holds one thread of a pool of
`--grpc_max_threads` (256; more requests wait for a thread; TF Serving's default is 4 per core) (measured
here, a Python sync server costs about half the CPU per call of grpc.aio).
Without batching the model runs on that thread, as TF Serving runs it on its RPC thread; with
batching the thread enqueues and waits while batch threads run the model.
`model_metadata`, `model_status` and `server_info` are shared with the REST API.

Not for: validation or running the model (`serving.server.handling.core`), or starting the gRPC server
(`serving.server.app`).
"""

from __future__ import annotations

import logging
import time

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

from serving.endpoint import ServerKind
from serving.protocol.tensors import to_numpy, write_tensor
from serving.server.handling.core import ServerConfig, ServingCore
from serving.server.handling.errors import ServingError
from serving.server.handling.metrics import DECODE, ENCODE, VALIDATE, PhaseClock
from serving.server.handling.model_source import ModelSource

log = logging.getLogger("serving")


def _status_name(exc: BaseException) -> str:
    return exc.code if isinstance(exc, ServingError) else "INTERNAL"


def decode_inputs(request: predict_pb2.PredictRequest, max_bytes: int | None = None) -> dict[str, np.ndarray]:
    """Request TensorProtos -> arrays; undecodable tensors, or typed values that would expand past
    `max_bytes` (the request size limit), are INVALID_ARGUMENT.

    numpy's own refusals count as undecodable too (a ValueError, e.g. a shape of more than the 64 dims numpy
    holds, where TF takes up to 254 and the signature then refuses them): the client's input is wrong."""
    try:
        return {alias: to_numpy(proto, max_bytes) for alias, proto in request.inputs.items()}
    except ValueError as exc:  # serving.protocol.tensors.TensorConversionError, or numpy's own
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
        clock = PhaseClock()
        name = request.model_spec.name
        try:
            if not request.HasField("model_spec"):
                raise ServingError("INVALID_ARGUMENT", "Missing ModelSpec")  # TF Serving's check, before the lookup
            version, label = requested_version(request.model_spec)
            model, spec = self.core.resolve(name, version, label, request.model_spec.signature_name)
            clock.lap(VALIDATE)
            inputs = decode_inputs(request, self.core.config.max_message_bytes)
            clock.lap(DECODE)
            outputs = self.core.predict(model, spec, inputs, list(request.output_filter), clock)
            response = predict_pb2.PredictResponse()
            response.model_spec.name = name
            response.model_spec.version.value = model.version
            response.model_spec.signature_name = spec.name
            tensor_content = self.core.config.tensor_content
            for alias, array in outputs.items():
                write_tensor(response.outputs[alias], array, tensor_content)
            clock.lap(ENCODE)
        except Exception as exc:
            status = _status_name(exc)
            self.core.metrics.record_request(name, "Predict", "GRPC", status, time.perf_counter() - clock.started)
            _abort(context, exc)
        self.core.metrics.record_ok(name, "Predict", "GRPC", clock)
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


def server_info(config: ServerConfig, device_floor: dict | None = None) -> dict:
    """What the server reports about itself besides TF Serving's metadata (device, runtime, batching, and
    the device floor measured at start: `serving.server.handling.floor.DeviceFloor.as_dict()`)."""
    info = {
        "kind": str(ServerKind.EMBEDDED),
        "device": config.device,
        "device_name": config.device_name,
        "backend": config.backend,
        "runtime": config.runtime.name,
        "runtime_versions": config.runtime.versions(),
        "batching": "on" if config.batching else "off",
        "batching_profile": config.batching_profile,
        "batching_parameters": config.batching.as_dict() if config.batching else {},
        "gc_freeze": config.gc_freeze,
        "grpc_max_threads": config.grpc_max_threads,
    }
    if device_floor is not None:
        info["device_floor"] = device_floor
    return info


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
        info.update(server_info(core.config, core.device_floor))
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
    states: dict[int, str | None] = {v: None for v in source.versions(name)}
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




__all__ = ["ModelServicer", "PredictionServicer", "SERVER_INFO_FIELD", "decode_inputs", "model_metadata",
           "model_status", "requested_version", "server_info"]

"""The request core both protocols call: resolve the model version, validate, run through the process's runner.

`ServingCore` checks the signature and inputs before TensorFlow sees anything, then runs the
model through the runner it was given (`serving.server.handling.runner.runner_for`: alone, batched by its
model version's queue, or on the device owner).
`ServerConfig` is everything one server process needs; `select_device` pins the backend's runtime to the
device (`serving.server.runtimes`), importing TensorFlow only for the savedmodel backend: the device bundle's
machines have none.

Validation: a tensor of the wrong dtype or shape fed straight into TensorFlow on CPU can abort the whole
process (a oneDNN check failure), so every input is checked here first (`check_inputs`) and refused with
the status code and, where TF Serving has one, the wording TF Serving gives. Non-finite values are valid
floats and pass through.

Not for: protocol conversion (`serving.server.api.grpc_api`, `serving.server.api.rest`) or the process
lifecycle (`serving.server.app`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic

import numpy as np

from serving.endpoint import Device
from serving.protocol.names import METRICS_PATH
from serving.protocol.tensors import CODECS_BY_NUMPY, dtype_name
from serving.server.handling.batching_options import BatchingOptions
from serving.server.handling.errors import ServingError
from serving.server.handling.metrics import VALIDATE, PhaseClock, ServerMetrics
from serving.server.handling.model_source import ModelEntry, ModelSource
from serving.server.handling.runner import Model, Runner
from serving.server.runtimes import DEFAULT_BACKEND, Runtime, runtime_of
from serving.server.runtimes.model_spec import DEFAULT_SIGNATURE, BackendOptions, SignatureSpec

DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class ServerConfig:
    """Everything a server's processes need, resolved once from its flags and files (`serving.server.flags`);
    `device_name` is set by the process that runs the model, once it selected the device."""

    models: tuple[ModelEntry, ...]
    host: str = "127.0.0.1"
    grpc_port: int = 8500
    rest_port: int = 8501
    backend: str = DEFAULT_BACKEND
    backend_options: BackendOptions = field(default_factory=BackendOptions)
    batching: BatchingOptions | None = None  # None: every request runs alone
    batching_profile: str = "off"
    tensor_content: bool = False
    poll_wait_s: float = 1.0
    device_name: str = ""
    monitoring_path: str | None = METRICS_PATH  # None: metrics page disabled
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    grpc_max_threads: int = 256  # in-flight gRPC requests; batching can only merge requests that hold one
    grace_s: float = 30.0
    device_floor_s: float = 2.0  # time budget of the device floor measured at start (0: not measured)
    gc_freeze: bool = True  # freeze the start-up heap so collections walk only what requests allocate
    frontends: int = 1  # gRPC frontend processes of the whole server (--workers; above 1: serving.pool runs them)
    device_owner: str = "auto"  # above 1 frontend: "always" runs the model in an owner process even without need
    log_level: str = "INFO"

    @property
    def device(self) -> str:
        return self.backend_options.device

    @property
    def runtime(self) -> Runtime:
        """What runs the model (`serving.server.runtimes`)."""
        return runtime_of(self.backend)


def select_device(device: str, backend: str) -> str:
    """Pin the backend's runtime to the device and return its name; `gpu` without a visible GPU is an error."""
    if device not in tuple(Device):
        raise ValueError(f"--device must be cpu or gpu, not {device!r}")
    return runtime_of(backend).device_name(device)


def _shape_text(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def check_input_names(spec: SignatureSpec, names: set[str]) -> None:
    """Missing, extra or misnamed inputs: INVALID_ARGUMENT with TF Serving's messages."""
    expected = set(spec.inputs)
    if names == expected:
        return
    if len(names) != len(expected):
        raise ServingError(
            "INVALID_ARGUMENT",
            f"input size does not match signature: {len(names)}!={len(expected)} len({{{','.join(sorted(names))}}}) "
            f"!= len({{{','.join(sorted(expected))}}}). Sent extra: {{{','.join(sorted(names - expected))}}}. "
            f"Missing but required: {{{','.join(sorted(expected - names))}}}.")
    alias = sorted(names - expected)[0]
    raise ServingError("INVALID_ARGUMENT",
                       f"input tensor alias not found in signature: {alias}. Inputs expected to be in the set "
                       f"{{{','.join(sorted(expected))}}}.")


def check_outputs(spec: SignatureSpec, output_filter: list[str]) -> list[str]:
    """The output aliases to fetch: the filter (checked) or every output of the signature."""
    if not output_filter:
        return sorted(spec.outputs)
    seen = set()
    for alias in output_filter:
        if alias not in spec.outputs:
            raise ServingError("INVALID_ARGUMENT",
                               f"output tensor alias not found in signature: {alias} Outputs expected to be in the "
                               f"set {{{','.join(sorted(spec.outputs))}}}.")
        if alias in seen:
            raise ServingError("INVALID_ARGUMENT", f"duplicate output tensor alias: {alias}")
        seen.add(alias)
    return list(output_filter)


def _check_one(index: int, alias: str, array: np.ndarray, spec: SignatureSpec) -> None:
    tensor = spec.inputs[alias]
    codec = CODECS_BY_NUMPY.get(array.dtype)
    got = "string" if array.dtype == object else (codec.name if codec else str(array.dtype))
    want = dtype_name(tensor.dtype_enum)
    if got != want:
        raise ServingError("INVALID_ARGUMENT", f"Expects arg[{index}] to be {want} but {got} is provided")
    if tensor.shape is None:
        return
    if array.ndim != len(tensor.shape) or any(want >= 0 and got_dim != want
                                              for got_dim, want in zip(array.shape, tensor.shape)):
        raise ServingError("INVALID_ARGUMENT",
                           f"input tensor '{alias}' has shape {_shape_text(array.shape)} but the signature "
                           f"'{spec.name}' expects {_shape_text(tensor.shape)} (-1: any size)")


def check_inputs(spec: SignatureSpec, inputs: dict[str, np.ndarray]) -> int:
    """Validate every input; returns the batch size (rows), which must be the same for all and > 0."""
    check_input_names(spec, set(inputs))
    batch = None
    for index, alias in enumerate(sorted(inputs)):
        array = inputs[alias]
        _check_one(index, alias, array, spec)
        if array.ndim == 0:
            raise ServingError("INVALID_ARGUMENT", f"input tensor '{alias}' is a scalar; it needs a batch dimension")
        if batch is not None and array.shape[0] != batch:
            raise ServingError("INVALID_ARGUMENT",
                               "Batching Run() input tensors must have equal 0th-dimension size")
        batch = array.shape[0]
    if not batch:
        raise ServingError("INVALID_ARGUMENT", "Batch size expected to be positive; was 0 (empty batch)")
    return batch


class ServingCore(Generic[Model]):
    """Request handling shared by gRPC and REST: resolve, validate, run (through `runner`: alone, batched or on
    the device owner, as `runner_for` chose for this process)."""

    def __init__(self, config: ServerConfig, source: ModelSource[Model], metrics: ServerMetrics,
                 runner: Runner[Model]) -> None:
        self.config = config
        self.source = source
        self.metrics = metrics
        self.runner = runner
        self.device_floor: dict | None = None  # DeviceFloor.as_dict(), set once at start (handling.floor)

    def resolve(self, name: str, version: int | None, label: str | None,
                signature_name: str) -> tuple[Model, SignatureSpec]:
        """Model version and signature a request names: NOT_FOUND / FAILED_PRECONDITION as TF Serving."""
        model = self.source.resolve(name, version, label)
        signature_name = signature_name or DEFAULT_SIGNATURE
        spec = model.signatures.get(signature_name)
        if spec is None:
            raise ServingError("FAILED_PRECONDITION", f'Serving signature key "{signature_name}" not found.')
        return model, spec

    def predict(self, model: Model, spec: SignatureSpec, inputs: dict[str, np.ndarray],
                output_filter: list[str], clock: PhaseClock | None = None) -> dict[str, np.ndarray]:
        """Validated inputs -> outputs, answered on the calling (request) thread; `clock` gets the validate,
        queue, assemble, compute and deliver phases (with an owner, its phases and the hand-off)."""
        clock = clock or PhaseClock()
        rows = check_inputs(spec, inputs)
        outputs = check_outputs(spec, output_filter)
        clock.lap(VALIDATE)
        return self.runner.run(model, spec.name, inputs, rows, outputs, clock)

    def shutdown(self) -> None:
        """Finish what the runner holds (queued batches; the owner's connection) and stop its threads."""
        self.runner.shutdown()


__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "ServerConfig", "ServingCore", "check_input_names", "check_inputs",
           "check_outputs", "select_device"]

"""A served model's signature as the load generator sees it: input and output names, dtypes and shapes.

Read from the server itself (gRPC `GetModelMetadata` with metadata_field "signature_def", what any
TF Serving answers), so a load test needs nothing of the model but its name. Shapes keep TF's `-1`
for "any size"; `None` is an unknown rank (the records are `serving.protocol.signatures`', shared with
the server).

Not for: making inputs from a signature (`loadtest.load.inputs`) or judging outputs
(`loadtest.load.outputs`).
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from serving.protocol.signatures import SignatureSpec, TensorSpec, signature_spec


class SignatureError(ValueError):
    """The model's signature could not be read, or does not name what was asked for."""


@dataclass(frozen=True)
class Signature:
    """One signature of a served model: the model's name beside the shared `SignatureSpec`."""

    model_name: str
    spec: SignatureSpec

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def inputs(self) -> dict[str, TensorSpec]:
        return self.spec.inputs

    @property
    def outputs(self) -> dict[str, TensorSpec]:
        return self.spec.outputs

    def describe(self) -> str:
        return f"{self.model_name}/{self.spec.describe()}"


def signature_from_def(model_name: str, name: str, sig_def) -> Signature:
    """A `tensorflow.SignatureDef` message as a `Signature`; SignatureError for a dtype it cannot carry."""
    spec = signature_spec(name, sig_def)
    try:
        [t.numpy_dtype for t in (*spec.inputs.values(), *spec.outputs.values())]
    except ValueError as exc:
        raise SignatureError(str(exc)) from None
    return Signature(model_name, spec)


def pick_signature(model_name: str, name: str, defs) -> Signature:
    """The signature `name` out of a model's SignatureDef map; a clear error naming the ones there are."""
    if name not in defs:
        served = sorted(k for k in defs if not k.startswith("__"))
        raise SignatureError(f"model {model_name} has no signature {name!r}; it serves {served}")
    return signature_from_def(model_name, name, defs[name])


def fetch_signature(target: str, model_name: str, signature: str, timeout_s: float = 10.0) -> Signature:
    """GetModelMetadata (signature_def) from the gRPC server at HOST:PORT; raises SignatureError."""
    from tensorflow_serving.apis import get_model_metadata_pb2, prediction_service_pb2_grpc

    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = model_name
    request.metadata_field.append("signature_def")
    with grpc.insecure_channel(target) as channel:
        try:
            response = prediction_service_pb2_grpc.PredictionServiceStub(channel).GetModelMetadata(
                request, timeout=timeout_s)
        except grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") else "UNKNOWN"
            raise SignatureError(f"GetModelMetadata for model {model_name} at {target} failed: {code}: "
                                 f"{exc.details() if hasattr(exc, 'details') else exc}") from None
    defs = get_model_metadata_pb2.SignatureDefMap()
    if "signature_def" not in response.metadata or not response.metadata["signature_def"].Unpack(defs):
        raise SignatureError(f"model {model_name} at {target}: GetModelMetadata returned no signature_def")
    return pick_signature(model_name, signature, defs.signature_def)

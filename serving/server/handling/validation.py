"""Checks a request against its signature BEFORE anything reaches TensorFlow.

A tensor of the wrong dtype or shape fed straight into TensorFlow on CPU can abort the whole
process (a oneDNN check failure), so every input is checked here first and refused with the
status code and, where TF Serving has one, the wording TF Serving gives. Non-finite values are
valid floats and pass through.

Not for: decoding protos or JSON (see `serving.protocol.tensors`, `serving.server.api.rest`).
"""

from __future__ import annotations

import numpy as np

from serving.protocol.tensors import CODECS_BY_NUMPY, dtype_name
from serving.server.handling.errors import ServingError
from serving.server.runtimes.model_spec import SignatureSpec


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

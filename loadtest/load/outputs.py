"""Judging any model's answers against its signature: the `outputs` check.

An answer is right when it has exactly the signature's outputs, each of the signature's dtype and
shape (a `-1` first dimension = the request batch); otherwise it is a WRONG_ANSWER. When the user's
.npz gave expected outputs (`expected:<output>`), each row's outputs are also compared with them
(exact for integers, bools and strings; close for floats: `numpy.isclose` at rtol 1e-4, atol 1e-5)
and the share of rows that match is the accuracy; without expected outputs there is no accuracy.

Not for: the MNIST demo's `classes` check (`loadtest.load.client`) or making inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from loadtest.load.collector import WRONG_ANSWER
from loadtest.load.inputs import FLOAT_ATOL, FLOAT_RTOL
from loadtest.load.signature import Signature
from serving.protocol import tensors
from serving.protocol.signatures import TensorSpec


@dataclass(frozen=True)
class ResponseCheck:
    """A response's verdict: status, error text, and how many rows matched what was expected."""

    status: str
    error: str
    correct: int
    checked: int


OK = ResponseCheck("OK", "", 0, 0)


def wrong(text: str) -> ResponseCheck:
    return ResponseCheck(WRONG_ANSWER, text, 0, 0)


def shape_problem(shape: tuple[int, ...], info: TensorSpec, rows: int) -> str:
    """Why `shape` is not the signature's for a request of `rows` rows ("" when it is)."""
    if info.shape is None:
        return ""
    wanted = ((rows,) + info.shape[1:]) if info.batched else info.shape
    if len(shape) != len(wanted) or any(w not in (-1, s) for w, s in zip(wanted, shape)):
        return f"output {info.alias} has shape {list(shape)}, expected {list(wanted)}"
    return ""


def names_problem(names, signature: Signature) -> str:
    if set(names) != set(signature.outputs):
        return f"response outputs {sorted(names)}, the signature's are {sorted(signature.outputs)}"
    return ""


def matching_rows(got: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], rows: int) -> int:
    """Rows whose every expected output matches (floats closely, the rest exactly)."""
    good = np.ones(rows, dtype=bool)
    for name, want in expected.items():
        have = np.asarray(got[name])
        if have.shape != want.shape:
            return 0
        if want.dtype.kind == "f":
            equal = np.isclose(have.astype(want.dtype), want, rtol=FLOAT_RTOL, atol=FLOAT_ATOL)
        else:
            equal = have == want
        good &= equal.reshape(rows, -1).all(axis=1) if rows else good
    return int(np.count_nonzero(good))


def check_grpc(outputs, signature: Signature, rows: int, expected: Mapping[str, np.ndarray]) -> ResponseCheck:
    """A gRPC PredictResponse's `outputs` map against the signature (and the expected values, if any)."""
    problem = names_problem(outputs.keys(), signature)
    if problem:
        return wrong(problem)
    for name, info in signature.outputs.items():
        proto = outputs[name]
        if proto.dtype != info.dtype_enum:
            return wrong(f"output {name} is {tensors.dtype_name(proto.dtype)}, the signature says "
                         f"{tensors.dtype_name(info.dtype_enum)}")
        problem = shape_problem(tensors.proto_shape(proto), info, rows)
        if problem:
            return wrong(problem)
    if not expected:
        return OK
    got = {name: tensors.to_numpy(outputs[name]) for name in expected}
    return ResponseCheck("OK", "", matching_rows(got, expected, rows), rows)


REST_KINDS = {"f": "fiu", "i": "iu", "u": "iu", "b": "b", "O": "USO"}  # JSON loses widths: kinds only


def check_rest(body_outputs, signature: Signature, rows: int, expected: Mapping[str, np.ndarray]) -> ResponseCheck:
    """A REST (columnar) response's `outputs`: a dict by name, or the bare value of a single output."""
    if len(signature.outputs) == 1 and not (isinstance(body_outputs, dict) and set(body_outputs) ==
                                            set(signature.outputs)):
        body_outputs = {next(iter(signature.outputs)): body_outputs}
    if not isinstance(body_outputs, dict):
        return wrong(f"response outputs are not a map of the signature's {sorted(signature.outputs)}")
    problem = names_problem(body_outputs.keys(), signature)
    if problem:
        return wrong(problem)
    got = {}
    for name, info in signature.outputs.items():
        values = np.asarray(body_outputs[name])
        if values.size and values.dtype.kind not in REST_KINDS.get(info.numpy_dtype.kind, values.dtype.kind):
            return wrong(f"output {name} holds {values.dtype} values, the signature says {info.describe()}")
        problem = shape_problem(values.shape, info, rows)
        if problem:
            return wrong(problem)
        got[name] = values
    if not expected:
        return OK
    decoded = {name: _rest_decoded(got[name], expected[name]) for name in expected}
    return ResponseCheck("OK", "", matching_rows(decoded, expected, rows), rows)


def _rest_decoded(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    if like.dtype.kind == "O":
        return np.array([v.encode() if isinstance(v, str) else v for v in values.ravel()],
                        dtype=object).reshape(values.shape)
    return values

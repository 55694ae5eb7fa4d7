"""numpy <-> TensorProto conversion, shared by the server and the load tester.

Pure numpy and protobuf: no TensorFlow op is ever called here, so a malformed request can
never reach a TensorFlow kernel through this module, and the conversion stays cheap enough
to sit on the per-request hot path of both sides.

Encoding follows TF Serving: by default responses use the typed repeated fields
(`float_val`, `int64_val`, ...) exactly as `Tensor::AsProtoField` writes them, so clients
written for TF Serving read them unchanged; `tensor_content` (raw little-endian bytes, what
`tf.make_tensor_proto` sends) is available as an option.

Not for: validating a tensor against a signature (see `serving.server.handling.core`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from tensorflow.core.framework import tensor_pb2, types_pb2


@dataclass(frozen=True)
class DtypeCodec:
    """How one TensorFlow dtype maps to numpy and to TensorProto's typed field."""

    enum: int
    name: str  # TensorFlow's name ("float", "int64"), used in error messages as TF does
    numpy: np.dtype
    field: str  # TensorProto repeated field holding typed values


_CODECS = [
    DtypeCodec(types_pb2.DT_FLOAT, "float", np.dtype("<f4"), "float_val"),
    DtypeCodec(types_pb2.DT_DOUBLE, "double", np.dtype("<f8"), "double_val"),
    DtypeCodec(types_pb2.DT_INT32, "int32", np.dtype("<i4"), "int_val"),
    DtypeCodec(types_pb2.DT_UINT8, "uint8", np.dtype("u1"), "int_val"),
    DtypeCodec(types_pb2.DT_INT16, "int16", np.dtype("<i2"), "int_val"),
    DtypeCodec(types_pb2.DT_INT8, "int8", np.dtype("i1"), "int_val"),
    DtypeCodec(types_pb2.DT_UINT16, "uint16", np.dtype("<u2"), "int_val"),
    DtypeCodec(types_pb2.DT_INT64, "int64", np.dtype("<i8"), "int64_val"),
    DtypeCodec(types_pb2.DT_UINT32, "uint32", np.dtype("<u4"), "uint32_val"),
    DtypeCodec(types_pb2.DT_UINT64, "uint64", np.dtype("<u8"), "uint64_val"),
    DtypeCodec(types_pb2.DT_BOOL, "bool", np.dtype("?"), "bool_val"),
    DtypeCodec(types_pb2.DT_HALF, "half", np.dtype("<f2"), "half_val"),
    DtypeCodec(types_pb2.DT_STRING, "string", np.dtype(object), "string_val"),
]
CODECS_BY_ENUM: dict[int, DtypeCodec] = {c.enum: c for c in _CODECS}
CODECS_BY_NUMPY: dict[np.dtype, DtypeCodec] = {c.numpy: c for c in _CODECS if c.enum != types_pb2.DT_STRING}

# Wire tags of TensorProto's packed float/double fields (field 5 / 6, wire type 2).
_PACKED_TAGS = {"float_val": b"\x2a", "double_val": b"\x32"}


class TensorConversionError(ValueError):
    """A TensorProto that cannot be turned into an array (TF Serving answers INVALID_ARGUMENT)."""


def dtype_name(enum: int) -> str:
    """TensorFlow's short name for a DataType enum, as its error messages print it."""
    codec = CODECS_BY_ENUM.get(enum)
    if codec is not None:
        return codec.name
    if enum in types_pb2.DataType.values():
        return types_pb2.DataType.Name(enum).removeprefix("DT_").lower()
    return str(enum)


def proto_shape(proto: tensor_pb2.TensorProto) -> tuple[int, ...]:
    """The shape a TensorProto declares; unknown rank or negative sizes are errors."""
    shape = proto.tensor_shape
    if shape.unknown_rank:
        raise TensorConversionError("tensor has unknown rank")
    dims = tuple(d.size for d in shape.dim)
    if any(d < 0 for d in dims):
        raise TensorConversionError(f"tensor shape {list(dims)} has a negative dimension")
    return dims


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _typed_values(proto: tensor_pb2.TensorProto, codec: DtypeCodec, size: int) -> np.ndarray:
    """Read the typed repeated field; fewer values than elements repeat the last one, as TF does."""
    values = getattr(proto, codec.field)
    count = len(values)
    if count > size:
        raise TensorConversionError(f"tensor has {count} values but its shape holds {size}")
    if codec.enum == types_pb2.DT_STRING:
        flat = np.empty(count, dtype=object)
        flat[:] = list(values)
    elif codec.enum == types_pb2.DT_HALF:
        flat = np.array(values, dtype="<u2").view("<f2")
    else:
        flat = np.array(values, dtype=codec.numpy)
    if count == size:
        return flat
    if count == 0:
        if codec.enum == types_pb2.DT_STRING:
            return np.full(size, b"", dtype=object)
        return np.zeros(size, dtype=codec.numpy)
    return np.concatenate([flat, np.repeat(flat[-1:], size - count)])


def to_numpy(proto: tensor_pb2.TensorProto, max_expanded_bytes: int | None = None) -> np.ndarray:
    """Decode a TensorProto (tensor_content or typed fields) into an array of its own dtype.

    Typed fields may carry fewer values than the shape holds (TF repeats the last one, or fills with
    zeros); `max_expanded_bytes` bounds what such a tensor may expand to, so a few bytes on the wire
    cannot make the decoder allocate gigabytes.
    """
    codec = CODECS_BY_ENUM.get(proto.dtype)
    if codec is None:
        raise TensorConversionError(f"unsupported tensor dtype {dtype_name(proto.dtype)}")
    shape = proto_shape(proto)
    size = math.prod(shape)
    expanded = size * codec.numpy.itemsize
    if max_expanded_bytes is not None and expanded > max_expanded_bytes:
        _check_carried(proto, codec, shape, expanded, max_expanded_bytes)
    content = proto.tensor_content if codec.enum != types_pb2.DT_STRING else b""  # read once: each read copies
    if content:
        if len(content) != expanded:
            raise TensorConversionError(
                f"tensor_content holds {len(content)} bytes but shape {list(shape)} of {codec.name} needs "
                f"{expanded}")
        return np.frombuffer(content, dtype=codec.numpy).reshape(shape)
    return _typed_values(proto, codec, size).reshape(shape)


def _check_carried(proto: tensor_pb2.TensorProto, codec: DtypeCodec, shape: tuple[int, ...], expanded: int,
                   limit: int) -> None:
    """A tensor over the limit is fine only when its values are all on the wire (the message limit bounds
    those); one that would expand a few typed values to that size is refused."""
    carried = len(proto.tensor_content) if codec.enum != types_pb2.DT_STRING else 0
    if carried == 0:
        carried = len(getattr(proto, codec.field)) * codec.numpy.itemsize
    if carried < expanded:
        raise TensorConversionError(
            f"tensor of shape {list(shape)} ({codec.name}) would expand to {expanded} bytes from the values it "
            f"carries, more than the {limit} bytes a request may hold")


def _set_shape(proto: tensor_pb2.TensorProto, shape: tuple[int, ...]) -> None:
    dims = proto.tensor_shape.dim
    for size in shape:
        dims.add(size=size)


def from_numpy(array: np.ndarray, tensor_content: bool = False) -> tensor_pb2.TensorProto:
    """Encode an array; typed fields (TF Serving's default) unless `tensor_content` is asked for."""
    proto = tensor_pb2.TensorProto()
    write_tensor(proto, array, tensor_content)
    return proto


def write_tensor(proto: tensor_pb2.TensorProto, array: np.ndarray, tensor_content: bool = False) -> None:
    """`from_numpy` into an empty TensorProto in place (e.g. a response's output map entry), saving a copy."""
    array = np.asarray(array)
    if array.dtype.kind in "SUO":
        proto.dtype = types_pb2.DT_STRING
        _set_shape(proto, array.shape)
        proto.string_val.extend(v if isinstance(v, bytes) else str(v).encode() for v in array.ravel())
        return
    codec = CODECS_BY_NUMPY.get(array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype)
    if codec is None:
        raise TensorConversionError(f"cannot encode numpy dtype {array.dtype}")
    proto.dtype = codec.enum
    _set_shape(proto, array.shape)
    flat = np.ascontiguousarray(array, dtype=codec.numpy).ravel()
    if tensor_content:
        proto.tensor_content = flat.tobytes()
    elif codec.field in _PACKED_TAGS:
        # Packed repeated floats are their raw little-endian bytes on the wire: parse them in one go
        # instead of appending element by element.
        raw = flat.tobytes()
        if raw:
            proto.MergeFromString(_PACKED_TAGS[codec.field] + _varint(len(raw)) + raw)
    elif codec.enum == types_pb2.DT_HALF:
        proto.half_val.extend(flat.view("<u2").tolist())
    else:
        getattr(proto, codec.field).extend(flat.tolist())

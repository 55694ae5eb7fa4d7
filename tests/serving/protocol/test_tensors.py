"""numpy <-> TensorProto conversion agrees with TensorFlow's own make_tensor_proto / make_ndarray."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2

from serving.protocol.tensors import TensorConversionError, from_numpy, to_numpy, write_tensor

ARRAYS = [
    np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
    np.array([[1.5, -2.25]], dtype=np.float64),
    np.array([1, -2, 3], dtype=np.int32),
    np.array([[7, 8]], dtype=np.int64),
    np.array([0, 255], dtype=np.uint8),
    np.array([True, False]),
    np.array([0.5, -1.0], dtype=np.float16),
    np.array([np.nan, np.inf, -np.inf], dtype=np.float32),
]


def test_write_tensor_fills_a_response_output_in_place():
    from tensorflow_serving.apis import predict_pb2

    response = predict_pb2.PredictResponse()
    scores = np.arange(20, dtype=np.float32).reshape(2, 10) / 3
    write_tensor(response.outputs["scores"], scores)
    assert response.outputs["scores"] == from_numpy(scores)
    parsed = predict_pb2.PredictResponse.FromString(response.SerializeToString())
    np.testing.assert_array_equal(tf.make_ndarray(parsed.outputs["scores"]), scores)


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: str(a.dtype))
@pytest.mark.parametrize("tensor_content", [False, True])
def test_round_trip_matches_tensorflow(array, tensor_content):
    proto = from_numpy(array, tensor_content=tensor_content)
    np.testing.assert_array_equal(tf.make_ndarray(proto), array)
    np.testing.assert_array_equal(to_numpy(proto), array)
    assert to_numpy(proto).dtype == array.dtype


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: str(a.dtype))
def test_reads_what_tensorflow_writes(array):
    decoded = to_numpy(tf.make_tensor_proto(array))
    np.testing.assert_array_equal(decoded, array)
    assert decoded.shape == array.shape


def test_default_encoding_uses_typed_fields_like_tf_serving():
    proto = from_numpy(np.array([[0.25, 0.5]], dtype=np.float32))
    assert list(proto.float_val) == [0.25, 0.5] and not proto.tensor_content
    assert proto.dtype == types_pb2.DT_FLOAT and [d.size for d in proto.tensor_shape.dim] == [1, 2]
    classes = from_numpy(np.array([3, 9], dtype=np.int64))
    assert list(classes.int64_val) == [3, 9]


def test_strings_round_trip():
    proto = from_numpy(np.array([b"a", b"bc"], dtype=object))
    assert list(proto.string_val) == [b"a", b"bc"]
    assert list(to_numpy(proto)) == [b"a", b"bc"]


def test_fewer_typed_values_repeat_the_last_as_tensorflow_does():
    proto = tf.make_tensor_proto(0.5, dtype=tf.float32, shape=[2, 2])
    np.testing.assert_array_equal(to_numpy(proto), np.full((2, 2), 0.5, dtype=np.float32))


def test_expansion_of_few_typed_values_is_bounded_but_values_on_the_wire_are_not():
    splat = tf.make_tensor_proto(0.5, dtype=tf.float32, shape=[1000, 784])  # one value, 3,136,000 bytes expanded
    assert to_numpy(splat).shape == (1000, 784)  # no limit asked for: expands as TensorFlow does
    with pytest.raises(TensorConversionError, match=r"\[1000, 784\] \(float\) would expand to 3136000 bytes"):
        to_numpy(splat, max_expanded_bytes=1_000_000)
    carried = from_numpy(np.ones((1000, 784), np.float32))  # every value on the wire, typed or raw
    assert to_numpy(carried, max_expanded_bytes=1_000_000).shape == (1000, 784)
    raw = from_numpy(np.ones((1000, 784), np.float32), tensor_content=True)
    assert to_numpy(raw, max_expanded_bytes=1_000_000).shape == (1000, 784)


def test_bad_protos_are_refused():
    too_many = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[1, 2, 3])
    too_many.tensor_shape.dim.add(size=2)
    with pytest.raises(TensorConversionError, match="3 values"):
        to_numpy(too_many)
    short_content = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_content=b"\0" * 6)
    short_content.tensor_shape.dim.add(size=2)
    with pytest.raises(TensorConversionError, match="6 bytes"):
        to_numpy(short_content)
    resource = tensor_pb2.TensorProto(dtype=types_pb2.DT_RESOURCE)
    with pytest.raises(TensorConversionError, match="unsupported tensor dtype resource"):
        to_numpy(resource)
    unknown_rank = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
    unknown_rank.tensor_shape.unknown_rank = True
    with pytest.raises(TensorConversionError, match="unknown rank"):
        to_numpy(unknown_rank)

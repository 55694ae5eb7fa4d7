"""Signature checks that run before TensorFlow, and model config parsing."""

from __future__ import annotations

import numpy as np
import pytest
from tensorflow.core.framework import types_pb2

from serving.server.handling.core import check_inputs, check_outputs
from serving.server.handling.errors import HTTP_STATUS, ServingError
from serving.server.handling.model_source import entries_from_config
from serving.server.runtimes.model_spec import SignatureSpec, TensorSpec

SPEC = SignatureSpec(
    name="predict_images", method_name="tensorflow/serving/predict",
    inputs={"images": TensorSpec("images", "images:0", types_pb2.DT_FLOAT, (-1, 784))},
    outputs={"scores": TensorSpec("scores", "s:0", types_pb2.DT_FLOAT, (-1, 10)),
             "classes": TensorSpec("classes", "c:0", types_pb2.DT_INT64, (-1,))},
)


def test_valid_inputs_give_the_batch_size():
    assert check_inputs(SPEC, {"images": np.zeros((5, 784), np.float32)}) == 5
    assert check_inputs(SPEC, {"images": np.full((1, 784), np.nan, np.float32)}) == 1  # non-finite is valid


@pytest.mark.parametrize("inputs, message", [
    ({}, "input size does not match signature: 0!=1 len({}) != len({images}). Sent extra: {}. "
         "Missing but required: {images}."),
    ({"images": np.zeros((1, 784), np.float32), "x": np.zeros((1, 1), np.float32)}, "Sent extra: {x}."),
    ({"pixels": np.zeros((1, 784), np.float32)}, "input tensor alias not found in signature: pixels."),
    ({"images": np.zeros((1, 784), np.int32)}, "Expects arg[0] to be float but int32 is provided"),
    ({"images": np.zeros((1, 784, 1), np.float32)}, "has shape [1,784,1]"),
    ({"images": np.zeros((1, 10), np.float32)}, "expects [-1,784]"),
    ({"images": np.zeros((0, 784), np.float32)}, "Batch size expected to be positive; was 0"),
    ({"images": np.zeros((), np.float32)}, "has shape []"),
])
def test_invalid_inputs_are_invalid_argument(inputs, message):
    with pytest.raises(ServingError) as info:
        check_inputs(SPEC, inputs)
    assert info.value.code == "INVALID_ARGUMENT" and message in info.value.message
    assert info.value.http_status == 400


def test_output_filter():
    assert check_outputs(SPEC, []) == ["classes", "scores"]
    assert check_outputs(SPEC, ["scores"]) == ["scores"]
    with pytest.raises(ServingError, match="duplicate output tensor alias: scores"):
        check_outputs(SPEC, ["scores", "scores"])
    with pytest.raises(ServingError, match=r"Outputs expected to be in the set \{classes,scores\}"):
        check_outputs(SPEC, ["logits"])


def test_http_codes_follow_tf_serving():
    assert (HTTP_STATUS["NOT_FOUND"], HTTP_STATUS["FAILED_PRECONDITION"], HTTP_STATUS["UNAVAILABLE"],
            HTTP_STATUS["RESOURCE_EXHAUSTED"], HTTP_STATUS["UNIMPLEMENTED"]) == (404, 400, 503, 429, 501)


def test_model_config_file_entries(tmp_path):
    from serving.protocol.protos import load_model_server_config

    path = tmp_path / "models.config"
    path.write_text('model_config_list { config { name: "mnist" base_path: "/m/mnist" model_platform: "tensorflow" '
                    'model_version_policy { latest { num_versions: 2 } } version_labels { key: "stable" value: 1 } } '
                    'config { name: "other" base_path: "/m/other" model_version_policy { all {} } } }')
    mnist, other = entries_from_config(load_model_server_config(path))
    assert (mnist.name, str(mnist.base_path), mnist.policy, mnist.num_versions) == ("mnist", "/m/mnist", "latest", 2)
    assert mnist.version_labels == {"stable": 1}
    assert other.policy == "all"
    path.write_text('model_config_list { config { name: "a" base_path: "/x" } config { name: "a" base_path: "/y" } }')
    with pytest.raises(ValueError, match="unique"):
        entries_from_config(load_model_server_config(path))

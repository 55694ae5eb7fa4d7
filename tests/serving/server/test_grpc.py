"""gRPC API of a running embedded server: answers, metadata, status, and TF Serving's error codes."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import struct_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    regression_pb2,
)

from serving.protocol.tensors import from_numpy, to_numpy
from tests.support.grpc import predict_request, rpc_error, stub_for
from tests.support.metrics import metric_value, metrics_page

pytestmark = [pytest.mark.integration, pytest.mark.untimed]  # every test here talks to a real server process


@pytest.fixture(scope="module")
def stub(plain_server):
    return stub_for(plain_server)


def test_predictions_match_the_savedmodel_run_in_process(stub, exported_model, samples):
    images = samples["images"][:64]
    response = stub.Predict(predict_request(images, signature="predict_images"), timeout=30)
    local = tf.saved_model.load(str(exported_model.model_dir)).signatures["predict_images"](images=tf.constant(images))
    np.testing.assert_array_equal(to_numpy(response.outputs["classes"]), local["classes"].numpy())
    np.testing.assert_allclose(to_numpy(response.outputs["scores"]), local["scores"].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(to_numpy(response.outputs["classes"]), samples["expected_classes"][:64])
    assert response.model_spec.name == "mnist"
    assert response.model_spec.version.value == exported_model.version
    assert response.model_spec.signature_name == "predict_images"


def test_responses_use_typed_fields_so_tutorial_clients_work(stub, samples):
    request = predict_request(samples["images"][:3], tensor_content=False)  # float_val request, as well
    response = stub.Predict(request, timeout=30)
    assert len(response.outputs["scores"].float_val) == 30 and not response.outputs["scores"].tensor_content
    assert list(response.outputs["classes"].int64_val) == samples["expected_classes"][:3].tolist()
    assert tf.make_ndarray(response.outputs["scores"]).shape == (3, 10)


def test_default_signature_and_explicit_version(stub, samples, exported_model):
    request = predict_request(samples["images"][:2])
    request.model_spec.version.value = exported_model.version
    request.output_filter.append("classes")
    response = stub.Predict(request, timeout=30)
    assert response.model_spec.signature_name == "serving_default"
    assert list(response.outputs) == ["classes"]


def test_non_finite_values_are_passed_through(stub):
    images = np.zeros((2, 784), np.float32)
    images[0, :5] = [np.nan, np.inf, -np.inf, np.nan, 1e38]
    response = stub.Predict(predict_request(images), timeout=30)
    assert to_numpy(response.outputs["scores"]).shape == (2, 10)


def _request(images=None, **kwargs):
    return predict_request(np.zeros((2, 784), np.float32) if images is None else images, **kwargs)


def _with_version(version: int):
    request = _request()
    request.model_spec.version.value = version
    return request


def _with_label(label: str):
    request = _request()
    request.model_spec.version_label = label
    return request


def _with_extra_input():
    request = _request()
    request.inputs["extra"].CopyFrom(from_numpy(np.zeros((2, 1), np.float32)))
    return request


def _without_inputs():
    request = _request()
    del request.inputs["images"]
    return request


def _with_bad_content():
    request = _request()
    request.inputs["images"].tensor_content = b"\0" * 10
    return request


def _with_values_expanding_past_the_size_limit():
    request = _request()  # one typed value declared as 2**24 rows: 53 GB once expanded, a few bytes sent
    request.inputs["images"].CopyFrom(tf.make_tensor_proto(0.5, dtype=tf.float32, shape=[1 << 24, 784]))
    return request


def _without_model_spec():
    request = _request()
    request.ClearField("model_spec")
    return request


def _with_rank_past_numpys_limit():
    request = _request()  # TF holds up to 254 dims, numpy 64 (its ValueError was INTERNAL)
    request.inputs["images"].CopyFrom(tf.make_tensor_proto(0.5, dtype=tf.float32, shape=[1] * 65))
    return request


def _with_unknown_output():
    request = _request()
    request.output_filter.append("logits")
    return request


BAD_REQUESTS = {
    "unknown model": (lambda: _request(model="fashion"), "NOT_FOUND",
                      "Servable not found for request: Latest(fashion)"),
    "unknown version": (lambda: _with_version(99), "NOT_FOUND", "Specific(mnist, 99)"),
    "unknown label": (lambda: _with_label("stable"), "INVALID_ARGUMENT", "Unrecognized servable version label"),
    "unknown signature": (lambda: _request(signature="classify"), "FAILED_PRECONDITION",
                          'Serving signature key "classify" not found.'),
    "missing input": (_without_inputs, "INVALID_ARGUMENT", "Missing but required: {images}"),
    "extra input": (_with_extra_input, "INVALID_ARGUMENT", "Sent extra: {extra}"),
    "misnamed input": (lambda: _request(alias="image"), "INVALID_ARGUMENT",
                       "input tensor alias not found in signature: image"),
    "wrong dtype": (lambda: _request(np.zeros((2, 784), np.float64)), "INVALID_ARGUMENT",
                    "Expects arg[0] to be float but double is provided"),
    "wrong rank": (lambda: _request(np.zeros(784, np.float32)), "INVALID_ARGUMENT", "has shape [784]"),
    "wrong inner shape": (lambda: _request(np.zeros((2, 28, 28), np.float32)), "INVALID_ARGUMENT",
                          "has shape [2,28,28]"),
    "wrong width": (lambda: _request(np.zeros((1, 783), np.float32)), "INVALID_ARGUMENT", "expects [-1,784]"),
    "empty batch": (lambda: _request(np.zeros((0, 784), np.float32)), "INVALID_ARGUMENT", "was 0"),
    "bad tensor_content": (_with_bad_content, "INVALID_ARGUMENT", "tensor_content holds 10 bytes"),
    "expands past the size limit": (_with_values_expanding_past_the_size_limit, "INVALID_ARGUMENT",
                                    "would expand to 52613349376 bytes"),
    "missing model_spec": (_without_model_spec, "INVALID_ARGUMENT", "Missing ModelSpec"),
    "rank past numpy's limit": (_with_rank_past_numpys_limit, "INVALID_ARGUMENT", "maximum supported dimension"),
    "unknown output": (_with_unknown_output, "INVALID_ARGUMENT", "output tensor alias not found in signature: logits"),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_bad_requests_get_tf_servings_status_codes(stub, case):
    make, code, text = BAD_REQUESTS[case]
    error = rpc_error(stub.Predict, make(), timeout=30)
    assert error.code() == getattr(grpc.StatusCode, code), error.details()
    assert text in error.details()


def test_oversize_message_is_resource_exhausted_and_server_keeps_serving(stub, samples):
    huge = np.zeros((11_000, 784), np.float32)  # ~34 MB, over the 32 MiB default limit
    error = rpc_error(stub.Predict, predict_request(huge), timeout=60)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    response = stub.Predict(predict_request(samples["images"][:1]), timeout=30)
    assert to_numpy(response.outputs["classes"]).tolist() == samples["expected_classes"][:1].tolist()


def test_metadata_reports_signatures_and_device(stub, exported_model):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def", "server_info"])
    request.model_spec.name = "mnist"
    response = stub.GetModelMetadata(request, timeout=30)
    assert response.model_spec.version.value == exported_model.version
    signatures = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signatures)
    assert {"predict_images", "serving_default"} <= set(signatures.signature_def)
    images = signatures.signature_def["predict_images"].inputs["images"]
    assert images.dtype == tf.float32.as_datatype_enum
    assert [d.size for d in images.tensor_shape.dim] == [-1, 784]
    info = struct_pb2.Struct()
    response.metadata["server_info"].Unpack(info)
    assert info["device"] == "cpu" and info["device_name"] and info["kind"] == "embedded"
    floor = info["device_floor"]
    assert floor["runtime"] == "tensorflow" and floor["round_trip_us"] > 0 and floor["batches"]
    assert floor["round_trip_note"].startswith("tensorflow: tf.constant")


@pytest.mark.parametrize("fields, text", [([], "at least one metadata_field"),
                                          (["graph"], "Metadata field graph is not supported")])
def test_metadata_field_errors(stub, fields, text):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=fields)
    request.model_spec.name = "mnist"
    error = rpc_error(stub.GetModelMetadata, request, timeout=30)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and text in error.details()


def test_model_status(plain_server, exported_model):
    models = model_service_pb2_grpc.ModelServiceStub(grpc.insecure_channel(plain_server.grpc_target))
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "mnist"
    response = models.GetModelStatus(request, timeout=30)
    [status] = response.model_version_status
    assert status.version == exported_model.version
    assert status.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    request.model_spec.version.value = 42
    error = rpc_error(models.GetModelStatus, request, timeout=30)
    assert error.code() == grpc.StatusCode.NOT_FOUND and "Could not find version 42 of model mnist" in error.details()
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "nope"
    assert rpc_error(models.GetModelStatus, request, timeout=30).code() == grpc.StatusCode.NOT_FOUND


def test_other_rpcs_are_unimplemented_with_a_clear_message(stub, plain_server):
    models = model_service_pb2_grpc.ModelServiceStub(grpc.insecure_channel(plain_server.grpc_target))
    calls = {
        "Classify": (stub.Classify, classification_pb2.ClassificationRequest()),
        "Regress": (stub.Regress, regression_pb2.RegressionRequest()),
        "MultiInference": (stub.MultiInference, inference_pb2.MultiInferenceRequest()),
        "HandleReloadConfigRequest": (models.HandleReloadConfigRequest, model_management_pb2.ReloadConfigRequest()),
    }
    for name, (method, request) in calls.items():
        error = rpc_error(method, request, timeout=30)
        assert error.code() == grpc.StatusCode.UNIMPLEMENTED
        assert name in error.details() and "not implemented" in error.details()


def test_request_count_metric_by_status(stub, plain_server):
    def count(status: str) -> float:
        page = metrics_page(plain_server)
        try:
            return metric_value(page, ":tensorflow:serving:request_count",
                                f'model_name="mnist",status="{status}"')
        except AssertionError:
            return 0.0

    ok, bad = count("OK"), count("INVALID_ARGUMENT")
    stub.Predict(_request(), timeout=30)
    rpc_error(stub.Predict, _request(np.zeros((1, 3), np.float32)), timeout=30)
    assert count("OK") == ok + 1 and count("INVALID_ARGUMENT") == bad + 1

"""REST API of a running embedded server, as TF Serving documents it; it agrees with gRPC."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse

import numpy as np
import pytest

from serving.protocol.tensors import to_numpy
from tests.support.grpc import predict_request, stub_for

pytestmark = [pytest.mark.integration, pytest.mark.untimed]  # every test here talks to a real server process


def call(server, method: str, path: str, body=None, content_type: str = "application/json"):
    """(HTTP status, parsed JSON or text) for one request."""
    url = urllib.parse.urlparse(server.rest_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    headers = {"Content-Type": content_type} if body is not None else {}
    payload = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
    connection.request(method, path, body=payload, headers=headers)
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    if response.getheader("Content-Type", "").startswith("application/json"):
        return response.status, json.loads(text)
    return response.status, text


def test_model_status_and_version(plain_server, exported_model):
    status, body = call(plain_server, "GET", "/v1/models/mnist")
    assert status == 200
    [entry] = body["model_version_status"]
    assert entry["version"] == str(exported_model.version) and entry["state"] == "AVAILABLE"
    assert entry["status"]["error_code"] == "OK"
    assert call(plain_server, "GET", f"/v1/models/mnist/versions/{exported_model.version}")[0] == 200


def test_a_version_beyond_int64_is_a_bad_request_not_a_server_error(plain_server):
    huge = "99999999999999999999"
    for method, path in (("GET", f"/v1/models/mnist/versions/{huge}"),
                         ("GET", f"/v1/models/mnist/versions/{huge}/metadata"),
                         ("POST", f"/v1/models/mnist/versions/{huge}:predict")):
        status, body = call(plain_server, method, path, {"instances": [[0.0] * 784]} if method == "POST" else None)
        assert status == 400 and "outside int64" in body["error"], (path, status, body)


def test_metadata(plain_server, exported_model):
    status, body = call(plain_server, "GET", "/v1/models/mnist/metadata")
    assert status == 200
    assert body["model_spec"] == {"name": "mnist", "signature_name": "", "version": str(exported_model.version)}
    signature = body["metadata"]["signature_def"]["signature_def"]["predict_images"]
    assert signature["inputs"]["images"]["dtype"] == "DT_FLOAT"
    assert body["server_info"]["device"] == "cpu"


def test_row_and_columnar_predictions_agree_with_grpc(plain_server, samples):
    images = samples["images"][:5]
    grpc_response = stub_for(plain_server).Predict(predict_request(images), timeout=30)
    grpc_scores = to_numpy(grpc_response.outputs["scores"])
    status, rows = call(plain_server, "POST", "/v1/models/mnist:predict",
                        {"signature_name": "predict_images", "instances": images.tolist()})
    assert status == 200
    assert [p["classes"] for p in rows["predictions"]] == samples["expected_classes"][:5].tolist()
    np.testing.assert_allclose([p["scores"] for p in rows["predictions"]], grpc_scores, rtol=1e-5, atol=1e-6)
    status, columns = call(plain_server, "POST", "/v1/models/mnist/versions/1:predict",
                           {"inputs": {"images": images.tolist()}})
    assert status == 200
    assert columns["outputs"]["classes"] == samples["expected_classes"][:5].tolist()
    np.testing.assert_allclose(columns["outputs"]["scores"], grpc_scores, rtol=1e-5, atol=1e-6)
    status, named_rows = call(plain_server, "POST", "/v1/models/mnist:predict",
                              {"instances": [{"images": row} for row in images[:2].tolist()]})
    assert status == 200 and len(named_rows["predictions"]) == 2


def test_curl_default_content_type_is_accepted(plain_server, samples):
    body = json.dumps({"instances": samples["images"][:1].tolist()})
    status, answer = call(plain_server, "POST", "/v1/models/mnist:predict", body,
                          content_type="application/x-www-form-urlencoded")
    assert status == 200 and len(answer["predictions"]) == 1


ROW = [0.0] * 784
BAD = {
    "malformed json": ("POST", "/v1/models/mnist:predict", b"{not json", "application/json", 400, "JSON Parse error"),
    "wrong content type": ("POST", "/v1/models/mnist:predict", json.dumps({"instances": [ROW]}),
                           "application/octet-stream", 400, "Content-Type"),
    "no instances or inputs": ("POST", "/v1/models/mnist:predict", {"rows": [ROW]}, "application/json", 400,
                               "Missing 'inputs' or 'instances' key"),
    "both formats": ("POST", "/v1/models/mnist:predict", {"instances": [ROW], "inputs": [ROW]},
                     "application/json", 400, "only one of"),
    "empty instances": ("POST", "/v1/models/mnist:predict", {"instances": []}, "application/json", 400, "was 0"),
    "wrong width": ("POST", "/v1/models/mnist:predict", {"instances": [[0.0] * 783]}, "application/json", 400,
                    "expects [-1,784]"),
    "ragged rows": ("POST", "/v1/models/mnist:predict", {"instances": [ROW, [0.0]]}, "application/json", 400,
                    "ragged"),
    "strings for floats": ("POST", "/v1/models/mnist:predict", {"instances": [["a"] * 784]}, "application/json",
                           400, "expected float"),
    "misnamed input": ("POST", "/v1/models/mnist:predict", {"inputs": {"image": [ROW]}}, "application/json", 400,
                       "input tensor alias not found"),
    "unknown model": ("POST", "/v1/models/fashion:predict", {"instances": [ROW]}, "application/json", 404,
                      "Servable not found"),
    "unknown version": ("GET", "/v1/models/mnist/versions/77", None, "", 404, "Could not find version 77"),
    "unknown signature": ("POST", "/v1/models/mnist:predict", {"signature_name": "x", "instances": [ROW]},
                          "application/json", 400, 'Serving signature key "x" not found.'),
    "nested too deep": ("POST", "/v1/models/mnist:predict", '{"instances": ' + "[" * 100_000 + "]" * 100_000 + "}",
                        "application/json", 400, "JSON Parse error: maximum recursion depth exceeded"),
    "classify": ("POST", "/v1/models/mnist:classify", {"examples": []}, "application/json", 501, "not implemented"),
    "bad path": ("GET", "/v2/whatever", None, "", 404, "Malformed request"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_rest_requests_get_tf_servings_http_codes(plain_server, case):
    method, path, body, content_type, code, text = BAD[case]
    status, answer = call(plain_server, method, path, body, content_type=content_type)
    assert status == code, answer
    assert set(answer) == {"error"} and text in answer["error"]


def post_declaring(server, content_length: str, body: bytes) -> tuple[int, dict, float]:
    """(status, JSON answer, seconds) of a predict POST whose Content-Length header is `content_length`."""
    url = urllib.parse.urlparse(server.rest_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    started = time.monotonic()
    connection.putrequest("POST", "/v1/models/mnist:predict")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", content_length)
    connection.endheaders(body)
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    return response.status, answer, time.monotonic() - started


@pytest.mark.parametrize("content_length, text", [
    ("-1", "is not a number of bytes"),  # was read to EOF: a 500 once the server's 2 s read timeout passed
    ("1e3", "is not a number of bytes"),
    ("999", "ended before the 999 bytes"),  # the body never comes: 400 after the server's 2 s read timeout
])
def test_content_length_that_is_no_byte_count_or_longer_than_the_body_is_400(plain_server, content_length, text):
    status, answer, seconds = post_declaring(plain_server, content_length, b'{"instances": [[0]]}')
    assert status == 400 and text in answer["error"] and seconds < 10


def test_non_finite_json_values_pass_through(plain_server):
    status, answer = call(plain_server, "POST", "/v1/models/mnist:predict",
                          '{"instances": [[NaN, Infinity' + ", 0.0" * 782 + "]]}")
    assert status == 200 and len(answer["predictions"]) == 1


def test_prometheus_page_has_tf_serving_names_and_device_label(plain_server):
    call(plain_server, "POST", "/v1/models/mnist:predict", {"instances": [ROW]})
    status, page = call(plain_server, "GET", "/monitoring/prometheus/metrics")
    assert status == 200
    assert "# TYPE :tensorflow:serving:request_count counter" in page
    assert ':tensorflow:serving:request_count{model_name="mnist",status="OK"}' in page
    assert ":tensorflow:serving:request_latency_bucket{" in page and 'entrypoint="REST"' in page
    assert ':tensorflow:serving:embedded:server_info{' in page and 'device="cpu"' in page

"""Bad input at volume: over 10,000 mutated Predict requests, over gRPC and REST, against ONE embedded server.

The server runs the real SavedModel with batching on (a small batching parameters file). Hypothesis
draws the mutations, derandomized and with no example database, so every run sends the same requests:

- gRPC, raw bytes (a `unary_unary` with no serializer, as `loadtest.load.client` sends them): bit
  flips, truncations and spliced-in bytes of valid serialized PredictRequests;
- gRPC, messages: huge, negative and overflowing dims, ranks past numpy's 64, every DataType enum
  (and values outside it), tensor_content whose length does not match the shape, typed values that
  would expand to huge tensors (one float_val for [2**31, 784]), out-of-range int_val/half_val,
  wrong or extra input names, a missing model_spec, unknown models, versions, labels, signatures and
  output filters;
- REST: valid bodies mutated as text, malformed JSON, deep nesting, huge numbers, wrong types,
  ragged lists, empty bodies, declared lengths over the limit or not numbers, other content types,
  unknown models, versions and labels in the path.

Every answer must be a TF Serving status. gRPC: a code TF Serving gives for bad input, INTERNAL
exactly when the bytes do not parse as a PredictRequest (what gRPC, C++ as Python, answers when a
request cannot be deserialized), or OK with well-formed outputs. REST: a 4xx with `{"error": "..."}`, or 200 with
`predictions`/`outputs`. A dropped connection, a timeout (every call has one) or any other answer is
a failure. Afterwards the server must still classify real digits as the export did.

Memory: the server's resident set is read (psutil, by pid) after a warm-up and after the barrage;
growth must stay under 200 MiB. The biggest legitimate transient allocation a request can cause is
one 32 MiB tensor (typed values may expand up to the request size limit), and glibc may keep a
few such peaks in its per-thread arenas; a per-request leak of
20 KiB or more would, over 10,000 requests, pass the bound. Measured on the 2-core development machine
(10,200 requests in about 23 s): 826 MiB after the warm-up, 869 MiB after the barrage (+43 MiB).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
import numpy as np
import psutil
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2

from serving.deploy.process import start_server
from serving.protocol.tensors import CODECS_BY_ENUM, to_numpy
from tests.support.batching import write_batching_file
from tests.support.grpc import predict_request

pytestmark = [pytest.mark.integration, pytest.mark.untimed]

EXAMPLES = 5_100  # each example sends one gRPC and one REST request
MIN_REQUESTS = 10_000
MEMORY_GROWTH_BOUND_MIB = 200
CALL_TIMEOUT_S = 10.0
MAX_MESSAGE_BYTES = 32 * 1024 * 1024  # the server's default request size limit
PREDICT_METHOD = "/tensorflow.serving.PredictionService/Predict"

# What TF Serving answers bad input with: resolving the model (NOT_FOUND, INVALID_ARGUMENT for an unknown
# label), the signature (FAILED_PRECONDITION), the inputs (INVALID_ARGUMENT) and the size limit (RESOURCE_EXHAUSTED).
GRPC_BAD_INPUT = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION,
                  grpc.StatusCode.RESOURCE_EXHAUSTED}
INT32, INT64, UINT32, UINT64 = (-(2**31), 2**31 - 1), (-(2**63), 2**63 - 1), (0, 2**32 - 1), (0, 2**64 - 1)


@dataclass
class Tally:
    """What the barrage sent and got back, and every answer that broke the rules."""

    sent: Counter = field(default_factory=Counter)  # (protocol, mutation kind) -> requests
    answers: Counter = field(default_factory=Counter)  # (protocol, status) -> answers
    problems: list[str] = field(default_factory=list)  # the first 50, each cut to 600 characters
    problem_kinds: Counter = field(default_factory=Counter)  # (protocol, mutation kind, status) -> answers

    def problem(self, protocol: str, kind: str, status: str, text: str) -> None:
        self.problem_kinds[protocol, kind, status] += 1
        if len(self.problems) < 50:
            self.problems.append(f"{protocol} {kind}: {status} {text}"[:600])


@pytest.fixture(scope="module")
def fuzz_server(exported_model, tmp_path_factory):
    """The real SavedModel with batching: small batches, a short timeout, two batch threads."""
    params = write_batching_file(tmp_path_factory.mktemp("fuzz") / "batching.txt", max_batch_size=32,
                                 batch_timeout_micros=1000, num_batch_threads=2, max_enqueued_batches=16,
                                 allowed_batch_sizes=[8, 32])
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--enable_batching", "--batching_parameters_file", str(params)) as server:
        yield server


# ---- gRPC ---------------------------------------------------------------------------------------------

def base_requests(images: np.ndarray) -> list[bytes]:
    """Valid serialized requests the raw mutations start from: both value encodings, optional fields set."""
    plain = predict_request(images[:1])
    typed = predict_request(images[1:3], signature="predict_images", tensor_content=False)
    typed.model_spec.version.value = 1
    filtered = predict_request(images[3:4])
    filtered.output_filter.append("classes")
    return [r.SerializeToString() for r in (plain, typed, filtered)]


@st.composite
def raw_mutations(draw, bases: list[bytes]) -> tuple[str, bytes]:
    """A valid request's bytes with bits flipped, cut short, or a span replaced by random bytes."""
    data = bytearray(draw(st.sampled_from(bases)))
    kind = draw(st.sampled_from(["bit flips", "truncation", "splice"]))
    if kind == "bit flips":
        header_bits = 8 * 64  # model_spec and the tensor's dtype and shape come first: flip there often
        bits = st.one_of(st.integers(0, header_bits - 1), st.integers(0, 8 * len(data) - 1))
        for bit in draw(st.lists(bits, min_size=1, max_size=8)):
            data[bit // 8] ^= 1 << (bit % 8)
    elif kind == "truncation":
        data = data[:draw(st.integers(0, len(data) - 1))]
    else:
        start = draw(st.integers(0, len(data)))
        end = draw(st.integers(start, min(len(data), start + 16)))
        data[start:end] = draw(st.binary(max_size=16))
    return f"raw {kind}", bytes(data)


DIMS = st.one_of(
    st.tuples(st.integers(1, 40), st.just(784)).map(list),  # often valid, sometimes over max_batch_size
    st.lists(st.sampled_from([-(2**63), -1, 0, 1, 2, 783, 784, 785, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1]),
             max_size=6),
    st.lists(st.integers(*INT64), max_size=4),
    st.integers(60, 300).map(lambda rank: [1] * rank),  # numpy holds at most 64 dims, TF 254
)
DTYPES = st.one_of(st.just(types_pb2.DT_FLOAT), st.sampled_from(sorted(types_pb2.DataType.values())),
                   st.sampled_from([-7, 64, 9999, 2**31 - 1]))
TYPED_VALUES = {
    "float_val": st.lists(st.floats(width=32), max_size=40),
    "double_val": st.lists(st.floats(), max_size=40),
    "int_val": st.lists(st.integers(*INT32), max_size=40),  # also fills int8/int16/uint8/uint16 (and half_val)
    "half_val": st.lists(st.integers(*INT32), max_size=40),
    "int64_val": st.lists(st.integers(*INT64), max_size=40),
    "uint32_val": st.lists(st.integers(*UINT32), max_size=40),
    "uint64_val": st.lists(st.integers(*UINT64), max_size=40),
    "bool_val": st.lists(st.booleans(), max_size=40),
    "string_val": st.lists(st.binary(max_size=12), max_size=10),
}
ITEM_SIZES = {types_pb2.DT_FLOAT: 4, types_pb2.DT_DOUBLE: 8, types_pb2.DT_INT64: 8, types_pb2.DT_HALF: 2,
              types_pb2.DT_INT8: 1, types_pb2.DT_UINT8: 1}


@st.composite
def tensors(draw) -> tuple[str, tensor_pb2.TensorProto]:
    """A TensorProto of drawn dtype and shape, carrying tensor_content of some length, or typed values."""
    tensor = tensor_pb2.TensorProto(dtype=draw(DTYPES))
    dims = draw(DIMS)
    for size in dims:
        tensor.tensor_shape.dim.add(size=size)
    if draw(st.integers(0, 30)) == 0:
        tensor.tensor_shape.unknown_rank = True
    exact = int(np.prod(dims, dtype=object)) * ITEM_SIZES.get(tensor.dtype, 4)
    if draw(st.booleans()):
        lengths = [0, 1, 7, 3136] + ([exact, exact - 1, exact + 1] if 0 < exact <= 200_000 else [])
        tensor.tensor_content = bytes(draw(st.sampled_from(lengths)))
        return "tensor_content", tensor
    codec = CODECS_BY_ENUM.get(tensor.dtype)  # the dtype's own field (out-of-range values too), or any other
    field_name = codec.field if codec and draw(st.booleans()) else draw(st.sampled_from(sorted(TYPED_VALUES)))
    getattr(tensor, field_name).extend(draw(TYPED_VALUES[field_name]))
    return "typed values", tensor


NAMES = st.text(max_size=16)


@st.composite
def message_mutations(draw, valid: predict_pb2.PredictRequest) -> tuple[str, bytes]:
    """A PredictRequest with its tensor, input names, model_spec or output_filter replaced by drawn ones."""
    request = predict_pb2.PredictRequest()
    request.CopyFrom(valid)
    kind = draw(st.sampled_from(["tensor", "tensor", "tensor", "input names", "model_spec", "output_filter"]))
    if kind == "tensor":
        kind, tensor = draw(tensors())
        request.inputs["images"].CopyFrom(tensor)
    elif kind == "input names":
        tensor = tensor_pb2.TensorProto()
        tensor.CopyFrom(request.inputs["images"])
        del request.inputs["images"]
        for alias in draw(st.lists(st.one_of(st.just("images"), NAMES), max_size=3, unique=True)):
            request.inputs[alias].CopyFrom(tensor)
    elif kind == "model_spec":
        request.ClearField("model_spec")
        if draw(st.integers(0, 4)):
            spec = request.model_spec
            spec.SetInParent()  # present even when every field below is empty
            spec.name = draw(st.one_of(st.just("mnist"), NAMES))
            spec.signature_name = draw(st.sampled_from(["", "serving_default", "predict_images", "classify", "x"]))
            choice = draw(st.sampled_from(["", "version", "label"]))
            if choice == "version":
                spec.version.value = draw(st.one_of(st.just(1), st.integers(*INT64)))
            elif choice == "label":
                spec.version_label = draw(NAMES)
        else:
            kind = "missing model_spec"
    else:
        request.output_filter[:] = draw(st.lists(st.one_of(st.sampled_from(["classes", "scores"]), NAMES),
                                                 max_size=3))
    return kind, request.SerializeToString()


def parses(data: bytes) -> bool:
    try:
        predict_pb2.PredictRequest.FromString(data)
    except Exception:  # noqa: BLE001  (protobuf's DecodeError, or worse: either way it does not parse)
        return False
    return True


def check_grpc(predict: Callable, kind: str, data: bytes, tally: Tally) -> None:
    """Send one raw request; tally its status; note anything that is not a TF Serving answer."""
    tally.sent["grpc", kind] += 1
    try:
        answer = predict(data, timeout=CALL_TIMEOUT_S)
    except grpc.RpcError as exc:
        code = exc.code()
        tally.answers["grpc", code.name] += 1
        expected = GRPC_BAD_INPUT if parses(data) else {grpc.StatusCode.INTERNAL}
        if code not in expected:
            tally.problem("grpc", kind, code.name, f"({exc.details()}) for {data[:200]!r}")
        return
    tally.answers["grpc", "OK"] += 1
    problem = malformed_response(predict_pb2.PredictResponse.FromString(answer))
    if problem:
        tally.problem("grpc", kind, "OK", f"but {problem} for {data[:200]!r}")


def malformed_response(response: predict_pb2.PredictResponse) -> str:
    """Why an OK answer is not a well-formed MNIST prediction ("" when it is)."""
    outputs = {alias: to_numpy(tensor) for alias, tensor in response.outputs.items()}
    if not outputs or not set(outputs) <= {"classes", "scores"}:
        return f"outputs {sorted(outputs)}"
    rows = {len(a) for a in outputs.values()}
    if len(rows) != 1 or 0 in rows:
        return f"output rows {rows}"
    if "scores" in outputs and outputs["scores"].shape[1:] != (10,):
        return f"scores of shape {outputs['scores'].shape}"
    if "classes" in outputs and not np.isin(outputs["classes"], np.arange(10)).all():
        return f"classes {outputs['classes']}"
    return ""


# ---- REST ---------------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=30)
NUMBER_TEXTS = ["1e999", "-1e999", "1e-999", "NaN", "-Infinity", "1" * 400, "9" * 5000, "-0", "0x10", "01", "+1",
                ".5", "1.", "2e+308", "123456789012345678901234567890"]
CONTENT_TYPES = ["text/html", "application/octet-stream", "multipart/form-data; boundary=x", "application/xml",
                 "application/json; charset=utf-16", "APPLICATION/JSON", "json", ";;;", "application/json\\"]
# Declared lengths the server can answer without waiting for bytes that never come.
CONTENT_LENGTHS = [str(MAX_MESSAGE_BYTES + 1), str(2**31), str(2**63), str(10**30), "-1", "-99999", "abc", "1e3",
                   "0x10", "0"]


def rest_bodies(images: np.ndarray) -> st.SearchStrategy[tuple[str, bytes]]:
    rows = images[:3].tolist()
    valid = st.one_of(
        st.integers(1, 3).map(lambda n: {"instances": rows[:n]}),
        st.integers(1, 3).map(lambda n: {"inputs": {"images": rows[:n]}}),
        st.integers(1, 3).map(lambda n: {"signature_name": "predict_images", "instances": [{"images": r}
                                                                                           for r in rows[:n]]}),
    ).map(lambda body: json.dumps(body).encode())

    @st.composite
    def mutated(draw) -> tuple[str, bytes]:
        data = bytearray(draw(valid))
        kind = draw(st.sampled_from(["bit flips", "truncation", "splice"]))
        if kind == "bit flips":
            for bit in draw(st.lists(st.integers(0, 8 * len(data) - 1), min_size=1, max_size=8)):
                data[bit // 8] ^= 1 << (bit % 8)
        elif kind == "truncation":
            data = data[:draw(st.integers(0, len(data) - 1))]
        else:
            start = draw(st.integers(0, len(data)))
            data[start:start + draw(st.integers(0, 16))] = draw(st.binary(max_size=16))
        return f"text {kind}", bytes(data)

    wrong_types = st.one_of(
        st.builds(lambda v: {"instances": v}, JSON_VALUES), st.builds(lambda v: {"inputs": v}, JSON_VALUES),
        st.builds(lambda v: {"inputs": {"images": v}}, JSON_VALUES),
        st.builds(lambda v: {"instances": [{"images": v}]}, JSON_VALUES),
        st.builds(lambda v, w: {"instances": rows[:1], "signature_name": v, "extra": w}, JSON_VALUES, JSON_VALUES),
        st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=3),
    ).map(lambda body: ("wrong types", json.dumps(body).encode()))
    ragged = st.lists(st.integers(0, 800), min_size=1, max_size=4).map(
        lambda widths: ("ragged lists", json.dumps({"instances": [[0.5] * w for w in widths]}).encode()))
    deep = st.tuples(st.sampled_from(["[", '{"a":', '{"instances":']),
                     st.one_of(st.sampled_from([63, 64, 65, 999, 1000, 1001]), st.integers(1, 200_000))).map(
        lambda p: ("deep nesting", (b'{"instances":' + p[0].encode() * p[1] + b"1" + (b"]" if p[0] == "[" else b"}")
                                    * p[1] + b"}")))
    numbers = st.tuples(st.sampled_from(NUMBER_TEXTS), st.integers(0, 783)).map(
        lambda p: ("huge numbers", ('{"instances": [[' + ", ".join(["0.5"] * p[1] + [p[0]] + ["0.5"] * (783 - p[1]))
                                    + "]]}").encode()))
    empty = st.sampled_from([b"", b" ", b"null", b"[]", b"{}", b'""', b"0", b"\xff\xfe", b'{"instances": null}']).map(
        lambda body: ("empty bodies", body))
    return st.one_of(valid.map(lambda body: ("valid", body)), mutated(), mutated(), mutated(), wrong_types, ragged,
                     deep, numbers, empty)


REST_PATHS = st.one_of(
    st.just("/v1/models/mnist:predict"),
    st.integers(*INT64).map(lambda v: f"/v1/models/mnist/versions/{v}:predict"),
    st.just("/v1/models/mnist/versions/99999999999999999999999:predict"),
    NAMES.map(lambda name: f"/v1/models/{urllib.parse.quote(name, safe='')}:predict"),
    NAMES.map(lambda label: f"/v1/models/mnist/labels/{urllib.parse.quote(label, safe='')}:predict"),
    st.sampled_from(["/v1/models/mnist", "/v1/models/mnist:predictx", "/v1/models/mnist/versions/1/metadata",
                     "/v1/models/:predict", "/v2/models/mnist:predict"]),
)


@st.composite
def rest_requests(draw, bodies) -> tuple[str, str, list[tuple[str, str]], bytes]:
    kind, body = draw(bodies)
    # About 1 in 6, 10 and 20 (a value inside the range: Hypothesis draws a range's ends far more often).
    path = draw(REST_PATHS) if draw(st.integers(0, 5)) == 3 else "/v1/models/mnist:predict"
    content_type = draw(st.sampled_from(CONTENT_TYPES)) if draw(st.integers(0, 9)) == 7 else "application/json"
    length = str(len(body))
    if draw(st.integers(0, 19)) == 7:
        kind, length = "declared lengths", draw(st.sampled_from(CONTENT_LENGTHS))
    elif content_type != "application/json":
        kind = "content types"
    elif path != "/v1/models/mnist:predict":
        kind = "paths"
    return kind, path, [("Content-Type", content_type), ("Content-Length", length)], body


def post(address: tuple[str, int], path: str, headers: list[tuple[str, str]], body: bytes) -> tuple[int, str, bytes]:
    """(HTTP status, Content-Type, body) of one POST sent exactly as given, on a connection of its own."""
    connection = http.client.HTTPConnection(*address, timeout=CALL_TIMEOUT_S)
    try:
        connection.putrequest("POST", path, skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        connection.close()


def check_rest(address: tuple[str, int], request: tuple, tally: Tally) -> None:
    kind, path, headers, body = request
    tally.sent["rest", kind] += 1
    try:
        status, content_type, answer = post(address, path, headers, body)
    except (OSError, http.client.HTTPException) as exc:
        tally.answers["rest", type(exc).__name__] += 1
        tally.problem("rest", kind, type(exc).__name__, f"{exc} for POST {path} {headers} {body[:200]!r}")
        return
    tally.answers["rest", str(status)] += 1
    problem = malformed_rest_answer(status, content_type, answer)
    if problem:
        tally.problem("rest", kind, str(status), f"{problem} for POST {path} {headers} {body[:200]!r}")


def malformed_rest_answer(status: int, content_type: str, answer: bytes) -> str:
    """Why an HTTP answer is not TF Serving's ("" when it is)."""
    if not content_type.startswith("application/json"):
        return f"Content-Type {content_type!r}: {answer[:200]!r}"
    try:
        parsed = json.loads(answer)
    except ValueError:
        return f"body is not JSON: {answer[:200]!r}"
    if 400 <= status < 500:
        return "" if isinstance(parsed, dict) and set(parsed) == {"error"} and isinstance(parsed["error"], str) \
            else f"error body {answer[:200]!r}"
    if status == 200:
        return "" if isinstance(parsed, dict) and set(parsed) & {"predictions", "outputs"} \
            else f"200 body {answer[:200]!r}"
    return f"status {status}: {answer[:200]!r}"


# ---- the barrage --------------------------------------------------------------------------------------

def rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def classes_over_both_protocols(predict: Callable, address: tuple[str, int], images: np.ndarray) -> tuple[list, list]:
    """The classes the server gives `images` over gRPC and over REST."""
    answer = predict_pb2.PredictResponse.FromString(
        predict(predict_request(images).SerializeToString(), timeout=CALL_TIMEOUT_S))
    body = json.dumps({"instances": images.tolist()}).encode()
    status, _, rest_answer = post(address, "/v1/models/mnist:predict",
                                  [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], body)
    assert status == 200, rest_answer[:300]
    return to_numpy(answer.outputs["classes"]).tolist(), [p["classes"] for p in json.loads(rest_answer)["predictions"]]


@pytest.mark.filterwarnings("ignore:Generating overly large repr")  # the strategies hold whole valid requests
def test_mutated_requests_get_tf_serving_statuses_and_the_server_survives(fuzz_server, samples):
    images, expected = samples["images"], samples["expected_classes"].tolist()
    channel = grpc.insecure_channel(fuzz_server.grpc_target)
    predict = channel.unary_unary(PREDICT_METHOD, request_serializer=None, response_deserializer=None)
    url = urllib.parse.urlparse(fuzz_server.rest_url)
    address = (url.hostname, url.port)
    pid = fuzz_server.proc.pid

    for start, rows in enumerate([1, 5, 8, 9, 17, 32] * 10):  # warm-up: both padded batch sizes, both protocols
        grpc_classes, rest_classes = classes_over_both_protocols(predict, address, images[start:start + rows])
        assert grpc_classes == rest_classes == expected[start:start + rows]
    rss_before = rss_mib(pid)

    grpc_cases = st.one_of(raw_mutations(base_requests(images)), message_mutations(predict_request(images[:2])))
    rest_cases = rest_requests(rest_bodies(images))
    tally = Tally()

    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(grpc_case=grpc_cases, rest_case=rest_cases)
    def barrage(grpc_case, rest_case):
        check_grpc(predict, *grpc_case, tally)
        check_rest(address, rest_case, tally)

    started = time.monotonic()
    barrage()
    elapsed_s = time.monotonic() - started
    rss_after = rss_mib(pid)
    grpc_classes, rest_classes = classes_over_both_protocols(predict, address, images[-32:])
    channel.close()

    total = sum(tally.sent.values())
    print(f"\nsent {total} requests in {elapsed_s:.1f} s:")
    for (protocol, kind), count in sorted(tally.sent.items()):
        print(f"  {protocol:4} {kind:20} {count}")
    print("answers:")
    for (protocol, status), count in sorted(tally.answers.items()):
        print(f"  {protocol:4} {status:20} {count}")
    print(f"server RSS: {rss_before:.1f} MiB after warm-up, {rss_after:.1f} MiB after the barrage "
          f"(+{rss_after - rss_before:.1f} MiB; bound {MEMORY_GROWTH_BOUND_MIB} MiB)")
    assert not tally.problem_kinds, f"answers that are not TF Serving's: {dict(tally.problem_kinds)}; the first:\n" + \
        "\n".join(tally.problems)
    assert total >= MIN_REQUESTS
    assert fuzz_server.proc.poll() is None
    assert grpc_classes == rest_classes == expected[-32:]
    assert rss_after - rss_before < MEMORY_GROWTH_BOUND_MIB

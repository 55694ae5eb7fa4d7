"""Clients for TF Serving's Predict API (gRPC and REST) that turn every call into a `CallRecord`.

Requests come from an input source (`loadtest.load.inputs.InputSource`), `batch_size` rows each,
cycling through every row of the source whatever the batch size: for the MNIST demo, real test
digits from the export's sample file (`images`, `labels`, `expected_classes`: `Samples`), so accuracy
under load is measured on all of them; for any other model, inputs made from its signature or read
from the user's .npz (`loadtest.load.inputs.ModelInputs`). Requests are built and serialised once,
ahead of the load, so the hot path spends the load generator's CPU on the call itself. Every response
is checked (a registry of checks: "classes" compares each returned class with the exported MNIST
model's own prediction, a mismatch being a WRONG_ANSWER error; "shape" only checks output shapes,
for the null backend that returns zeros; "outputs", for any model, checks the outputs' names, dtypes
and shapes against the signature and, given expected outputs, their values: `loadtest.load.outputs`).
A call never raises: failures come back as records.

Under Locust, import this module only after `locust` (gevent must patch the standard library
before anything pulls in ssl). There, gRPC calls are made on native threads, one client (one
channel) per thread (`GrpcPredictClient.fork`, `loadtest.load.threads`); REST calls on greenlets.
Not for: scheduling load (see `loadtest.load.locustfile`) or statistics (see `loadtest.evidence.stats`).
"""

from __future__ import annotations

import base64
import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
from tensorflow_serving.apis import predict_pb2

from loadtest.evidence.vocab import Check, InputKind, Protocol
from loadtest.load import outputs
from loadtest.load.collector import WRONG_ANSWER, CallRecord
from loadtest.load.inputs import InputOptions, InputSource, ModelInputs, RequestInputs, model_inputs
from loadtest.load.outputs import ResponseCheck
from loadtest.load.signature import fetch_signature
from model_export.data import IMAGE_PIXELS, NUM_CLASSES
from serving.protocol import tensors
from serving.protocol.names import PREDICT_METHOD

INPUT_NAME = "images"


@dataclass(frozen=True)
class Samples:
    """The export's sample digits: pixels, true labels, and the model's own answers."""

    images: np.ndarray  # float32 [N, 784]
    labels: np.ndarray  # int64 [N]
    expected_classes: np.ndarray  # int64 [N]
    model_version: int | None

    @classmethod
    def load(cls, path: Path) -> Samples:
        with np.load(Path(path)) as data:
            missing = {"images", "labels", "expected_classes"} - set(data.files)
            if missing:
                raise ValueError(f"{path}: sample file lacks {sorted(missing)}")
            version = int(data["model_version"]) if "model_version" in data.files else None
            images = data["images"].astype(np.float32).reshape(-1, IMAGE_PIXELS)
            return cls(images, data["labels"].astype(np.int64), data["expected_classes"].astype(np.int64), version)

    def batches_to_cover(self, size: int) -> int:
        """How many consecutive `size`-digit requests it takes to send every digit at least once."""
        return -(-len(self.labels) // size)

    def batch(self, index: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The `index`-th run of `size` consecutive digits, wrapping around the sample set."""
        rows = (np.arange(size) + index * size) % len(self.labels)
        return self.images[rows], self.labels[rows], self.expected_classes[rows]

    def variants(self, batch_size: int) -> int:
        return self.batches_to_cover(batch_size)

    def request(self, index: int, batch_size: int) -> RequestInputs:
        images, labels, expected = self.batch(index, batch_size)
        return RequestInputs({INPUT_NAME: images}, batch_size, labels, expected)


def input_source(kind: InputKind, samples: str, options: InputOptions, metadata_target: str, model_name: str,
                 signature: str, timeout_s: float = 10.0) -> InputSource:
    """The MNIST sample digits, or inputs for any model made from the signature its server reports."""
    if kind == InputKind.SAMPLES:
        return Samples.load(Path(samples))
    return model_inputs(fetch_signature(metadata_target, model_name, signature, timeout_s), options)


@dataclass(frozen=True)
class PreparedRequest:
    payload: bytes  # the serialised request body
    rows: int  # the request batch
    labels: np.ndarray | None = None  # MNIST only
    expected: np.ndarray | None = None  # MNIST only
    expected_outputs: dict | None = None  # any model: expected output values, when the user gave them


def check_classes(classes: np.ndarray, scores_shape: tuple, prepared: PreparedRequest) -> ResponseCheck:
    """Shapes must be [N] and [N, 10]; every class must equal the model's own prediction."""
    outcome = check_shapes(classes, scores_shape, prepared)
    if outcome.status != "OK":
        return outcome
    wrong = int(np.count_nonzero(classes != prepared.expected))
    if wrong:
        return ResponseCheck(WRONG_ANSWER, f"{wrong} of {len(classes)} classes differ from the exported model's "
                                           f"predictions", 0, 0)
    return ResponseCheck("OK", "", int(np.count_nonzero(classes == prepared.labels)), len(classes))


def check_shapes(classes: np.ndarray, scores_shape: tuple, prepared: PreparedRequest) -> ResponseCheck:
    n = prepared.rows
    if classes.shape != (n,) or tuple(scores_shape) != (n, NUM_CLASSES):
        return ResponseCheck(WRONG_ANSWER, f"output shapes classes={list(classes.shape)} "
                                           f"scores={list(scores_shape)}, expected [{n}] and [{n}, {NUM_CLASSES}]",
                             0, 0)
    return ResponseCheck("OK", "", 0, 0)


CHECKS = {Check.CLASSES: check_classes, Check.SHAPE: check_shapes, Check.OUTPUTS: None}


def checked_source(source: InputSource, check: str) -> bool:
    """Whether answers are judged by the signature (`outputs`, or `shape` for inputs of any model);
    refuses a check that does not fit the source."""
    if check not in CHECKS:
        raise ValueError(f"unknown check {check!r}; choose from {sorted(CHECKS)}")
    generic = isinstance(source, ModelInputs)
    if generic and check == Check.CLASSES:
        raise ValueError("the classes check needs the MNIST sample digits; check any model's answers with outputs")
    if not generic and check == Check.OUTPUTS:
        raise ValueError("the outputs check needs inputs made for the model (input data random, zeros or an .npz)")
    return generic


def prepared(payload: bytes, request: RequestInputs, check: str) -> PreparedRequest:
    """A serialised request with what its answer is checked against (values only for the outputs check)."""
    wanted = request.expected_outputs if check == Check.OUTPUTS else {}
    return PreparedRequest(payload, request.rows, request.labels, request.expected, wanted)


def rest_value(array: np.ndarray) -> list:
    """An input as TF Serving's REST API takes it: nested lists; strings as {"b64": ...}."""
    if array.dtype.kind != "O":
        return array.tolist()
    encoded = np.empty(array.shape, dtype=object)
    encoded.ravel()[:] = [{"b64": base64.b64encode(v).decode()} for v in array.ravel()]
    return encoded.tolist()


# A connection of its own for every channel: gRPC's global subchannel pool otherwise gives every channel of a process
# to one target the same TCP connection, and a server whose gRPC frontends share one port (SO_REUSEPORT hands each
# connection, not each request, to one of them) was served by one frontend only. Measured: four channels to a
# 2-frontend server, 1 connection without it, 4 with it; the shape sweep's 2-core server read the same capacity
# as its 1-core one (280.2 req/s each) before.
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20),
                   ("grpc.use_local_subchannel_pool", 1)]


class GrpcPredictClient:
    """Predict over one gRPC channel; `call` returns a record and never raises."""

    protocol = Protocol.GRPC

    def __init__(self, target: str, model_name: str, signature: str, samples: InputSource, batch_size: int,
                 check: str = Check.CLASSES, timeout_s: float = 10.0, variants: int | None = None):
        """`variants`: distinct requests to cycle through; by default enough to send every row of `samples`."""
        generic = checked_source(samples, check)
        self.signature = samples.signature if isinstance(samples, ModelInputs) and generic else None
        self.batch_size, self.timeout_s, self.check = batch_size, timeout_s, CHECKS[Check(check)] or check_shapes
        self.check_name = Check(check)
        self.target = target
        self._open_channel()
        count = variants or samples.variants(batch_size)
        self.requests = [self._prepare(model_name, signature, samples, i) for i in range(count)]
        self.model_version: int | None = None

    def _open_channel(self) -> None:
        self.channel = grpc.insecure_channel(self.target, options=CHANNEL_OPTIONS)
        # Identity serializer: requests are serialised once, up front.
        self.predict = self.channel.unary_unary(PREDICT_METHOD, request_serializer=None,
                                                response_deserializer=predict_pb2.PredictResponse.FromString)

    def fork(self) -> GrpcPredictClient:
        """The same prepared requests and checks on a channel of its own (one per native thread:
        `loadtest.load.threads`)."""
        twin = copy.copy(self)
        twin._open_channel()
        twin.model_version = None
        return twin

    def _prepare(self, model_name: str, signature: str, samples: InputSource, index: int) -> PreparedRequest:
        inputs = samples.request(index, self.batch_size)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model_name
        request.model_spec.signature_name = signature
        for name, values in inputs.inputs.items():
            tensors.write_tensor(request.inputs[name], values, tensor_content=True)
        return prepared(request.SerializeToString(), inputs, self.check_name)

    def call(self, index: int, intended_unix_s: float | None = None) -> CallRecord:
        prepared = self.requests[index % len(self.requests)]
        clock = CallClock(intended_unix_s)
        images = prepared.rows
        try:
            response = self.predict(prepared.payload, timeout=self.timeout_s)
            latency_us = clock.latency_us()
            self.model_version = response.model_spec.version.value or self.model_version
            outcome = self._judge(response, prepared)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            return clock.failure(clock.latency_us(), code.name if code else "UNKNOWN",
                                 exc.details() if hasattr(exc, "details") else str(exc), images)
        except Exception as exc:  # a call never raises into the load loop
            return clock.failure(clock.latency_us(), "CLIENT_ERROR", f"{type(exc).__name__}: {exc}", images)
        return clock.record(latency_us, outcome, images)

    def _judge(self, response, prepared: PreparedRequest) -> ResponseCheck:
        if self.signature is not None:
            return outputs.check_grpc(response.outputs, self.signature, prepared.rows, prepared.expected_outputs or {})
        if "classes" not in response.outputs or "scores" not in response.outputs:
            return ResponseCheck(WRONG_ANSWER, f"response outputs {sorted(response.outputs)} lack classes/scores", 0, 0)
        classes = tensors.to_numpy(response.outputs["classes"])
        scores_shape = tensors.proto_shape(response.outputs["scores"])
        return self.check(classes, scores_shape, prepared)

    def close(self) -> None:
        self.channel.close()


class RestPredictClient:
    """Predict over TF Serving's REST API (`POST /v1/models/<name>:predict`), columnar format."""

    protocol = Protocol.REST

    def __init__(self, base_url: str, model_name: str, signature: str, samples: InputSource, batch_size: int,
                 check: str = Check.CLASSES, timeout_s: float = 10.0, variants: int | None = None,
                 concurrency: int = 512):
        """`variants`: distinct requests to cycle through; by default enough to send every row of `samples`."""
        from geventhttpclient import HTTPClient
        from geventhttpclient.url import URL

        generic = checked_source(samples, check)
        self.signature = samples.signature if isinstance(samples, ModelInputs) and generic else None
        self.batch_size, self.check = batch_size, CHECKS[Check(check)] or check_shapes
        self.path = f"/v1/models/{model_name}:predict"
        self.http = HTTPClient.from_url(URL(base_url), concurrency=concurrency, network_timeout=timeout_s,
                                        connection_timeout=timeout_s)
        self.requests = []
        for index in range(variants or samples.variants(batch_size)):
            inputs = samples.request(index, batch_size)
            body = json.dumps({"signature_name": signature,
                               "inputs": {name: rest_value(values) for name, values in inputs.inputs.items()}})
            self.requests.append(prepared(body.encode(), inputs, check))
        self.model_version: int | None = None

    def call(self, index: int, intended_unix_s: float | None = None) -> CallRecord:
        prepared = self.requests[index % len(self.requests)]
        clock = CallClock(intended_unix_s)
        images = prepared.rows
        try:
            response = self.http.post(self.path, body=prepared.payload, headers={"Content-Type": "application/json"})
            body = response.read()
            latency_us = clock.latency_us()
            if response.status_code != 200:
                return clock.failure(latency_us, f"HTTP_{response.status_code}",
                                     body[:300].decode(errors="replace"), images)
            outcome = self._judge(json.loads(body), prepared)
        except Exception as exc:  # a call never raises into the load loop
            return clock.failure(clock.latency_us(), "CLIENT_ERROR", f"{type(exc).__name__}: {exc}", images)
        return clock.record(latency_us, outcome, images)

    def _judge(self, body: dict, prepared: PreparedRequest) -> ResponseCheck:
        answer = body.get("outputs")
        if self.signature is not None:
            return outputs.check_rest(answer, self.signature, prepared.rows, prepared.expected_outputs or {})
        if not isinstance(answer, dict) or "classes" not in answer or "scores" not in answer:
            return ResponseCheck(WRONG_ANSWER, f"response has no outputs.classes/scores: {str(body)[:200]}", 0, 0)
        classes = np.asarray(answer["classes"], dtype=np.int64)
        return self.check(classes, np.asarray(answer["scores"]).shape, prepared)

    def close(self) -> None:
        self.http.close()


CLIENTS: dict[Protocol, type[GrpcPredictClient] | type[RestPredictClient]] = {
    Protocol.GRPC: GrpcPredictClient, Protocol.REST: RestPredictClient}


class CallClock:
    """One call's times: when it was meant to leave (open loop: its scheduled slot), when it left, and
    the monotonic start its duration is measured from. Latency counts from the intended time, so a
    late send is charged to the call (coordinated omission)."""

    __slots__ = ("intended", "sent", "start", "scheduled")

    def __init__(self, intended_unix_s: float | None) -> None:
        self.sent = time.time()
        self.scheduled = intended_unix_s is not None
        self.intended = self.sent if intended_unix_s is None else intended_unix_s
        self.start = time.perf_counter()

    def latency_us(self) -> float:
        """The monotonic call duration so far plus how late the call left."""
        return (time.perf_counter() - self.start) * 1e6 + max(0.0, self.sent - self.intended) * 1e6

    def record(self, latency_us: float, outcome: ResponseCheck, images: int) -> CallRecord:
        return CallRecord(self.intended, self.sent, latency_us, outcome.status == "OK", outcome.status,
                          outcome.error, images, outcome.correct, outcome.checked, self.scheduled)

    def failure(self, latency_us: float, status: str, error: str, images: int) -> CallRecord:
        return CallRecord(self.intended, self.sent, latency_us, False, status, error, images, 0, 0, self.scheduled)

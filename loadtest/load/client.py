"""Clients for TF Serving's Predict API (gRPC and REST) that turn every call into a `CallRecord`.

Requests carry real MNIST test digits from the export's sample file (`images`, `labels`,
`expected_classes`), `batch_size` images each, cycling through every digit of the file whatever the
batch size (so accuracy under load is measured on all of them). Requests are built and serialised
once, ahead of the load, so the hot path spends the load generator's CPU on the call itself. Every response is
checked (a registry of checks: "classes" compares each returned class with the exported model's
own prediction, a mismatch being a WRONG_ANSWER error; "shape" only checks output shapes, for the
null backend that returns zeros). A call never raises: failures come back as records.

Under Locust, import this module only after `locust` (gevent must patch the standard library
before anything pulls in ssl). There, gRPC calls are made on native threads, one client (one
channel) per thread (`GrpcPredictClient.fork`, `loadtest.load.threads`); REST calls on greenlets.
Not for: scheduling load (see `loadtest.load.locustfile`) or statistics (see `loadtest.stats`).
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
from tensorflow_serving.apis import predict_pb2

from loadtest.load.collector import WRONG_ANSWER, CallRecord
from loadtest.vocab import Check, Protocol
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


@dataclass(frozen=True)
class PreparedRequest:
    payload: bytes  # the serialised request body
    labels: np.ndarray
    expected: np.ndarray


@dataclass(frozen=True)
class Outcome:
    """A response's verdict: status, error text, and how many classes matched the true labels."""

    status: str
    error: str
    correct: int
    checked: int


def check_classes(classes: np.ndarray, scores_shape: tuple, prepared: PreparedRequest) -> Outcome:
    """Shapes must be [N] and [N, 10]; every class must equal the model's own prediction."""
    outcome = check_shapes(classes, scores_shape, prepared)
    if outcome.status != "OK":
        return outcome
    wrong = int(np.count_nonzero(classes != prepared.expected))
    if wrong:
        return Outcome(WRONG_ANSWER, f"{wrong} of {len(classes)} classes differ from the exported model's "
                                     f"predictions", 0, 0)
    return Outcome("OK", "", int(np.count_nonzero(classes == prepared.labels)), len(classes))


def check_shapes(classes: np.ndarray, scores_shape: tuple, prepared: PreparedRequest) -> Outcome:
    n = len(prepared.labels)
    if classes.shape != (n,) or tuple(scores_shape) != (n, NUM_CLASSES):
        return Outcome(WRONG_ANSWER, f"output shapes classes={list(classes.shape)} scores={list(scores_shape)}, "
                                     f"expected [{n}] and [{n}, {NUM_CLASSES}]", 0, 0)
    return Outcome("OK", "", 0, 0)


CHECKS = {Check.CLASSES: check_classes, Check.SHAPE: check_shapes}


class GrpcPredictClient:
    """Predict over one gRPC channel; `call` returns a record and never raises."""

    protocol = Protocol.GRPC

    def __init__(self, target: str, model_name: str, signature: str, samples: Samples, batch_size: int,
                 check: str = Check.CLASSES, timeout_s: float = 10.0, variants: int | None = None):
        """`variants`: distinct requests to cycle through; by default enough to send every sample digit."""
        if check not in CHECKS:
            raise ValueError(f"unknown check {check!r}; choose from {sorted(CHECKS)}")
        self.batch_size, self.timeout_s, self.check = batch_size, timeout_s, CHECKS[Check(check)]
        self.target = target
        self._open_channel()
        count = variants or samples.batches_to_cover(batch_size)
        self.requests = [self._prepare(model_name, signature, samples, i) for i in range(count)]
        self.model_version: int | None = None

    def _open_channel(self) -> None:
        self.channel = grpc.insecure_channel(self.target, options=[("grpc.max_receive_message_length", 64 << 20),
                                                                  ("grpc.max_send_message_length", 64 << 20)])
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

    def _prepare(self, model_name: str, signature: str, samples: Samples, index: int) -> PreparedRequest:
        images, labels, expected = samples.batch(index, self.batch_size)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model_name
        request.model_spec.signature_name = signature
        request.inputs[INPUT_NAME].CopyFrom(tensors.from_numpy(images, tensor_content=True))
        return PreparedRequest(request.SerializeToString(), labels, expected)

    def call(self, index: int, intended_unix_s: float | None = None) -> CallRecord:
        prepared = self.requests[index % len(self.requests)]
        clock = CallClock(intended_unix_s)
        images = len(prepared.labels)
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

    def _judge(self, response, prepared: PreparedRequest) -> Outcome:
        if "classes" not in response.outputs or "scores" not in response.outputs:
            return Outcome(WRONG_ANSWER, f"response outputs {sorted(response.outputs)} lack classes/scores", 0, 0)
        classes = tensors.to_numpy(response.outputs["classes"])
        scores_shape = tensors.proto_shape(response.outputs["scores"])
        return self.check(classes, scores_shape, prepared)

    def close(self) -> None:
        self.channel.close()


class RestPredictClient:
    """Predict over TF Serving's REST API (`POST /v1/models/<name>:predict`), columnar format."""

    protocol = Protocol.REST

    def __init__(self, base_url: str, model_name: str, signature: str, samples: Samples, batch_size: int,
                 check: str = Check.CLASSES, timeout_s: float = 10.0, variants: int | None = None,
                 concurrency: int = 512):
        """`variants`: distinct requests to cycle through; by default enough to send every sample digit."""
        from geventhttpclient import HTTPClient
        from geventhttpclient.url import URL

        if check not in CHECKS:
            raise ValueError(f"unknown check {check!r}; choose from {sorted(CHECKS)}")
        self.batch_size, self.check = batch_size, CHECKS[Check(check)]
        self.path = f"/v1/models/{model_name}:predict"
        self.http = HTTPClient.from_url(URL(base_url), concurrency=concurrency, network_timeout=timeout_s,
                                        connection_timeout=timeout_s)
        self.requests = []
        for index in range(variants or samples.batches_to_cover(batch_size)):
            images, labels, expected = samples.batch(index, batch_size)
            body = json.dumps({"signature_name": signature, "inputs": {INPUT_NAME: images.tolist()}})
            self.requests.append(PreparedRequest(body.encode(), labels, expected))
        self.model_version: int | None = None

    def call(self, index: int, intended_unix_s: float | None = None) -> CallRecord:
        prepared = self.requests[index % len(self.requests)]
        clock = CallClock(intended_unix_s)
        images = len(prepared.labels)
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

    def _judge(self, body: dict, prepared: PreparedRequest) -> Outcome:
        outputs = body.get("outputs")
        if not isinstance(outputs, dict) or "classes" not in outputs or "scores" not in outputs:
            return Outcome(WRONG_ANSWER, f"response has no outputs.classes/scores: {str(body)[:200]}", 0, 0)
        classes = np.asarray(outputs["classes"], dtype=np.int64)
        return self.check(classes, np.asarray(outputs["scores"]).shape, prepared)

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

    def record(self, latency_us: float, outcome: Outcome, images: int) -> CallRecord:
        return CallRecord(self.intended, self.sent, latency_us, outcome.status == "OK", outcome.status,
                          outcome.error, images, outcome.correct, outcome.checked, self.scheduled)

    def failure(self, latency_us: float, status: str, error: str, images: int) -> CallRecord:
        return CallRecord(self.intended, self.sent, latency_us, False, status, error, images, 0, 0, self.scheduled)

"""TF Serving's REST API and the Prometheus page, on a standard-library threaded HTTP server.

Endpoints as TF Serving documents them (https://www.tensorflow.org/tfx/serving/api_rest):
`GET /v1/models/{name}[/versions/{v}|/labels/{l}]` (status), `GET .../metadata`, and
`POST .../{name}[/versions/{v}|/labels/{l}]:predict` with the row (`instances`) or columnar
(`inputs`) format; answers `predictions` / `outputs` shaped as TF Serving shapes them, and
errors as `{"error": "..."}` with the HTTP code TF Serving maps each status code to.

Each HTTP thread parses JSON and calls the same `ServingCore` as gRPC, so both protocols share
one batching queue. Not for: high request rates (gRPC is the load path).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from google.protobuf import json_format
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2, model_pb2

from serving.protocol.tensors import CODECS_BY_ENUM
from serving.server.api.grpc_api import model_metadata, model_status, server_info
from serving.server.handling.core import ServingCore, check_input_names
from serving.server.handling.errors import ServingError
from serving.server.handling.metrics import CONTENT_TYPE, DECODE, ENCODE, VALIDATE, PhaseClock
from serving.server.runtimes.model_spec import SignatureSpec

log = logging.getLogger("serving.server.api.rest")

_MODEL_PATH = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>-?\d+)|/labels/(?P<label>[^/:]+))?"
    r"(?P<rest>/metadata|:predict|:classify|:regress)?$")
# Media types accepted for a JSON body: JSON itself, plus what `curl -d` sends by default (TF Serving's
# own examples use plain `curl -d`).
_JSON_MEDIA_TYPES = {"application/json", "application/x-www-form-urlencoded", "text/plain", ""}


def version_number(text: str) -> int:
    """A version from the URL; INVALID_ARGUMENT (400) when it does not fit TF Serving's int64."""
    number = int(text)
    if not -(2**63) <= number < 2**63:
        raise ServingError("INVALID_ARGUMENT", f"Failed to convert version: {text} is outside int64")
    return number


def _model_spec(name: str, version: str | None, label: str | None) -> model_pb2.ModelSpec:
    spec = model_pb2.ModelSpec(name=name)
    if version is not None:
        spec.version.value = version_number(version)
    elif label is not None:
        spec.version_label = label
    return spec


def _to_array(value, alias: str, spec: SignatureSpec) -> np.ndarray:
    """JSON value -> array of the signature's dtype; refuses values that do not fit it."""
    tensor = spec.inputs[alias]
    codec = CODECS_BY_ENUM.get(tensor.dtype_enum)
    if codec is None:
        raise ServingError("INVALID_ARGUMENT", f"input '{alias}' has a dtype the REST API cannot fill")
    if codec.name == "string":
        return _string_array(value, alias)
    try:
        raw = np.asarray(value)
    except ValueError as exc:  # ragged lists
        raise ServingError("INVALID_ARGUMENT",
                           f"input '{alias}': values are ragged (lists of different lengths) and do not form a "
                           "tensor") from exc
    if raw.dtype == object or raw.dtype.kind in "SU":
        raise ServingError("INVALID_ARGUMENT",
                           f"input '{alias}': expected {codec.name} values, got a ragged or non-numeric list")
    kinds = {"f": "biuf", "i": "biu", "u": "biu", "b": "b"}[codec.numpy.kind]
    if raw.dtype.kind not in kinds:
        raise ServingError("INVALID_ARGUMENT",
                           f"input '{alias}': JSON values of kind {raw.dtype.name} are not of expected type "
                           f"{codec.name}")
    return raw.astype(codec.numpy)


def _string_array(value, alias: str) -> np.ndarray:
    def convert(v):
        if isinstance(v, list):
            return [convert(x) for x in v]
        if _is_b64(v):
            return base64.b64decode(v["b64"])
        if isinstance(v, str):
            return v.encode()
        raise ServingError("INVALID_ARGUMENT", f"input '{alias}': expected strings")

    out = np.array(convert(value), dtype=object)
    return out


def _named_arrays(columns: dict, spec: SignatureSpec) -> dict[str, np.ndarray]:
    """{alias: JSON value} -> arrays; names are checked against the signature first, as TF Serving does."""
    check_input_names(spec, set(columns))
    return {name: _to_array(value, name, spec) for name, value in columns.items()}


def parse_predict_body(body: dict, spec: SignatureSpec) -> tuple[dict[str, np.ndarray], bool]:
    """Row or columnar JSON -> ({alias: array}, is_row_format)."""
    has_rows, has_cols = "instances" in body, "inputs" in body
    if has_rows == has_cols:
        raise ServingError("INVALID_ARGUMENT", "Missing 'inputs' or 'instances' key" if not has_rows
                           else "Not formatted correctly expecting only one of 'inputs' or 'instances' keys exists")
    if has_cols:
        inputs = body["inputs"]
        if isinstance(inputs, dict) and not _is_b64(inputs):
            return _named_arrays(inputs, spec), False
        alias = _single_input(spec)
        return {alias: _to_array(inputs, alias, spec)}, False
    instances = body["instances"]
    if not isinstance(instances, list):
        raise ServingError("INVALID_ARGUMENT", "Expecting 'instances' to be an list/array")
    if not instances:
        raise ServingError("INVALID_ARGUMENT", "Batch size expected to be positive; was 0 (empty 'instances')")
    if all(isinstance(i, dict) and not _is_b64(i) for i in instances):
        names = set(instances[0])
        if any(set(i) != names for i in instances):
            raise ServingError("INVALID_ARGUMENT", "Expecting all instances to have the same named inputs")
        return _named_arrays({n: [i[n] for i in instances] for n in names}, spec), True
    alias = _single_input(spec)
    return {alias: _to_array(instances, alias, spec)}, True


def _is_b64(value) -> bool:
    return isinstance(value, dict) and set(value) == {"b64"}


def _single_input(spec: SignatureSpec) -> str:
    if len(spec.inputs) != 1:
        raise ServingError("INVALID_ARGUMENT",
                           f"signature '{spec.name}' has {len(spec.inputs)} inputs; name them "
                           f"({', '.join(sorted(spec.inputs))}) in each instance or in 'inputs'")
    return next(iter(spec.inputs))


def _jsonable(array: np.ndarray):
    if array.dtype == object:
        return [_jsonable(a) for a in array] if array.ndim else (
            {"b64": base64.b64encode(array.item()).decode()} if isinstance(array.item(), bytes) else array.item())
    return array.tolist()


def format_predictions(outputs: dict[str, np.ndarray], row_format: bool) -> dict:
    """TF Serving's answer shapes: `predictions` rows (a dict per row when several outputs) or `outputs`."""
    if row_format:
        if len(outputs) == 1:
            return {"predictions": _jsonable(next(iter(outputs.values())))}
        columns = {k: _jsonable(v) for k, v in outputs.items()}
        rows = len(next(iter(outputs.values())))
        return {"predictions": [{k: columns[k][i] for k in columns} for i in range(rows)]}
    if len(outputs) == 1:
        return {"outputs": _jsonable(next(iter(outputs.values())))}
    return {"outputs": {k: _jsonable(v) for k, v in outputs.items()}}


def _status_json(response: get_model_status_pb2.GetModelStatusResponse) -> dict:
    return json_format.MessageToDict(response, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)


def _as_serving_error(exc: Exception) -> ServingError:
    """Anything unexpected is INTERNAL (logged), so a client always gets `{"error": ...}`."""
    if isinstance(exc, ServingError):
        return exc
    log.exception("internal error in a REST request", exc_info=exc)
    return ServingError("INTERNAL", f"{type(exc).__name__}: {exc}")


class _Handler(BaseHTTPRequestHandler):
    server_version = "TensorFlowServing-embedded"
    protocol_version = "HTTP/1.1"
    timeout = 2  # idle keep-alive connections end soon, so shutdown is not held up by them
    # Headers and body leave in separate writes; with Nagle on, the body waits for the client's
    # delayed ACK (~40 ms per keep-alive request), which would swamp every REST latency measured.
    disable_nagle_algorithm = True
    core: ServingCore  # set on the subclass built per server

    def log_message(self, format: str, *args) -> None:  # noqa: A002  (the stdlib's signature)
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _send_json(self, status: int, obj) -> None:
        self._send(status, json.dumps(obj).encode())

    def _send_error(self, exc: ServingError) -> None:
        self._send_json(exc.http_status, {"error": exc.message})

    def do_GET(self) -> None:  # noqa: N802  (the stdlib's name)
        try:
            if self.path == self.core.config.monitoring_path:
                self._send(200, self.core.metrics.exposition(), CONTENT_TYPE)
                return
            match = _MODEL_PATH.match(self.path)
            if not match or match["rest"] not in (None, "/metadata"):
                raise ServingError("NOT_FOUND", f"Malformed request: GET {self.path}")
            spec = _model_spec(match["name"], match["version"], match["label"])
            if match["rest"] == "/metadata":
                self._send_json(200, self._metadata(spec))
            else:
                if match["label"] is not None:  # status by label: resolve to its version first
                    spec.version.value = self.core.source.resolve(match["name"], label=match["label"]).version
                request = get_model_status_pb2.GetModelStatusRequest(model_spec=spec)
                self._send_json(200, _status_json(model_status(self.core.source, request)))
        except Exception as exc:
            self._send_error(_as_serving_error(exc))

    def _metadata(self, spec: model_pb2.ModelSpec) -> dict:
        request = get_model_metadata_pb2.GetModelMetadataRequest(model_spec=spec, metadata_field=["signature_def"])
        response = model_metadata(self.core, request)
        sig_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(sig_map)
        return {
            "model_spec": {"name": response.model_spec.name, "signature_name": "",
                           "version": str(response.model_spec.version.value)},
            "metadata": {"signature_def": json_format.MessageToDict(sig_map, preserving_proto_field_name=True)},
            "server_info": server_info(self.core.config, self.core.device_floor),
        }

    def do_POST(self) -> None:  # noqa: N802
        clock = PhaseClock()
        match = _MODEL_PATH.match(self.path)
        name = match["name"] if match else ""
        try:
            body = self._read_json()
            clock.lap(DECODE)
            if not match or match["rest"] not in (":predict", ":classify", ":regress"):
                raise ServingError("NOT_FOUND", f"Malformed request: POST {self.path}")
            if match["rest"] != ":predict":
                raise ServingError("UNIMPLEMENTED",
                                   f"{match['rest'][1:]} is not implemented by the embedded server (predict only)")
            payload = self._predict(match, body, clock)
        except Exception as exc:
            error = _as_serving_error(exc)
            self.core.metrics.record_request(name, "predict", "REST", error.code, time.perf_counter() - clock.started)
            self._send_error(error)
            return
        self.core.metrics.record_ok(name, "predict", "REST", clock)
        self._send(200, payload)

    def _read_json(self) -> dict:
        media_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        raw = self._read_body()
        if media_type not in _JSON_MEDIA_TYPES:
            raise ServingError("INVALID_ARGUMENT", f"Content-Type {media_type!r} is not supported; send JSON "
                                                   "(application/json)")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: nested too deep
            raise ServingError("INVALID_ARGUMENT", f"JSON Parse error: {exc}") from exc
        if not isinstance(body, dict):
            raise ServingError("INVALID_ARGUMENT", "JSON Value: the request body must be a JSON object")
        return body

    def _read_body(self) -> bytes:
        """Exactly Content-Length bytes. A length that is no byte count, or more than the client sends
        (within the socket timeout), is INVALID_ARGUMENT, and one over the limit RESOURCE_EXHAUSTED; all
        three close the connection, as where the next request starts is then unknown."""
        declared = self.headers.get("Content-Length") or "0"
        if not (declared.isascii() and declared.isdigit()):  # int() would take "-1" (read to EOF) or "1_0"
            self.close_connection = True
            raise ServingError("INVALID_ARGUMENT", f"Content-Length {declared[:40]!r} is not a number of bytes")
        length = int(declared)
        if length > self.core.config.max_message_bytes:
            self.close_connection = True
            raise ServingError("RESOURCE_EXHAUSTED",
                               f"Request body of {length} bytes exceeds the limit of "
                               f"{self.core.config.max_message_bytes} bytes")
        try:
            raw = self.rfile.read(length)
        except TimeoutError:
            raw = b""
        if len(raw) < length:
            self.close_connection = True
            raise ServingError("INVALID_ARGUMENT",
                               f"the request body ended before the {length} bytes its Content-Length declares")
        return raw

    def _predict(self, match: re.Match, body: dict, clock: PhaseClock) -> bytes:
        """The JSON answer's bytes; the clock gets every phase up to and including encoding them."""
        core = self.core
        version = version_number(match["version"]) if match["version"] is not None else None
        signature_name = body.get("signature_name", "")
        if not isinstance(signature_name, str):
            raise ServingError("INVALID_ARGUMENT", "'signature_name' must be a string")
        model, spec = core.resolve(match["name"], version, match["label"], signature_name)
        clock.lap(VALIDATE)
        inputs, row_format = parse_predict_body(body, spec)
        clock.lap(DECODE)
        outputs = core.predict(model, spec, inputs, [], clock)
        payload = json.dumps(format_predictions(outputs, row_format)).encode()
        clock.lap(ENCODE)
        return payload


class RestServer:
    """The HTTP server in its own threads; `port` is the bound port (after picking a free one for 0)."""

    def __init__(self, core: ServingCore, host: str, port: int) -> None:
        handler = type("Handler", (_Handler,), {"core": core})
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = False  # join in-flight requests on stop
        self._httpd.block_on_close = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="rest", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, then wait for requests in flight."""
        self._httpd.shutdown()
        self._httpd.server_close()

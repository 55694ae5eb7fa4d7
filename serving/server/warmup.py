"""Model warmup as TF Serving does it: replay a version's recorded requests before it serves.

`load_and_warm` loads one version with the configured backend and replays
`assets.extra/tf_serving_warmup_requests` (a TFRecord file of PredictionLogs) through the same
validation as live requests, so a bad record fails the load instead of reaching TensorFlow.

Not for: deciding which versions to load (`serving.server.handling.model_source`).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from pathlib import Path

from serving.server.api.grpc_api import decode_inputs
from serving.server.handling.core import ServerConfig, check_inputs, check_outputs
from serving.server.handling.errors import ServingError
from serving.server.handling.model_source import ModelEntry
from serving.server.runtimes import load_model
from serving.server.runtimes.model_spec import DEFAULT_SIGNATURE, LoadedModel

log = logging.getLogger("serving")

WARMUP_FILE = Path("assets.extra") / "tf_serving_warmup_requests"
MAX_WARMUP_RECORDS = 1000  # TF Serving's WarmupConsts::kMaxNumRecords


def tfrecords(path: Path) -> Iterator[bytes]:
    """Payloads of a TFRecord file (length, length CRC, data, data CRC); CRCs are not checked."""
    data = path.read_bytes()
    offset = 0
    while offset + 12 <= len(data):
        length = struct.unpack_from("<Q", data, offset)[0]
        start = offset + 12
        if start + length + 4 > len(data):
            raise ValueError(f"{path}: truncated TFRecord at byte {offset}")
        yield data[start:start + length]
        offset = start + length + 4


def warm_up(model: LoadedModel) -> int:
    """Replay the version's warmup PredictRequests (TF Serving's model warmup); returns how many ran.

    Every record goes through the same validation as a live request, so a bad record fails the
    load instead of reaching TensorFlow.
    """
    from tensorflow_serving.apis import prediction_log_pb2

    path = model.path / WARMUP_FILE
    if not path.is_file():
        return 0
    count = 0
    for payload in tfrecords(path):
        count += 1
        if count > MAX_WARMUP_RECORDS:
            raise ValueError(f"Number of warmup records exceeds the maximum ({MAX_WARMUP_RECORDS}) at {path}")
        log_record = prediction_log_pb2.PredictionLog.FromString(payload)
        if log_record.WhichOneof("log_type") != "predict_log":
            raise ValueError(f"{path}: only predict_log warmup records are supported by the embedded server")
        request = log_record.predict_log.request
        spec = model.signatures.get(request.model_spec.signature_name or DEFAULT_SIGNATURE)
        if spec is None:
            raise ValueError(f"{path}: warmup record names unknown signature {request.model_spec.signature_name!r}")
        inputs = decode_inputs(request)
        check_inputs(spec, inputs)
        model.run(spec.name, inputs, check_outputs(spec, list(request.output_filter)))
    return count


def load_and_warm(config: ServerConfig, entry: ModelEntry, version: int) -> LoadedModel:
    """Load one version with the configured backend and replay its warmup requests."""
    model = load_model(config.backend, entry.name, version, entry.base_path / str(version), config.backend_options)
    try:
        replayed = warm_up(model)
    except ServingError as exc:
        raise ValueError(f"warmup of {model.path} failed: {exc}") from exc
    if replayed:
        log.info("model %s: version %d warmed up with %d request(s)", entry.name, version, replayed)
    return model



__all__ = ["MAX_WARMUP_RECORDS", "WARMUP_FILE", "load_and_warm", "tfrecords", "warm_up"]

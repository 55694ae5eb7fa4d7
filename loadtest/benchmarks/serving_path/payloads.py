"""The inputs every server-bench phase sends: fixed batches of digits and their serialized PredictRequests.

The served phases and the in-process baseline cycle through the same `batches`, so both do the
same work per request; the requests are serialized once, before any timing, so the client's
per-call cost stays small.

Not for: sending them (`loadtest.benchmarks.serving_path.bench_client`) or the load test's own requests
(`loadtest.load.client`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

BATCH_COUNT = 16  # distinct batches each phase cycles through


def images(samples: Path | None, n: int) -> np.ndarray:
    """The first `n` images of the samples file, or `n` rows of random pixels without one."""
    if samples:
        return np.load(samples)["images"][:n].astype(np.float32)
    return np.random.default_rng(0).random((n, 784), dtype=np.float32)


def batches(batch: int, samples: Path | None, count: int = BATCH_COUNT) -> list[np.ndarray]:
    """The `count` input batches every phase cycles through, served and in-process alike."""
    pool = images(samples, max(batch * count, 64))
    out = []
    for i in range(count):
        rows = pool[(i * batch) % len(pool):][:batch]
        out.append(rows if len(rows) == batch else np.resize(pool, (batch, pool.shape[1])))
    return out


def predict_payloads(model: str, batch: int, samples: Path | None) -> list[bytes]:
    """Serialized PredictRequests (tensor_content, as tf.make_tensor_proto sends), built once."""
    from tensorflow_serving.apis import predict_pb2

    from serving.protocol.tensors import from_numpy

    out = []
    for rows in batches(batch, samples):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model
        request.inputs["images"].CopyFrom(from_numpy(rows, tensor_content=True))
        out.append(request.SerializeToString())
    return out

"""The clients' prepared requests: every sample digit is sent, whatever the request batch size."""

from __future__ import annotations

import numpy as np
import pytest
from tensorflow_serving.apis import predict_pb2

from loadtest.load.client import GrpcPredictClient, Samples
from serving.protocol.tensors import to_numpy


def samples(n: int) -> Samples:
    images = np.arange(n, dtype=np.float32)[:, None] * np.ones((1, 784), np.float32) / n  # row i holds i/n
    return Samples(images, np.arange(n) % 10, np.arange(n) % 10, 1)


@pytest.mark.parametrize("n, batch, requests", [(10, 1, 10), (10, 3, 4), (10, 10, 1), (10, 32, 1)])
def test_requests_cover_every_digit(n, batch, requests):
    client = GrpcPredictClient("127.0.0.1:1", "mnist", "serving_default", samples(n), batch)  # never connects
    try:
        assert len(client.requests) == requests
        sent = set()
        for prepared in client.requests:
            request = predict_pb2.PredictRequest.FromString(prepared.payload)
            rows = to_numpy(request.inputs["images"])
            assert rows.shape == (batch, 784)
            sent |= {round(float(row[0]) * n) for row in rows}
            assert list(prepared.labels) == [round(float(row[0]) * n) % 10 for row in rows]
        assert sent == set(range(n))
    finally:
        client.close()


def test_a_fixed_number_of_variants_can_still_be_asked_for():
    client = GrpcPredictClient("127.0.0.1:1", "mnist", "serving_default", samples(10), 1, variants=1)
    try:
        assert len(client.requests) == 1
    finally:
        client.close()

"""gRPC helpers for tests against a real server: stubs, Predict requests, the error a call raises."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from serving.protocol.tensors import from_numpy


def stub_for(server) -> prediction_service_pb2_grpc.PredictionServiceStub:
    channel = grpc.insecure_channel(server.grpc_target, options=[("grpc.max_send_message_length", 256 << 20)])
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


def predict_request(images: np.ndarray, model: str = "mnist", signature: str = "", alias: str = "images",
                    tensor_content: bool = True) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    if signature:
        request.model_spec.signature_name = signature
    request.inputs[alias].CopyFrom(from_numpy(images, tensor_content=tensor_content))
    return request


def rpc_error(fn, *args, **kwargs) -> grpc.RpcError:
    """The RpcError a call raises (fails the test if it succeeds)."""
    with pytest.raises(grpc.RpcError) as info:
        fn(*args, **kwargs)
    return info.value

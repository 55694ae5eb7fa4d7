"""Every channel of the load generator on a connection of its own, against a real server whose two gRPC frontends
share one port: the kernel hands each connection, not each request, to one frontend, so calls made over one shared
connection would all land on one of them."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from loadtest.load.client import GrpcPredictClient, Samples
from serving.deploy.process import start_server

pytestmark = [pytest.mark.integration, pytest.mark.untimed]


def established(port: str) -> int:
    out = subprocess.run(["ss", "-tn", "state", "established", f"( dport = :{port} )"], capture_output=True,
                         text=True, check=True).stdout
    return sum(1 for line in out.splitlines()[1:] if line.strip())


def test_each_forked_client_calls_over_a_connection_of_its_own(exported_model):
    samples = Samples(np.zeros((4, 784), np.float32), np.zeros(4, np.int64), np.zeros(4, np.int64), 1)
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--workers", "2",
                      backend="null") as server:
        first = GrpcPredictClient(server.grpc_target, "mnist", "serving_default", samples, 1, check="shape")
        clients = [first, first.fork(), first.fork()]
        assert [c.call(i).status for i, c in enumerate(clients)] == ["OK"] * 3
        assert established(server.grpc_target.rsplit(":", 1)[1]) == 3

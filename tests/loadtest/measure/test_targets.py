"""Servers given by address become served-endpoint records; a result's server label keeps its shape."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from loadtest.evidence.vocab import Protocol
from loadtest.measure import plan as plans
from loadtest.measure.targets import server_label


def test_explicit_targets_are_served_endpoints():
    first, second = plans.explicit_targets(["127.0.0.1:8500", "grpc://10.0.0.2:9000"], ["http://127.0.0.1:8501"],
                                           "mnist")
    assert (first.name, first.grpc_target, first.rest_url, first.kind) == (
        "target0", "127.0.0.1:8500", "http://127.0.0.1:8501", "unknown")
    assert (second.grpc_target, second.rest_url) == ("10.0.0.2:9000", "")  # REST address unknown
    with pytest.raises(plans.PlanError, match="--rest-url given more often than --target"):
        plans.explicit_targets(["h:1"], ["http://h:2", "http://h:3"], "mnist")
    with pytest.raises(plans.PlanError, match="not HOST:PORT"):
        plans.explicit_targets(["nowhere"], [], "mnist")


def test_server_label_of_an_endpoint_keeps_the_recorded_shape():
    [endpoint] = plans.explicit_targets(["127.0.0.1:8500"], ["http://127.0.0.1:8501"], "mnist")
    grpc = server_label(endpoint, protocol=Protocol.GRPC, model_version=3)
    rest = server_label(endpoint, protocol=Protocol.REST, model_version=None)
    assert (grpc.target, rest.target) == ("127.0.0.1:8500", "http://127.0.0.1:8501")
    assert json.loads(json.dumps(asdict(grpc))) == {
        "name": "target0", "kind": "unknown", "device": "unknown", "device_name": "", "target": "127.0.0.1:8500",
        "protocol": "grpc", "model_name": "mnist", "model_version": 3, "batching_profile": "unknown",
        "batching": {}, "versions": {}}

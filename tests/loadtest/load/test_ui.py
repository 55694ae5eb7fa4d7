"""`make locust-ui`: the web UI is pointed at the server the state file records."""

from __future__ import annotations

import pytest

from loadtest.load import ui
from serving.deploy.state import write_state
from serving.endpoint import ServedEndpoint


def endpoint(name: str, port: int) -> ServedEndpoint:
    return ServedEndpoint(name=name, kind="embedded", device="cpu", device_name="x", host="127.0.0.1",
                          grpc_port=port, rest_port=port + 1, model_name="mnist", batching_profile="off")


def test_host_comes_from_the_state_file(tmp_path):
    state = tmp_path / "servers.json"
    write_state({"gpu": endpoint("gpu", 8510), "cpu": endpoint("cpu", 8500)}, state)
    assert ui.host_from_state(None, state) == "grpc://127.0.0.1:8500"  # the first by name
    assert ui.host_from_state("gpu", state) == "grpc://127.0.0.1:8510"
    with pytest.raises(RuntimeError, match=r"server 'tpu' not in the state file \(recorded: \['cpu', 'gpu'\]\)"):
        ui.host_from_state("tpu", state)
    with pytest.raises(RuntimeError, match="no running server recorded"):
        ui.host_from_state(None, tmp_path / "absent.json")


def test_web_ui_binds_loopback_on_the_same_locustfile():
    command = ui.locust_ui_command("grpc://127.0.0.1:8500", "models/mnist-samples.npz", 8089, ["--loglevel", "INFO"])
    assert command[command.index("--web-host") + 1] == "127.0.0.1"
    assert command[command.index("-f") + 1].endswith("loadtest/load/locustfile.py")
    assert command[-2:] == ["--loglevel", "INFO"] and "--class-picker" in command

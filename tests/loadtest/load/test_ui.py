"""`make locust-ui`: the web UI is pointed at the server the state file records."""

from __future__ import annotations

import pytest

from loadtest.load import ui
from serving.deploy.state import write_state
from serving.endpoint import ServedEndpoint


def endpoint(name: str, port: int, model_name: str = "mnist") -> ServedEndpoint:
    return ServedEndpoint(name=name, kind="embedded", device="cpu", device_name="x", host="127.0.0.1",
                          grpc_port=port, rest_port=port + 1, model_name=model_name, batching_profile="off")


def test_host_comes_from_the_state_file(tmp_path):
    state = tmp_path / "servers.json"
    write_state({"gpu": endpoint("gpu", 8510), "cpu": endpoint("cpu", 8500)}, state)
    assert ui.endpoint_from_state(None, state).grpc_target == "127.0.0.1:8500"  # the first by name
    assert ui.endpoint_from_state("gpu", state).grpc_target == "127.0.0.1:8510"
    with pytest.raises(RuntimeError, match=r"server 'tpu' not in the state file \(recorded: \['cpu', 'gpu'\]\)"):
        ui.endpoint_from_state("tpu", state)
    with pytest.raises(RuntimeError, match="no running server recorded"):
        ui.endpoint_from_state(None, tmp_path / "absent.json")


def test_web_ui_binds_loopback_on_the_same_locustfile():
    target = ui.UiTarget("grpc://127.0.0.1:8500", "mnist")
    command = ui.locust_ui_command(target, 8089, ["--loglevel", "INFO"])
    assert command[command.index("--web-host") + 1] == "127.0.0.1"
    assert command[command.index("-f") + 1].endswith("loadtest/load/locustfile.py")
    assert command[-2:] == ["--loglevel", "INFO"] and "--class-picker" in command
    assert command[command.index("--model-name") + 1] == "mnist"
    assert command[command.index("--input-data") + 1] == "auto"


def test_the_model_comes_from_the_state_file_and_its_inputs_are_checked(tmp_path):
    state = tmp_path / "servers.json"
    write_state({"cpu": endpoint("cpu", 8500, "ranker")}, state)
    absent, samples = str(tmp_path / "absent.npz"), tmp_path / "samples.npz"
    samples.write_bytes(b"")  # only its presence is checked here
    target = ui.ui_target(None, "", "", "auto", absent, state)  # random inputs: no sample digits needed
    assert (target.host, target.model_name) == ("grpc://127.0.0.1:8500", "ranker")
    assert ui.ui_target(None, "grpc://h:1", "", "auto", str(samples), state).model_name == "mnist"
    with pytest.raises(RuntimeError, match=f"sample digits {absent} not found"):
        ui.ui_target(None, "grpc://h:1", "mnist", "auto", absent, state)
    with pytest.raises(RuntimeError, match=f"input data {absent} not found"):
        ui.ui_target(None, "", "", absent, str(samples), state)

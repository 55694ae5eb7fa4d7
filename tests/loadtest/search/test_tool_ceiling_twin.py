"""A configuration's tool-ceiling twin, as `loadtest.search.tool_ceiling_run` shapes it (no server started): the
plan's server with its backend swapped for the null backend, everything else kept; none for a running server."""

from __future__ import annotations

import pytest

from loadtest.measure import plan as plans
from loadtest.measure.servers import Running, ToStart
from loadtest.search.tool_ceiling_run import NoTwin, TwinClock, null_flags, twin_slot
from serving.deploy.config import BatchingProfile, load_config
from serving.endpoint import ServedEndpoint


def test_the_twins_flags_swap_the_backend_and_keep_the_rest():
    flags = ("--backend", "jax", "--gpu_backend=torch", "--workers", "4", "--null_delay_ms", "5",
             "--device_owner", "always", "--grpc_max_threads", "8")
    assert null_flags(flags) == ("--workers", "4", "--device_owner", "always", "--grpc_max_threads", "8",
                                 "--backend", "null")


def test_the_twin_is_the_configuration_on_the_embedded_server_named_as_its_tool_ceiling():
    launch = plans.LaunchSettings(kind="auto", server_flags=("--grpc_max_threads", "8"), server_cpus="0")
    profile = BatchingProfile(name="cpu", enable_batching=True, max_batch_size=16)
    slot = ToStart("cpu", profile, load_config(None), launch)
    twin = twin_slot(slot)
    assert twin.name == "cpu-cpu-tool-ceiling" and twin.family == "cpu-cpu"
    assert twin.launch.kind == "embedded" and twin.launch.server_cpus == "0" and twin.profile == profile
    assert twin.launch.server_flags == ("--grpc_max_threads", "8", "--backend", "null")


def test_a_running_server_has_no_twin_and_says_why():
    endpoint = ServedEndpoint(name="tfs", kind="container", device="cpu", device_name="", host="127.0.0.1",
                              grpc_port=8500, rest_port=8501, model_name="mnist", batching_profile="off")
    with pytest.raises(NoTwin, match="not started by the tool"):
        twin_slot(Running(endpoint))


def test_without_a_budget_the_twins_get_a_share_of_the_searches_time():
    now = [100.0]
    clock = TwinClock(began=0.0, share=0.15, clock=lambda: now[0])
    clock.start()
    assert clock.left_s() == pytest.approx(15.0)
    budgeted = TwinClock(began=0.0, share=0.15, deadline=130.0, clock=lambda: now[0])
    budgeted.start()
    assert budgeted.left_s() == pytest.approx(30.0)

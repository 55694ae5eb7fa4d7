"""Server configurations the tool starts itself: how plans and `--serve` name them, grids, and refusals."""

from __future__ import annotations

import pytest

from loadtest.measure import plan as plans
from loadtest.measure.servers import Running, ToStart, configurations, grid_points, parse_serve, server_slots
from serving.deploy.process import cpu_list, pinned
from serving.endpoint import ServerKind


def plan_with(tmp_path, servers: str, run: str = "") -> plans.Plan:
    path = tmp_path / "plan.toml"
    path.write_text(f"[run]\n{run}\n[grid]\nconcurrency = [1]\n[servers]\n{servers}\n")
    return plans.load_plan(path, env={})


def test_grid_points_expand_lists_and_keep_allowed_sizes_whole():
    assert grid_points({"max_batch_size": [8, 64], "batch_timeout_micros": 0}) == [
        {"batch_timeout_micros": 0, "max_batch_size": 8}, {"batch_timeout_micros": 0, "max_batch_size": 64}]
    assert grid_points({"allowed_batch_sizes": [8, 16]}) == [{"allowed_batch_sizes": [8, 16]}]
    assert grid_points({"allowed_batch_sizes": [[8], [8, 16]]}) == [
        {"allowed_batch_sizes": [8]}, {"allowed_batch_sizes": [8, 16]}]
    assert grid_points({}) == [{}]


def test_a_plan_names_configurations_and_each_becomes_a_server_to_start(tmp_path):
    plan = plan_with(tmp_path, 'configs = [{ device = "cpu", batching = "off" },\n'
                               '  { device = "cpu", batching = "cpu", set = { batch_timeout_micros = [0, 1000] } }]\n'
                               '[servers.launch]\nkind = "embedded"\nserver_cpus = "0"')
    slots = server_slots(plan)
    assert all(isinstance(s, ToStart) for s in slots)
    assert [s.name for s in slots] == ["cpu-off", "cpu-cpu+batch_timeout_micros=0", "cpu-cpu+batch_timeout_micros=1000"]
    tuned = slots[2]
    assert isinstance(tuned, ToStart)
    assert tuned.profile.batch_timeout_micros == 1000 and tuned.profile.max_batch_size == 1024
    assert tuned.profile.num_batch_threads == 1  # "cpu_cores" resolves to the pinned cores, not the machine's
    planned = tuned.planned()
    assert (planned.kind, planned.device, planned.grpc_port) == (ServerKind.EMBEDDED, "cpu", 0)
    assert planned.batching["batch_timeout_micros"] == 1000
    assert plan.to_dict()["configs"][1]["set"] == {"batch_timeout_micros": [0, 1000]}


@pytest.mark.parametrize(("servers", "message"), [
    ('configs = [{ device = "cpu", batching = "nope" }]', "unknown batching profile 'nope'"),
    ('configs = [{ device = "tpu" }]', "unknown device 'tpu'"),
    ('configs = [{ batching = "off", set = { max_batch_size = 8 } }]', "enable_batching = false"),
    ('configs = [{ batching = "cpu", set = { max_batch_size = 0 } }]', "max_batch_size must be >= 1"),
    ('configs = [{ batching = "cpu", set = { colour = 1 } }]', "unknown field(s) colour"),
    ('configs = [{}]\n[servers.launch]\nkind = "vm"', "kind='vm'"),
])
def test_bad_configurations_are_refused_before_anything_starts(tmp_path, servers, message):
    plan = plan_with(tmp_path, servers)
    with pytest.raises(plans.PlanError, match=None) as caught:
        list(configurations(plan))
    assert message in str(caught.value)


@pytest.mark.parametrize(("servers", "run", "message"), [
    ('configs = [{}]\ntargets = [{ name = "a", grpc = "127.0.0.1:1" }]', "", "keep one"),
    ('[servers.launch]\nserver_cpus = "x"', "", "server_cpus"),
    ("", 'loadgen_cpus = "1-"', "loadgen_cpus"),
    ('[servers.launch]\nstart_timeout_s = 0', "", "start_timeout_s"),
])
def test_bad_server_settings_fail_the_plan(tmp_path, servers, run, message):
    with pytest.raises(plans.PlanError, match=message):
        plan_with(tmp_path, servers, run)


def test_running_servers_are_used_when_no_configuration_is_named(tmp_path):
    plan = plan_with(tmp_path, 'targets = [{ name = "a", grpc = "127.0.0.1:1" }]')
    [slot] = server_slots(plan)
    assert isinstance(slot, Running) and slot.name == "a"


def test_serve_flags_use_the_names_results_use():
    assert parse_serve("cpu/off") == plans.PlannedServer("cpu", "off", {})
    assert parse_serve("gpu/gpu+batch_timeout_micros=1000,max_batch_size=64") == plans.PlannedServer(
        "gpu", "gpu", {"batch_timeout_micros": "1000", "max_batch_size": "64"})
    for bad in ("cpu", "/off", "cpu/", "cpu/cpu+max_batch_size"):
        with pytest.raises(plans.PlanError, match="--serve"):
            parse_serve(bad)


def test_cpu_lists_and_pinning():
    assert cpu_list("0") == {0} and cpu_list("0,2") == {0, 2} and cpu_list("0-3") == {0, 1, 2, 3}
    for bad in ("", "a", "1-x", ","):
        with pytest.raises(ValueError, match="CPU list"):
            cpu_list(bad)
    assert pinned(["python"], "1") == ["taskset", "-c", "1", "python"] and pinned(["python"], "") == ["python"]


def test_a_configuration_asked_for_twice_is_two_servers_with_their_own_names(tmp_path):
    plan = plan_with(tmp_path, 'configs = [{ device = "cpu", batching = "off" }, { device = "cpu", batching = "off" }]')
    assert [s.name for s in server_slots(plan)] == ["cpu-off", "cpu-off#2"]

"""A configuration's tool-ceiling twin, as `loadtest.search.tool_ceiling_run` shapes it (no server started): the
plan's server with its backend swapped for the null backend, everything else kept; none for a running server; a twin
whose start fails (its cores refused) is one failed cell per search it was to check, naming why."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from loadtest.evidence.objective import Objective
from loadtest.evidence.search_tag import SearchTag
from loadtest.evidence.vocab import Role
from loadtest.measure import plan as plans
from loadtest.measure.servers import Running, StartFailed, ToStart
from loadtest.search.capacity_request import CapacityRequest, SearchEnd
from loadtest.search.tool_ceiling_run import NoTwin, ToolCeilings, TwinClock, null_flags, twin_slot
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


class Cells:
    """What `ToolCeilings` asks of a `CellRunner` when a twin cannot start: lines said, failed cells recorded."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self.failed: list[tuple[str, str, SearchTag]] = []

    def say(self, text: str) -> None:
        self.said.append(text)

    def not_run(self, target, cell, run, reason, total, model_version=None, search=None) -> None:
        self.failed.append((target.name, reason, search))


def answered(search_id: str) -> SearchEnd:
    """An outcome whose search answered a rate (only what `ToolCeilings.check` reads of it)."""
    answer = SimpleNamespace(conclusion=SimpleNamespace(answer=SimpleNamespace(rate_rps=100.0)))
    return SearchEnd("cpu-off", 1, answer, objective=Objective(25.0), search_id=search_id)  # type: ignore[arg-type]


def test_a_twin_whose_start_fails_is_one_failed_cell_a_search_naming_why(monkeypatch, tmp_path):
    # e.g. its cores refused: the launcher's StartFailed, as `ToStart.serve` raises it
    def refused(self, build_dir, say):
        raise StartFailed(self.planned(), f"server {self.name} did not start: taskset: invalid cpus 99")
        yield  # a generator, as the real one

    monkeypatch.setattr(ToStart, "serve", contextmanager(refused))
    cells = Cells()
    plan = plans.Plan(run=plans.RunSettings(), launch=plans.LaunchSettings(server_cpus="99"))
    twins = ToolCeilings(CapacityRequest(plan, Objective(25.0)), cells, None, tmp_path,  # type: ignore[arg-type]
                         TwinClock(0.0, 0.15))
    slot = ToStart("cpu", BatchingProfile(name="off"), load_config(None), plan.launch)
    twins.check(slot, [answered("r/1"), answered("r/2"), SearchEnd("cpu-off", 1, None, "no start", search_id="r/3")])
    assert [(name, tag.id, tag.checks, tag.role) for name, _, tag in cells.failed] == [
        ("cpu-off-tool-ceiling", "r/1/tool-ceiling", "r/1", Role.TOOL_CEILING),
        ("cpu-off-tool-ceiling", "r/2/tool-ceiling", "r/2", Role.TOOL_CEILING)]
    assert all("tool ceiling not measured: server cpu-off-tool-ceiling did not start: taskset: invalid cpus 99" == why
               for _, why, _ in cells.failed)

"""Plan files: layering (defaults -> TOML -> environment -> flags), validation, and the cell grid."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.measure import plan as plans
from tests.support.paths import REPO

PLANS = REPO / "loadtest" / "plans"


@pytest.mark.parametrize("name", ["quick.toml", "full.toml", "demo.toml"])
def test_shipped_plans_load(name):
    plan = plans.load_plan(PLANS / name, env={})
    assert plan.name == name.removesuffix(".toml")
    assert plans.cells(plan.grid)


def test_quick_plan_fits_a_few_minutes():
    plan = plans.load_plan(PLANS / "quick.toml", env={})
    per_cell_s = plan.run.warmup_s + plan.run.measure_s + 8  # + Locust start-up, drain, scrapes
    assert len(plans.cells(plan.grid)) * per_cell_s <= 5 * 60


def test_layers_later_wins(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[run]\nmeasure_s = 7.0\nprocesses = 2\n[grid]\nbatch_sizes = [2]\nconcurrency = [3]\n')
    plan = plans.load_plan(path, env={"LOADTEST_MEASURE_S": "9", "LOADTEST_ARRIVAL": "constant"})
    assert (plan.run.measure_s, plan.run.processes, plan.run.arrival) == (9.0, 2, "constant")
    assert plan.run.warmup_s == plans.RunSettings().warmup_s  # untouched default
    plan = plans.with_overrides(plan, measure_s=3.0, processes=None)
    assert (plan.run.measure_s, plan.run.processes) == (3.0, 2)


def test_cells_in_sweep_order():
    grid = plans.Grid(batch_sizes=(1, 8), concurrency=(1, 4), rates_rps=(50,))
    got = [(c.batch_size, c.mode, c.concurrency, c.rate_rps) for c in plans.cells(grid)]
    assert got == [(1, "closed", 1, None), (1, "closed", 4, None), (1, "open", None, 50.0),
                   (8, "closed", 1, None), (8, "closed", 4, None), (8, "open", None, 50.0)]


@pytest.mark.parametrize("text, message", [
    ("[run]\nmeasure_s = 0\n", "measure_s=0"),
    ("[run]\nprotocol = \"http2\"\n", "protocol='http2'"),
    ("[run]\nmesure_s = 3\n", "unknown [run] field(s) ['mesure_s']"),
    ("[grid]\nbatch_sizes = [0]\n", "batch_sizes=[0]"),
    ("[grid]\nconcurrency = []\n", "needs concurrency levels"),
    ("[grids]\n", "unknown plan section(s) ['grids']"),
    ("[run\n", "p.toml"),
    ("[capacity]\np99_ms_by_batch = { 32 = 0 }\n", "[capacity] p99_ms_by_batch: 32 = 0"),
    ("[capacity]\np99_ms_by_batch = { big = 10 }\n", "[capacity] p99_ms_by_batch: big = 10"),
    ("[capacity]\nobjective = 10\n", "capacity"),
])
def test_bad_plans_are_named(tmp_path, text, message):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(plans.PlanError, match=None) as error:
        plans.load_plan(path, env={})
    assert message in str(error.value)


def test_a_plan_sets_the_objective_of_a_request_batch_size(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("[capacity]\np99_ms_by_batch = { 32 = 50.0 }\n")
    plan = plans.load_plan(path, env={})
    assert plan.capacity.p99_objective_ms(32, 10.0) == 50.0
    assert plan.capacity.p99_objective_ms(1, 10.0) == 10.0  # else --p99-ms
    assert plan.to_dict()["capacity"] == {"p99_ms_by_batch": {"32": 50.0}, "objectives": ()}
    demo = plans.load_plan(REPO / "loadtest" / "plans" / "demo.toml", env={})
    assert demo.capacity.p99_objective_ms(32, 10.0) == 50.0


def test_the_demo_plan_gives_its_embedded_servers_eight_request_threads():
    """The demo's server flags are ones the embedded server takes (its own parser reads them)."""
    from serving.server.__main__ import build_parser

    flags = plans.load_plan(REPO / "loadtest" / "plans" / "demo.toml", env={}).launch.server_flags
    args = build_parser().parse_args(["--model_base_path", "models/mnist", *flags])
    assert args.grpc_max_threads == 8


def test_a_plan_sets_the_objectives_every_search_is_answered_at(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("[capacity]\nobjectives = [50, 2.5, 10]\n")
    plan = plans.load_plan(path, env={})
    assert plan.capacity.objectives_ms() == (2.5, 10.0, 50.0)
    assert plans.CapacityObjectives().objectives_ms() == (5.0, 10.0, 25.0, 50.0, 100.0)  # the default
    path.write_text("[capacity]\nobjectives = [10, -5]\n")
    with pytest.raises(plans.PlanError, match="objectives"):
        plans.load_plan(path, env={})


def test_a_model_base_path_ends_in_the_models_name_and_exists(tmp_path):
    (tmp_path / "ranker").mkdir()
    plan = plans.load_plan(None, env={})
    ok = plans.with_overrides(plan, model_name="ranker", model_base_path=str(tmp_path / "ranker"))
    assert ok.run.model_base_path == str(tmp_path / "ranker")
    with pytest.raises(plans.PlanError, match="model_base_path .*/ranker must end in the model name 'mnist'"):
        plans.with_overrides(plan, model_base_path=str(tmp_path / "ranker"))
    with pytest.raises(plans.PlanError, match="model_base_path .*/absent is not a directory"):
        plans.with_overrides(plan, model_name="absent", model_base_path=str(tmp_path / "absent"))


def test_bad_environment_value_is_named():
    with pytest.raises(plans.PlanError, match="LOADTEST_PROCESSES='two'"):
        plans.load_plan(None, env={"LOADTEST_PROCESSES": "two"})


def test_missing_plan_file():
    with pytest.raises(plans.PlanError, match="not found"):
        plans.load_plan(Path("/nonexistent/plan.toml"), env={})


def test_a_target_given_by_address_can_be_labelled_by_hand(tmp_path):
    """A TF Serving container's metrics page does not say what it is: the plan may."""
    path = tmp_path / "plan.toml"
    path.write_text('[servers]\ntargets = [{ name = "tfs", grpc = "127.0.0.1:8500", rest = "http://127.0.0.1:8501",'
                    ' kind = "tfserving-container", device = "gpu", device_name = "NVIDIA H100",'
                    ' batching_profile = "gpu" }]\n')
    [target] = plans.load_plan(path, env={}).targets
    assert (target.kind, target.device, target.device_name, target.batching_profile) == (
        "tfserving-container", "gpu", "NVIDIA H100", "gpu")
    assert (target.grpc_target, target.rest_url) == ("127.0.0.1:8500", "http://127.0.0.1:8501")

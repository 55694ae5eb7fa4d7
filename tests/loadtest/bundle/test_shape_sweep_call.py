"""The bundle's shape sweep (`run.py --shapes`): its plan on a 16-core machine, the shapes that fit, the capacity
command it builds (not run), and the default run left as it was."""

from __future__ import annotations

import json
import os

import pytest

from loadtest.bundle import device_run, shape_sweep_call

SIXTEEN = list(range(16))


@pytest.fixture
def sixteen_cores(monkeypatch):
    """A lent machine's 16 cores, as `core_split` and `write_plan` read them."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(SIXTEEN))


@pytest.fixture
def plan_file(sixteen_cores, tmp_path):
    """The run's plan with Locust on the last 4 cores (the smoke test's share here), as `run.py` writes it."""
    args = device_run.parse(["--out", str(tmp_path / "plan-out")])
    return device_run.write_plan(tmp_path / "device-plan.toml", args, 4)


def sweep_args(tmp_path, *flags: str):
    return device_run.parse(["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), *flags])


def test_on_16_cores_auto_measures_1_2_4_and_8_cores_with_the_load_generator_on_its_own(plan_file):
    assert shape_sweep_call.pinned_cpus(plan_file) == ("0,1,2,3,4,5,6,7,8,9,10,11", "12,13,14,15")
    machine = shape_sweep_call.machine_shapes("auto", SIXTEEN, *shape_sweep_call.pinned_cpus(plan_file))
    assert [(s.cores, s.cpus, s.shares_loadgen) for s in machine.shapes] == [
        (1, "0", False), (2, "0-1", False), (4, "0-3", False), (8, "0-7", False)]
    assert machine.loadgen_cpus == "12-15" and not machine.refused


def test_with_room_for_every_shape_the_plan_keeps_them_all(plan_file, tmp_path):
    args = sweep_args(tmp_path, "--shapes", "auto")
    machine = shape_sweep_call.machine_shapes(args.shapes, SIXTEEN, *shape_sweep_call.pinned_cpus(plan_file))
    planned = shape_sweep_call.plan(args, machine, budget_s=20 * 60)
    assert planned.kept == (1, 2, 4, 8) and not planned.left_out
    lines = shape_sweep_call.plan_lines(machine, planned)
    assert "shapes kept (cores per replica): 1, 2, 4, 8" in lines[0]
    assert lines[1] == ("  replica shapes: 1 core (cores 0); 2 cores (cores 0-1); 4 cores (cores 0-3); "
                        "8 cores (cores 0-7); the load generator on cores 12-15")


def test_a_small_budget_names_the_larger_shapes_as_not_fitting_and_a_too_large_one_as_refused(plan_file, tmp_path):
    """5 minutes: 270 s after the 10% margin, 240 s after the report's 30 s; a shape is both CPU configurations'
    starts (15 s) and searches (33.5 s) and the pair's reference cells (21.9 s): 118.9 s. Two fit."""
    args = sweep_args(tmp_path, "--shapes", "1,2,4,8,32")
    machine = shape_sweep_call.machine_shapes(args.shapes, SIXTEEN, *shape_sweep_call.pinned_cpus(plan_file))
    planned = shape_sweep_call.plan(args, machine, budget_s=300)
    assert planned.kept == (1, 2) and planned.shape_s == pytest.approx(2 * (15 + 33.5) + 21.9)
    assert [(o.cores, o.reason) for o in planned.left_out] == [(4, "needs 119 s, 2 s of the budget left"),
                                                               (8, "needs 119 s, 2 s of the budget left")]
    lines = shape_sweep_call.plan_lines(machine, planned)
    assert "  left out: 4 cores a replica: needs 119 s, 2 s of the budget left" in lines
    assert "  left out: 8 cores a replica: needs 119 s, 2 s of the budget left" in lines
    assert "  replica shape not measured: 32 cores: this machine gives 16" in lines
    assert "  replica shapes: 1 core (cores 0); 2 cores (cores 0-1); the load generator on cores 12-15" in lines


def test_the_sweeps_capacity_run_gets_only_the_shapes_that_fit_and_their_minutes(plan_file, tmp_path, monkeypatch):
    ran: list[tuple[str, list[str], float]] = []

    def command(self, name, command, timeout_s, echoed=True):
        ran.append((name, command, timeout_s))
        self.record["exit_codes"][name] = 0
        return 0

    monkeypatch.setattr(device_run.DeviceRun, "command", command)
    monkeypatch.setattr(device_run.DeviceRun, "report", lambda self: None)
    monkeypatch.setattr(device_run.DeviceRun, "left_s", lambda self: 300.0)
    run = device_run.DeviceRun(sweep_args(tmp_path, "--shapes", "auto", "--budget-min", "5"))
    assert shape_sweep_call.sweep(run, plan_file, SIXTEEN) == 0
    [(name, line, timeout_s)] = ran
    assert name == "shapes" and line[1:4] == ["-m", "loadtest", "capacity"]
    assert line[line.index("--shapes") + 1] == "1,2"  # 4 and 8 cores do not fit 5 minutes: not passed
    assert line[line.index("--shapes-budget-min") + 1] == "1.4"  # 2 shapes x 2 configurations x 0.35 min
    assert [a for a in line if a.startswith("--serve=")] == ["--serve=cpu/off", "--serve=cpu/cpu"]
    assert [a for a in line if a.startswith(("--batch=", "--goal="))] == ["--batch=1", "--goal=1000:10:1"]
    assert line[line.index("--plan") + 1] == str(plan_file) and "--sequential" not in line
    assert line[line.index("--max-minutes") + 1] == "0.35" and "--target-rps" in line and "--prices" in line
    assert timeout_s == pytest.approx(2 * 118.9)  # its planned time: less than what is left less the reserve
    record = json.loads((tmp_path / "out" / "device-run.json").read_text())
    assert record["plan"]["kept_shapes"] == [1, 2] and record["plan"]["loadgen_cpus"] == "12-15"
    assert [o["cores"] for o in record["left_out"]] == [4, 8]
    assert [s["cpus"] for s in record["plan"]["shapes"]] == ["0", "0-1"] and not record["profile"]["ok"]
    assert "run.py: plan: budget 300 s" in (tmp_path / "out" / "run.log").read_text()


def test_no_shape_fitting_runs_no_capacity_and_fails_saying_so(plan_file, tmp_path, monkeypatch):
    monkeypatch.setattr(device_run.DeviceRun, "command", lambda *a, **k: pytest.fail("nothing should run"))
    monkeypatch.setattr(device_run.DeviceRun, "left_s", lambda self: 60.0)
    run = device_run.DeviceRun(sweep_args(tmp_path, "--shapes", "1,2"))
    assert shape_sweep_call.sweep(run, plan_file, SIXTEEN) == 1
    assert "no replica shape fits the budget" in (tmp_path / "out" / "run.log").read_text()


def test_a_sequential_sweep_counts_no_reference_cells_and_says_sequential(plan_file, tmp_path):
    args = sweep_args(tmp_path, "--shapes", "2", "--sequential", "--batches", "1,32")
    machine = shape_sweep_call.machine_shapes(args.shapes, SIXTEEN, *shape_sweep_call.pinned_cpus(plan_file))
    planned = shape_sweep_call.plan(args, machine, budget_s=600)
    assert planned.shape_s == pytest.approx(2 * (15 + 2 * 33.5)) and planned.searches_per_shape == 4
    assert shape_sweep_call.capacity_flags(args, planned) == ["--shapes", "2", "--shapes-budget-min", "1.4",
                                                         "--sequential"]


def runs_main(monkeypatch, tmp_path, *flags: str) -> list[tuple[str, list[str]]]:
    """`run.py` with the install, the probes and the smoke test skipped and nothing run: the commands it asks for."""
    ran: list[tuple[str, list[str]]] = []

    def command(self, name, command, timeout_s, echoed=True):
        ran.append((name, command))
        self.record["exit_codes"][name] = 0
        return 0

    monkeypatch.setattr(device_run.DeviceRun, "prepare", lambda self: self.args.devices.split(","))
    monkeypatch.setattr(device_run.DeviceRun, "smoke", lambda self, devices: 4)
    monkeypatch.setattr(device_run.DeviceRun, "command", command)
    monkeypatch.setattr(device_run.DeviceRun, "report", lambda self: None)
    assert device_run.main(["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), *flags]) == 0
    return ran


def test_run_py_with_shapes_runs_the_sweep_alone_in_its_nine_minutes(sixteen_cores, monkeypatch, tmp_path):
    ran = runs_main(monkeypatch, tmp_path, "--shapes", "auto")
    assert [name for name, _ in ran] == ["shapes"]
    line = ran[0][1]
    # 540 s, nothing spent here: 456 s after the margin and the report; 118.9 s a shape: 1, 2 and 4 cores fit
    assert line[line.index("--shapes") + 1] == "1,2,4" and "--serve=gpu/gpu" not in line
    record = json.loads((tmp_path / "out" / "device-run.json").read_text())
    assert record["left_out"] == [{"cores": 8, "reason": "needs 119 s, 99 s of the budget left"}]


def test_the_default_run_is_one_paired_capacity_run_over_all_four_with_their_tool_ceiling(
        sixteen_cores, monkeypatch, tmp_path):
    # With the tool ceiling (issue #59) the nine minutes hold request batch 1 only; without it, batches 1 and 32.
    args = device_run.parse(["--out", str(tmp_path / "parsed")])
    assert (args.devices, args.batches, args.shapes) == ("gpu,cpu", "1,32", None)
    ran = runs_main(monkeypatch, tmp_path)
    assert [name for name, _ in ran] == ["paired"]
    line = ran[0][1]
    assert [a for a in line if a.startswith("--serve=")] == ["--serve=gpu/off", "--serve=gpu/gpu", "--serve=cpu/off",
                                                            "--serve=cpu/cpu"]
    assert [a for a in line if a.startswith("--batch=")] == ["--batch=1"] and "--no-tool-ceiling" not in line
    assert not [a for a in line if a.startswith("--shapes")]
    record = json.loads((tmp_path / "out" / "device-run.json").read_text())
    assert record["plan"]["paired"] and len(record["plan"]["kept"]) == 4
    assert {o["batch"] for o in record["left_out"]} == {32}
    ran = runs_main(monkeypatch, tmp_path / "without", "--no-tool-ceiling")
    line = ran[0][1]
    assert [a for a in line if a.startswith("--batch=")] == ["--batch=1", "--batch=32"] and "--no-tool-ceiling" in line


@pytest.mark.parametrize(("flags", "said"), [
    (["--shapes", "1,x"], "expected auto or CORES,CORES"),
    (["--shapes", "0,2"], "expected auto or CORES,CORES"),
    (["--shapes", "auto", "--devices", "gpu,cpu"], "sweeps the CPU configurations only"),
    (["--shapes", "auto", "--profile-s", "20"], "no profile (--profile-s), no tuning"),
])
def test_a_shape_sweep_with_a_bad_list_or_another_calls_flags_is_a_usage_error(flags, said, capsys):
    with pytest.raises(SystemExit) as exit_info:
        device_run.parse(["--out", "x", *flags])
    assert exit_info.value.code == 2 and said in capsys.readouterr().err

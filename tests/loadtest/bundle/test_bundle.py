"""The offline device bundle: what goes in it, its size, and a real offline run from it on CPU."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadtest.bundle import budget, device_run, processes, run_args, smoke
from loadtest.bundle.build import (
    IMAGE_PACKAGES,
    LIMIT_BYTES,
    BundleError,
    WheelPlatforms,
    build,
    copy_model,
    normalized,
    requirements,
    source_record,
)
from loadtest.bundle.run_outputs import OUT_FILES
from loadtest.evidence.records import read_results
from loadtest.judge.tool_ceiling import is_twin
from loadtest.search import run_budget
from tests.support import timing


def test_wheel_names_are_compared_as_pip_normalises_them():
    assert normalized("Flask_Login") == "flask-login" and normalized("zope.event") == "zope-event"
    assert {"jax", "numpy", "grpcio", "matplotlib"} <= IMAGE_PACKAGES and "keras" not in IMAGE_PACKAGES


def test_the_bundle_installs_the_projects_dependencies_less_tensorflows():
    wanted = requirements()
    assert {"keras", "protobuf", "locust", "hdrhistogram", "grpcio"} <= set(wanted)
    assert not {"tensorflow", "tensorflow-serving-api", "mlxtend", "jax"} & set(wanted)


def test_a_model_without_its_keras_weights_is_refused(tmp_path):
    (tmp_path / "mnist" / "3").mkdir(parents=True)
    (tmp_path / "mnist-samples.npz").write_bytes(b"")
    with pytest.raises(BundleError, match="has no model.keras"):
        copy_model(tmp_path, tmp_path / "out")
    with pytest.raises(BundleError, match="no exported model"):
        copy_model(tmp_path / "none", tmp_path / "out")


def test_locust_gets_the_last_quarter_of_the_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert run_args.core_split(0) == ("0,1,2,3,4,5,6,7,8,9,10,11", "12,13,14,15", 4)
    assert run_args.core_split(2) == ("0,1,2,3,4,5,6,7,8,9,10,11,12,13", "14,15", 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert run_args.core_split(0) == ("0", "1", 1) and run_args.core_split(5) == ("0", "1", 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    assert run_args.core_split(0) == ("", "", 1)  # one core: nothing pinned


def test_the_defaults_search_all_four_configurations_at_batch_1_with_their_tool_ceiling_paired_in_one_call(tmp_path):
    """9 minutes, ~20 s of it for install and probes and at most 60 s for the smoke test: gpu-off, gpu-gpu, cpu-off
    and cpu-cpu at request batch 1, their server starts, their twins (a start, a check cell a search, 15% of the
    searches' time) and reference cells included, with 10% and the report's time to spare; batch 32 does not fit
    with the tool ceiling, and is named; without it (`--no-tool-ceiling`), batches 1 and 32 both fit."""
    args = device_run.parse(["--out", str(tmp_path)])
    assert args.batches == "1,32" and args.tool_ceiling
    configurations = [("gpu", "off"), ("gpu", "gpu"), ("cpu", "off"), ("cpu", "cpu")]
    budget_s = args.budget_min * 60 - 20 - smoke.SMOKE_S
    plan = budget.plan_paired(configurations, [1, 32], run_args.costs(args, 2), budget_s, run_args.reference_s(args))
    assert plan.paired and len(plan.kept) == 4 and plan.batches() == [1]
    assert {o.search.batch for o in plan.left_out} == {32} and "need" in plan.left_out[0].reason
    assert plan.costs.search_s == 0.35 * 60 + 6 + 0.5 + 6  # 21 s a search and the cell it may start at its end
    assert plan.costs.twin_cell_s == budget.CELL_OVERHEAD_S + 0.5 + 1.5
    assert "the tool ceiling: a twin's start 15 s" in plan.describe()[0]
    args = device_run.parse(["--out", str(tmp_path), "--no-tool-ceiling"])
    plan = budget.plan_paired(configurations, [1, 32], run_args.costs(args, 2), budget_s, run_args.reference_s(args))
    assert plan.paired and len(plan.kept) == 8 and not plan.left_out and plan.batches() == [1, 32]


def test_the_tool_ceilings_share_is_the_capacity_runs():
    assert budget.TOOL_CEILING_SHARE == run_budget.TOOL_CEILING_SHARE


def test_the_bundle_passes_spare_instances_to_capacity_and_report(tmp_path):
    """--spare-instances reaches the card's sizing (`capacity` and `report` both take it); N + 1 by default, as the
    report's, and 0 allowed (#60)."""
    from loadtest.report.sizing.instances import SPARE_INSTANCES

    assert run_args.SPARE_INSTANCES == SPARE_INSTANCES
    default = device_run.sizing_flags(device_run.parse(["--out", str(tmp_path)]))
    assert default[default.index("--spare-instances") + 1] == str(SPARE_INSTANCES)
    none = device_run.sizing_flags(device_run.parse(["--out", str(tmp_path), "--spare-instances", "0"]))
    assert none[none.index("--spare-instances") + 1] == "0"
    with pytest.raises(SystemExit):
        device_run.parse(["--out", str(tmp_path), "--spare-instances", "-1"])


def test_a_failed_smoke_test_stops_the_run_before_any_search_saying_why(monkeypatch, tmp_path):
    asked: list[str] = []

    def command(self, name, command, timeout_s):
        asked.append(name)
        self.last_lines = ["starting gpu-gpu (gpu, batching gpu) ...", "server gpu-gpu did not start: CUDA error 999"]
        self.record["exit_codes"][name] = 1
        return 1

    monkeypatch.setattr(device_run.DeviceRun, "prepare", lambda self: ["gpu", "cpu"])
    monkeypatch.setattr(device_run.DeviceRun, "command", command)
    code = device_run.main(["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    summary = json.loads((tmp_path / "out" / "device-run.json").read_text())
    assert code == 1 and asked == ["smoke"] and "plan" not in summary
    assert summary["status"].startswith(
        "failed: smoke test of gpu-gpu failed, no search run: measured nothing (exit 1)")
    assert "CUDA error 999" in summary["smoke"]["why"] and not summary["smoke"]["ok"]
    assert "smoke test of gpu-gpu failed" in (tmp_path / "out" / "run.log").read_text()


def test_an_unknown_device_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        device_run.parse(["--out", "x", "--devices", "gpu,tpu"])
    assert exit_info.value.code == 2 and "unknown ['tpu']" in capsys.readouterr().err


def test_an_out_folder_that_holds_a_run_is_refused(capsys, tmp_path):
    (tmp_path / "device-run.json").write_text("{}")
    with pytest.raises(SystemExit) as exit_info:
        device_run.parse(["--out", str(tmp_path)])
    assert exit_info.value.code == 2 and "already holds a run" in capsys.readouterr().err


@pytest.mark.untimed
@pytest.mark.integration
def test_the_device_bundle_fits_a_call_and_holds_only_what_the_image_lacks(exported_model, tmp_path):
    manifest = build(tmp_path / "bundle", exported_model.output_dir)
    bundle = tmp_path / "bundle"
    assert manifest.size_bytes <= LIMIT_BYTES and manifest.python_version == "3.12"
    wheels = {normalized(name.split("-")[0]) for name in manifest.wheels}
    assert {"keras", "locust", "hdrhistogram", "gevent", "protobuf", "py-spy"} <= wheels
    assert not (wheels & (IMAGE_PACKAGES - {"protobuf"}))  # jax, numpy, grpcio... are the image's
    # CPython 3.12's, or any Python's (pure, or py-spy's binary: py2.py3-none-manylinux1_x86_64)
    assert all("cp312" in name or "-none-" in name or "abi3" in name for name in manifest.wheels)
    source = json.loads((bundle / "project" / "SOURCE.json").read_text())
    assert source == manifest.source and len(source["commit"]) == 40 and source["built_utc"]
    assert (bundle / "project" / "models" / "mnist" / "1" / "model.keras").is_file()
    assert (bundle / "protos" / "tensorflow_serving" / "apis" / "predict_pb2.py").is_file()
    assert not (bundle / "protos" / "tensorflow" / "__init__.py").exists()  # TF's runtime can never load
    assert json.loads((bundle / "manifest.json").read_text())["size_bytes"] == manifest.size_bytes


def offline(command: list[str]) -> list[str]:
    """The command in a network namespace of its own with only loopback up, where this machine allows it."""
    probe = subprocess.run(["unshare", "-rn", "sh", "-c", "ip link set lo up"], capture_output=True)
    if shutil.which("unshare") is None or shutil.which("ip") is None or probe.returncode != 0:
        return command
    return ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "offline", *command]


@pytest.fixture(scope="module")
def cpu_bundle(exported_model, tmp_path_factory):
    """A self-contained bundle for this Python (what the image has is packed too) and a venv with nothing
    in it: (the venv's python, the bundle)."""
    root = tmp_path_factory.mktemp("cpu-bundle")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    build(root / "bundle", exported_model.output_dir,
          WheelPlatforms(python_version=version, image_packages=frozenset(), limit_bytes=None))
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    # run.py's own install, once for both runs (~30 s here): their budgets then go to what they measure
    subprocess.run([str(python), "-c", "import sys; sys.path.insert(0, sys.argv[1]); import run; run.install()",
                    str(root / "bundle")], check=True, env=clean_env(), timeout=300)
    assert (root / "bundle" / "site" / ".installed").is_file()
    return python, root / "bundle"


def run_py(cpu_bundle, out, *args: str) -> list[str]:
    python, bundle = cpu_bundle
    return [str(python), str(bundle / "run.py"), "--out", str(out), "--max-steps", "2", "--measure-s", "1",
            "--max-rate-s", "3", "--start-s", "25", *args]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def left_behind(bundle) -> list[int]:
    """Processes still running from the bundle (a server, Locust), killed here so that none outlives the test."""
    found = [int(p.name) for p in Path("/proc").glob("[0-9]*") if str(bundle) in processes.command_line(int(p.name))]
    for pid in found:
        os.kill(pid, signal.SIGKILL)
    return found


@pytest.mark.integration
def test_the_bundle_runs_offline_on_cpu_within_its_budget_and_explains_itself(cpu_bundle, tmp_path):
    """No index, no network, a 7-minute budget: the GPU is skipped with the reason, the smoke test passes on the
    CPU's owner, the plan keeps what fits, the CPU's two configurations are searched paired on the jax backend,
    each answer is said beside the device alone, and --out holds at most 8 files, no folder."""
    out = tmp_path / "out"
    # a budget with room for slow minutes here: the smoke test may take 120 s and each start what the smoke's took
    command = run_py(cpu_bundle, out, "--devices", "gpu,cpu", "--batches", "1,8", "--budget-min", "7",
                     "--max-minutes", "0.2", "--profile-s", "8", "--smoke-s", "120")
    started = time.monotonic()
    done = subprocess.run(offline(command), capture_output=True, text=True, timeout=600, env=clean_env(),
                          cwd=tmp_path)
    took_s = time.monotonic() - started
    tail = done.stdout[-3000:] + done.stderr[-3000:]
    assert (out / "device-run.json").is_file(), tail
    summary = json.loads((out / "device-run.json").read_text())
    # A step stopped at its time limit (exit 124: the smoke test, the searches, the report) fails the run on a slow
    # host; a traceback, any other step's failure, or a failed run with none stopped is the code's.
    codes = summary["exit_codes"]
    limited = sorted(name for name, code in codes.items() if code == 124)
    slow = done.returncode == 1 and bool(limited) and all(code in (0, 124) for code in codes.values()) \
        and "Traceback" not in done.stderr
    assert done.returncode == 0 or slow, (codes, tail)
    timing.holds("every step within its time limit", done.returncode == 0, f"stopped at their limit: {limited}; {tail}")
    timing.at_most("the run's wall time (s)", took_s, 7 * 60 + 5, "for a 7-minute budget")
    entries = sorted(out.iterdir())
    assert len(entries) <= 8 and all(p.is_file() for p in entries), [p.name for p in entries]
    assert {p.name for p in entries} <= set(OUT_FILES)
    assert summary["status"] == "finished"
    timing.holds("within its budget", summary["within_budget"], f"{summary['seconds_total']} s")
    timing.at_most("the run's own seconds", summary["seconds_total"], 420)
    assert "PyTorch sees no GPU" in summary["skipped"]["gpu"] and summary["exit_codes"]["report"] == 0
    # the smoke test first, on the first device kept: its owner (batching on) answered right, on jax
    smoke_record = summary["smoke"]
    assert smoke_record["ok"] and smoke_record["server"] == "cpu-cpu" and smoke_record["runtime"] == "jax"
    assert [c["batch"] for c in smoke_record["cells"]] == [1, 32] and smoke_record["start_s"] > 0
    assert all(c["device_alone_ips"] and c["loadgen_cpu_s"] and c["server_cpu_s"] for c in smoke_record["cells"])
    timing.at_most("the smoke test's seconds", summary["seconds"]["smoke"], 120 + 5, smoke_record)
    assert summary["cores"]["loadgen"] == 1
    kept = {(s["device"], s["profile"], s["batch"]) for s in summary["plan"]["kept"]}
    left_out = {(o["device"], o["profile"], o["batch"]) for o in summary["left_out"]}
    # 4 asked: both configurations at batch 1, paired; batch 8 kept whole or left out whole, with the reason. What
    # fits is what the probes and the smoke test (its server's start included) left of the budget: this machine's speed
    timing.holds("both configurations at batch 1 kept, paired",
                 {("cpu", "off", 1), ("cpu", "cpu", 1)} <= kept and summary["plan"]["paired"], summary["plan"])
    assert kept | left_out == {("cpu", p, b) for p in ("off", "cpu") for b in (1, 8)} and not kept & left_out
    assert all(o["reason"] for o in summary["left_out"]) and len({b for _, _, b in left_out}) <= 1
    answers = [(c["server"], c["batch"]) for c in summary["capacities"]]
    assert answers and len(set(answers)) == len(answers)  # each search's answer once
    assert summary["torch_round_trip"]["note"] in ("PyTorch not installed", "no CUDA")
    source = json.loads((cpu_bundle[1] / "project" / "SOURCE.json").read_text())
    assert summary["source"]["commit"] == source["commit"] == source_record()["commit"]
    every = read_results(out / "results.jsonl")
    assert every and all(c.provenance.git_commit == source["commit"] for c in every)
    # the tool ceiling's twins: the null backend, each checking a search of this run (issue #59)
    twins, cells = [c for c in every if is_twin(c)], [c for c in every if not is_twin(c)]
    assert all(c.search and c.search.checks and c.server.name.endswith("-tool-ceiling") for c in twins)
    assert all(c.server.versions.get("runtime") == "jax" and "tensorflow" not in c.server.versions for c in cells)
    # one comparison per request batch: both searches' cells and the reference cells tagged with it, interleaved
    tags = {json.dumps(c.tag.comparison.to_dict(), sort_keys=True) for c in cells}
    assert len(tags) == len({b for _, _, b in kept}) and all(json.loads(t)["paired"] for t in tags)  # one a batch
    assert {c.search and c.search.role for c in cells} >= {"reference", "probe"}
    assert summary["results_lines"] == len(every) and set(summary["by_configuration"]) <= {"cpu-off", "cpu-cpu"}
    report = (out / "report.md").read_text()
    # the decision opens the report, the record and the console's end; the record's figures are the report's
    assert summary["decision"][0].startswith(("# NOT FOR BUYING — ", "# FOR BUYING — "))
    assert report.splitlines()[0] == summary["decision"][0]  # the card's title is the report's first line
    console = (out / "run.log").read_text()
    # the card once in the console: the capacity run's end prints it, the report's echo does not repeat it
    assert console.count(summary["decision"][0]) == 1 and "run.py: smoke test passed: cpu-cpu on jax" in console
    # each answer beside the device alone: the CPU's from one caller per core the server was given
    lines = device_run.run_outputs.answer_lines(summary["by_configuration"])
    rows = [figures for batches in summary["by_configuration"].values() for figures in batches.values()]
    for line, figures in zip(lines, rows, strict=True):
        assert f"run.py: {line}" in console and "the device alone" in line
        # the tool ceiling beside each answer that has one (a row at its peak, no capacity confirmed, has none)
        ceiling = (figures.get("tool_ceiling") or {}).get("text")
        assert (f"; tool ceiling {ceiling}" in line) if ceiling else ("tool ceiling" not in line), (line, figures)
    # the twins ran: each checks an answer its search found in its 12 s (--max-minutes 0.2), this machine's speed
    timing.holds("a tool ceiling beside an answer", any("; tool ceiling " in line for line in lines), lines)
    for label, batches in summary["by_configuration"].items():
        for batch, figures in batches.items():
            mean = "—" if figures["server_mean_ms"] is None else f"{figures['server_mean_ms']:,.3f}"
            assert f"| {label} | {batch} | {figures['at']} | " in report and f" | {mean} | " in report
    assert "embedded server (JAX, the same weights (.keras))" in report
    # never called TF Serving: the report names TF Serving only as what was not measured, or what to run next
    said = [line.replace("not TF Serving", "").replace("TF Serving's containers", "").replace("TF Serving itself", "")
            for line in report.splitlines()]
    assert not [line for line in said if "cpu-off" in line and "TF Serving" in line]
    profile = summary["profile"]
    assert (profile["ok"] and (out / "profile-stacks.txt").is_file() and profile["top"]["self"]) or profile["why"]
    assert not left_behind(cpu_bundle[1])


@pytest.mark.untimed
@pytest.mark.integration
def test_a_run_stopped_part_way_keeps_the_results_already_measured(cpu_bundle, tmp_path):
    out = tmp_path / "out"
    command = run_py(cpu_bundle, out, "--devices", "cpu", "--batches", "1,8", "--budget-min", "6",
                     "--max-minutes", "1", "--profile-s", "0")
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env(),
                            cwd=tmp_path)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None and not lines(out / "results.jsonl"):
            time.sleep(0.5)
        seen = lines(out / "results.jsonl")
        assert seen, "no result line within 240 s"
        proc.send_signal(signal.SIGTERM)  # what `timeout` sends at a call's limit, before SIGKILL
        assert proc.wait(timeout=90) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
    assert lines(out / "results.jsonl")[: len(seen)] == seen
    summary = json.loads((out / "device-run.json").read_text())
    assert summary["status"].startswith("stopped by SIGTERM") and summary["exit_code"] == 143
    assert not left_behind(cpu_bundle[1])


def lines(path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []

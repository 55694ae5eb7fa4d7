"""What a device run leaves in --out, the bundle's source record, and the profile's summary."""

from __future__ import annotations

import json

from loadtest.bundle import device_run, profiling
from loadtest.bundle import run_outputs as outputs
from loadtest.bundle.build import source_record
from loadtest.bundle.profiling import profile_plan, top_functions
from model_export import provenance


def test_results_lines_are_copied_as_they_appear_and_a_half_written_one_waits(tmp_path):
    work, dest = tmp_path / "work", tmp_path / "results.jsonl"
    (work / "cpu-off" / "run1").mkdir(parents=True)
    source = work / "cpu-off" / "run1" / "results.jsonl"
    source.write_text('{"a": 1}\n{"b": ')
    copier = outputs.ResultsCopier(work, dest)
    assert copier.poll() == 1 and dest.read_text() == '{"a": 1}\n'
    with source.open("a") as f:
        f.write('2}\n{"c": 3}\n')
    (work / "cpu-cpu").mkdir()
    (work / "cpu-cpu" / "results.jsonl").write_text('{"d": 4}\n')
    assert copier.poll() == 3 and copier.poll() == 0
    assert sorted(dest.read_text().splitlines()) == ['{"a": 1}', '{"b": 2}', '{"c": 3}', '{"d": 4}']
    assert copier.lines == 4


def test_the_run_record_is_rewritten_whole(tmp_path):
    record = outputs.RunRecord(tmp_path / "device-run.json", status="running")
    record.update_and_write(exit_codes={"cpu-off": 0})
    assert json.loads((tmp_path / "device-run.json").read_text()) == {"status": "running",
                                                                     "exit_codes": {"cpu-off": 0}}
    assert [p.name for p in tmp_path.iterdir()] == ["device-run.json"]


def test_the_record_keeps_the_reports_figures_by_configuration_and_batch(tmp_path):
    written = {"card": {"lines": ["# NOT FOR BUYING — ...", "", "| target | ... |"]},
               "headline": ["the serving path bounded this answer ..."],
               "figures": [{"configuration": "gpu-off", "request_batch": 1, "server_mean_ms": 1.743},
                           {"configuration": "gpu-off", "request_batch": 32, "server_mean_ms": 2.657},
                           {"configuration": "cpu-off", "request_batch": 1, "server_mean_ms": None}]}
    (tmp_path / "figures.json").write_text(json.dumps(written))
    record = outputs.figures_record(tmp_path / "figures.json")
    assert record["decision"] == written["card"]["lines"]  # the card, as the report opens with it
    assert record["by_configuration"]["gpu-off"]["32"] == written["figures"][1]
    assert sorted(record["by_configuration"]) == ["cpu-off", "gpu-off"]


def test_without_a_report_the_record_has_no_figures(tmp_path):
    assert outputs.figures_record(tmp_path / "figures.json") == {}
    (tmp_path / "figures.json").write_text('{"headline": [')  # a report killed while writing
    assert outputs.figures_record(tmp_path / "figures.json") == {}


def test_the_bundles_source_record_names_this_checkout():
    record = source_record()
    assert len(record["commit"]) == 40 and isinstance(record["dirty"], bool)
    assert record["changed_count"] >= len(record["changed"]) and record["built_utc"].endswith("+00:00")


def test_a_copy_with_a_source_record_names_that_source_not_the_checkout_around_it(monkeypatch, tmp_path):
    (tmp_path / provenance.SOURCE_RECORD).write_text(json.dumps({"commit": "4c0f69c", "dirty": False}))
    monkeypatch.setattr(provenance, "REPO", tmp_path)
    assert provenance.git_revision() == provenance.GitRevision("4c0f69c", False)
    (tmp_path / provenance.SOURCE_RECORD).write_text("not json")
    assert provenance.git_revision() == provenance.GitRevision("unknown", None)  # not a checkout either


def test_top_functions_from_collapsed_stacks():
    stacks = ("main (a.py:1);serve (b.py:2);infer (c.py:3) 6\n"
              "main (a.py:1);serve (b.py:2) 3\nmain (a.py:1);wait (d.py:4) 1\n")
    top = top_functions(stacks, count=2)
    assert top["samples"] == 10
    assert top["self"] == [{"function": "infer (c.py:3)", "samples": 6, "share": 0.6},
                           {"function": "serve (b.py:2)", "samples": 3, "share": 0.3}]
    assert top["inclusive"][0] == {"function": "main (a.py:1)", "samples": 10, "share": 1.0}


def test_the_profile_plan_is_one_open_loop_cell_at_the_rate(tmp_path, monkeypatch):
    monkeypatch.setattr(device_run.os, "sched_getaffinity", lambda pid: set(range(16)))
    base = device_run.write_plan(tmp_path / "plan.toml", device_run.parse(["--out", str(tmp_path)]), 0).read_text()
    plan = profile_plan(base, 32, 123.456, 28.0)
    assert "batch_sizes = [32]" in plan and "rates_rps = [123.5]" in plan and "concurrency = []" in plan
    assert "measure_s = 28.0" in plan and 'server_cpus = "0,1,2,3,4,5,6,7,8,9,10,11"' in plan


def test_the_profile_goes_to_the_configuration_that_served_the_most_images_at_90_percent_of_it():
    capacities = [{"server": "gpu-off", "batch": "1", "answer": "400.0 req/s at p99 <= 10 ms"},
                  {"server": "cpu-cpu", "batch": "32", "answer": "at least 50.0 req/s at p99 <= 50 ms"},
                  {"server": "gpu-gpu", "batch": "1", "answer": "none met"}]
    assert profiling.profile_target(capacities, None) == ("cpu", "cpu", 32, 45.0)  # 1,600 images/s beat 400
    kept = [{"device": "gpu", "profile": "gpu", "batch": 1}]
    assert profiling.profile_target(capacities[2:], kept) == ("gpu", "gpu", 1, profiling.MODEST_RPS)
    assert profiling.profile_target([], None) == ("cpu", "off", 1, profiling.MODEST_RPS)

"""The typed parts of a cell's record write exactly the keys they were read with (`loadtest.evidence.search_tag`,
`loadtest.evidence.cell_parts`, `loadtest.evidence.floor_record`, `loadtest.evidence.provenance_record`): keys an
older record lacks stay absent, and an empty part stays `{}`."""

from __future__ import annotations

import dataclasses
import json

import pytest

from loadtest.evidence.cell_parts import (
    HostProbe,
    LocustTotals,
    ProbeSide,
    ServerLatency,
    ServerPhases,
    ServerResources,
    ServerScrape,
    TelemetryNote,
)
from loadtest.evidence.floor_record import DeviceFloorRecord
from loadtest.evidence.provenance_record import Provenance
from loadtest.evidence.records import read_results
from loadtest.evidence.search_tag import SearchTag
from tests.support.paths import ANALYSIS_FIXTURES

OLD_TAG = {"id": "run/1", "role": "start", "p99_objective_ms": 10.0, "offered_rps": None}
NEW_TAG = {**OLD_TAG, "role": "confirm", "offered_rps": 300, "confidence": 0.99, "confirming": True,
           "objectives": [5.0, 10.0], "attempt": 2,
           "comparison": {"id": "run/b1", "repeat": 1, "paired": True, "servers": ["cpu-off", "cpu-cpu"]},
           "evidence": {"decision": "pass", "reason": "ok", "requests": 900, "over": 1, "p99_estimate_ms": None,
                        "confidence": 0.99, "requests_to_pass": 459}}


SHAPE_TAG = {**NEW_TAG, "shape": {"family": "cpu-off", "cores": 2, "cpus": "0-1", "shares_loadgen": True}}


@pytest.mark.parametrize("raw", [OLD_TAG, NEW_TAG, SHAPE_TAG, {**OLD_TAG, "role": "reference", "when": "between"},
                                 {**OLD_TAG, "evidence": {"decision": "loadgen", "reason": "limited"}}])
def test_a_search_tag_writes_back_the_keys_it_was_read_with(raw):
    assert SearchTag.from_dict(raw).to_dict() == raw


def test_a_first_try_writes_no_attempt():
    assert "attempt" not in SearchTag.from_dict({**NEW_TAG, "attempt": 0}).to_dict()


@pytest.mark.parametrize("part, raw", [
    (HostProbe, {"interval_ms": 1.0, "note": "off ([run] host_probe = false)"}),
    (HostProbe, {"interval_ms": 1.0, "server": {"note": "not on this host"},
                 "loadgen": {"cpus": "1", "note": "no sample inside the measured window"}}),
    (ProbeSide, {"cpus": "0", "samples": 2, "duration_s": 0.5, "p50_us": 0, "p99_us": 9, "p999_us": 9, "max_us": 9,
                 "histogram": "x"}),
    (ServerLatency, {"source": "s", "count": 2.0, "p50_us": 1000.0, "p90_us": None, "p99_us": None,
                     "p999_us": None, "buckets": [[1000.0, 2.0], [None, 0.0]]}),
    (ServerResources, {"cpus": None, "cpu_model": "m", "gpus": 0, "gpu_name": "", "source": "unknown"}),
    (TelemetryNote, {"gpu": "not sampled"}),
    (TelemetryNote, {}),
    (ServerPhases, {"source": "s", "request_latency": {"mean_us": 2.0, "p99_us": None, "count": 1.0},
                    "phases": {"queue": {"mean_us": None, "p99_us": None, "count": 0.0}}, "not_exported": ["decode"],
                    "note": "not exported by TF Serving: decode", "gc_pauses": None}),
    (ServerPhases, {"source": "s", "request_latency": None, "phases": {}, "not_exported": [], "note": "",
                    "gc_pauses": {"mean_us": 3.0, "p99_us": None, "count": 2.0, "max_us": None}}),
    (LocustTotals, {"requests": 900, "failures": 0, "p50_ms": 4.0, "p99_ms": None}),
    (ServerScrape, {"scraped": False}),
    (ServerScrape, {"scraped": True, "request_count": {"model_name=mnist,status=OK": 6.0},
                    "request_latency_mean_us": None, "server_info": {"device_name": "AMD EPYC"}}),
])
def test_a_part_writes_back_the_keys_it_was_read_with(part, raw):
    assert part.from_dict(raw).to_dict() == raw


def test_a_cell_without_the_parts_writes_them_empty():
    [old, *_] = read_results(ANALYSIS_FIXTURES / "cpu-run" / "results.jsonl")  # a sweep from before the parts
    assert old.search is None and old.host_probe is None and old.telemetry_note == TelemetryNote()
    written = json.loads(old.to_json())
    assert [written[name] for name in ("search", "host_probe", "server_latency", "server_resources",
                                       "telemetry_note", "server_phases", "device_floor")] == [{}] * 7


SERVER_FLOOR = {"source": "embedded server at start, after warm-up", "device": "gpu", "runtime": "jax",
                "batches": [{"batch_size": 1, "latency_us": 870.0, "latency_p99_us": 900.0, "images_per_s": 1149.7,
                             "runs": 40}],
                "round_trip_us": 678.9, "round_trip_note": "jax: device_put", "budget_s": 20.0,
                "device_round_trip_us": None, "device_round_trip_note": "", "callers": 1}


@pytest.mark.parametrize("raw", [
    SERVER_FLOOR,  # today's server: device_round_trip_us written as null
    {k: v for k, v in SERVER_FLOOR.items() if k not in ("callers", "device_round_trip_us", "device_round_trip_note")},
    {"source": "metrics page", "device": "gpu", "device_name": "Test GPU", "runtime": "jax", "round_trip_us": None,
     "batches": [{"batch_size": 8, "latency_us": None, "images_per_s": 12000.0}]},
    {"source": "unknown", "note": "not on this host"},
    {"source": "future server", "batches": [], "new_key": {"a": [1]}, "present": "kept", "extra": None},
])
def test_a_device_floor_writes_back_the_keys_it_was_read_with(raw):
    floor = DeviceFloorRecord.from_dict(raw)
    assert floor.to_dict() == raw and DeviceFloorRecord.from_dict(floor.to_dict()) == floor


def test_a_device_floors_typed_keys_read_as_attributes():
    floor = DeviceFloorRecord.from_dict(SERVER_FLOOR)
    assert (floor.runtime, floor.round_trip_us, floor.callers, floor.batches[0].runs) == ("jax", 678.9, 1, 40)
    assert floor.device_round_trip_us is None and "device_round_trip_us" in floor.present
    assert floor.extra == {"device": "gpu", "budget_s": 20.0, "device_round_trip_note": ""}


def test_a_device_floor_made_by_hand_writes_the_keys_it_was_given():
    made = DeviceFloorRecord(source="unknown", note="why")
    assert made.to_dict() == {"source": "unknown", "note": "why"}
    assert DeviceFloorRecord.from_dict(made.to_dict()) == made


def test_a_cell_without_locust_totals_or_a_scrape_writes_them_empty():
    [old, *_] = read_results(ANALYSIS_FIXTURES / "cpu-run" / "results.jsonl")
    made = dataclasses.replace(old, server_metrics=None, locust_stats=None)
    written = json.loads(made.to_json())
    assert (written["server_metrics"], written["locust_stats"]) == ({}, {})
    assert made.to_json() == type(made).from_dict(written).to_json()


NEWEST = {"git_commit": "66db09b", "git_dirty": False, "host": "bench", "cpu_model": "AMD EPYC", "cpu_count": 16,
          "cpu_physical_cores": 8, "cpu_virtualization": "kvm", "loadgen_cores": 2, "platform": "Linux",
          "python": "3.11.2", "versions": {"locust": "2.47.0"}, "utc_time": "2026-11-27T00:00:00Z",
          "plan_path": "p.toml", "plan": {"name": "demo", "launch": {"server_cpus": "0"}},
          "command": ["mnist-bench", "capacity"], "inputs": {"source": "samples", "path": "s.npz", "sha256": None}}


@pytest.mark.parametrize("raw", [
    NEWEST,
    {"cpu_model": "m", "git_commit": "abc", "host": "h", "plan": "loadtest/plans/quick.toml", "versions": {}},
    {"git_commit": "unknown", "git_dirty": None, "host": "h"},  # outside a checkout: null, and written so
    {},  # a hand-made record
    {"git_commit": "abc", "future_key": [1, {"a": None}], "present": "kept", "extra": None},
])
def test_a_provenance_writes_back_the_keys_it_was_read_with(raw):
    provenance = Provenance.from_dict(raw)
    assert provenance.to_dict() == raw and Provenance.from_dict(provenance.to_dict()) == provenance


def test_a_provenances_keys_read_as_attributes():
    provenance = Provenance.from_dict(NEWEST)
    assert (provenance.host, provenance.cpu_count, provenance.versions["locust"]) == ("bench", 16, "2.47.0")
    assert provenance.command == ("mnist-bench", "capacity") and provenance.plan["name"] == "demo"
    assert Provenance.from_dict({"host": "h"}).cpu_virtualization is None  # an older record lacks it
    assert Provenance(host="h", git_commit="abc").to_dict() == {"host": "h", "git_commit": "abc"}

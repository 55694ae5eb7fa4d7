"""The typed parts of a cell's record write exactly the keys they were read with (`loadtest.evidence.search_tag`,
`loadtest.evidence.cell_parts`, `loadtest.evidence.floor_record`): keys an older record lacks stay absent, and an
empty part stays `{}`."""

from __future__ import annotations

import json

import pytest

from loadtest.evidence.cell_parts import (
    HostProbe,
    ProbeSide,
    ServerLatency,
    ServerPhases,
    ServerResources,
    TelemetryNote,
)
from loadtest.evidence.floor_record import DeviceFloorRecord
from loadtest.evidence.records import read_results
from loadtest.evidence.search_tag import SearchTag
from tests.support.paths import ANALYSIS_FIXTURES

OLD_TAG = {"id": "run/1", "role": "start", "p99_objective_ms": 10.0, "offered_rps": None}
NEW_TAG = {**OLD_TAG, "role": "confirm", "offered_rps": 300, "confidence": 0.99, "confirming": True,
           "objectives": [5.0, 10.0], "attempt": 2,
           "comparison": {"id": "run/b1", "repeat": 1, "paired": True, "servers": ["cpu-off", "cpu-cpu"]},
           "evidence": {"decision": "pass", "reason": "ok", "requests": 900, "over": 1, "p99_estimate_ms": None,
                        "confidence": 0.99, "requests_to_pass": 459}}


@pytest.mark.parametrize("raw", [OLD_TAG, NEW_TAG, {**OLD_TAG, "role": "reference", "when": "between"},
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

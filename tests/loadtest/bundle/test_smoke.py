"""The device run's smoke test: its plan, its verdict on cells, and the split of the cores it measures."""

from __future__ import annotations

import json

from loadtest.bundle import smoke
from loadtest.measure import locust_run


def cell(batch: int, **changes) -> dict:
    """A smoke cell as results.jsonl holds it: every answer right, CPU and the floor measured."""
    base = {"status": "ok", "failure_reason": "", "requests": 4000, "ok_requests": 4000, "wrong_answers": 0,
            "errors_by_code": {}, "throughput_rps": 2000.0, "load": {"request_batch_size": batch},
            "loadgen_cpu_percent": 60.0, "server_cpu_percent": 25.0, "server_cpu_cores": 12.0,
            "server": {"versions": {"runtime": "keras-torch"}},
            "device_floor": {"callers": 1, "batches": [{"batch_size": batch, "images_per_s": 17130.0 * batch,
                                                        "latency_us": 58.0}]}}
    return {**base, **changes}


def test_the_smoke_plan_is_one_closed_loop_cell_at_batches_1_and_32_from_one_process():
    base = "[run]\nwarmup_s = 0.5\nmeasure_s = 1.5\nprocesses = 4\n[grid]\nbatch_sizes = [1]\nconcurrency = [4]\n" \
           'rates_rps = []\nloadgen_cpus = "12,13"\n'
    plan = smoke.smoke_plan(base)
    assert "batch_sizes = [1, 32]" in plan and f"concurrency = [{smoke.USERS}]" in plan
    assert "processes = 1" in plan and 'loadgen_cpus = "12,13"' in plan and "rates_rps = []" in plan


def test_every_answer_right_on_the_runtime_asked_for_passes_and_keeps_what_it_read():
    found = smoke.judge([cell(1), cell(32)], "gpu-gpu", "gpu", 0, [], start_s=14.2)
    assert found.ok and found.runtime == "keras-torch" and found.start_s == 14.2
    assert [(c.batch, c.device_alone_ips) for c in found.cells] == [(1, 17130.0), (32, 17130.0 * 32)]
    # 60% of one core at 2,000 req/s; 25% of 12 cores at 2,000 req/s
    assert found.costs() == (0.0003, 0.0015)
    assert "gpu-gpu on keras-torch, started in 14.2 s; batch 1: 2,000 req/s, the device alone 17,130" \
           in found.summary()
    assert json.loads(json.dumps(found.to_dict()))["cells"][0]["batch"] == 1


def test_a_wrong_answer_an_error_a_failed_cell_or_another_runtime_fails_it_saying_why():
    wrong = smoke.judge([cell(1), cell(32, wrong_answers=3)], "gpu-gpu", "gpu", 0, [])
    assert not wrong.ok and wrong.why == "request batch 32: 3 of 4000 answers were not the digits' classes"
    erring = smoke.judge([cell(1, errors_by_code={"UNAVAILABLE": 2}), cell(32)], "gpu-gpu", "gpu", 0, [])
    assert not erring.ok and "errors {'UNAVAILABLE': 2}" in erring.why
    failed = smoke.judge([cell(1, status="failed", failure_reason="server died")], "gpu-gpu", "gpu", 1, [])
    assert not failed.ok and failed.why == "request batch 1: the cell failed: server died"
    jax = smoke.judge([cell(1, server={"versions": {"runtime": "jax"}}), cell(32)], "gpu-gpu", "gpu", 0, [])
    assert not jax.ok and jax.why == "the gpu server ran jax, not keras-torch"
    short = smoke.judge([cell(1)], "gpu-gpu", "gpu", None, [])
    assert not short.ok and short.why == "1 of 2 cells measured (stopped at its time limit)"


def test_no_cell_fails_it_with_the_consoles_last_lines():
    found = smoke.judge([], "gpu-gpu", "gpu", 1, ["starting gpu-gpu ...", "server gpu-gpu did not start: CUDA error"])
    assert not found.ok and found.why.startswith("measured nothing (exit 1): ") and "CUDA error" in found.why


def test_the_start_is_read_from_when_the_console_said_starting_and_available():
    lines = ["run", "starting gpu-gpu (gpu, batching gpu) on 127.0.0.1:5 ...", "gpu-gpu: embedded ... AVAILABLE", "x"]
    assert smoke.start_seconds(lines, [0.0, 1.0, 13.5, 14.0]) == 12.5
    assert smoke.start_seconds(lines[:2], [0.0, 1.0]) is None


def test_locust_gets_the_cores_where_it_and_the_server_run_out_at_the_same_rate():
    assert smoke.BUSY_SHARE == locust_run.BUSY_SHARE
    # Locust 0.3 ms at half a core each (0.6 ms a core), the server 1.5 ms: 16 x 0.6 / 2.1 = 4.6 -> 5
    assert smoke.loadgen_share(16, 0.0003, 0.0015) == 5
    assert smoke.loadgen_share(16, 0.001, 0.00001) == 15 and smoke.loadgen_share(16, 1e-7, 0.01) == 1
    found = smoke.judge([cell(1), cell(32)], "gpu-gpu", "gpu", 0, [])
    assert smoke.loadgen_cores(found, 16, 0, 4)[0] == 5
    assert smoke.loadgen_cores(found, 16, 2, 2) == (2, "--loadgen-cores")
    unmeasured = smoke.judge([cell(1, loadgen_cpu_percent=None), cell(32, loadgen_cpu_percent=None)], "g", "gpu", 0, [])
    assert smoke.loadgen_cores(unmeasured, 16, 0, 4)[0] == 4

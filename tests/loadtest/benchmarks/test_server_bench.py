"""The benchmark's arithmetic: per-round ratios and their medians (hand-computed figures)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from loadtest.benchmarks.serving_path.bench_records import BenchOptions, LoadResult, RoundResult
from loadtest.benchmarks.serving_path.bench_summary import format_summary, summarize
from serving.deploy.process import _thread_kind, thread_cpu_s
from tests.support.waiting import wait_for

# What the servers' ready lines said (serving.deploy.process.parse_ready_line).
SERVER = {"kind": "embedded", "device": "cpu", "device_name": "cpu model"}


def load(requests: int, images: int, p99_ms: float = 10.0, cpu_s: float = 2.0,
         batch_mean: float | None = None, threads: dict[str, float] | None = None) -> LoadResult:
    return LoadResult(requests=requests, errors=0, images=images, elapsed_s=2.0, p50_latency_ms=1.0,
                      p99_latency_ms=p99_ms, server_cpu_s=cpu_s, server_batch_mean=batch_mean,
                      server_thread_cpu_s=threads or {})


def test_cpu_ratios_count_work_per_cpu_second():
    # served: 1000 img in 2 s wall but only 1 CPU-s (the core was shared) -> 1000 img/CPU-s;
    # in-process: 1000 img in 2 CPU-s -> 500 img/CPU-s; ratio 2.0 while the wall-clock ratio is 1.0
    rnd = RoundResult(load(10, 1000, cpu_s=2.0), load(10, 1000, cpu_s=1.0), load(100, 100), load(100, 100),
                      load(100, 100), load(10, 1000))
    assert rnd.ratios[0] == 1.0 and rnd.cpu_ratios[0] == 2.0


def test_ratios_are_medians_of_per_round_ratios():
    args = BenchOptions(server_cpu="0", client_cpu="1", duration_s=2.0)
    rounds = [
        # in-process 20k img/s, served 18k -> 0.9; batching 3000 rps / none 1000 -> 3.0; model 3000 / null 4000 -> 0.75
        RoundResult(load(625, 40_000), load(563, 36_000), load(2000, 2000, 40.0), load(6000, 6000, 20.0),
                    load(8000, 8000), NULL_B64),
        # 0.5, 1.0, 0.5
        RoundResult(load(625, 40_000), load(313, 20_000), load(4000, 4000, 40.0), load(4000, 4000, 20.0),
                    load(8000, 8000), NULL_B64),
        # 1.0, 2.0, 1.0
        RoundResult(load(625, 40_000), load(625, 40_000), load(2000, 2000, 40.0), load(4000, 4000, 20.0),
                    load(4000, 4000), NULL_B64),
    ]
    summary = summarize(rounds, wrong_answers=0, options=args, server=SERVER)
    assert round(summary.ratio_served_vs_in_process, 3) == 0.9
    assert summary.ratio_batching_vs_none == 2.0
    assert summary.ratio_model_vs_null == 0.75
    assert summary.p99_batching_not_worse is True
    # every phase used its whole core here, so work per CPU-second gives the same ratios
    assert (round(summary.cpu_ratio_served_vs_in_process, 3), summary.cpu_ratio_batching_vs_none,
            summary.cpu_ratio_model_vs_null) == (0.9, 2.0, 0.75)
    assert summary.b1_batching_rps == 2000.0 and summary.rounds == 3
    assert summary.ratio_ranges == ((0.5, 1.0), (1.0, 3.0), (0.5, 1.0))
    assert (summary.server_kind, summary.device, summary.device_name) == ("embedded", "cpu", "cpu model")
    text = format_summary(summary)
    assert "(embedded server, cpu: cpu model)" in text
    assert "ratio 0.90" in text and "ratio 2.00" in text and "ratio 0.75" in text


# Null backend at batch 64: 4000 requests in 2 CPU-s -> 500 us of harness per request.
NULL_B64 = load(4000, 256_000, cpu_s=2.0)


def test_harness_share_bounds_ratio_one():
    # in-process: 625 calls in 2 CPU-s -> 3200 us per call; served: 500 requests in 2 CPU-s -> 4000 us
    rnd = RoundResult(load(625, 40_000), load(500, 32_000), load(100, 100), load(100, 100), load(100, 100),
                      NULL_B64)
    assert rnd.harness_b64_cpu_us == 500.0
    assert round(rnd.ceiling_served_vs_in_process, 4) == round(3200 / 3700, 4)


def test_cpu_by_kind_of_thread_is_per_request_and_the_median_over_rounds():
    args = BenchOptions(server_cpu="0", client_cpu="1", duration_s=2.0)

    def round_with(tf_s: float, python_s: float):
        # 500 served requests: tf_s / 500 s of TensorFlow threads' CPU per request, likewise Python's
        served = load(500, 32_000, threads={"tensorflow": tf_s, "python": python_s, "native": 0.05})
        in_process = load(625, 40_000, threads={"tensorflow": 1.5, "python": 0.25})
        return RoundResult(in_process, served, load(100, 100), load(100, 100), load(100, 100), NULL_B64)

    summary = summarize([round_with(1.2, 0.5), round_with(1.3, 0.6), round_with(1.4, 0.4)], 0, args, SERVER)
    assert summary.served_b64_thread_cpu_us == {"native": 100.0, "python": 1000.0, "tensorflow": 2600.0}
    assert summary.in_process_b64_thread_cpu_us == {"python": 400.0, "tensorflow": 2400.0}
    assert summary.null_b64_thread_cpu_us == {}
    assert summary.served_b64_cpu_us == 4000.0
    assert "native 100 / 0 / 0, python 1,000 / 400 / 0, tensorflow 2,600 / 2,400 / 0" in format_summary(summary)


def _burn_s(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@pytest.mark.integration  # starts a child process
def test_thread_cpu_is_split_into_python_and_native_threads():
    # A child that burns CPU on a Python thread only: its Python threads account for it, no other kind.
    code = "import time\nend = time.thread_time() + 0.3\nwhile time.thread_time() < end: pass\ninput()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: thread_cpu_s(child.pid).get("python", 0.0) >= 0.3, 30, "the child to burn 0.3 s of CPU")
        used = thread_cpu_s(child.pid)
        assert used["python"] >= 0.3 and used["tensorflow"] == 0.0 and used["native"] < 0.1
    finally:
        child.communicate("\n", timeout=30)
    assert thread_cpu_s(child.pid) == {}  # the process is gone


def test_a_python_thread_of_this_process_counts_as_python():
    burned, release = threading.Event(), threading.Event()

    def work() -> None:
        _burn_s(0.3)
        burned.set()
        release.wait(30)  # stay alive: a thread's time leaves the live threads' total when it ends

    before = thread_cpu_s(os.getpid())
    worker = threading.Thread(target=work)
    worker.start()
    try:
        assert burned.wait(30)
        after = thread_cpu_s(os.getpid())
    finally:
        release.set()
        worker.join()
    assert after["python"] - before["python"] >= 0.25


def test_threads_are_classified_by_their_names():
    assert _thread_kind("tf_Compute", "python") == "tensorflow"
    assert _thread_kind("python", "python") == "python"
    assert _thread_kind("event_engine", "python") == "native"


def test_batch_size_is_the_median_of_the_rounds_that_report_one():
    args = BenchOptions(server_cpu="0", client_cpu="1", duration_s=2.0)

    def round_with(batch_mean):
        return RoundResult(load(625, 40_000), load(563, 36_000), load(2000, 2000),
                           load(4000, 4000, batch_mean=batch_mean), load(8000, 8000), NULL_B64)

    summary = summarize([round_with(20.0), round_with(None), round_with(30.0)], 0, args, SERVER)
    assert summary.b1_batching_batch_mean == 25.0
    assert "batch: 25.0 rows" in format_summary(summary)
    unknown = summarize([round_with(None)], 0, args, SERVER)
    assert unknown.b1_batching_batch_mean is None and "batch: not exposed" in format_summary(unknown)

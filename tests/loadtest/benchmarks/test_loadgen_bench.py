"""The load-generator benchmark's arithmetic: where a fixed delay's excess latency goes."""

from __future__ import annotations

from loadtest.benchmarks.loadgen import delay_breakdown


def run_summary(mean_ms: float, server_mean_us: float | None) -> dict:
    return {"latency": {"mean_ms": mean_ms}, "server_latency_mean_us": server_mean_us}


def test_excess_is_split_between_server_and_round_trip():
    idle = run_summary(0.700, 100.0)  # round trip 0.7 ms, of which the server measured 0.1 ms
    delayed = run_summary(6.000, 5300.0)  # 5 ms delay: server measured 5.3 ms, Locust 6.0 ms
    text = delay_breakdown(idle, delayed)
    assert "+0.300 ms inside the server" in text
    assert "+0.700 ms between Locust's clock and the server's" in text
    assert "against +0.600 ms" in text


def test_no_breakdown_without_a_server_latency_metric():
    assert "no breakdown" in delay_breakdown(run_summary(0.7, None), run_summary(6.0, 5300.0))

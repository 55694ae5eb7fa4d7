"""Sizing arithmetic and answers, against numbers computed by hand.

Fixture figures (tests/loadtest/analysis/fixtures/make_fixtures.py) and test prices
(fixtures/prices.toml: cpu 0.40, gpu 2.00, "NVIDIA H100 80GB HBM3" 4.00 USD/h), objective
p99 <= 50 ms, headroom 0.2, target 5000 requests/s (18e6 images/h at 1 image per request):

    cpu off/1        capacity 1300 + (50-30)/(70-30)*(1350-1300) = 1325 (interpolated)
                     5000 / (1325*0.8 = 1060) = 4.72 -> 5 replicas -> 2.00 USD/h -> 2/18 = 0.1111/M
    cpu latency/1    2650 (lower bound: met everywhere) -> 5000/2120 = 2.36 -> 3 -> 1.20 USD/h
                     -> 1.2/18 = 0.0667/M   <- cheapest
    gpu off/1        4600 (c=32 invalid) -> 5000/3680 = 1.36 -> 2 -> 2 * 4.00 (by name) = 8.00
    cpu latency/32   never meets: lowest p99 58 ms
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest.analysis import prices, size
from loadtest.analysis.series import AnalysisError
from loadtest.analysis.size import Capacity, MeasuredPoint
from tests.support.cli import invoke
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

CPU = str(FIXTURES / "cpu-run" / "results.jsonl")
GPU = str(FIXTURES / "gpu-run" / "results.jsonl")
PRICES = str(FIXTURES / "prices.toml")
CPU_OFF_1 = [MeasuredPoint(1, 400, 4.0), MeasuredPoint(2, 720, 6.0), MeasuredPoint(4, 1100, 10.0),
             MeasuredPoint(8, 1300, 30.0), MeasuredPoint(16, 1350, 70.0)]


# ----------------------------------------------------------------------------- pure arithmetic


@pytest.mark.parametrize("target, capacity, headroom, expected", [
    (5000, 1325, 0.2, 5),  # 5000 / 1060 = 4.72
    (5000, 1250, 0.2, 5),  # exactly 5.0: no spurious sixth replica from 0.8 in binary
    (1000, 1000, 0.0, 1),
    (1000.5, 1000, 0.0, 2),
    (0.9, 0.3, 0.0, 3),  # 0.9 / 0.3 = 3.0000000000000004 in floating point
    (5000, 2650, 0.2, 3),  # 2.36
])
def test_replicas_needed(target, capacity, headroom, expected):
    assert size.replicas_needed(target, capacity, headroom) == expected


def test_costs():
    assert size.cost_per_hour(0.40, 5) == pytest.approx(2.00)
    assert size.cost_per_million(2.00, 5000) == pytest.approx(2.00 / 18.0)  # 18e6 images/h
    assert size.cost_per_million(12.00, 5000 * 32) == pytest.approx(12.00 / 576.0)


def test_capacity_interpolates_between_last_meeting_and_first_failing_point():
    cap = size.capacity_at_objective(CPU_OFF_1, 50.0, "concurrency")
    assert cap.method == "interpolated" and cap.throughput == pytest.approx(1325.0)
    assert "concurrency 8 (p99 30 ms) and 16 (p99 70 ms)" in cap.note
    # An objective equal to a measured p99 gives that point exactly.
    assert size.capacity_at_objective(CPU_OFF_1, 30.0).throughput == pytest.approx(1300.0)


def test_capacity_never_extrapolates_past_the_highest_measured_point():
    cap = size.capacity_at_objective(CPU_OFF_1, 200.0, "concurrency")
    assert cap == Capacity(1350, "lower-bound", cap.note) and "may be higher" in cap.note


def test_capacity_cannot_answer():
    never = size.capacity_at_objective(CPU_OFF_1, 3.0, "concurrency")
    assert never.throughput is None and never.method == "never-met"
    assert "lowest measured p99 is 4 ms (at concurrency 1)" in never.note
    assert size.capacity_at_objective([], 50.0).method == "no-valid-cells"


def test_capacity_not_interpolated_when_series_not_monotone():
    dip = [MeasuredPoint(1, 100, 10), MeasuredPoint(2, 90, 20), MeasuredPoint(4, 150, 40),
           MeasuredPoint(8, 160, 80)]
    cap = size.capacity_at_objective(dip, 50.0)
    assert (cap.throughput, cap.method) == (150, "measured")  # not interpolated towards 160
    meets_again = [MeasuredPoint(1, 100, 10), MeasuredPoint(2, 150, 60), MeasuredPoint(4, 200, 40),
                   MeasuredPoint(8, 210, 90)]
    cap = size.capacity_at_objective(meets_again, 50.0)
    assert (cap.throughput, cap.method) == (200, "measured")


# ----------------------------------------------------------------------------- prices


def test_prices_by_device_name_then_kind():
    book = prices.load_prices(Path(PRICES))
    assert book.lookup("gpu", "NVIDIA H100 80GB HBM3") == 4.00
    assert book.lookup("gpu", "NVIDIA A10G") == 2.00
    assert book.lookup("cpu", "any CPU") == 0.40
    assert book.lookup("tpu", "x") is None


def test_example_price_file_loads_and_is_labelled_example():
    book = prices.load_prices(prices.DEFAULT_PRICES)
    assert book.example and book.lookup("cpu", "?") is not None and book.lookup("gpu", "?") is not None


@pytest.mark.parametrize("text, message", [
    ('currency = "USD"\n[devices]\ncpu = 1.0\n', "unknown field(s) devices"),
    ('[device]\ncpu = -1.0\n', "'cpu' must be a non-negative number"),
    ('[device]\ncpu = "cheap"\n', "'cpu' must be a non-negative number"),
    ('[device]\ncpu = true\n', "'cpu' must be a non-negative number"),
    ('device = 3\n', "[device] must be a table"),
    ('[device\n', "not valid TOML"),
])
def test_bad_price_files(tmp_path, text, message):
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(AnalysisError) as err:
        prices.load_prices(path)
    assert message in str(err.value)


# ----------------------------------------------------------------------------- answers


def answers_by_label(p99_ms, *, target_rps=None, target_ips=None):
    answers, _ = size.run([CPU, GPU], size.objective_from(p99_ms, target_rps, target_ips, 0.2), PRICES)
    return {(a.series.device, a.series.batching_profile, a.series.request_batch_size, a.series.mode): a
            for a in answers}, answers


def test_sizing_answers_from_fixtures_by_requests():
    by, answers = answers_by_label(50, target_rps=5000)
    off = by[("cpu", "off", 1, "closed")]
    assert (off.capacity, off.capacity_method, off.replicas) == (pytest.approx(1325), "interpolated", 5)
    assert off.cost_per_hour == pytest.approx(2.00) and off.cost_per_million == pytest.approx(2 / 18)
    assert off.cells_used == 5 and len(off.cells_not_used) == 1 and "saturated" in off.cells_not_used[0]
    lat = by[("cpu", "latency", 1, "closed")]
    assert (lat.capacity, lat.capacity_method, lat.replicas, lat.rank) == (2650, "lower-bound", 3, 1)
    assert lat.cost_per_hour == pytest.approx(1.20) and lat.cost_per_million == pytest.approx(1.2 / 18)
    gpu = by[("gpu", "off", 1, "closed")]
    assert (gpu.capacity, gpu.replicas, gpu.price_per_hour, gpu.cost_per_hour) == (4600, 2, 4.00, 8.00)
    batch32 = by[("cpu", "off", 32, "closed")]  # 176.32 req/s -> 36 replicas; 576e6 images/h
    assert batch32.capacity == pytest.approx(175 + 9 / 34 * 5) and batch32.replicas == 36
    assert batch32.cost_per_million == pytest.approx(14.40 / 576)
    never = by[("cpu", "latency", 32, "closed")]
    assert not never.meets and never.replicas is None and never.rank is None
    assert "objective never met: lowest measured p99 is 58 ms (at concurrency 1)" in never.note
    assert [a.rank for a in answers] == [1, 2, 3, 4, 5, 6, 7, 8, None]
    assert size.cheapest(answers) is lat


def test_sizing_by_images_prefers_large_request_batches():
    by, answers = answers_by_label(50, target_ips=20000)
    best = size.cheapest(answers)
    # 5642.35 images/s -> 20000 / 4513.88 = 4.43 -> 5 replicas x 0.40 = 2.00; 2 / 72 per million.
    assert best is by[("cpu", "off", 32, "closed")]
    assert (best.replicas, best.cost_per_hour) == (5, pytest.approx(2.00))
    assert best.cost_per_million == pytest.approx(2.00 / 72)
    assert by[("gpu", "off", 32, "closed")].replicas == 1  # 89600 images/s measured per replica


def test_text_answer_names_cheapest_and_what_cannot_be_answered():
    done = invoke("size", "--p99-ms", "50", "--target-rps", "5000", "--prices", PRICES, CPU, GPU)
    assert done.exit_code == 0
    out = done.stdout
    assert ("Cheapest meeting the objective: cpu embedded, batching latency, req batch 1, "
            "run 2026-11-22T05-10-00Z on Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz: 3 replica(s), "
            "1.20 USD/h, 0.0667 USD per million inferences.") in out
    assert "Cannot answer from these measurements:" in out and "never met" in out
    assert "Not used (6 invalid or failed cells):" in out
    assert "failed: server stopped answering: UNAVAILABLE for 12.0 s" in out


def test_objective_met_nowhere_says_so():
    done = invoke("size", "--p99-ms", "1.5", "--target-rps", "100", "--prices", PRICES, CPU, GPU)
    assert done.exit_code == 0
    out = done.stdout
    assert "No measured option meets the objective: the measurements cannot answer." in out


def test_example_prices_are_labelled_in_the_answer():
    done = invoke("size", "--p99-ms", "50", "--target-rps", "5000", CPU)
    assert done.exit_code == 0
    assert "EXAMPLE prices, not quotes" in done.stdout


def test_json_output():
    _, text = size.run([CPU], size.objective_from(50, 5000, None, 0.2), PRICES, as_json=True)
    first = json.loads(text)[0]
    assert first["rank"] == 1 and first["replicas"] == 3 and first["series"]["batching_profile"] == "latency"


@pytest.mark.parametrize("argv, exit_code, message", [
    (["--p99-ms", "50", "--target-rps", "10", "missing.jsonl"], 1, "results file not found: missing.jsonl"),
    (["--p99-ms", "0", "--target-rps", "10", CPU], 2, "--p99-ms must be a positive number"),
    (["--p99-ms", "50", "--target-ips", "-5", CPU], 2, "--target-ips must be positive"),
    (["--p99-ms", "50", "--target-rps", "10", "--headroom", "1", CPU], 2, "--headroom must be in [0, 1)"),
    (["--p99-ms", "50", CPU], 2, "one of the arguments --target-rps --target-ips is required"),
    (["--p99-ms", "fast", "--target-rps", "10", CPU], 2, "'fast' is not a valid float"),
    (["--p99-ms", "50", "--target-rps", "10", "--prices", "nope.toml", CPU], 1, "price file not found"),
])
def test_cli_errors_are_one_line_and_non_zero(argv, exit_code, message):
    done = invoke("size", *argv)
    assert done.exit_code == exit_code  # 1: a file to fix; 2: a flag to fix
    err = done.stderr
    assert err.count("\n") == 1 and err.startswith("mnist-bench size: error: ") and message in err


def test_unknown_price_field_is_a_cli_error(tmp_path):
    price_file = tmp_path / "prices.toml"
    price_file.write_text('currency = "EUR"\nper_hour = 3\n')
    done = invoke("size", "--p99-ms", "50", "--target-rps", "10", "--prices", price_file, CPU)
    assert done.exit_code == 1
    assert "unknown field(s) per_hour" in done.stderr


def test_corrupt_results_file_is_a_cli_error(tmp_path):
    bad = tmp_path / "results.jsonl"
    bad.write_text("{not json\n{}\n")
    done = invoke("size", "--p99-ms", "50", "--target-rps", "10", bad)
    assert done.exit_code == 1
    assert "not a results file" in done.stderr

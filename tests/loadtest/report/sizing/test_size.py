"""Sizing arithmetic, capacity sources and answers, against numbers computed by hand.

Fixture figures (tests/loadtest/report/fixtures/make_fixtures.py) and test prices
(fixtures/prices.toml: cpu 0.40, gpu 2.00, "NVIDIA H100 80GB HBM3" 4.00 USD/h), objective
p99 <= 50 ms, headroom 0.2, target 5000 requests/s (18e6 images/h at 1 image per request), at
request batch 1 (the smallest measured), N + 1 (this price file prices replicas: one spare replica):

    cpu off        open-loop grid: 800 req/s passes (p99 21 ms), 1600 failed (saturated): 800, a real
                   capacity -> 5000 / 640 = 7.8 -> 8 replicas + 1 -> 3.60 USD/h -> 3.6/18 = 0.2/M  <- cheapest
                   (its closed-loop cells are not mixed in)
    cpu latency    closed loop only: lower bound 2650 -> 5000/2120 = 2.36 -> 3 + 1 -> 1.60 USD/h: cheaper,
                   but only a lower bound, so ranked after cpu off
    gpu off        closed loop only: lower bound 4600 (c=32 invalid) -> 2 + 1 -> 3 * 4.00 (by name) = 12.00
    gpu latency    closed loop only: lower bound 5200 -> 2 + 1 -> 12.00
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest.evidence.vocab import LoadMode
from loadtest.report.answers.sources import highest_passing
from loadtest.report.series import AnalysisError
from loadtest.report.sizing import fleet, prices, size
from tests.loadtest.report.handmade import cell, search, server
from tests.support.cli import invoke
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

CPU = str(FIXTURES / "cpu-run" / "results.jsonl")
GPU = str(FIXTURES / "gpu-run" / "results.jsonl")
PRICES = str(FIXTURES / "prices.toml")
CAPACITY = str(FIXTURES / "capacity-run" / "results.jsonl")


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
    assert fleet.replicas_needed(target, capacity, headroom) == expected


def test_costs():
    assert fleet.cost_per_hour(0.40, 5) == pytest.approx(2.00)
    assert fleet.cost_per_million(2.00, 5000) == pytest.approx(2.00 / 18.0)  # 18e6 images/h
    assert fleet.cost_per_million(12.00, 5000 * 32) == pytest.approx(12.00 / 576.0)


# ----------------------------------------------------------------------------- prices


def test_prices_by_device_name_then_kind():
    book = prices.load_prices(Path(PRICES))
    assert book.lookup("gpu", "NVIDIA H100 80GB HBM3") == 4.00
    assert book.lookup("gpu", "NVIDIA A10G") == 2.00
    assert book.lookup("cpu", "any CPU") == 0.40
    assert book.lookup("tpu", "x") is None


def test_example_price_file_loads_and_is_labelled_example():
    book = prices.load_prices(prices.DEFAULT_PRICES)
    assert book.example and not book.per_replica  # it prices instances
    assert {i.name for i in book.instances} >= {"general-16", "h100-1"}
    assert any(i.gpus == 0 for i in book.instances) and any(i.gpus for i in book.instances)


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


def answers_by_label(p99_ms, *, target_rps=None, target_ips=None, batch_size=None, results=(CPU, GPU)):
    answers, _ = size.run(list(results), size.objective_from(p99_ms, target_rps, target_ips, 0.2), PRICES,
                          batch_size=batch_size)
    return {a.label: a for a in answers}, answers


def test_sizing_compares_at_the_smallest_request_batch_by_default():
    by, answers = answers_by_label(50, target_rps=5000)
    assert {a.request_batch_size for a in answers} == {1}
    assert set(by) == {"cpu-off", "cpu-latency", "gpu-off", "gpu-latency"}
    off = by["cpu-off"]
    assert (off.capacity, off.source, off.lower_bound, off.replicas) == (800, "open-loop, measured grid", False, 8)
    assert off.cost_per_hour == pytest.approx(3.60) and off.cost_per_million == pytest.approx(3.6 / 18)
    assert "5 closed-loop cell(s) not used" in off.note  # 1325 req/s interpolated in closed loop is not mixed in
    assert off.cells_not_used == ("offered rate (req/s) 1600: saturated: achieved 1290 of 1600 req/s offered; "
                                  "34% of sends late",)
    lat = by["cpu-latency"]
    assert (lat.capacity, lat.source, lat.lower_bound, lat.replicas) == (2650, "closed-loop: lower bound", True, 3)
    gpu = by["gpu-off"]
    assert (gpu.capacity, gpu.replicas, gpu.price_per_hour, gpu.cost_per_hour) == (4600, 2, 4.00, 12.00)
    assert [a.label for a in answers] == ["cpu-off", "cpu-latency", "gpu-latency", "gpu-off"]
    assert [a.rank for a in answers] == [1, 2, 3, 4]


def test_cheapest_prefers_a_real_capacity_over_a_cheaper_lower_bound():
    by, answers = answers_by_label(50, target_rps=5000)
    assert by["cpu-latency"].cost_per_hour < by["cpu-off"].cost_per_hour
    assert size.cheapest(answers) is by["cpu-off"]


def test_sizing_at_another_request_batch_with_only_lower_bounds_says_so():
    by, answers = answers_by_label(50, target_ips=20000, batch_size=32)
    assert {a.request_batch_size for a in answers} == {32}
    off = by["cpu-off"]  # closed loop: c=4 175 req/s (p99 41 ms) passes; c=8 misses; not interpolated
    assert (off.capacity, off.source, off.lower_bound) == (175 * 32, "closed-loop: lower bound", True)
    # 20000 / 4480 = 4.46 -> 5 replicas, + 1 spare: 6 x 0.40 = 2.40 USD/h for 72e6 images/h
    assert off.replicas == 5 and off.cost_per_million == pytest.approx(2.40 / 72)
    never = by["cpu-latency"]
    assert not never.meets and never.rank is None and "lowest measured p99 is 58 ms (at concurrency 1)" in never.note
    assert by["gpu-off"].replicas == 1  # 89600 images/s per replica
    assert size.cheapest(answers) is off
    text = size.format_answers(answers, size.objective_from(50, None, 20000, 0.2), prices.load_prices(Path(PRICES)))
    assert "Cheapest meeting the objective (only lower bounds measured: a capacity search would say more)" in text


def test_a_request_batch_not_measured_is_an_error():
    with pytest.raises(AnalysisError, match="no cells at request batch 8; measured: 1, 32"):
        answers_by_label(50, target_rps=100, batch_size=8)


def test_capacity_search_answers_come_first():
    by, answers = answers_by_label(10, target_rps=5000, results=[CAPACITY])
    off = by["cpu-off"]  # its plain open-loop sweep (100-400 req/s) is not used
    assert (off.capacity, off.source, off.lower_bound) == (453.1, "capacity search", False)
    assert off.note == ("search 2026-11-23T09-00-00Z/cpu-off/batch-1: 453.1 confirmed at p99 <= 10 ms, est. p99 "
                        "9.223 ms; upper end 489.4 req/s")  # the figure as the report's tables print it
    assert by["cpu-cpu"].capacity == 675 and by["gpu-gpu"].capacity == 6250  # not cpu-cpu's closed loop
    assert by["gpu-gpu"].replicas == 1  # 5000 / (6250 x 0.8) = 1 exactly
    by_ips, _ = answers_by_label(10, target_ips=1000, results=[CAPACITY], batch_size=8)
    assert by_ips["cpu-cpu"].capacity == pytest.approx(168.8 * 0.99 * 8)  # images/s of the answering cell
    assert not by_ips["cpu-off"].meets and "no rate confirmed at p99 <= 10 ms" in by_ips["cpu-off"].note


def test_a_search_is_answered_at_the_objective_asked_by_the_reports_rule():
    """`size` reads a search at any objective as the report's objective table does (`objective_answers`)."""
    looser, _ = answers_by_label(20, target_rps=5000, results=[CAPACITY])
    cpu = looser["cpu-cpu"]  # searched at 10 ms; at 20 ms 800 passed too, and nothing above it failed
    assert (cpu.capacity, cpu.source, cpu.lower_bound, cpu.how) == (675, "capacity search", True,
                                                                    "capacity search (lower bound)")
    assert "675.0 confirmed (≥ 800.0 passed: the search stopped) at p99 <= 20 ms" in cpu.note
    assert looser["cpu-off"].capacity == 471.2  # its upper end at 10 ms, confirmed at 20 ms
    stricter, _ = answers_by_label(5, target_rps=5000, results=[CAPACITY])
    off = stricter["cpu-off"]  # the search confirmed nothing at 5 ms: the sweep (200 req/s, 5.0 ms) answers
    assert (off.capacity, off.source, off.how) == (200, "open-loop, measured grid",
                                                   "open-loop, measured grid, not confirmed")
    assert "search 2026-11-23T09-00-00Z/cpu-off/batch-1: no rate confirmed at p99 <= 5 ms" in off.note
    assert not stricter["gpu-off"].meets and "2,000.0 req/s passed, not confirmed" in stricter["gpu-off"].note


def test_text_answer_names_batch_sources_cheapest_and_what_cannot_be_answered():
    done = invoke("size", "--p99-ms", "50", "--target-rps", "5000", "--prices", PRICES, CPU, GPU)
    assert done.exit_code == 0
    out = done.stdout
    assert "at request batch 1 (also measured: 32; pick one with --batch)" in out
    assert ("Cheapest meeting the objective: cpu-off (cpu embedded server (runtime not recorded), batching off) on "
            "Intel(R) Xeon(R) Platinum "
            "8375C CPU @ 2.90GHz, request batch 1: 8 replica(s), 3.60 USD/h, 0.200 USD per million images; "
            "capacity 800.0 requests/s from open-loop, measured grid, not confirmed. Cheaper with only a lower bound, "
            "so ranked after it: cpu-latency.") in out
    row = next(line for line in out.splitlines() if line.startswith("2 "))
    assert "cpu-latency" in row and "closed-loop: lower bound" in row
    assert "Not used (2 invalid or failed cells):" in out


def test_objective_met_nowhere_says_so():
    done = invoke("size", "--p99-ms", "1.5", "--target-rps", "100", "--prices", PRICES, CPU, GPU)
    assert done.exit_code == 0
    out = done.stdout
    assert "No measured option meets the objective: the measurements cannot answer." in out
    assert "cpu-off (Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz): open-loop, measured grid: objective never " \
           "met: lowest measured p99 is 4.4 ms (at offered rate (req/s) 200)" in out


def test_example_prices_are_labelled_in_the_answer():
    done = invoke("size", "--p99-ms", "50", "--target-rps", "5000", CPU)
    assert done.exit_code == 0
    assert "EXAMPLE prices, not quotes" in done.stdout


def test_json_output():
    _, text = size.run([CPU], size.objective_from(50, 5000, None, 0.2), PRICES, as_json=True, batch_size=1)
    first = json.loads(text)[0]
    assert first["rank"] == 1 and first["replicas"] == 8 and first["config"]["batching_profile"] == "off"
    assert (first["request_batch_size"], first["source"], first["how"]) == (1, "open-loop, measured grid",
                                                                             "open-loop, measured grid, not confirmed")


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


# ----------------------------------------------------------------------------- sources, hand-made


def test_open_loop_grid_is_a_lower_bound_when_every_measured_rate_passed():
    label = server("cpu-off", "off")
    grid = [cell(label, rate=100, p99=4.0), cell(label, rate=200, p99=6.0)]
    searched = search(label, "s", [("bracket", 400, 7.0), ("confirm", 400, 8.0)])
    high = highest_passing(grid + searched, 10.0, LoadMode.OPEN)
    assert (high.rate_rps, high.lower_bound, high.valid_cells) == (200, True, 2)  # a search's cells are no grid
    assert "passed at every measured rate, up to 200 req/s: capacity may be higher" == high.note
    bounded = highest_passing([*grid, cell(label, rate=300, p99=12.0)], 10.0, LoadMode.OPEN)
    assert (bounded.rate_rps, bounded.lower_bound) == (200, False)
    closed = highest_passing([cell(label, mode="closed", concurrency=4, rps=900, p99=3.0)], 10.0, LoadMode.CLOSED)
    assert (closed.rate_rps, closed.lower_bound) == (900, True)


def test_size_judges_each_answer_with_its_runs_drift_as_the_card_does(monkeypatch):
    """`size`'s verdict on a paired run's answer reads the machine's movement over its search, the one the card reads
    (`Answers.movements`): judged without it, a served share within the drift of 50% read as the device's."""
    from loadtest.evidence.records import read_results
    from loadtest.report.answers import sources
    from loadtest.report.answers.answers import answer

    results = read_results(FIXTURES / "h200-paired" / "results.jsonl")
    movements = answer(results).movements
    assert movements  # a paired run: its reference cells measured the drift
    seen: dict[str, float | None] = {}
    judge = sources.what_bounded

    def recording(search, ceiling, moved=None):
        seen[search.search_id] = moved
        return judge(search, ceiling, moved)

    monkeypatch.setattr(sources, "what_bounded", recording)
    for batch in sources.request_batches(results):
        sources.capacities(results, batch, 10.0)
    assert seen and seen == {search_id: movements[search_id] for search_id in seen}

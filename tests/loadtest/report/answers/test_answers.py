"""What capacity searches answer, from hand-made records, against numbers computed by hand; and the
same derivations on the committed capacity-run fixture (see fixtures/make_fixtures.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from loadtest.evidence.provenance_record import Provenance
from loadtest.evidence.records import read_results
from loadtest.judge.objectives import Bound
from loadtest.report.answers import answers
from loadtest.report.configs import config_labels, config_of
from tests.loadtest.report.handmade import cell, rates, search, server
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

OFF = server("cpu-off", "off")
ON = server("cpu-cpu", "cpu")
GPU_OFF = server("gpu-off", "off", device="gpu")
GPU_ON = server("gpu-gpu", "gpu", device="gpu")

# Confirmation passes: 162.5 req/s, lowest failing 175 (200 also failed, higher).
CONFIRMED = [("probe", 400, 12.0), ("bracket", 100, 5.0), ("bracket", 200, 15.0), ("bisect", 150, 8.0),
             ("bisect", 175, 12.0), ("bisect", 162.5, 9.0), ("confirm", 162.5, 9.5)]
# The first confirmation (162.5) fails; the search goes on below it and confirms 156.2.
RECONFIRMED = [("bracket", 100, 5.0), ("bracket", 200, 15.0), ("bisect", 150, 8.0), ("bisect", 175, 12.0),
               ("bisect", 162.5, 9.0), ("confirm", 162.5, 10.5), ("bisect", 156.2, 9.2), ("confirm", 156.2, 9.8)]
UNMET = [("bracket", 40, 22.0), ("bracket", 20, 15.0), ("bracket", 10, 12.0)]


def only(cells):
    [result] = answers.search_answers(cells)
    return result


def test_a_passing_confirmation_is_the_answer():
    a = only(search(ON, "s1", CONFIRMED))
    assert a.met and a.capacity_rps == 162.5
    assert a.capacity_ips == pytest.approx(162.5 * 0.99)  # what the answering cell achieved
    assert (a.p50_ms, a.p99_ms) == (pytest.approx(9.5 / 3, abs=1e-3), 9.5)
    assert a.lowest_failing_rps == 175  # not the probe, whose p99 (12 ms) also misses
    assert (a.cells, a.request_batch_size, a.p99_objective_ms) == (7, 1, 10.0)


def test_a_failed_confirmation_is_not_the_answer_the_lower_confirmed_rate_is():
    a = only(search(ON, "s1", RECONFIRMED))
    assert a.capacity_rps == 156.2  # the bisect at 162.5 passed, but its confirmation did not
    assert a.lowest_failing_rps == 162.5  # the failed confirmation is the bracket's upper end
    assert a.p99_ms == 9.8


def test_a_busy_load_generators_confirmation_does_not_pass_even_within_the_objective():
    steps = [*CONFIRMED[:-1], ("confirm", 162.5, 9.5, "saturated", "a load generator process used 97% of a core")]
    a = only(search(ON, "s1", steps))
    assert not a.met and a.capacity_rps is None and a.lowest_failing_rps == 175  # a busy client is no fail
    assert a.conclusion.loadgen_limited_rps == 162.5 and "load generator was the limit at 162.5" in a.reason


def test_a_late_load_generators_confirmation_passes_where_it_sent_the_rate_and_its_latencies_pass():
    """Each late send is timed from its intended send, and they reach the server in bursts: its pass is the harder."""
    steps = [*CONFIRMED[:-1], ("confirm", 162.5, 9.5, "saturated", "1.6% of sends left late")]
    a = only(search(ON, "s1", steps))
    assert a.met and a.capacity_rps == 162.5
    short = search(ON, "s1", steps)
    short[-1] = replace(short[-1], throughput_rps=162.5 * 0.8)  # 20% short: past counting noise in 5 s at this rate
    b = only(short)
    assert not b.met and b.lowest_failing_rps == 162.5  # completions short of the sends: the server fell behind


def test_a_search_with_no_passing_confirmation_did_not_meet_the_objective():
    a = only(search(OFF, "s1", UNMET))
    assert not a.met and (a.capacity_rps, a.capacity_ips, a.p99_ms) == (None, None, None)
    assert a.lowest_failing_rps == 10


def test_searches_sharing_a_results_file_are_told_apart_by_id():
    cells = search(ON, "a", CONFIRMED) + search(ON, "b", RECONFIRMED, objective=12.0) + [cell(ON, rate=50)]
    found = {s.search_id: s for s in answers.search_answers(cells)}
    assert set(found) == {"a", "b"}  # the plain sweep cell belongs to no search
    assert found["a"].capacity_rps == 162.5
    assert found["b"].capacity_rps == 162.5 and found["b"].p99_objective_ms == 12.0  # 10.5 ms <= 12 ms


# ----------------------------------------------------------------------------- gain and ratio


def device(result, device_kind, batch=1, objective=10.0):
    [d] = [d for d in result.devices if (d.device, d.request_batch_size, d.p99_objective_ms)
           == (device_kind, batch, objective)]
    return d


def test_batching_gain_is_best_batching_enabled_over_off_at_the_same_device_batch_and_objective():
    other_on = server("cpu-tuned", "cpu+max_batch_size=32", batching={"max_batch_size": 32})
    cells = (rates(OFF, 290.1, "off") + rates(ON, 669.3, "on") + rates(other_on, 500, "tuned")
             + rates(ON, 2000, "on-8", batch=8) + rates(ON, 900, "on-20ms", objective=20.0)
             + rates(GPU_OFF, 4000, "gpu-off"))
    d = device(answers.answer(cells), "cpu")
    assert d.gain.ratio == pytest.approx(669.3 / 290.1)  # 2.307: not the batch 8, 20 ms or GPU searches
    assert d.gain.batching.capacity_rps == 669.3 and d.gain.off.capacity_rps == 290.1
    assert d.best.config.name == "cpu-cpu" and len(d.searches) == 3


def test_a_configuration_searched_again_answers_with_its_repeats_lower_median_not_its_luckiest():
    two = rates(ON, 539.4, "on-1") + rates(ON, 464.1, "on-2") + rates(OFF, 391.8, "off-1") + rates(OFF, 392.1, "off-2")
    d = device(answers.answer(two), "cpu")
    assert d.best.capacity_rps == 464.1  # the lower of two, not 539.4
    assert d.gain.ratio == pytest.approx(464.1 / 391.8)
    three = rates(ON, 539.4, "a") + rates(ON, 464.1, "b") + search(ON, "c", UNMET) + rates(OFF, 300, "off")
    assert device(answers.answer(three), "cpu").best.capacity_rps == 464.1  # the middle: "not met" counts as 0
    one_unmet = rates(ON, 539.4, "a") + search(ON, "b", UNMET) + rates(OFF, 300, "off")
    assert device(answers.answer(one_unmet), "cpu").best.config.name == "cpu-off"  # one of two did not meet


def test_no_gain_without_an_off_baseline_says_why():
    result = answers.answer(rates(ON, 669.3, "on") + rates(GPU_ON, 3000, "g") + search(GPU_OFF, "go", UNMET)
                            + rates(OFF, 300, "off-8", batch=8))
    cpu = device(result, "cpu")
    assert cpu.gain.ratio is None and cpu.gain.reason == "no batching-off search to compare with"
    gpu = device(result, "gpu")
    assert gpu.gain.ratio is None and "batching off did not meet the objective" in gpu.gain.reason
    assert gpu.best.capacity_rps == 3000  # the best configuration is still known
    only_off = device(result, "cpu", batch=8)
    assert only_off.gain.ratio is None and only_off.gain.reason == "no batching-enabled search"


def test_no_gain_when_no_batching_enabled_configuration_met_the_objective():
    d = device(answers.answer(rates(OFF, 290.1, "off") + search(ON, "on", UNMET)), "cpu")
    assert d.gain.ratio is None and d.gain.reason == "no batching-enabled configuration met the objective"
    assert d.best.config.name == "cpu-off"


def test_batching_is_off_for_the_off_profile_or_without_parameters():
    assert not config_of(cell(server("a", "off"), rate=1)).batching_on
    assert not config_of(cell(server("b", "cpu", batching={}), rate=1)).batching_on
    assert config_of(cell(server("c", "cpu"), rate=1)).batching_on


def test_gpu_cpu_ratio_of_best_capacities_where_both_were_searched():
    cells = (rates(OFF, 290.1, "off") + rates(ON, 669.3, "on") + rates(GPU_OFF, 4000, "gpu-off")
             + rates(GPU_ON, 6250, "gpu-on") + rates(ON, 150, "on-8", batch=8))
    result = answers.answer(cells)
    [ratio] = result.ratios  # none at batch 8: no GPU there
    assert (ratio.request_batch_size, ratio.p99_objective_ms) == (1, 10.0)
    assert ratio.ratio == pytest.approx(6250 / 669.3)
    assert ratio.gpu.config.name == "gpu-gpu" and ratio.cpu.config.name == "cpu-cpu"


def test_gpu_cpu_ratio_missing_when_one_side_did_not_meet_the_objective():
    [ratio] = answers.answer(rates(ON, 669.3, "on") + search(GPU_ON, "g", UNMET)).ratios
    assert ratio.ratio is None and ratio.reason == "GPU did not meet the objective"


def test_configuration_labels_are_the_server_names_made_unique():
    def config(label, **kw):
        return config_of(cell(label, rate=1, **kw))

    unique = [config(OFF), config(ON)]
    assert sorted(config_labels(unique).values()) == ["cpu-cpu", "cpu-off"]
    one_name = [config(server("cpu", "off")), config(server("cpu", "cpu"))]  # the profile tells them apart
    assert sorted(config_labels(one_name).values()) == ["cpu-cpu", "cpu-off"]
    other_versions = replace(server("x", "off"), versions={"tensorflow": "2.20.0"})
    clash = [config(server("x", "off")), config(other_versions)]
    assert sorted(config_labels(clash).values()) == ["x-off#1", "x-off#2"]
    assert config(OFF, run_id="another run") == config(OFF)  # a run does not make another configuration
    assert config(OFF) != config_of(replace(cell(OFF, rate=1), provenance=Provenance(host="elsewhere")))  # a host does


# ----------------------------------------------------------------------------- the fixture


def test_capacity_run_fixture_answers():
    result = answers.answer(read_results(FIXTURES / "capacity-run" / "results.jsonl"))
    found = {(s.config.name, s.request_batch_size): s for s in result.searches}
    # 471.2's confirmation (p99 10.4 ms, ~30 of 2000 over 10 ms) is neither a pass nor a fail at 99%: it is no
    # upper end (issue #67: a range ends on a rate shown to fail), and the lowest rate that failed is 489.4.
    cpu_off = found[("cpu-off", 1)]
    assert cpu_off.capacity_rps == 453.1 and cpu_off.upper_rps == 489.4 and cpu_off.lowest_failing_rps == 489.4
    assert cpu_off.uncertainty() == "between 453.1 and 489.4 req/s (upper end 489.4)"
    assert [s.rate_rps for s in cpu_off.conclusion.inconclusive] == [471.2]
    assert found[("cpu-cpu", 8)].capacity_ips == pytest.approx(168.8 * 0.99 * 8)
    assert not found[("cpu-off", 8)].met  # p99 10.4-22 ms from 40 down to 1 req/s: the share over stays ~2%
    assert found[("cpu-off", 8)].reason.startswith("unmet: stalls of about")
    assert device(result, "cpu").gain.ratio == pytest.approx(675 / 453.1)
    assert (device(result, "cpu").gain.low, device(result, "cpu").gain.high) == (pytest.approx(675 / 489.4),
                                                                                 pytest.approx(700 / 453.1))
    assert device(result, "cpu").gain.describe() == "×1.49 (×1.38–×1.54)"
    assert device(result, "gpu").gain.ratio == pytest.approx(6250 / 3375)
    assert device(result, "cpu", batch=8).gain.ratio is None
    assert [r.ratio for r in result.ratios] == [pytest.approx(6250 / 675)]


def test_a_search_whose_server_never_answered_has_no_answer_and_says_why():
    start = cell(OFF, rate=None, p99=None, failed="server cpu-off at 127.0.0.1:8500 is not answering (refused)",
                 search={"id": "s1", "role": "start", "p99_objective_ms": 10.0, "offered_rps": None})
    a = only([start])
    assert not a.met and a.lowest_failing_rps is None and a.cells == 1
    assert a.reason == "no rate measured: server cpu-off at 127.0.0.1:8500 is not answering (refused)"
    assert only(search(OFF, "s2", UNMET)).reason == "lowest failing rate 10 req/s"


def test_a_failing_rate_whose_retry_passed_is_not_the_bracket_s_upper_end():
    steps = [("bracket", 400, 5.0), ("bracket", 800, 30.0), ("retry", 800, 6.0), ("bracket", 1600, 40.0),
             ("retry", 1600, 45.0), ("bisect", 1200, 9.0), ("confirm", 1200, 8.0)]
    a = only(search(OFF, "s3", steps))
    assert a.capacity_rps == 1200 and a.lowest_failing_rps == 1600  # 800 failed once, then passed: not a bound


def test_a_gain_over_lower_bounds_keeps_only_the_bound_that_holds():
    result = answers.answer(read_results(FIXTURES / "capacity-run" / "results.jsonl"))
    gain = device(result, "cpu").gain  # cpu-cpu 675 (upper end 700) over cpu-off 453.1 (upper end 489.4)

    def limited(search):  # the same answer, but the load generator was the limit above it
        return replace(search, at=replace(search.at, bound=Bound.LOADGEN, upper_rps=None, lowest_failing_rps=None))

    on_limited = replace(gain, batching=limited(gain.batching))
    assert on_limited.describe() == ("at least ×1.38 (batching's capacity is a lower bound: the load generator's "
                                     "limit)")  # 675 / 489.4
    off_limited = replace(gain, off=limited(gain.off))
    assert off_limited.describe().startswith("at most ×1.54 (off's")  # 700 / 453.1
    both = answers.batching_gain([limited(gain.batching), limited(gain.off)])
    assert both.ratio is None and both.reason.startswith("both capacities are lower bounds")

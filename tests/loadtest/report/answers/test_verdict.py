"""What bounded each card row, from one function (`loadtest.report.answers.verdict`), with its tool ceiling
(`loadtest.report.answers.tool_ceiling`): hand-made records, each search with or without its twin's cells."""

from __future__ import annotations

from dataclasses import replace

import pytest

from loadtest.evidence.cell_parts import HostProbe
from loadtest.evidence.floor_record import DeviceFloorRecord
from loadtest.evidence.stats import encode, histogram_of
from loadtest.judge.goals import Target
from loadtest.report.answers.answers import answer
from loadtest.report.answers.tool_ceiling import ceiling_of
from loadtest.report.answers.verdict import Bounded, finding, verdict_in
from loadtest.report.card.card import card_for
from loadtest.report.sizing.instances import Pricing
from loadtest.report.sizing.prices import load_prices
from tests.loadtest.judge.test_noise import HOST_STALLS, side
from tests.loadtest.report.answers.test_bound import paired
from tests.loadtest.report.handmade import search, server, twin, with_twin
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

STAND_IN = server("cpu-off", "off")
CONTAINER = replace(server("tfs", "off", device="gpu"), kind="tfserving-container", name="tfs")


def confirmed(label, rate: float, search_id: str = "s", **fields) -> list:
    """A search confirming `rate` req/s (1.1 × rate fails), every cell with `fields`."""
    cells = search(label, search_id, [("bracket", rate, 8.0), ("bracket", rate * 1.1, 12.0), ("confirm", rate, 9.0)])
    return [replace(c, **fields) for c in cells]


def floor(images_per_s: float) -> DeviceFloorRecord:
    return DeviceFloorRecord.from_dict({"source": "test", "device": "Test GPU", "runtime": "none",
                                        "batches": [{"batch_size": 1, "latency_us": 1e6 / images_per_s,
                                                     "images_per_s": images_per_s}]})


def row_of(cells, rate: float = 5000.0):
    """The card's only row, priced per replica at `rate` req/s (`prices.toml`: 0.40 USD/h a CPU replica, 4.00 a GPU)."""
    card = card_for(cells, Pricing(rate, 0.2, load_prices(FIXTURES / "prices.toml"), {}), [Target(10.0, 1, rate)])
    assert card is not None
    [row] = card.rows
    return card, row, dict(zip(card.header(), card.table_rows()[0]))


def bounded(shown: dict) -> str:
    """The card's "bounded by" cell without the tool ceiling said after the verdict."""
    return shown["bounded by"].split("; tool ceiling ")[0]


def test_a_stand_in_without_a_device_floor_is_not_for_buying_even_with_its_tool_ceiling():
    card, row, shown = row_of(with_twin(confirmed(STAND_IN, 400.0)))
    # the verdict and its tool ceiling in one cell (the design's first screen: at most 9 columns)
    assert shown["bounded by"] == "device alone not measured; tool ceiling ≥ 800.0 req/s (2× the answer)"
    assert row.tool_ceiling == "≥ 800.0 req/s (2× the answer)" and "tool ceiling" not in card.header()
    assert not row.for_buying and not card.for_buying and card.title.startswith("NOT FOR BUYING")
    # a confirmed answer still answers what it can: the most replicas a server at least this fast needs
    # 5000 / (400 × 0.8) = 15.6 -> 16, + 1 spare at 0.40 USD/h
    assert shown["boxes"] == "≤ 16 + 1 spare replicas" and shown["USD/h"] == "≤ 6.80"
    assert shown["USD per million requests"].startswith("≤ ")
    assert row.at_most and row.boxes == (16, 16)


def test_a_containers_answer_with_its_tool_ceiling_is_for_buying_whatever_it_served_of_the_device():
    # it served 2% of the device alone: for the stand-in, its serving path; for TF Serving, the production server
    cells = with_twin(confirmed(CONTAINER, 1000.0, device_floor=floor(50000.0)))
    card, row, shown = row_of(cells)
    assert shown["bounded by"] == "the production server; tool ceiling ≥ 2,000.0 req/s (2× the answer)"
    assert row.served_share is not None and row.served_share < 0.05
    assert row.for_buying and card.for_buying and card.title.startswith("FOR BUYING")
    assert not shown["boxes"].startswith("≤") and not shown["USD/h"].startswith("≤")


def test_a_tool_ceiling_under_twice_the_answer_names_the_tool_and_its_ceiling():
    # the twin failed its check at 2,000 req/s and searched: 1,500 passed, so the tool carried 1,500, not 2×
    cells = [*confirmed(CONTAINER, 1000.0), twin(CONTAINER, "s", 2000.0, p99=50.0, index=100),
             twin(CONTAINER, "s", 1500.0, index=101), twin(CONTAINER, "s", 1750.0, p99=50.0, index=102)]
    card, row, shown = row_of(cells)
    assert row.tool_ceiling == "1,500.0 req/s"
    # the ceiling is the why: said once, not again beside it
    assert shown["bounded by"] == "the tool: tool ceiling 1,500.0 req/s, under 2× the answer"
    assert not row.for_buying and shown["boxes"].startswith("≤ ")
    # the findings say the ceiling once (a demo run's read "… under 2× the answer (tool ceiling 263.4 req/s)")
    [device] = answer(cells).devices
    line = finding("cpu", verdict_in(device.best, answer(cells)), "")
    assert line == "cpu: bounded by the tool (tool ceiling 1,500.0 req/s, under 2× the answer).", line


def test_a_searched_twins_ceiling_is_its_own_searchs_answer_as_its_console_line_gives_it():
    # the check fails at 2,000; the twin's own search passes 1,500 and 1,750 once each, and 1,750's confirmation
    # fails: the search answers 1,500 (its highest pass below a failing rate), not the 1,750 one cell carried
    check = twin(CONTAINER, "s", 2000.0, p99=50.0, index=100)
    own = search(check.server, "s/tool-ceiling", [("bracket", 1500.0, 1.0), ("bracket", 1750.0, 1.0),
                                                  ("confirm", 1750.0, 50.0)])
    own = [replace(c, cell_index=101 + i, search=replace(c.search, checks="s")) for i, c in enumerate(own)]
    cells = [*confirmed(CONTAINER, 1000.0), check, *own]
    assert ceiling_of([check, *own]).value() == "1,500.0 req/s"
    _, row, shown = row_of(cells)
    assert row.tool_ceiling == "1,500.0 req/s" and "tool ceiling 1,500.0 req/s" in shown["bounded by"]
    assert [s.search_id for s in answer(cells).searches] == ["s"]  # the twin's own search is no answer


def test_a_check_that_did_not_run_is_said_so_and_the_twins_own_search_answers_never_as_twice_the_answer():
    # the check cell at 2,000 failed to run; the twin's own search then passed 1,000 and confirmed it. Read as the
    # check, that first pass printed "≥ 1,000.0 req/s (2× the answer)" for a rate 1× the answer
    check = twin(CONTAINER, "s", 2000.0, failed="Locust exited with code 1", index=100)
    own = search(check.server, "s/tool-ceiling", [("bracket", 1000.0, 1.0), ("bracket", 2000.0, 50.0),
                                                  ("confirm", 1000.0, 1.0)])
    own = [replace(c, cell_index=101 + i, search=replace(c.search, checks="s")) for i, c in enumerate(own)]
    ceiling = ceiling_of([check, *own])
    assert not ceiling.checked and ceiling.rps == 1000.0
    assert ceiling.value() == "1,000.0 req/s (the check did not run: Locust exited with code 1)"
    _, row, shown = row_of([*confirmed(CONTAINER, 1000.0), check, *own])
    assert "2× the answer)" not in shown["bounded by"] and "the check did not run" in shown["bounded by"]
    assert not row.for_buying
    assert ceiling_of([check]).value() == "not measured: Locust exited with code 1"


def test_a_lower_bound_is_never_bought_and_gets_no_boxes():
    # late sends where the latencies did not pass (a late load generator's pass is a pass: `verdicts.verdict_of`)
    steps = [("bracket", 1000, 8.0), ("bracket", 1100, 12.0, "saturated", "2% of sends left late"),
             ("confirm", 1000, 9.0)]
    cells = with_twin(search(CONTAINER, "s", steps))
    card, row, shown = row_of(cells)
    said = ("unconfirmed: a lower bound: the load generator's limit (its dispatch: sends late, its CPU not recorded, "
            "no host probe on its cores), though it carried 2,000.0 req/s against its twin: the host it shares with "
            "the server, not its own ceiling")
    assert bounded(shown) == said
    assert not row.for_buying and not card.for_buying and row.boxes is None
    assert row.why_not == said and not card.priced


@pytest.mark.parametrize(("times", "carried"), [(None, False), (1.05, False), (1.1, True)])
def test_a_load_generator_blamed_at_a_rate_its_twin_carried_is_said_to_have_carried_it(times, carried):
    """#68's live run: "≥ 327.5 confirmed: the load generator's limit (its dispatch: sends late…)" beside "tool ceiling
    ≥ 655.0 req/s (2× the answer)": the same load generator carried twice the rate it was blamed for, against a
    server that costs nothing. The row says so where the twin carried the rate blamed (1,100 here), never where it
    was not run or carried less (1,050)."""
    steps = [("bracket", 1000, 8.0), ("bracket", 1100, 12.0, "saturated", "2% of sends left late"),
             ("confirm", 1000, 9.0)]
    cells = search(CONTAINER, "s", steps)
    _, _, shown = row_of(cells if times is None else with_twin(cells, times=times))
    assert bounded(shown).startswith("unconfirmed: a lower bound: the load generator's limit (its dispatch: ")
    assert ("though it carried" in bounded(shown)) == carried, bounded(shown)
    if carried:
        assert bounded(shown).endswith(", though it carried 1,100.0 req/s against its twin: the host it shares with "
                                       "the server, not its own ceiling")
    else:  # nothing said after what limited it
        assert bounded(shown).endswith("(its dispatch: sends late, its CPU not recorded, no host probe on its cores)")
    if times is None:  # once: a twin that carried exactly the rate blamed carried it
        _, _, exact = row_of([*cells, twin(CONTAINER, "s", 1100.0)])
        assert ", though it carried 1,100.0 req/s against its twin" in bounded(exact), bounded(exact)


def test_a_lower_bound_names_what_in_the_load_generator_limited_it_from_the_cell_at_its_limit():
    # the case: Locust at 27% of its core, its sends late, the host probe on its cores quiet: not its CPU
    steps = [("bracket", 72.7, 8.0), ("bracket", 75.0, 12.0, "saturated", "2% of sends left late"),
             ("confirm", 72.7, 9.0)]
    quiet = HostProbe(1.0, None, side([], samples=1000, duration_s=1.0))
    for cpu, said in ((27.0, "its dispatch: sends late with Locust at 27% of a core, which the host probe on its "
                             "cores does not explain"),
                      (96.0, "its CPU: a Locust process at 96% of a core")):
        cells = [replace(c, loadgen_process_cpu_percent=[cpu], host_probe=quiet, late_send_fraction=0.02,
                         load=replace(c.load, late_threshold_ms=2.0)) if c.tag.offered_rps == 75.0 else c
                 for c in search(CONTAINER, "s", steps)]
        _, _, shown = row_of(with_twin(cells))
        assert bounded(shown) == (f"unconfirmed: a lower bound: the load generator's limit ({said}), though it "
                                  "carried 145.4 req/s against its twin: the host it shares with the server, not its "
                                  "own ceiling")


def test_a_twin_that_could_not_start_is_named_with_why_never_a_crash():
    why = "no null backend for the custom runtime ranker"
    cells = [*confirmed(CONTAINER, 1000.0), twin(CONTAINER, "s", 2000.0, failed=why)]
    assert ceiling_of(cells[-1:]).value() == f"not measured: {why}"
    card, row, shown = row_of(cells)
    assert shown["bounded by"] == f"the tool: tool ceiling not measured: {why}"
    assert not row.for_buying and row.tool_ceiling == f"not measured: {why}"
    assert f"| the tool: tool ceiling not measured: {why} |" in "\n".join(card.lines())
    assert verdict_in(answer(cells).searches[0], answer(cells)).ceiling.why_not == why


def test_records_without_a_twin_read_no_twin_was_run():
    cells = confirmed(CONTAINER, 1000.0)
    verdict = verdict_in(answer(cells).searches[0], answer(cells))
    assert verdict.bounded == Bounded.TOOL and verdict.ceiling.value() == "not measured: no twin was run"


def test_a_busy_load_generator_at_the_answer_is_the_tool():
    cells = with_twin(confirmed(CONTAINER, 1000.0, loadgen_process_cpu_percent=[96.0]))
    _, row, shown = row_of(cells)
    assert bounded(shown) == "the tool: the load generator's CPU: a Locust process at 96% of a core"
    assert not row.for_buying


def test_the_card_row_the_findings_and_figures_json_carry_one_verdict():
    """The card's row, the report's findings and figures.json, each as printed, name one bound and one ceiling (#69:
    this test compared the card's row with its own dict, and read neither the findings nor figures.json)."""
    import json

    from loadtest.report.build import build_report
    from loadtest.report.page import figures_json

    cells = with_twin(confirmed(CONTAINER, 1000.0))
    card, row, shown = row_of(cells)
    report = build_report(cells, pricing=Pricing(5000.0, 0.2, load_prices(FIXTURES / "prices.toml"), {}),
                          targets=[Target(10.0, 1, 5000.0)])
    ceiling = "≥ 2,000.0 req/s (2× the answer)"
    assert shown["bounded by"] == f"the production server; tool ceiling {ceiling}"
    [line] = [line for line in report.summary.headline if ": bounded by " in line]
    assert line.startswith("gpu") and f"bounded by the production server (tool ceiling {ceiling})" in line, line
    record = json.loads(figures_json(report))
    assert record["headline"] == list(report.summary.headline)
    [card_row] = record["card"]["rows"]
    assert card_row["bounded"] == "the production server" and card_row["verdict"] == row.verdict
    assert card_row["tool_ceiling"] == ceiling and card_row["at_most"] is False


def lagging(cells, loadgen_side=None, twins_too: bool = False):
    """`cells` whose sends lagged 3.07 ms at p99 against a 2 ms limit, the load generator at 13.5% of its core,
    with the host probe's `loadgen_side` (None: no probe); the twin's cells too where `twins_too`."""
    return [replace(c, dispatch_lag_p99_us=3071.0, loadgen_process_cpu_percent=[13.5], loadgen_cpu_percent=13.5,
                    loadgen_cores=1, load=replace(c.load, dispatch_lag_limit_ms=2.0),
                    host_probe=HostProbe(1.0, None, loadgen_side) if loadgen_side else None)
            if c.search and (twins_too or c.search.role != "tool_ceiling") else c for c in cells]


def test_dispatch_lag_the_host_probe_explains_is_the_host_not_the_load_generator():
    # 16 ms stalls on the load generator's cores, 2.1 a second (tests/loadtest/judge/test_noise.py's H100 cell),
    # with the generator far from busy: the host, not the tool
    cells = lagging(with_twin(confirmed(CONTAINER, 1000.0)), HOST_STALLS)
    _, row, shown = row_of(cells)
    assert bounded(shown) == ("the host: its stalls on the load generator's cores explain the dispatch lag p99 "
                                   "3.07 ms over its 2 ms limit")
    assert not row.for_buying
    # the same lag with no probe to explain it: the load generator's own
    _, _, unexplained = row_of(lagging(with_twin(confirmed(CONTAINER, 1000.0))))
    assert bounded(unexplained) == ("the tool: the load generator's dispatch lag p99 3.07 ms over its 2 ms "
                                         "limit, which the host probe on its cores does not explain")


def test_a_twin_whose_dispatch_lag_the_host_probe_explains_still_carries_its_rate():
    # the host's stalls held the twin's sends as they held the answer's: no faster tool would undo them
    _, row, shown = row_of(lagging(with_twin(confirmed(CONTAINER, 1000.0)), HOST_STALLS, twins_too=True))
    assert row.tool_ceiling == "≥ 2,000.0 req/s (2× the answer)"
    assert shown["bounded by"].startswith("the host: its stalls on the load generator's cores") and not row.for_buying
    assert shown["bounded by"].endswith("; tool ceiling ≥ 2,000.0 req/s (2× the answer)")
    # with no probe to explain the twin's lag, the twin did not carry 2× the answer: the tool
    _, unexplained_row, unexplained = row_of(lagging(with_twin(confirmed(CONTAINER, 1000.0)), twins_too=True))
    assert unexplained["bounded by"].startswith("the tool: "), unexplained["bounded by"]
    assert unexplained_row.tool_ceiling != "≥ 2,000.0 req/s (2× the answer)"


def test_size_gives_each_searched_options_verdict_and_leaves_the_twins_out():
    from loadtest.evidence.records import read_results
    from loadtest.report.sizing import prices, size

    results = read_results(FIXTURES / "capacity-run-twins" / "results.jsonl")
    answers = size.size(results, size.objective_from(10, 5000, None, 0.2), prices.load_prices(FIXTURES / "prices.toml"))
    verdicts = {a.label: a.bounded for a in answers}
    assert set(verdicts) == {"cpu-cpu", "cpu-off", "gpu-gpu", "gpu-off"}  # no twin is an option
    assert verdicts["gpu-gpu"] == "the production server; tool ceiling ≥ 12,500.0 req/s (2× the answer)"
    assert verdicts["cpu-cpu"] == ("device alone not measured, not for buying; tool ceiling ≥ 1,350.0 req/s (2× the "
                                   "answer)")


def test_a_confirmed_capacity_beside_a_higher_open_pass_is_confirmed():
    # 1,000 confirmed; 1,500 passed above it and nothing above that failed: "1,000.0 confirmed (≥ 1,500.0 passed: the
    # search stopped)": the "≥" is the pass's, so the row is the production server's, for buying
    steps = [("bracket", 1000, 8.0), ("confirm", 1000, 9.0), ("bracket", 1500, 8.0)]
    cells = with_twin(search(CONTAINER, "s", steps), times=3.0)
    card, row, shown = row_of(cells)
    assert shown["capacity req/s"] == "1,000.0 confirmed"  # one figure; the pass in the table under the card
    assert row.state.startswith("1,000.0 confirmed (≥ 1,500.0 passed")
    assert bounded(shown) == "the production server" and row.for_buying


def test_a_stand_in_within_the_runs_drift_of_its_line_is_not_for_buying_on_the_card_and_in_its_record():
    busy = with_twin(confirmed(STAND_IN, 96.0, device_floor=floor(100.0), server_cpu_percent=85.0))
    card, row, shown = row_of(paired(busy, (400.0, 600.0)))  # moved 50%: 95% of the device alone clears 75%
    assert bounded(shown) == "the device: served 95% of the device alone" and row.for_buying
    card, row, shown = row_of(paired(busy, (300.0, 600.0)))  # moved 100%: it does not clear 100%
    said = "the stand-in's serving path: served 95% of the device alone, within the run's 100% drift of 50%"
    assert bounded(shown) == said and not row.for_buying and shown["boxes"].startswith("≤ ")
    assert card.as_dict()["rows"][0]["verdict"] == said  # figures.json's card


def failed_check(label, rate: float, **fields) -> list:
    """A twin of search "s" that fails its check at 2 × `rate` (p99 over the objective) with `fields` there, then
    carries 1.5 × `rate` in its own search."""
    check = replace(twin(label, "s", 2 * rate, p99=50.0, index=100), **fields)
    own = twin(label, "s", 1.5 * rate, index=101)
    own = replace(own, search=replace(check.search, role="confirm", id="s/tool-ceiling", offered_rps=1.5 * rate))
    return [check, own]


def test_a_containers_twin_stopped_by_its_own_server_leaves_the_answer_to_the_production_server():
    """#59: a TF Serving container's twin is the embedded null server on its cores; where that Python server's CPU
    stood first and the load generator was calm, the ceiling measured our server, not the tool the container's
    requests cross, so the row is the production server's, and the card says which stood."""
    own_server = failed_check(CONTAINER, 1000.0, server_cpu_percent=97.0, server_cpu_cores=1.0)
    card, row, shown = row_of([*confirmed(CONTAINER, 1000.0), *own_server])
    assert shown["bounded by"] == ("the production server; tool ceiling 1,500.0 req/s (the twin's own server stood: "
                                   "its CPU at 97% of 1 core)")
    assert row.for_buying and card.for_buying
    # the load generator stood at the check: the tool bounded it, whatever the server
    busy_client = failed_check(CONTAINER, 1000.0, server_cpu_percent=97.0, loadgen_process_cpu_percent=[96.0])
    _, row, shown = row_of([*confirmed(CONTAINER, 1000.0), *busy_client])
    assert bounded(shown) == ("the tool: tool ceiling 1,500.0 req/s (the load generator stood: a Locust process at "
                              "96% of a core), under 2× the answer") and not row.for_buying
    # the twin's server stood, but the load generator saturated at the answer itself: still the tool
    calm_twin_busy_answer = confirmed(CONTAINER, 1000.0, loadgen_process_cpu_percent=[95.0])
    _, row, shown = row_of([*calm_twin_busy_answer, *own_server])
    assert bounded(shown).startswith("the tool: the load generator's CPU: a Locust process at 95% of a core")
    # the stand-in's own path is the one its twin's server measured: its row stays the tool's
    _, row, shown = row_of([*confirmed(STAND_IN, 1000.0, device_floor=floor(1100.0), server_cpu_percent=85.0),
                            *failed_check(STAND_IN, 1000.0, server_cpu_percent=97.0, server_cpu_cores=1.0)])
    assert bounded(shown).startswith("the tool: tool ceiling 1,500.0 req/s (the twin's own server stood")
    assert not row.for_buying
    # neither stood (its server at half its CPU, the load generator calm): nothing said, and a container's row is
    # the tool's, as before
    neither = failed_check(CONTAINER, 1000.0, server_cpu_percent=50.0, server_cpu_cores=1.0)
    assert ceiling_of(neither).value() == "1,500.0 req/s"
    _, row, shown = row_of([*confirmed(CONTAINER, 1000.0), *neither])
    assert bounded(shown) == "the tool: tool ceiling 1,500.0 req/s, under 2× the answer" and not row.for_buying


def test_a_search_that_passed_nothing_is_bounded_by_nothing_and_keeps_its_ceiling():
    from loadtest.report.answers.tool_ceiling import ToolCeiling
    from loadtest.report.answers.verdict import what_bounded

    ceiling = ToolCeiling(rps=900.0, checked=True, why_not="")  # a measured ceiling, carried whatever the answer
    [failed] = answer(search(STAND_IN, "s", [("bracket", 100.0, 30.0), ("bracket", 50.0, 25.0)])).searches
    assert failed.figure_rps is None  # every rate failed the 10 ms objective
    for nothing in (None, failed):
        verdict = what_bounded(nothing, ceiling, 0.1)
        assert (verdict.bounded, verdict.why, verdict.ceiling, verdict.served) == (Bounded.NOTHING, "", ceiling, None)


def slow_tail(over: int, requests: int = 100_000) -> str:
    """A client histogram of `requests`: `over` of them at 12 ms (over a 10 ms objective), the rest at 3 ms."""
    return encode(histogram_of([12_000.0] * over + [3_000.0] * (requests - over)))


def stalled(cells, over: int, probe: HostProbe | None) -> list:
    """`cells` whose confirmation had `over` of its 100,000 requests over the objective, with the host `probe`."""
    return [replace(c, histogram_us=slow_tail(over), host_probe=probe, requests=100_000, ok_requests=100_000)
            if c.search and c.search.role == "confirm" else c for c in cells]


@pytest.mark.parametrize(("over", "probe", "said"), [
    (600, HostProbe(1.0, HOST_STALLS, None), "the server's cores explain the requests over 10 ms (0.6% at the client)"),
    (600, HostProbe(1.0, None, HOST_STALLS), "the load generator's cores explain the requests over 10 ms (0.6% at "
                                             "the client)"),
    (500, HostProbe(1.0, HOST_STALLS, None), "the server's cores explain the requests over 10 ms (0.5% at the client)"),
    (499, HostProbe(1.0, HOST_STALLS, None), None),  # under half the 1% a p99 allows: the answer stands
    (600, None, None),  # no probe: nothing says the host made them slow
    (600, HostProbe(1.0, side([], samples=10_000, duration_s=10.0), None), None),  # a quiet host explains nothing
])
def test_requests_over_the_objective_that_the_hosts_stalls_explain_are_the_host(over, probe, said):
    """A confirmed answer whose requests over the objective are at least half the 1% a p99 allows
    (`noise.HOST_SHARE_LIMIT`), where the host probe's stalls on either side explain them: the host, named by the side
    it stalled on, never for buying; under that share, or with no stall to explain them, the answer is the server's."""
    _, row, shown = row_of(stalled(with_twin(confirmed(CONTAINER, 1000.0)), over, probe))
    if said is None:
        assert bounded(shown) == "the production server" and row.for_buying
    else:
        assert bounded(shown) == f"the host: its stalls on {said}" and not row.for_buying


BUSY = {"server_cpu_percent": 85.0, "gpu_utilization_percent": 90.0}


@pytest.mark.parametrize(("label", "device_floor", "busy", "moved", "said", "buy"), [
    # a TF Serving container: the device where the device alone bounded it, else the production server
    (CONTAINER, floor(100.0), BUSY, (400.0, 600.0), "the device: served 95% of the device alone", True),
    (CONTAINER, floor(100.0), BUSY, None, "the production server", True),  # drift not measured: not the device
    (CONTAINER, floor(100.0), {}, (400.0, 600.0), "the production server", True),  # an idle device
    (CONTAINER, None, BUSY, (400.0, 600.0), "the production server", True),  # no device alone
    # the stand-in: only the device is for buying; drift not measured is never read as none
    (STAND_IN, floor(100.0), BUSY, (400.0, 600.0), "the device: served 95% of the device alone", True),
    (STAND_IN, floor(100.0), BUSY, None,
     "the stand-in's serving path: served 95% of the device alone, the run's drift not measured", False),
    (STAND_IN, floor(100.0), {}, (400.0, 600.0), "an idle device: served 95% of the device alone", False),
    (STAND_IN, None, BUSY, (400.0, 600.0), "device alone not measured", False),
])
def test_what_held_an_answer_the_tool_and_host_did_not_bound(label, device_floor, busy, moved, said, buy):
    """What held a confirmed answer that neither the tool nor the host bounded (`verdict._held`), for each server kind:
    its share of the device alone, clear of 50% by the run's drift, and whether the device was busy."""
    cells = with_twin(confirmed(label, 96.0, device_floor=device_floor, **busy))
    _, row, shown = row_of(paired(cells, moved) if moved else cells)
    assert bounded(shown) == said and row.for_buying == buy
    assert (row.served_share is not None) == (device_floor is not None)

"""The report's noise table and the headline's host floor, on hand-made cells with hand-computed shares."""

from __future__ import annotations

from dataclasses import replace

from loadtest.evidence.records import ValidityFlag
from loadtest.evidence.vocab import Flag
from loadtest.report.configs import config_labels, config_of
from loadtest.report.host_floor import host_floor_lines
from loadtest.report.sections.noise_table import noise_table
from tests.loadtest.judge.test_noise import client_histogram, latency_record, probed, side
from tests.loadtest.report.handmade import cell, server

LABEL = server("cpu-off", "off")
QUIET = side([], samples=1000, duration_s=1.0)
STALLED = side([20479, 20479], samples=1000, duration_s=1.0)  # 2 x 10.479 ms over 10 ms: 2.1% of the time


def rows_by_objective(cells, objectives):
    labels = config_labels(config_of(c) for c in cells)
    table = noise_table(cells, labels, objectives)
    return {row[2]: dict(zip(table.header, row)) for row in table.rows}


def test_a_host_that_stalls_is_named_and_its_floor_stated():
    slow = probed(cell(LABEL, rate=100.0), STALLED, QUIET, histogram_us=client_histogram(30))  # 3% over 10 ms
    rows = rows_by_objective([slow], (10.0, 50.0))
    assert rows["10"]["whose"] == "host" and rows["10"]["client over"] == "3.00%"
    assert rows["10"]["host over"] == "2.10%"
    assert rows["10"]["host allows p99 ≥ ms"] == "18"  # 2 x (20479 - L) <= 5000 µs: L >= 17.979 ms
    assert rows["50"]["whose"] == "no cell over the 1% a p99 allows"
    assert rows["10"]["host oversleep, server's cores ms"] == "20.5 / 20.5"  # 2 of 1000 samples: the p99.9 is a stall
    lines = host_floor_lines([slow], (10.0, 50.0))
    assert len(lines) == 1 and lines[0].startswith("objectives below 18 ms cannot be confirmed on this host")
    assert host_floor_lines([slow], (50.0,)) == ()  # nothing asked below the floor


def test_a_server_that_stalls_on_a_quiet_host_is_the_servers():
    latency = latency_record([[5000.0, 970.0], [25000.0, 30.0], [None, 0.0]])  # 30 x (25-10)/(25-5) = 22.5 of 1000
    slow = probed(cell(LABEL, rate=100.0), QUIET, QUIET, histogram_us=client_histogram(30), server_latency=latency)
    rows = rows_by_objective([slow], (10.0,))
    assert rows["10"]["whose"] == "server" and rows["10"]["server over"] == "2.25%"
    assert host_floor_lines([slow], (10.0,)) == ()


def test_cells_without_a_probe_say_so_and_overloaded_cells_are_left_out():
    plain = replace(cell(LABEL, rate=100.0), histogram_us=client_histogram(30))
    rows = rows_by_objective([plain], (10.0,))
    assert rows["10"]["host over"] == "—" and rows["10"]["whose"] == "client and wire"
    overloaded = replace(plain, throughput_rps=50.0)  # half of what was sent: the server did not keep up
    assert rows_by_objective([overloaded], (10.0,)) == {}


def test_cells_the_load_generator_limited_are_left_out():
    plain = probed(cell(LABEL, rate=100.0), STALLED, QUIET, histogram_us=client_histogram(30))
    limited = replace(plain, flags=[ValidityFlag(Flag.SATURATED, "a load generator process used 99% of a core")])
    assert rows_by_objective([plain], (10.0,))["10"]["whose"] == "host"
    assert rows_by_objective([limited], (10.0,)) == {}
    assert host_floor_lines([limited], (10.0,)) == ()


def test_the_headline_says_the_host_not_the_device_where_the_host_put_the_objective_out_of_reach():
    """A search at 10 ms that found nothing, on a host whose stalls allow no objective below 18 ms: the headline
    names the host, and the noise table counts its stalls over 10 ms (2 in 1 s)."""
    from tests.loadtest.report.test_report import headline_of

    tag = {"id": "s1", "role": "bracket", "p99_objective_ms": 10.0, "offered_rps": 100.0, "objectives": [10.0]}
    slow = probed(cell(LABEL, rate=100.0, search=tag), STALLED, QUIET, histogram_us=client_histogram(30))
    lines = headline_of([slow])
    assert any(line.startswith("p99 ≤ 10 ms cannot be confirmed on this host for cpu (Test CPU) (request batch 1): "
                               "the machine's own stalls put objectives below 18 ms out of reach") for line in lines)
    assert not any(line.startswith("no configuration on cpu") for line in lines)
    assert rows_by_objective([slow], (10.0,))["10"]["host stalls > objective per s"] == "2.00"

"""The host probe as a real process: its samples on an idle core, a planted stall on its core, its own
deadline, a core it cannot pin to, and the record's window arithmetic (hand-made samples).
"""

from __future__ import annotations

import os
import time
from array import array

import pytest

from loadtest.evidence import stats
from loadtest.measure import hiccups
from tests.support import timing
from tests.support.stalls import host_stall
from tests.support.waiting import wait_for


def two_cores() -> tuple[int, int]:
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores: one probed, one for the rest")
    return cores[0], cores[1]


def test_the_record_keeps_only_samples_inside_the_window():
    samples = array("d", [10.0, 50.0, 10.5, 200.0, 11.0, 30_000.0, 12.0, 900.0])  # (unix s, oversleep µs) pairs
    record = hiccups.side_record(samples, {0, 1, 2}, 10.2, 11.5)
    assert record.cpus == "0-2" and record.samples == 2 and record.duration_s == 0.501
    assert record.max_us == pytest.approx(30_000, rel=1e-3) and record.p50_us == 200
    assert stats.decode(record.histogram).get_total_count() == 2
    assert hiccups.side_record(samples, {0}, 20.0, 21.0).to_dict() == {"cpus": "0",
                                                                       "note": "no sample inside the measured window"}
    assert hiccups.off_record().to_dict() == {"interval_ms": 1.0, "note": "off ([run] host_probe = false)"}


@pytest.mark.integration
def test_a_probe_on_an_idle_core_records_a_sample_a_millisecond(tmp_path):
    _, idle = two_cores()
    with hiccups.probing({"loadgen": {idle}}, tmp_path, max_s=30.0) as probes:
        start = time.time()
        time.sleep(2.0)
        record = probes.record(start, time.time())
    side = record.loadgen
    print(f"\nidle core {idle}: {side}")
    assert record.interval_ms == 1.0 and side.cpus == str(idle)
    # 1 ms plus ~0.1 ms of oversleep and the loop each time: how many fit 2 s is this core's speed
    timing.at_least("samples in 2 s", side.samples, 1500, side)
    timing.at_most("samples in 2 s", side.samples, 2000, side)
    timing.at_least("probed duration (s)", side.duration_s, 1.8, side)
    timing.at_most("probed duration (s)", side.duration_s, 2.1, side)
    timing.holds("p50 oversleep < 1000 µs", side.p50_us < 1000, side)


@pytest.mark.integration
def test_a_planted_stall_on_the_probed_core_shows_as_oversleep(tmp_path):
    stalled, _ = two_cores()
    with host_stall(core=stalled, stall_ms=20, every_s=0.5, max_s=10.0):
        with hiccups.probing({"server": {stalled}}, tmp_path, max_s=30.0) as probes:
            start = time.time()
            time.sleep(2.0)
            record = probes.record(start, time.time())
    side = record.server
    print(f"\nstalled core {stalled}: {side}")
    timing.at_least("max oversleep (µs)", side.max_us, 15_000, side)  # a 20 ms stall, caught part way through at worst
    timing.holds("p50 oversleep < 1000 µs", side.p50_us < 1000, side)  # between the stalls, the core is as before


@pytest.mark.integration
def test_a_probe_ends_by_itself_at_its_deadline_and_says_when_it_cannot_pin(tmp_path):
    probe = hiccups.start_probe("loadgen", {two_cores()[1]}, tmp_path / "short.bin", max_s=0.5)
    probe.started()
    assert probe.proc is not None
    wait_for(lambda: probe.proc.poll() is not None, 10.0, "the probe to exit at its deadline")
    assert probe.proc.returncode == 0
    short = probe.record(0, 2e9)  # 0.5 s of 1 ms sleeps: how many fit is this core's speed
    timing.at_least("samples in 0.5 s", short.samples, 300, short)
    timing.at_most("samples in 0.5 s", short.samples, 500, short)
    unpinnable = hiccups.start_probe("server", {4095}, tmp_path / "none.bin", max_s=5.0)
    unpinnable.started()
    assert unpinnable.proc is None and unpinnable.note.startswith("cannot pin to cores 4095")
    assert unpinnable.record(0, 2e9).to_dict() == {"note": unpinnable.note}

"""The tool ceiling's rule (`loadtest.judge.tool_ceiling`) on hand-made twin cells: a twin passes only where its
schedule sent the rate asked, not merely where its server served what the schedule sent."""

from __future__ import annotations

from dataclasses import replace

from loadtest.judge.tool_ceiling import Stood, schedule_short, twin_failure, twin_passed, who_stood
from tests.loadtest.report.handmade import server, twin

P99_MS = 10.0


def scheduled(asked: float, sent: float, served: float | None = None, windows: int = 10):
    """A twin asked `asked` req/s whose schedule sent `sent` req/s in each of `windows` 0.5 s windows, of which its
    server served `served` (all by default)."""
    cell = twin(server("cpu-off", "off"), "s", asked)
    done = sent if served is None else served
    return replace(cell, load=replace(cell.load, window_s=0.5, duration_s=windows * 0.5),
                   window_scheduled_rps=[sent] * windows, window_throughput_rps=[done] * windows,
                   throughput_rps=done)


def test_a_twin_whose_schedule_sent_half_the_rate_asked_fails_on_the_load_generator():
    """A Locust process or its users missing: 1,000 of 2,000 req/s sent, every one served. Read against what the
    schedule made it passed; against the rate asked it did not carry the rate."""
    half = scheduled(2000.0, 1000.0)
    assert not twin_passed(half, P99_MS)
    assert twin_failure(half, P99_MS) == "its schedule sent 1,000.0 of the 2,000.0 req/s asked (under 95%)"
    assert who_stood(half) == (Stood.LOAD_GENERATOR, schedule_short(half))


def test_a_schedule_within_poissons_noise_of_the_rate_asked_passes():
    """5 s at 2,000 req/s: 10,000 sends, a standard deviation of 100. Recorded cells here counted 1-6% short of the
    rate asked where their servers carried it, so 5% short passes, and 8% does not."""
    assert schedule_short(scheduled(2000.0, 1900.0)) == ""
    assert twin_passed(scheduled(2000.0, 1900.0), P99_MS)
    assert schedule_short(scheduled(2000.0, 1840.0)) != ""
    assert not twin_passed(scheduled(2000.0, 2000.0, served=1900.0), P99_MS)  # the schedule's own, not all served


def test_a_twin_without_counted_sends_is_judged_on_what_it_served_of_the_rate():
    old = twin(server("cpu-off", "off"), "s", 2000.0)  # records from before window_scheduled_rps
    assert schedule_short(old) == "" and twin_passed(old, P99_MS)

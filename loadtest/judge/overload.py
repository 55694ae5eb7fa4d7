"""Whether an open-loop cell was overloaded: the server did not keep up with the rate it was offered.

An overloaded cell is never a passing rate and never a peak: what it "served" is what the server
managed while its queue grew, not a rate it sustains. Two signs, either enough:

- completions fell short of the sends the schedule made beyond Poisson counting noise (three standard
  deviations) and by more than `SHORTFALL_SHARE`: over the cell's windows, against the sends scheduled
  in them (`CellResult.window_scheduled_rps`); in a record made before those were counted, against the
  offered rate, by more than `OFFERED_SHORTFALL_SHARE` (a seeded schedule can itself send a few % under
  its rate in every cell);
- the mean latency of the requests sent in each window (`CellResult.window_latency_ms`) grew from the
  first half of the cell to the second by more than `LATENCY_GROWTH` times and by more than
  `LATENCY_GROWTH_MIN_MS`: a queue building.

The first sign is firm. The second, in one short cell, can be a burst of Poisson arrivals or a moment of the
host's at a busy rate (measured on an AMD build machine: latency doubling at p99 36 ms, 0.79 of the server's
core, in a cell whose second half was sent 8% more than its first), so a rate's verdict calls it a queue
only when it shows again (`loadtest.judge.verdicts`); `shortfall_reason` and `queue_growth_reason` say which.

Pure functions over `CellResult`s. Not for: a cell's other validity flags (`loadtest.evidence.stats`) or the
verdict on a rate (`loadtest.judge.verdicts`).
"""

from __future__ import annotations

import math
import statistics

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import CellStatus, LoadMode

SHORTFALL_SIGMAS = 3.0  # completions this many standard deviations under the sends: not counting noise
SHORTFALL_SHARE = 0.05  # and this share of them (requests still in flight at the end are counting too)
OFFERED_SHORTFALL_SHARE = 0.10  # older records: against the offered rate, which the schedule only approximates
LATENCY_GROWTH = 2.0  # the second half's mean latency over the first half's
LATENCY_GROWTH_MIN_MS = 5.0  # and at least this much higher (a scheduler hiccup is not a queue)
MIN_WINDOWS = 4


def overloaded_reason(cell: CellResult) -> str | None:
    """Why the cell was overloaded, or None (closed loop, failed cells and cells that sent nothing: None)."""
    return shortfall_reason(cell) or queue_growth_reason(cell)


def shortfall_reason(cell: CellResult) -> str | None:
    """Completions short of the sends beyond counting noise (open loop, ok cells only; else None)."""
    if not _judged(cell):
        return None
    return _shortfall(cell)


def queue_growth_reason(cell: CellResult) -> str | None:
    """Mean latency that grew between the cell's halves (open loop, ok cells only; else None)."""
    if not _judged(cell):
        return None
    return _latency_growth(cell)


def _judged(cell: CellResult) -> bool:
    return cell.load.mode == LoadMode.OPEN and cell.status == CellStatus.OK and bool(cell.requests)


def shortfall(sent: float, done: float, share: float) -> float | None:
    """The share of `sent` that `done` fell short by, when beyond counting noise and `share`; else None."""
    missing = sent - done
    if sent <= 0 or missing <= SHORTFALL_SIGMAS * math.sqrt(sent) or missing / sent <= share:
        return None
    return missing / sent


def _shortfall(cell: CellResult) -> str | None:
    if cell.window_scheduled_rps:
        window_s = cell.load.window_s
        sent = sum(cell.window_scheduled_rps) * window_s
        done = sum(cell.window_throughput_rps[:len(cell.window_scheduled_rps)]) * window_s
        short = shortfall(sent, done, SHORTFALL_SHARE)
        if short is None:
            return None
        span_s = len(cell.window_scheduled_rps) * window_s
        return (f"completed {done / span_s:,.1f} req/s of the {sent / span_s:,.1f} req/s its schedule sent "
                f"({short:.0%} short): the server did not keep up")
    offered = cell.load.rate_rps or 0.0
    short = shortfall(offered * cell.load.duration_s, cell.throughput_rps * cell.load.duration_s,
                      OFFERED_SHORTFALL_SHARE)
    if short is None:
        return None
    return (f"served {cell.throughput_rps:,.1f} req/s of the {offered:,.1f} req/s offered ({short:.0%} short): "
            "the server did not keep up")


def _latency_growth(cell: CellResult) -> str | None:
    windows = [w for w in cell.window_latency_ms if w is not None]
    if len(windows) < MIN_WINDOWS:
        return None
    half = len(windows) // 2
    first, second = statistics.fmean(windows[:half]), statistics.fmean(windows[half:])
    if second > LATENCY_GROWTH * first and second - first > LATENCY_GROWTH_MIN_MS:
        return (f"mean latency grew from {first:.2f} ms to {second:.2f} ms between the cell's halves: "
                "a queue building")
    return None

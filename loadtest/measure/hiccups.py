"""The host probe: how long this machine kept a sleeping process from running while a cell was measured.

jHiccup's idea ("a lower bound for the stalls the application would experience"): a process that
asks to sleep 1 ms, again and again, and records by how much each sleep overran (the oversleep, µs).
A quiet host oversleeps by tens of µs; a host that stalls (a noisy neighbour, the hypervisor, a
real-time task) shows each stall as one oversleep of about its length. One probe runs on the
server's cores and one on the load generator's, each pinned from its first instruction
(`os.sched_setaffinity` in the child before its loop), from before Locust starts until after it
ends; the record keeps only the samples inside the cell's measured window.

The child (`python -m loadtest.measure.hiccups --cpus 0 --max-s 60 --out FILE`) writes its raw samples
(wake-up time, oversleep) when told to stop (SIGTERM or SIGINT) or at its own deadline, whichever
comes first, so a sweep that dies never leaves it running. It imports nothing heavy and costs about
1-2% of a core (one short wake-up per ms).

A probe pinned to several cores runs on one of them at a time and the scheduler moves it to an idle
one: it sees the stalls that hit all of them, a lower bound for the stalls of any one. On a core the
server keeps busy, the probe also waits for the server's own threads (as short as the scheduler
makes a waking sleeper's wait): the probe is evidence about the host when its oversleeps are far
longer than that.

Not for: what the oversleeps mean for a p99 (`loadtest.judge.noise`) or running the cell
(`loadtest.measure.cell_sweep`).
"""

from __future__ import annotations

import argparse
import os
import selectors
import signal
import subprocess
import sys
import time
from array import array
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from loadtest.evidence import stats
from loadtest.evidence.cell_parts import HostProbe, ProbeSide

INTERVAL_S = 0.001
INTERVAL_MS = INTERVAL_S * 1000
STOP_WAIT_S = 5.0  # after SIGTERM, for the child to write its samples
STARTED_WAIT_S = 5.0  # for the child to pin itself and begin its loop
OFF_NOTE = "off ([run] host_probe = false)"


# ----------------------------------------------------------------------------- the child


def sleep_loop(deadline_s: float, stopped, clock=time.perf_counter, wall=time.time) -> array:
    """1 ms sleeps until `deadline_s` (on `clock`) or until `stopped()`: (wall time, oversleep µs) pairs, flat."""
    samples = array("d")
    while not stopped():
        begun = clock()
        if begun >= deadline_s:
            break
        time.sleep(INTERVAL_S)
        over_us = (clock() - begun - INTERVAL_S) * 1e6
        samples.append(wall())
        samples.append(over_us if over_us > 0 else 0.0)
    return samples


def child_main(argv: list[str] | None = None) -> int:
    """The probe process: pin to `--cpus`, say so on stdout, sleep-loop, write the samples to `--out`."""
    parser = argparse.ArgumentParser(prog="python -m loadtest.measure.hiccups")
    parser.add_argument("--cpus", required=True, help="cores to pin to, e.g. 0 or 0,2")
    parser.add_argument("--max-s", type=float, required=True, help="exit by itself after this many seconds")
    parser.add_argument("--out", type=Path, required=True, help="raw samples: float64 (unix s, oversleep µs) pairs")
    args = parser.parse_args(argv)
    stop = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.append(True))
    try:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    except (OSError, ValueError) as exc:
        print(f"cannot pin to cores {args.cpus}: {exc}", file=sys.stderr, flush=True)
        return 2
    print("probing", flush=True)
    samples = sleep_loop(time.perf_counter() + args.max_s, lambda: bool(stop))
    partial = args.out.with_suffix(".partial")
    partial.write_bytes(samples.tobytes())
    partial.replace(args.out)
    return 0


# ----------------------------------------------------------------------------- the record (pure)


def side_record(samples: array, cpus: Collection[int], start_s: float, end_s: float) -> ProbeSide:
    """One side's record from its raw samples, keeping those that woke inside [start_s, end_s]."""
    from loadtest.measure.resources import core_list  # here: the child itself never needs it (nor psutil)

    histogram = stats.new_histogram()
    first = last = None
    for i in range(0, len(samples) - 1, 2):
        if start_s <= samples[i] <= end_s:
            stats.record_us(histogram, samples[i + 1])
            first = samples[i] if first is None else first
            last = samples[i]
    count = histogram.get_total_count()
    if first is None or last is None or count == 0:
        return ProbeSide(core_list(cpus), note="no sample inside the measured window")
    return ProbeSide(core_list(cpus), count, round(last - first + INTERVAL_S, 3),
                     histogram.get_value_at_percentile(50.0), histogram.get_value_at_percentile(99.0),
                     histogram.get_value_at_percentile(99.9), histogram.get_max_value(), stats.encode(histogram))


def off_record(reason: str = OFF_NOTE) -> HostProbe:
    """The record of a cell measured without the probe, or where it could not run."""
    return HostProbe(INTERVAL_MS, note=reason)


# ----------------------------------------------------------------------------- the parent


@dataclass
class ProbeProcess:
    """One running probe child, the cores it was pinned to, where it writes."""

    side: str
    cpus: frozenset[int]
    proc: subprocess.Popen | None
    out: Path
    note: str = ""  # why it is not running

    def started(self) -> None:
        """Wait until the child has pinned itself and begun; a child that cannot is stopped, with its reason."""
        if self.proc is None or _first_line(self.proc) == "probing":
            return
        self.proc.kill()
        _, err = self.proc.communicate()
        self.proc, self.note = None, (err.strip().splitlines() or ["the probe did not start"])[-1]

    def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.communicate(timeout=STOP_WAIT_S)  # waits, and closes its pipes
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()

    def record(self, start_s: float, end_s: float) -> ProbeSide:
        """Stop it (if still running) and summarise its samples inside [start_s, end_s]."""
        self.stop()
        if self.note:
            return ProbeSide(note=self.note)
        try:
            samples = array("d")
            samples.frombytes(self.out.read_bytes())
        except (OSError, ValueError) as exc:
            return ProbeSide(note=f"the probe wrote no samples ({exc.__class__.__name__}: {exc})")
        return side_record(samples, self.cpus, start_s, end_s)


def start_probe(side: str, cpus: Collection[int], out: Path, max_s: float) -> ProbeProcess:
    """Start one probe child pinned to `cpus` (`ProbeProcess.started` waits until it has pinned itself)."""
    cores = frozenset(cpus)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "loadtest.measure.hiccups", "--cpus", ",".join(map(str, sorted(cores))),
               "--max-s", f"{max_s:.1f}", "--out", str(out)]
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=Path(__file__).resolve().parents[2], start_new_session=True)
    except OSError as exc:
        return ProbeProcess(side, cores, None, out, f"could not start the probe: {exc}")
    return ProbeProcess(side, cores, proc, out)


def _first_line(proc: subprocess.Popen) -> str:
    """The child's first stdout line ("probing" once pinned), "" if it exits or stays silent too long."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=STARTED_WAIT_S):
            return ""
    return proc.stdout.readline().strip()


@dataclass
class HostProbes:
    """The probes of one cell, by side; `record` gives the cell's `host_probe`."""

    processes: list[ProbeProcess]

    def record(self, start_s: float, end_s: float) -> HostProbe:
        """Each side's record over the measured window [start_s, end_s] (unix s)."""
        return HostProbe(INTERVAL_MS).with_sides({p.side: p.record(start_s, end_s) for p in self.processes})

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


@contextmanager
def probing(cpus_by_side: Mapping[str, Collection[int]], directory: Path, max_s: float) -> Iterator[HostProbes]:
    """Probes on each side's cores for the block (every child stopped however the block ends)."""
    probes = HostProbes([start_probe(side, cpus, directory / f"{side}.bin", max_s)
                         for side, cpus in cpus_by_side.items()])
    try:
        for process in probes.processes:  # all started first: each takes ~50 ms to import and pin
            process.started()
        yield probes
    finally:
        probes.stop()


if __name__ == "__main__":
    sys.exit(child_main())

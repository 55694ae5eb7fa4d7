"""What a device run leaves in `--out`: at most 8 files, directly in it, each written as the run goes.

A lent machine returns at most 8 files from its output folder, no more than two folders down, and a
call is killed at its limit. So the run's subprocesses write into a work folder elsewhere, and this
module keeps `--out` current from it:

- `ResultsCopier`: every complete line the capacity runs append to their `results.jsonl` files is
  appended to `--out/results.jsonl` as it appears (a poll every half second), so a run killed part-way
  keeps every cell measured until then;
- `Console`: the run's console, echoed to `--out/run.log`;
- `RunRecord`: `--out/device-run.json`, rewritten (atomically) after every step;
- `summarise`: per configuration and request batch, from the results' JSON lines read as plain dicts
  (older records lack the fields): the device floor at the request's batch and the mean time of each
  server phase.

Standard library only (it runs before the bundle's wheels are installed). Not for: deciding what runs
(`loadtest.bundle.budget`) or running it (`loadtest.bundle.device_run`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

OUT_FILES = ("results.jsonl", "report.md", "device-run.json", "run.log", "device-plan.toml", "profile-stacks.txt",
             "profile-dump.txt")  # ≤ 8: what a lent machine returns


class ResultsCopier:
    """Appends new complete lines of every `results.jsonl` under `work` to `dest`, as they appear."""

    def __init__(self, work: Path, dest: Path, poll_s: float = 0.5):
        self.work, self.dest, self.poll_s = work, dest, poll_s
        self.offsets: dict[Path, int] = {}
        self.lines = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poll(self) -> int:
        """Copy what is new since the last poll; the number of lines copied."""
        copied = 0
        with self._lock:
            for source in sorted(self.work.rglob("results.jsonl")):
                copied += self._copy_new(source)
            self.lines += copied
        return copied

    def _copy_new(self, source: Path) -> int:
        offset = self.offsets.get(source, 0)
        try:
            with source.open("rb") as f:
                f.seek(offset)
                chunk = f.read()
        except OSError:
            return 0
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next poll
        if not complete:
            return 0
        with self.dest.open("ab") as out:
            out.write(complete)
            out.flush()
            os.fsync(out.fileno())
        self.offsets[source] = offset + len(complete)
        return complete.count(b"\n")

    def start(self) -> ResultsCopier:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="results-copier", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.poll()

    def stop(self) -> None:
        """Stop polling, after one last poll."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.poll()


class Console:
    """Lines to the console and to `run.log`, with the time since the start."""

    def __init__(self, log: Path, stream: TextIO = sys.stdout):
        self.stream = stream
        self.file = log.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def say(self, line: str) -> None:
        with self._lock:
            for target in (self.stream, self.file):
                target.write(line.rstrip("\n") + "\n")
                target.flush()

    def close(self) -> None:
        self.file.close()


class RunRecord(dict):
    """`device-run.json`: a dict written whole after each change (a killed run keeps the last step's)."""

    def __init__(self, path: Path, **initial: Any):
        super().__init__(**initial)
        self.path = path

    def write(self) -> None:
        partial = self.path.with_name(f".{self.path.name}.partial")
        partial.write_text(json.dumps(self, indent=2, default=str) + "\n")
        os.replace(partial, self.path)

    def update_and_write(self, **values: Any) -> None:
        self.update(values)
        self.write()


def read_lines(path: Path) -> list[dict]:
    """Every JSON line of a results file as a plain dict (lines that do not parse are skipped)."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def summarise(records: Iterable[dict]) -> dict[str, dict[str, dict]]:
    """Per configuration (server name) and request batch: cells, the device floor at that batch, and the
    mean of the server's request latency and of each of its phases, over the cells that recorded them."""
    grouped: dict[str, dict[str, list[dict]]] = {}
    for record in records:
        server = (record.get("server") or {}).get("name", "?")
        batch = str((record.get("load") or {}).get("request_batch_size", "?"))
        grouped.setdefault(server, {}).setdefault(batch, []).append(record)
    return {server: {batch: _summary(cells, batch) for batch, cells in batches.items()}
            for server, batches in grouped.items()}


def _summary(cells: list[dict], batch: str) -> dict:
    phases = [c.get("server_phases") or {} for c in cells]
    return {"cells": len(cells),
            "device_floor": device_floor_at([c.get("device_floor") or {} for c in cells], batch),
            "request_latency_mean_us": weighted_mean([p.get("request_latency") for p in phases]),
            "phases_mean_us": {name: weighted_mean([(p.get("phases") or {}).get(name) for p in phases])
                               for name in dict.fromkeys(n for p in phases for n in (p.get("phases") or {}))},
            "gc_pauses": gc_pauses([p.get("gc_pauses") for p in phases])}


def gc_pauses(windows: list[Any]) -> dict | None:
    """The server's garbage collections over the cells: how many, their mean and the slowest bucket (µs)."""
    found = [w for w in windows if isinstance(w, dict) and w.get("count") is not None]
    if not found:
        return None
    slowest = [w["max_us"] for w in found if isinstance(w.get("max_us"), (int, float))]
    return {"count": sum(w["count"] for w in found), "mean_us": weighted_mean(found),
            "max_us": max(slowest) if slowest else None}


def weighted_mean(windows: list[Any]) -> float | None:
    """The mean over several `{"mean_us", "count"}` windows, weighted by their counts; None without any."""
    pairs = [(w["mean_us"], w.get("count") or 0) for w in windows
             if isinstance(w, dict) and isinstance(w.get("mean_us"), (int, float))]
    total = sum(count for _, count in pairs)
    if not pairs:
        return None
    if total <= 0:
        return round(sum(mean for mean, _ in pairs) / len(pairs), 1)
    return round(sum(mean * count for mean, count in pairs) / total, 1)


def device_floor_at(floors: list[dict], batch: str) -> dict | None:
    """The first measured floor of the cells (else the first `unknown` one, with its note) at the padded
    batch the request runs as (the smallest floor batch ≥ the request's); None when none was recorded."""
    measured = [f for f in floors if f and f.get("source") != "unknown"]
    if not measured:
        unknown = [f for f in floors if f]
        return {"source": "unknown", "note": unknown[0].get("note", "")} if unknown else None
    floor = measured[0]
    entries = sorted((e for e in floor.get("batches") or () if isinstance(e, dict) and e.get("batch_size")),
                     key=lambda e: e["batch_size"])
    size = int(batch) if batch.isdigit() else 0
    at = next((e for e in entries if e["batch_size"] >= size), entries[-1] if entries else None)
    return {**{k: floor.get(k) for k in ("source", "device", "runtime", "round_trip_us", "round_trip_note")},
            "at_batch": at}

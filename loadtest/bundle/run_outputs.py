"""What a device run leaves in `--out`: at most 8 files, directly in it, each written as the run goes.

A lent machine returns at most 8 files from its output folder, no more than two folders down, and a
call is killed at its limit. So the run's subprocesses write into a work folder elsewhere, and this
module keeps `--out` current from it:

- `ResultsCopier`: every complete line the capacity runs append to their `results.jsonl` files is
  appended to `--out/results.jsonl` as it appears (a poll every half second), so a run killed part-way
  keeps every cell measured until then;
- `Console`: the run's console, echoed to `--out/run.log`;
- `RunRecord`: `--out/device-run.json`, rewritten (atomically) after every step;
- `figures_record`: the report's `figures.json` (the decision, the card's ratios, and per configuration and
  request batch the server's mean latency, the device floor at the batch the server ran, the peak, ...) as
  `device-run.json` keeps it: read, never recomputed, so the record and the report print one number.

Standard library only (it runs before the bundle's wheels are installed). Not for: deciding what runs
(`loadtest.bundle.budget`) or running it (`loadtest.bundle.device_run`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
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


def figures_record(path: Path) -> dict:
    """What `device-run.json` keeps of the report's `figures.json` (`loadtest.report.figures`): the decision
    and the report's first sentences, the card's ratios (each with the value every table prints), and per
    configuration and request batch the figures the report prints
    (the same values, not recomputed here); {} when the report wrote none."""
    if not path.is_file():
        return {}
    try:
        written = json.loads(path.read_text())
    except ValueError:
        return {}
    by_configuration: dict[str, dict[str, dict]] = {}
    for figures in written.get("figures") or ():
        by_configuration.setdefault(figures["configuration"], {})[str(figures["request_batch"])] = figures
    card = written.get("card") or {}
    return {"decision": card.get("lines") or written.get("headline") or [], "ratios": card.get("ratios") or {},
            "by_configuration": by_configuration}


def answer_lines(by_configuration: dict[str, dict[str, dict]]) -> list[str]:
    """Per configuration and request batch, the report's answer beside the device alone, served ÷ device alone and
    the tool ceiling (`figures.json`'s own values): `gpu-off, request batch 32: capacity 1,234.5 req/s; the device
    alone 341,072 images/s at batch 32; served ÷ device alone 12%; tool ceiling ≥ 2,469.0 req/s (2× the answer)`."""
    lines = []
    for label, batches in by_configuration.items():
        for batch, f in batches.items():
            floor, share = f.get("device_floor") or {}, f.get("served_share_of_floor")
            callers = f", {floor['callers']} callers at once" if (floor.get("callers") or 1) > 1 else ""
            alone = (f"the device alone {floor['images_per_s']:,.0f} images/s at batch {floor['batch']}{callers}"
                     if floor else "the device alone not measured")
            served = "" if share is None else f"; served ÷ device alone {share:.0%}"
            ceiling = (f.get("tool_ceiling") or {}).get("text")
            tool = f"; tool ceiling {ceiling}" if ceiling else ""
            lines.append(f"{label}, request batch {batch}: {f.get('at')}; {alone}{served}{tool}")
    return lines


"""Each capacity search on the console as it narrows: one line per search, its range (or what it has so far), how
wide, and the time its budget has left.

In a terminal the lines are live (`rich.live.Live`, redrawn in place); without one (a pipe, a log, CI) each search's
line is printed whenever it changes, at most once every `PLAIN_EVERY_S` seconds, and once more as it ends. Lines said
meanwhile (`print`) go above the live lines. The cell-by-cell lines are the run's log file's
(`loadtest.measure.cell_sweep.CellRunner.detail`); `--verbose` prints them too.

    progress = Progress(sys.stdout)
    with progress.shown():
        progress.update("run/1", "search 1 (cpu-off, p99 <= 50 ms): range 248–283.5 req/s (x1.14); 61 s of 98 s left")

Not for: what a search decides (`loadtest.search.capacity`) or the text of its range (`range_text`, here, reads its
steps through `loadtest.judge.conclusion.conclude`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from loadtest.evidence.objective import Objective
from loadtest.judge.conclusion import conclude
from loadtest.judge.verdicts import Step

PLAIN_EVERY_S = 5.0  # without a terminal, a search's line at most this often


def range_text(steps: Sequence[Step], objective: Objective) -> str:
    """What a search's steps say so far: `range 248–283.5 req/s (×1.14)`, `≥ 248 req/s (no rate above shown to fail
    yet)`, or `no rate passed yet`."""
    found = conclude(steps, objective)
    if found.answer is None:
        return "no rate passed yet"
    low = found.answer.rate_rps
    kind = "" if found.capacity is not None else ", not confirmed"
    upper = found.upper_rps()
    if upper is None:
        return f"≥ {low:g} req/s{kind} (no rate above shown to fail yet)"
    return f"range {low:g}–{upper:g} req/s{kind} (×{upper / low:.2f})"


@dataclass
class Progress:
    """The searches' lines, live in a terminal, plain every few seconds elsewhere."""

    out: TextIO
    clock: Callable[[], float] = time.monotonic
    live: bool | None = None  # None: a terminal's
    _lines: dict[str, str] = field(default_factory=dict)
    _printed: dict[str, tuple[float, str]] = field(default_factory=dict)
    _live: Live | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.live is None:
            self.live = bool(getattr(self.out, "isatty", lambda: False)())

    @contextmanager
    def shown(self) -> Iterator[Progress]:
        """The live lines drawn for the block (in a terminal); every line's last state printed where not live."""
        if self.live:
            self._live = Live(Text(""), console=Console(file=self.out), refresh_per_second=4, transient=False,
                              redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        try:
            yield self
        finally:
            if self._live is not None:
                self._live.stop()
                self._live = None
            else:
                self._flush()

    def update(self, key: str, text: str) -> None:
        """Search `key`'s line is now `text`."""
        with self._lock:
            self._lines[key] = text
            if self._live is not None:
                self._live.update(Text("\n".join(self._lines.values())))
                return
            said = self._printed.get(key)
            if said is None or (self.clock() - said[0] >= PLAIN_EVERY_S and said[1] != text):
                self._write(key, text)

    def print(self, text: str) -> None:
        """A line said meanwhile: above the live lines in a terminal, as it is elsewhere."""
        with self._lock:
            if self._live is not None:
                self._live.console.print(Text(text))
            else:
                self.out.write(text + "\n")
                self.out.flush()

    def _flush(self) -> None:
        with self._lock:
            for key, text in self._lines.items():
                if self._printed.get(key, (0.0, ""))[1] != text:
                    self._write(key, text)

    def _write(self, key: str, text: str) -> None:
        self._printed[key] = (self.clock(), text)
        self.out.write(text + "\n")
        self.out.flush()


__all__ = ["PLAIN_EVERY_S", "Progress", "range_text"]

"""Interleaved turns: several searches, each deciding in its own thread, their cells measured one at a time on
the calling thread, in short alternating slices, so that what is compared sees the same minutes.

    results = interleave([search_a, search_b], between=reference_cell)

Each body gets a `Turn` and calls `turn.call(measure)` for every cell it wants; the scheduler runs those calls
on the caller's thread (where Ctrl-C lands and where the cell is recorded), one body's call per slot of a round.
Rounds alternate their order (A B, then B A, then A B: the ABBA design, which cancels a drift that is linear in
time), and `between(round)` runs after every round while a body is still going (the reference cell). A body that
finishes leaves the rotation. A body's `turn.clock()` runs only while it decides or is measured, never while it
waits for the others, so a per-search time budget means the same with one server or several.

A call may be *held* (`turn.call(measure, held=True)`, a search's final confirmation) or be an *agreement*
(`turn.agree(passed, round)`): a held call waits until every body still going has a held call or an agreement
waiting, then all of them run in one round, so that final confirmations are measured in the same minutes. The
agreements, once every body still going has one waiting, are answered together (`Agreement`): `STAND` where every
answer passed, confirmed within `SAME_MINUTES` rounds of each other (`turn.last_round`: the round of a body's
last call); `AGAIN` where every answer passed in different minutes, to those confirmed before the newest one's
minutes (they confirm again, held, so all in one round, while the newest waits: each confirmation more at a knee
is one more chance to fail, so none is measured that the same minutes do not need); `WAIT` where one did not pass
(it searches on below; the others agree again when it has its next answer: `loadtest.search.capacity`).
Waiting while held is not on the body's clock.

Ctrl-C (or the cell sweep's `Interrupted`) in a call or in `between` stops every body at its next call (the call
raises `Interrupted`): each answers from what it measured, and `interleave` raises `Interrupted` after all have
ended. Any other error in a call is raised in the body that asked for it.

Not for: what is measured (`loadtest.search.capacity_search`) or the search's decisions (`loadtest.search.capacity`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from loadtest.measure.cell_sweep import Interrupted
from loadtest.search.search_settings import Agreement

T = TypeVar("T")
POLL_S = 0.2  # the scheduler's wait for a body, in slices short enough for Ctrl-C to land
JOIN_S = 60.0  # a stopped body's time to answer from what it measured


@dataclass(frozen=True)
class _Done(Generic[T]):
    value: T | None = None
    error: BaseException | None = None


@dataclass(frozen=True)
class _Ask:
    """A body's call: run `measure` in its slot; a held one waits for every body's held call or agreement."""

    measure: Callable[[], Any]
    held: bool = False


@dataclass(frozen=True)
class _Agree:
    """A body's say on its final answer: whether it passed, and the round its confirmation was measured in."""

    passed: bool
    round: int | None


# Confirmations this many rounds apart or fewer count as measured in the same minutes: a round is one cell of each
# search (8-12 s with two searches here), so about half a minute. At 1 round, two anchors confirmed 16 s apart (2
# rounds, the reference cell unchanged between them) were confirmed again two minutes later, in a drift's slowest
# minutes, where no rate met the objective (make bench-drift, 2026-11-27 05:01Z): the same minutes, tested again.
SAME_MINUTES = 3


class Turn:
    """One body's seat: `call` hands a measurement to the scheduler and waits for its result."""

    def __init__(self, index: int) -> None:
        self.index = index
        self._asks: queue.Queue[_Ask | _Agree | _Done] = queue.Queue()
        self._replies: queue.Queue[tuple[bool, Any]] = queue.Queue()
        self._waited = 0.0  # seconds spent waiting for the others' cells
        self._posted_at: float | None = None
        self._held: _Ask | _Agree | None = None  # a held call or agreement, waiting for the others'
        self._held_at = 0.0
        self.last_round: int | None = None  # the round this body's last call was measured in

    # ------------------------------------------------------------------ the body's side
    def call(self, measure: Callable[[], T], held: bool = False) -> T:
        """`measure()` run on the scheduler's thread in this body's slot; its exception raised here. `held`: only
        in a round where every body still going has a held call or an agreement waiting."""
        return self._ask(_Ask(measure, held))

    def agree(self, passed: bool, round_: int | None) -> Agreement:
        """`STAND`, `AGAIN` or `WAIT` (`Agreement`, see the module), once every body still going has said whether
        its final answer passed and the round it was confirmed in (`round_`; None: not confirmed)."""
        return self._ask(_Agree(passed, round_))

    def _ask(self, item: _Ask | _Agree) -> Any:
        self._posted_at = time.monotonic()
        self._asks.put(item)
        ok, value = self._replies.get()
        if not ok:
            raise value
        return value

    def clock(self) -> float:
        """Monotonic seconds, less the time this body spent waiting for the others' turns."""
        return time.monotonic() - self._waited

    # ------------------------------------------------------------------ the scheduler's side
    def _next(self) -> _Ask | _Agree | _Done:
        while True:
            try:
                item = self._asks.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if not isinstance(item, _Done) and self._posted_at is not None:
                self._waited += time.monotonic() - self._posted_at
            return item

    def _hold(self, item: _Ask | _Agree) -> None:
        self._held, self._held_at = item, time.monotonic()

    def _release(self) -> _Ask | _Agree:
        """The held item, its wait taken off the body's clock."""
        item, self._held = self._held, None
        assert item is not None
        self._waited += time.monotonic() - self._held_at
        return item

    def _answer(self, ok: bool, value: Any) -> None:
        self._replies.put((ok, value))

    def _finished(self, timeout_s: float) -> _Done | None:
        """After a stop: the body's end; any call it asks for meanwhile is answered Interrupted."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                item = self._asks.get(timeout=left)
            except queue.Empty:
                return None
            if isinstance(item, _Done):
                return item
            self._answer(False, Interrupted())
        return None


def interleave(bodies: Sequence[Callable[[Turn], T]], between: Callable[[int], None] | None = None) -> list[T]:
    """Every body's result, in order; their calls measured one at a time in alternating rounds (see the module).
    Raises Interrupted after every body ended when Ctrl-C or Interrupted came; a body's own error is re-raised."""
    turns = [Turn(i) for i in range(len(bodies))]
    for body, turn in zip(bodies, turns, strict=True):
        threading.Thread(target=_run_body, args=(body, turn), daemon=True, name=f"search-{turn.index}").start()
    done: dict[int, _Done] = {}
    try:
        _rounds(turns, done, between)
    except (Interrupted, KeyboardInterrupt):
        _stop(turns, done)
        raise Interrupted() from None
    return [_value(done[t.index]) for t in turns]


def _run_body(body: Callable[[Turn], Any], turn: Turn) -> None:
    try:
        turn._asks.put(_Done(value=body(turn)))
    except BaseException as exc:  # noqa: BLE001 - handed to the scheduler, re-raised on its thread
        turn._asks.put(_Done(error=exc))


def _rounds(turns: list[Turn], done: dict[int, _Done], between: Callable[[int], None] | None) -> None:
    active = list(turns)
    number = 0
    while active:
        order = active if number % 2 == 0 else active[::-1]
        if all(turn._held is not None for turn in active):
            served = _together(order, number)
        else:
            served = _round(order, active, done, number)
        if not served:
            continue
        number += 1
        if active and between is not None:
            between(number)


def _round(order: list[Turn], active: list[Turn], done: dict[int, _Done], number: int) -> bool:
    """One slot for every body not holding: its call served, a held one kept; whether any call ran."""
    served = False
    for turn in order:
        if turn._held is not None:
            continue
        item = turn._next()
        if isinstance(item, _Done):
            done[turn.index] = item
            active.remove(turn)
        elif isinstance(item, _Agree) or item.held:
            turn._hold(item)
        else:
            _serve(turn, item.measure, number)
            served = True
    return served


def _together(order: list[Turn], number: int) -> bool:
    """Every body holds: their held calls run in this one round; where none does, their agreements are answered
    (`_agreement`). A mix runs the calls first."""
    calls = [turn for turn in order if isinstance(turn._held, _Ask)]
    if calls:
        for turn in calls:
            item = turn._release()
            assert isinstance(item, _Ask)
            _serve(turn, item.measure, number)
        return True
    said = [turn._release() for turn in order]
    for turn, answer in zip(order, _agreements([item for item in said if isinstance(item, _Agree)]), strict=True):
        turn._answer(True, answer)
    return False


def _agreements(said: Sequence[_Agree]) -> list[Agreement]:
    """Each body's answer (see the module): where the answers passed in different minutes, only those confirmed
    before the newest's minutes confirm again; the newest waits for them, measuring nothing."""
    if not all(item.passed for item in said):
        return [Agreement.WAIT] * len(said)
    known = [item.round for item in said if item.round is not None]
    if len(known) == len(said) and max(known) - min(known) <= SAME_MINUTES:
        return [Agreement.STAND] * len(said)
    newest = max(known, default=None)
    return [Agreement.WAIT if item.round is not None and newest is not None and newest - item.round <= SAME_MINUTES
            else Agreement.AGAIN for item in said]


def _serve(turn: Turn, measure: Callable[[], Any], number: int) -> None:
    turn.last_round = number
    try:
        value = measure()
    except (Interrupted, KeyboardInterrupt):
        turn._answer(False, Interrupted())
        raise
    except Exception as exc:  # noqa: BLE001 - the body that asked handles it, as it would measuring itself
        turn._answer(False, exc)
        return
    turn._answer(True, value)


def _stop(turns: list[Turn], done: dict[int, _Done]) -> None:
    """Every body still going is answered Interrupted at its next call; each one's end is collected."""
    for turn in turns:
        if turn.index not in done:
            turn._answer(False, Interrupted())
    for turn in turns:
        if turn.index not in done:
            ended = turn._finished(JOIN_S)
            if ended is not None:
                done[turn.index] = ended


def _value(done: _Done[T]) -> T:
    if done.error is not None:
        raise done.error
    return done.value  # type: ignore[return-value]

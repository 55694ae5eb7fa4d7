"""Interleaved turns (`loadtest.search.interleave`): bodies deciding in their own threads, their calls run one at a
time on the caller's thread in ABBA rounds, a reference between rounds, Ctrl-C ending every body with an answer."""

from __future__ import annotations

import threading
import time

import pytest

from loadtest.measure.cell_sweep import Interrupted
from loadtest.search.interleave import Turn, interleave
from tests.support import timing


def body(name: str, calls: int, log: list[str], sleep_s: float = 0.0):
    def run(turn: Turn) -> str:
        for n in range(1, calls + 1):
            def measure(n: int = n) -> str:
                assert threading.current_thread() is threading.main_thread()  # measured on the caller's thread
                time.sleep(sleep_s)
                log.append(f"{name}{n}")
                return f"{name}{n}"
            assert turn.call(measure) == f"{name}{n}"
        return f"{name} done"
    return run


def test_rounds_alternate_their_order_and_the_reference_runs_between():
    log: list[str] = []
    results = interleave([body("A", 3, log), body("B", 3, log)], between=lambda n: log.append(f"ref{n}"))
    assert results == ["A done", "B done"]
    assert log == ["A1", "B1", "ref1", "B2", "A2", "ref2", "A3", "B3", "ref3"]


def test_a_body_that_finishes_leaves_the_rotation():
    log: list[str] = []
    interleave([body("A", 1, log), body("B", 3, log)])
    assert log == ["A1", "B1", "B2", "B3"]


@pytest.mark.integration  # A's clock runs while A's thread wakes and decides, this machine's speed: timed tests
def test_a_bodys_clock_does_not_run_while_the_others_are_measured():
    clocks: dict[str, float] = {}

    def timed(turn: Turn) -> None:
        start = turn.clock()
        for _ in range(3):
            turn.call(lambda: None)
        clocks["A"] = turn.clock() - start

    started = time.monotonic()
    interleave([timed, body("B", 3, [], sleep_s=0.2)])
    assert time.monotonic() - started >= 0.6  # B's three calls took 0.6 s of the wall
    timing.at_most("A's clock over its three calls (s)", clocks["A"], 0.3)  # ... none of them on A's clock


def test_an_error_in_a_call_is_raised_in_the_body_that_asked():
    def failing(turn: Turn) -> str:
        def measure() -> None:
            raise OSError("no such server")
        try:
            turn.call(measure)
        except OSError as exc:
            return f"handled: {exc}"
        return "not raised"

    assert interleave([failing, body("B", 1, [])]) == ["handled: no such server", "B done"]


def test_ctrl_c_ends_every_body_with_its_answer_then_raises_interrupted():
    answers: dict[str, str] = {}

    def searching(name: str, interrupt_at: int | None):
        def run(turn: Turn) -> None:
            made = 0
            try:
                while True:
                    def measure(made: int = made) -> None:
                        if interrupt_at is not None and made + 1 == interrupt_at:
                            raise KeyboardInterrupt()
                    turn.call(measure)
                    made += 1
            except Interrupted:
                answers[name] = f"interrupted after {made} cells"
        return run

    with pytest.raises(Interrupted):
        interleave([searching("A", None), searching("B", 2)])
    # round 1: A, B; round 2 starts with B, whose second cell is interrupted before A measures again
    assert answers == {"A": "interrupted after 1 cells", "B": "interrupted after 1 cells"}


def test_held_calls_wait_for_every_body_and_run_in_one_round_then_the_bodies_agree():
    log: list[str] = []
    agreed: dict[str, str] = {}

    def final(name: str, before: int, passed: bool):
        def run(turn: Turn) -> None:
            for n in range(before):
                turn.call(lambda n=n: log.append(f"{name}{n}"))
            turn.call(lambda: log.append(f"{name}-final"), held=True)
            agreed[name] = turn.agree(passed, turn.last_round)
        return run

    interleave([final("A", 0, True), final("B", 3, True)])
    assert log[:3] == ["B0", "B1", "B2"]  # A's final waited for B's: both in one round (its order ABBA's)
    assert sorted(log[3:]) == ["A-final", "B-final"]
    assert agreed == {"A": "stand", "B": "stand"}  # both passed, confirmed in one round
    log.clear()
    interleave([final("A", 1, True), final("B", 1, False)])
    assert agreed == {"A": "wait", "B": "wait"}  # one did not pass: it searches on, the other waits for it

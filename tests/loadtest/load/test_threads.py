"""The native call threads of a load process: hand-offs, the limit, stopping, one client per thread."""

from __future__ import annotations

import threading
import time

import pytest

from loadtest.load.threads import CallThreads, Schedule, wait_for
from tests.support import timing


class SlowClient:
    """A client whose calls block their thread `hold_s` (as a blocking gRPC call does) and return the job."""

    def __init__(self, hold_s: float, made: list) -> None:
        self.hold_s, self.made = hold_s, made
        self.model_version = None
        self.closed = False

    def fork(self) -> SlowClient:
        twin = SlowClient(self.hold_s, self.made)
        self.made.append((twin, threading.get_ident()))
        return twin

    def call(self, index: int, intended: float | None = None):
        time.sleep(self.hold_s)
        self.model_version = 7
        return index, intended, threading.get_ident()

    def close(self) -> None:
        self.closed = True


class Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started, self.records = 0, []

    def start(self) -> None:
        with self.lock:
            self.started += 1

    def record(self, record, client) -> None:
        with self.lock:
            self.records.append((record, client))


def pool(hold_s: float, limit: int, pool_waits: list | None = None):
    made, counts = [], Counts()
    on_wait = pool_waits.append if pool_waits is not None else (lambda intended: None)
    threads = CallThreads(SlowClient(hold_s, made).fork, counts.start, counts.record, limit, on_pool_wait=on_wait,
                          late_after_s=0.002)
    return threads, made, counts


def slots_every(gap_s: float, count: int, start_in_s: float = 0.05):
    start = time.time() + start_in_s
    return Schedule(iter([(i, start + i * gap_s, gap_s) for i in range(count)]))


def open_loop_sends(slots: int):
    """An open loop of `slots` 1 ms calls, 10 ms apart, on up to 4 threads: its records, the clients made (with
    their threads), and when each slot's call returned (time.time)."""
    threads, made, counts = pool(hold_s=0.001, limit=4)
    returned_at = {}
    threads.on_start = lambda: None
    original = threads.on_record

    def record(result, client):
        returned_at[result[0]] = time.time()
        original(result, client)
    threads.on_record = record
    threads.start_open_loop(slots_every(0.01, slots), spin_share=0.2)
    assert wait_for(threads.all_finished, 10.0)
    return counts.records, made, returned_at


def test_open_loop_threads_send_every_slot_once_each_on_its_own_threads_client():
    records, made, _ = open_loop_sends(20)
    assert sorted(r[0] for r, _ in records) == list(range(20))  # every slot once
    assert all(intended is not None for (_, intended, _), _ in records)
    owner = {id(client): ident for client, ident in made}
    assert len(made) <= 4 and all(record[2] == owner[id(client)] for record, client in records)


@pytest.mark.integration  # how late a send is, is this machine's speed: with the timed tests, one at a time
def test_open_loop_threads_send_near_each_slots_time():
    records, _, returned_at = open_loop_sends(20)
    lateness = sorted(returned_at[i] - intended - 0.001 for (i, intended, _), _ in records)
    timing.at_most("median send's lateness (s)", lateness[len(lateness) // 2], 0.005,
                   f"lateness (ms): {[round(s * 1e3, 2) for s in lateness]}")


def test_overlapping_calls_start_more_threads_up_to_the_limit_then_slots_wait():
    waits: list = []
    threads, made, counts = pool(hold_s=0.2, limit=3, pool_waits=waits)
    threads.start_open_loop(slots_every(0.02, 12), spin_share=0.0)
    assert wait_for(threads.all_finished, 20.0)
    assert len(threads.workers) == 3 and len(counts.records) == 12  # grown to the limit, nothing dropped
    assert waits, "slots past their time with every thread busy count as pool waits"
    assert threads.model_version() == 7


def test_stop_ends_the_open_loop_after_the_calls_in_progress():
    threads, made, counts = pool(hold_s=0.05, limit=2)
    threads.start_open_loop(slots_every(0.01, 1000), spin_share=0.0)
    assert wait_for(lambda: len(counts.records) >= 3, 5.0)
    assert threads.stop(timeout_s=5.0) and all(client.closed for client, _ in made)
    assert len(counts.records) < 1000


def test_a_back_to_back_thread_calls_until_told_to_stop():
    threads, made, counts = pool(hold_s=0.005, limit=1)
    worker = threads.start_back_to_back(100, keep_going=lambda: True)
    assert wait_for(lambda: len(counts.records) >= 5, 5.0)
    worker.stopping = True
    assert wait_for(lambda: worker.finished, 5.0)
    indices = [record[0] for record, _ in counts.records]
    assert indices == list(range(101, 101 + len(indices)))  # closed loop: no intended time, next index each call
    assert all(record[1] is None for record, _ in counts.records)


def test_a_back_to_back_thread_ends_when_its_condition_does():
    threads, made, counts = pool(hold_s=0.001, limit=1)
    allowed = iter(range(4))
    worker = threads.start_back_to_back(0, keep_going=lambda: next(allowed, None) is not None)
    assert wait_for(lambda: worker.finished, 5.0) and len(counts.records) == 4


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        CallThreads(lambda: None, lambda: None, lambda r, c: None, 0)

"""The native call threads of a load process: hand-offs, the limit, stopping, one client per thread."""

from __future__ import annotations

import threading
import time

import pytest

from loadtest.load.threads import CallThreads, wait_for


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


def pool(hold_s: float, limit: int):
    made, counts = [], Counts()
    threads = CallThreads(SlowClient(hold_s, made).fork, counts.start, counts.record, limit)
    return threads, made, counts


def test_sends_go_to_new_threads_up_to_the_limit_then_wait_for_room():
    threads, made, counts = pool(hold_s=0.2, limit=2)
    assert threads.try_send(1, 10.0) and threads.try_send(2, 11.0)
    assert not threads.try_send(3, 12.0) and not threads.has_room()  # both threads busy
    assert wait_for(threads.has_room, 5.0)
    assert threads.try_send(3, 12.0)
    assert wait_for(lambda: len(counts.records) == 3, 5.0)
    assert sorted(r[:2] for r, _ in counts.records) == [(1, 10.0), (2, 11.0), (3, 12.0)]
    assert counts.started == 3 and len(made) == 2  # the third send reused an idle thread
    assert len({ident for _, ident in made}) == 2  # each client made on its own thread
    assert all(client.model_version == 7 for _, client in counts.records) and threads.model_version() == 7
    assert threads.stop(timeout_s=5.0) and all(client.closed for client, _ in made)


def test_each_record_comes_from_the_thread_that_owns_its_client():
    threads, made, counts = pool(hold_s=0.05, limit=3)
    for i in range(3):
        assert threads.try_send(i, float(i))
    assert wait_for(lambda: len(counts.records) == 3, 5.0)
    owner = {id(client): ident for client, ident in made}
    assert all(record[2] == owner[id(client)] for record, client in counts.records)
    assert threads.stop(timeout_s=5.0)


def test_stop_ends_busy_threads_after_their_call_and_refuses_new_sends():
    threads, made, counts = pool(hold_s=0.3, limit=2)
    assert threads.try_send(1, 1.0)
    assert threads.stop(timeout_s=5.0)  # waits for the call in flight
    assert len(counts.records) == 1 and not threads.try_send(2, 2.0)


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

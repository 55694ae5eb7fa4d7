"""The gRPC calls of one Locust process, made on native threads, each thread on a channel of its own.

Under gevent (Locust), gRPC's Python layer hands every blocking call's completion-queue wait to
gevent's thread pool and back: two thread hand-offs and a hub wake-up per call. Measured on the
build machine against the no-op server (one core each, `docs/performance.md`), that path cost
110–125 µs of client CPU per call at 32 outstanding and a round trip of 0.35–0.39 ms, against
70–80 µs and 0.29–0.30 ms for the same blocking call made on a native thread. So the calls, their
timestamps (taken on the thread, just around the blocking call: where the bytes leave and
arrive), the response check and the record are made on native threads that never touch gevent.

- Closed loop: each user owns one thread that calls back to back until told to stop.
- Open loop: each user's threads share its `Schedule` of intended send times. A free thread takes
  the next time, waits for it itself (a native sleep, then a spin that yields the CPU: the
  `Dispatcher`), and sends. No hand-off between threads: handing each send from a greenlet to a
  thread put a median 0.5–0.6 ms between the intended time and the send at 3,000 req/s, since the
  woken thread had to wait for the hub to let go of the CPU and the GIL. A thread that starts a
  call while no other thread is waiting for a slot starts another, up to `limit`; with `limit`
  threads busy, a slot whose time has passed waits for the first one free (a pool wait), and its
  latency still counts from its intended time.

A gRPC channel's locks are gevent's once Locust has patched `threading`, and gevent's locks do not
work across native threads: so no channel is shared, each thread opens its own, on a connection of its own
(`loadtest.load.client.CHANNEL_OPTIONS`), as one connection per user in Locust's HTTP users: a server whose
frontends share one port gets as many connections as threads, and a free thread takes the next send, so a busy
frontend's connection takes fewer. Shared state uses the unpatched
`_thread` locks. Records go to `on_record`, called on the thread that made the call: it must be
thread-safe (see `loadtest.load.run_state.RunState.finished`).

Not for: what a call sends or checks (`loadtest.load.client`), or when sends are intended
(`loadtest.load.arrivals`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from gevent import monkey

from loadtest.load.dispatch import Dispatcher

start_native_thread = monkey.get_original("_thread", "start_new_thread")
native_lock = monkey.get_original("_thread", "allocate_lock")
native_sleep = monkey.get_original("time", "sleep")

Slot = tuple[int, float, float]  # (request index, intended send time, gap to the next send)
FIRST_OPEN_LOOP_THREADS = 2


class Schedule:
    """An open-loop user's intended sends, handed out in order to whichever thread asks first."""

    def __init__(self, slots: Iterator[Slot]) -> None:
        self.slots, self.lock = slots, native_lock()

    def take(self) -> Slot | None:
        with self.lock:
            return next(self.slots, None)


class Worker:
    """One native thread with its own client (its own channel)."""

    def __init__(self, pool: CallThreads) -> None:
        self.pool = pool
        self.client: Any = None
        self.stopping = False
        self.finished = False

    def call_back_to_back(self, first_index: int, keep_going: Callable[[], bool]) -> None:
        try:
            self.client = self.pool.make_client()
            index = first_index
            while not self.stopping and keep_going():
                index += 1
                self.pool.on_start()
                self.pool.on_record(self.client.call(index), self.client)
        finally:
            self.close()

    def send_on_schedule(self, schedule: Schedule, dispatcher: Dispatcher, planted_delay_s: float) -> None:
        """Take the next slot, wait for its time, send; until the schedule ends or the pool stops."""
        try:
            self.client = self.pool.make_client()
            while not self.stopping:
                slot = self.pool.take_slot(schedule)
                if slot is None:
                    return
                index, intended, gap_s = slot
                dispatcher.wait_until(intended, gap_s)
                if planted_delay_s > 0:
                    native_sleep(planted_delay_s)
                self.pool.sending(schedule, dispatcher, planted_delay_s)
                self.pool.on_start()
                self.pool.on_record(self.client.call(index, intended), self.client)
        finally:
            self.close()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.finished = True


class CallThreads:
    """The native threads of one Locust user: one closed-loop thread, or an open loop's set."""

    def __init__(self, make_client: Callable[[], Any], on_start: Callable[[], None],
                 on_record: Callable[[Any, Any], None], limit: int,
                 on_pool_wait: Callable[[float], None] = lambda intended: None,
                 late_after_s: float = 0.002) -> None:
        """`on_start()` before each call and `on_record(record, client)` after it, on the calling thread;
        `on_pool_wait(intended)` for a slot taken late while `limit` threads were busy."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.make_client, self.on_start, self.on_record, self.limit = make_client, on_start, on_record, limit
        self.on_pool_wait, self.late_after_s = on_pool_wait, late_after_s
        self.lock = native_lock()
        self.workers: list[Worker] = []
        self.waiting = 0  # threads holding a slot whose call has not started
        self.stopped = False

    def start_back_to_back(self, first_index: int, keep_going: Callable[[], bool]) -> Worker:
        """A closed-loop user's thread: calls back to back while `keep_going()` and not stopped."""
        worker = self._new_worker()
        start_native_thread(worker.call_back_to_back, (first_index, keep_going))
        return worker

    def start_open_loop(self, schedule: Schedule, spin_share: float, planted_delay_s: float = 0.0) -> None:
        """Threads that send `schedule`'s slots on time (`FIRST_OPEN_LOOP_THREADS`, more as calls overlap)."""
        for _ in range(min(FIRST_OPEN_LOOP_THREADS, self.limit)):
            self._start_scheduled(schedule, spin_share, planted_delay_s)

    def take_slot(self, schedule: Schedule) -> Slot | None:
        slot = None if self.stopped else schedule.take()
        if slot is None:
            return None
        with self.lock:
            self.waiting += 1
            all_busy = len(self.workers) >= self.limit and self.waiting == 1
        if all_busy and time.time() - slot[1] > self.late_after_s:
            self.on_pool_wait(slot[1])
        return slot

    def sending(self, schedule: Schedule, dispatcher: Dispatcher, planted_delay_s: float) -> None:
        """A thread leaves its slot for its call: if no other thread waits for the next slot, start one."""
        with self.lock:
            self.waiting -= 1
            grow = self.waiting == 0 and len(self.workers) < self.limit and not self.stopped
        if grow:
            self._start_scheduled(schedule, dispatcher.spin_share, planted_delay_s)

    def _start_scheduled(self, schedule: Schedule, spin_share: float, planted_delay_s: float) -> None:
        worker = self._new_worker()
        dispatcher = Dispatcher(spin_share, sleep=native_sleep, spin=os.sched_yield)
        start_native_thread(worker.send_on_schedule, (schedule, dispatcher, planted_delay_s))

    def _new_worker(self) -> Worker:
        worker = Worker(self)
        with self.lock:
            self.workers.append(worker)
        return worker

    def all_finished(self) -> bool:
        with self.lock:
            return all(worker.finished for worker in self.workers)

    def model_version(self) -> int | None:
        """The model version the server's responses named, from any thread's client."""
        versions = [w.client.model_version for w in list(self.workers) if w.client is not None]
        return next((v for v in versions if v), None)

    def stop(self, timeout_s: float) -> bool:
        """End every thread after its call or wait in progress (each call is bounded by its own
        timeout, each wait by the gap to its slot). True when all ended within `timeout_s`."""
        with self.lock:
            self.stopped = True
            workers = list(self.workers)
        for worker in workers:
            worker.stopping = True
        return wait_for(lambda: all(w.finished for w in workers), timeout_s)


def wait_for(condition: Callable[[], bool], timeout_s: float, step_s: float = 0.01) -> bool:
    """Poll `condition` on gevent's clock (a greenlet waiting on native threads) until true or timed out."""
    import gevent

    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        gevent.sleep(step_s)
    return True

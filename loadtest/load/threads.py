"""The gRPC calls of one Locust process, made on native threads, each thread on a channel of its own.

Under gevent (Locust), gRPC's Python layer hands every blocking call's completion-queue wait to
gevent's thread pool and back: two thread hand-offs and a hub wake-up per call. Measured on the
build machine against the no-op server (one core each, `docs/performance.md`), that path cost
110–125 µs of client CPU per call at 32 outstanding and a round trip of 0.35–0.39 ms, against
70–80 µs and 0.29–0.30 ms for the same blocking call made on a native thread. So the Locust users
here only decide *when* to call: the calls themselves, their timestamps (taken on the thread, just
around the blocking call: where the bytes leave and arrive), the response check and the record
are made on native threads that never touch gevent.

- Closed loop: each user owns one thread that calls back to back until told to stop.
- Open loop: the dispatcher (a greenlet, on time) hands each send to an idle thread, starting a new
  one while fewer than `limit` exist; with `limit` threads busy the send must wait (a pool wait).

A gRPC channel's locks are gevent's once Locust has patched `threading`, and gevent's locks do not
work across native threads: so no channel is shared, each thread opens its own (one connection
per thread, as one connection per user in Locust's HTTP users). Hand-offs use the unpatched
`_thread` locks. Records go to `on_record`, called on the thread that made the call: it must be
thread-safe (see `loadtest.load.run_state.RunState.finished`).

Not for: what a call sends or checks (`loadtest.load.client`), or when it is sent
(`loadtest.load.dispatch`, `loadtest.load.arrivals`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gevent import monkey

start_native_thread = monkey.get_original("_thread", "start_new_thread")
native_lock = monkey.get_original("_thread", "allocate_lock")

Job = tuple[int, float]  # (request index, intended send time)


class Worker:
    """One native thread with its own client (its own channel); runs the jobs it is handed."""

    def __init__(self, pool: CallThreads) -> None:
        self.pool = pool
        self.client: Any = None
        self.job: Job | None = None
        self.wake = native_lock()
        self.wake.acquire()  # held while idle: `hand` releases it
        self.stopping = False
        self.finished = False

    def hand(self, job: Job | None) -> None:
        """Give this (idle) worker its next job; None tells it to end."""
        self.job = job
        self.wake.release()

    def serve_jobs(self) -> None:
        try:
            self.client = self.pool.make_client()
            while True:
                self.wake.acquire()
                if self.job is None:
                    return
                index, intended = self.job
                self.pool.on_start()
                self.pool.on_record(self.client.call(index, intended), self.client)
                if not self.pool.idle(self):
                    return
        finally:
            self.close()

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

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.finished = True


class CallThreads:
    """The native threads of one Locust process: a closed-loop thread per user, an open-loop pool."""

    def __init__(self, make_client: Callable[[], Any], on_start: Callable[[], None],
                 on_record: Callable[[Any, Any], None], limit: int) -> None:
        """`on_start()` before each call and `on_record(record, client)` after it, on the calling thread."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.make_client, self.on_start, self.on_record, self.limit = make_client, on_start, on_record, limit
        self.lock = native_lock()
        self.workers: list[Worker] = []
        self.idle_workers: list[Worker] = []
        self.stopped = False

    def start_back_to_back(self, first_index: int, keep_going: Callable[[], bool]) -> Worker:
        """A closed-loop user's thread: calls back to back while `keep_going()` and not stopped."""
        worker = Worker(self)
        with self.lock:
            self.workers.append(worker)
        start_native_thread(worker.call_back_to_back, (first_index, keep_going))
        return worker

    def try_send(self, index: int, intended_unix_s: float) -> bool:
        """Open loop: hand the call to an idle thread (or a new one); False when `limit` are busy."""
        with self.lock:
            if self.stopped:
                return False
            worker = self.idle_workers.pop() if self.idle_workers else None
            if worker is None and len(self.workers) < self.limit:
                worker = Worker(self)
                self.workers.append(worker)
                start_native_thread(worker.serve_jobs, ())
        if worker is None:
            return False
        worker.hand((index, intended_unix_s))
        return True

    def idle(self, worker: Worker) -> bool:
        """A worker done with its job waits for the next; False once the pool has stopped (it ends)."""
        with self.lock:
            if self.stopped:
                return False
            self.idle_workers.append(worker)
            return True

    def has_room(self) -> bool:
        with self.lock:
            return bool(self.idle_workers) or len(self.workers) < self.limit

    def model_version(self) -> int | None:
        """The model version the server's responses named, from any thread's client."""
        versions = [w.client.model_version for w in list(self.workers) if w.client is not None]
        return next((v for v in versions if v), None)

    def stop(self, timeout_s: float) -> bool:
        """End every thread: idle ones at once, busy ones after their call (each call is bounded by its
        own timeout). True when all ended within `timeout_s`."""
        with self.lock:
            self.stopped = True
            workers, idle = list(self.workers), list(self.idle_workers)
            self.idle_workers.clear()
        for worker in workers:
            worker.stopping = True
        for worker in idle:
            worker.hand(None)
        return wait_for(lambda: all(w.finished for w in workers), timeout_s)


def wait_for(condition: Callable[[], bool], timeout_s: float, step_s: float = 0.01) -> bool:
    """Poll `condition` on gevent's clock (a greenlet waiting on native threads) until true or timed out."""
    import time

    import gevent

    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        gevent.sleep(step_s)
    return True

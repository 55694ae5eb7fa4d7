"""What every server process sets up first: its log format and the event SIGTERM/SIGINT set.

Standard library only, so a pool's supervisor (`serving.pool`) shares it without loading the server, TensorFlow
or a model runtime.

Not for: starting or draining the protocols (`serving.server.app`).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading

STOP_POLL_S = 0.2  # how often a process waiting for SIGTERM/SIGINT looks again


def configure_logging(level: str) -> None:
    """One log format for every server process, on stderr."""
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def stop_requested() -> threading.Event:
    """An event SIGTERM and SIGINT set."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def wait_for_stop(stop: threading.Event) -> None:
    """Block until `stop` is set, waking every `STOP_POLL_S`: Python runs a signal's handler only when the main
    thread runs bytecode, so a signal the kernel hands to another thread (gRPC's, the batcher's) would leave a
    main thread blocked in `stop.wait()` asleep, serving on (a clean clone's SIGTERM test once saw a server take new
    requests for 30 s after its SIGTERM)."""
    while not stop.wait(STOP_POLL_S):
        pass


__all__ = ["STOP_POLL_S", "configure_logging", "stop_requested", "wait_for_stop"]

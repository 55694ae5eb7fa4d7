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


__all__ = ["configure_logging", "stop_requested"]

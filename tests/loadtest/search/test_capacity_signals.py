"""`mnist-bench capacity` takes SIGTERM down Ctrl-C's path (the search answers, the command exits 130), and
puts the previous handler back after."""

from __future__ import annotations

import os
import signal

import pytest

from loadtest.commands.search_commands import sigterm_as_interrupt


def test_sigterm_raises_keyboard_interrupt_inside_and_the_old_handler_comes_back():
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # outside: the handler set before is back
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)

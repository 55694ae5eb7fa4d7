"""serving/deploy/process.py: the one process stopper and the one ready-line waiter."""

from __future__ import annotations

import signal
import subprocess
import sys

import psutil
import pytest

from serving.deploy.process import ServerNotReady, stop_process, wait_ready_line

READY = ('serving ready kind=embedded grpc=127.0.0.1:1 rest=127.0.0.1:2 model=mnist version=1 device=cpu '
         'device_name="X" batching=off')
IGNORES_SIGTERM = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                   "print('ready', flush=True)\ntime.sleep(60)")


def python(code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], **kwargs)


def test_stop_process_terminates_a_child_and_reaps_it():
    child = python("import time; time.sleep(60)")
    stop_process(child, timeout_s=10)
    assert child.returncode == -signal.SIGTERM


def test_stop_process_kills_what_ignores_sigterm_after_the_grace_period():
    child = python(IGNORES_SIGTERM, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"  # the handler is in place
    stop_process(child, timeout_s=0.2)
    assert child.returncode == -signal.SIGKILL
    child.stdout.close()


def test_stop_process_by_pid_waits_until_the_process_is_gone():
    child = python(IGNORES_SIGTERM, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    stop_process(child.pid, timeout_s=0.2)  # by pid, as the launcher stops a recorded server
    assert not psutil.pid_exists(child.pid)
    child.stdout.close()


def test_stop_process_accepts_a_process_that_is_already_gone():
    child = python("pass")
    child.wait(timeout=30)
    stop_process(child)
    stop_process(child.pid)


def test_ready_line_is_read_from_the_log_after_the_offset(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(READY.replace("version=1", "version=0") + "\n")  # an earlier run's line
    offset = log.stat().st_size
    with open(log, "ab") as out:
        child = python(f"import time; print('loading'); print({READY!r}, flush=True); time.sleep(60)", stdout=out)
    try:
        assert wait_ready_line(child, log, offset, timeout_s=30) == READY
    finally:
        stop_process(child)


def test_a_server_that_exits_first_is_reported_with_its_log(tmp_path):
    log = tmp_path / "server.log"
    with open(log, "ab") as out:
        child = python("import sys; print('no model here'); sys.exit(3)", stdout=out)
    with pytest.raises(ServerNotReady, match=r"exited with code 3 before it was ready(.|\n)*no model here"):
        wait_ready_line(child, log, 0, timeout_s=30)

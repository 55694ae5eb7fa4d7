"""A local server the tool did not start, found by the port it listens on (issue #41): a pooled server's
frontends listen, its supervisor and device owner do not; all of them are the server's processes."""

from __future__ import annotations

import psutil
import pytest

from loadtest.measure.device_sources import ProcessSource, listening_on, server_roots
from serving.deploy.process import start_server

pytestmark = [pytest.mark.integration, pytest.mark.untimed]


def test_a_pooled_servers_supervisor_owner_and_frontends_are_found_by_its_port(exported_model):
    flags = ("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--workers", "2",
             "--null_delay_ms", "1")
    with start_server(*flags, backend="null") as server:
        port = int(server.grpc_target.rsplit(":", 1)[1])
        supervisor = server.proc.pid
        frontends = listening_on(port)
        assert len(frontends) == 2 and supervisor not in frontends  # the frontends share the port
        assert server_roots(port) == [supervisor]  # their one parent, not this test's own tree
        found = {p.pid for p in ProcessSource(*server_roots(port))._processes()}
        assert found == {supervisor, *(p.pid for p in psutil.Process(supervisor).children(recursive=True))}
        assert len(found) == 4  # supervisor, owner, two frontends
    assert isinstance(server_roots(port), str)  # stopped: nothing listens there

"""A server's Prometheus page, read as tests read it."""

from __future__ import annotations

import urllib.request

from serving.protocol.names import METRICS_PATH


def metrics_page(server) -> str:
    """The server's Prometheus metrics page (`server` is anything with a `rest_url`)."""
    with urllib.request.urlopen(server.rest_url + METRICS_PATH, timeout=10) as reply:
        assert reply.status == 200
        return reply.read().decode()


def metric_value(page: str, name: str, labels: str = "") -> float:
    """Value of one sample line `name{labels} value` (labels as written, or none) on a metrics page."""
    prefix = f"{name}{{{labels}}} " if labels else f"{name} "
    for line in page.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {prefix.strip()!r} on the metrics page")

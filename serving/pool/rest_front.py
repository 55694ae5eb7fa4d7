"""The pool's one REST port: the summed metrics page, and every other REST call passed to a frontend.

A pooled server answers REST where a one-process server does (`--rest_api_port`): the metrics path
serves every process's page summed (`serving.pool.metrics_sum`); anything else (status, metadata,
predict) is forwarded to the frontends' internal loopback REST ports in turn, and their answer returned
as it is. A frontend that cannot be reached is a 503 with TF Serving's error body.

Not for: high request rates (gRPC, on the shared port, is the load path).
"""

from __future__ import annotations

import http.client
import itertools
import json
import logging
import threading
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from serving.pool.metrics_sum import sum_pages

log = logging.getLogger("serving.pool")
FORWARD_TIMEOUT_S = 60.0
SCRAPE_TIMEOUT_S = 5.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def read_page(port: int, path: str) -> str:
    """One process's metrics page ("" when it cannot be read: a process restarting)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=SCRAPE_TIMEOUT_S) as answer:
            return answer.read().decode()
    except OSError as exc:
        log.warning("metrics of the process on internal port %d not read: %s", port, exc)
        return ""


class PoolRest:
    """The supervisor's HTTP server: `ports()` gives the processes' internal REST ports (frontends first),
    `extra()` the supervisor's own families."""

    def __init__(self, host: str, port: int, metrics_path: str | None, ports: Callable[[], list[int]],
                 frontend_ports: Callable[[], list[int]], extra: Callable[[], str]) -> None:
        self.metrics_path = metrics_path
        self._ports = ports
        self._frontend_ports = frontend_ports
        self._extra = extra
        self._turn = itertools.count()
        self._serving = False
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]

    def start(self) -> None:
        self._serving = True
        threading.Thread(target=self.httpd.serve_forever, name="pool-rest", daemon=True).start()

    def stop(self) -> None:
        if self._serving:  # shutdown() waits for serve_forever, which never ran otherwise
            self.httpd.shutdown()
        self.httpd.server_close()

    def metrics(self) -> bytes:
        pages = [read_page(port, self.metrics_path or "") for port in self._ports()]
        return (sum_pages([p for p in pages if p]) + self._extra()).encode()

    def forward(self, method: str, path: str, body: bytes, content_type: str) -> tuple[int, str, bytes]:
        ports = self._frontend_ports()
        if not ports:
            return 503, "application/json", json.dumps({"error": "no frontend is up"}).encode()
        port = ports[next(self._turn) % len(ports)]
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=FORWARD_TIMEOUT_S)
        try:
            connection.request(method, path, body=body or None, headers={"Content-Type": content_type})
            answer = connection.getresponse()
            return answer.status, answer.getheader("Content-Type", "application/json"), answer.read()
        except OSError as exc:
            return 503, "application/json", json.dumps({"error": f"frontend unreachable: {exc}"}).encode()
        finally:
            connection.close()

    def _handler(self):
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # noqa: A002  (the base class's name)
                log.debug("rest: " + format, *args)

            def _answer(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _pass(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer(*front.forward(method, self.path, body, self.headers.get("Content-Type", "")))

            def do_GET(self):
                if front.metrics_path and self.path.split("?")[0] == front.metrics_path:
                    self._answer(200, CONTENT_TYPE, front.metrics())
                    return
                self._pass("GET")

            def do_POST(self):
                self._pass("POST")

        return Handler


__all__ = ["PoolRest", "read_page"]

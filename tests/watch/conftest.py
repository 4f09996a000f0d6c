"""Shared fixtures for the watch tests: a /metrics page served on 127.0.0.1 (loopback only)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest


class MetricsPages(http.server.BaseHTTPRequestHandler):
    """Serves `pages` in turn (the last one again once the others are used), as Prometheus text."""

    pages: ClassVar[list[bytes]] = []

    def do_GET(self) -> None:
        body = self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    """The URL of a /metrics endpoint that serves MetricsPages.pages."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), MetricsPages)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/metrics"
    httpd.shutdown()

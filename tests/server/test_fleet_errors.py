"""`fleet` on bad input: no Prometheus, something that is not one, a bad selector - one line, exit 2.

Needs no llama-server or Prometheus: a loopback HTTP server stands in for the wrong answers.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from doctor.sources.live.metrics.prometheus import parse_selector, window
from tests.server.harness import HOST, free_port


class _Wrong(http.server.BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, tuple[int, bytes]]] = {
        "/html/api/v1/query": (200, b"<html>not prometheus</html>"),
        "/err/api/v1/query": (400, b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}'),
    }

    def do_GET(self) -> None:
        prefix = "/" + self.path.split("/")[1]
        code, body = self.answers.get(prefix + "/api/v1/query", (404, b"no"))
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def wrong() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer((HOST, 0), _Wrong)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://{HOST}:{server.server_address[1]}"
    server.shutdown()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from doctor.cli import main

    code = main(["fleet", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_nothing_listening_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "--prometheus", f"http://{HOST}:{free_port()}")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Prometheus" in err and "Traceback" not in err


@pytest.mark.parametrize(("path", "words"), [("/html", "did not answer JSON"), ("/err", "parse error at char 3")])
def test_not_a_prometheus_answer(capsys: pytest.CaptureFixture[str], wrong: str, path: str, words: str) -> None:
    code, out, err = _run(capsys, "--prometheus", wrong + path)
    assert code == 2 and out == ""
    assert words in err and err.count("\n") == 1


@pytest.mark.parametrize("bad", ["job=llama", "{job=~llama}", 'job="a"} or vector(1) {', "ftp://x"])
def test_bad_selector_or_url(capsys: pytest.CaptureFixture[str], bad: str) -> None:
    args = ["--prometheus", bad] if bad.startswith("ftp") else ["--prometheus", "http://127.0.0.1:1", "--match", bad]
    code, _, err = _run(capsys, *args)
    assert code == 2 and err.startswith("llm-doctor: error:")


def test_selector_and_window() -> None:
    assert parse_selector('{job="llama-server", env=~"prod.*"}') == 'job="llama-server", env=~"prod.*"'
    assert parse_selector("") == ""
    assert window(90) == "90s" and window(1) == "10s"

"""watch without a false all-clear: metrics URLs that give nothing, commands that fail or print
nothing known, SIGTERM, findings that wait for the engine to finish loading, crash evidence.

The real CLI in a subprocess (metrics pages served by http.server on 127.0.0.1 only), the watch
session with the real rule base for the live judgement, and the embedded runner with a child that
crashes as the engine did.
"""

from __future__ import annotations

import http.server
import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from doctor.core.events import EndEvent, FindingEvent, LiveEvent, SettingsEvent
from doctor.judge.live_judge import LiveJudge
from doctor.judge.rulebase import RuleBase, load_rulebase
from doctor.sources.live.embedded.runner import RunSettings, run_embedded
from doctor.sources.live.session import TraceSession

ROOT = Path(__file__).resolve().parents[2]
LLAMA_SERVER_LOG = ROOT / "fixtures" / "logs" / "llama-server" / "session-slowdown-then-full.log"
LLAMA_SERVER_METRICS = ROOT / "fixtures" / "traces" / "metrics" / "llama-server.prom"
ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def rules() -> RuleBase:
    return load_rulebase([], env={})


def _watch(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "doctor", "watch", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, check=False, env=ENV)


# -- metrics URLs that give nothing -------------------------------------------------------------

class _Page(http.server.BaseHTTPRequestHandler):
    status: ClassVar[int] = 200
    body: ClassVar[bytes] = b""
    content_type: ClassVar[str] = "text/plain"

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(status: int, body: bytes, content_type: str) -> Iterator[str]:
    handler = type("Page", (_Page,), {"status": status, "body": body, "content_type": content_type})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/metrics"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def html_page() -> Iterator[str]:
    yield from _serve(200, b"<!doctype html><html><body><h1>Welcome</h1></body></html>\n", "text/html")


@pytest.fixture
def not_found() -> Iterator[str]:
    yield from _serve(404, b"404 page not found\n", "text/plain")


@pytest.fixture
def llama_server_metrics() -> Iterator[str]:
    yield from _serve(200, LLAMA_SERVER_METRICS.read_bytes(), "text/plain; version=0.0.4")


@pytest.fixture
def refused() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: the connection is refused
    return f"http://127.0.0.1:{port}/metrics"


@pytest.mark.parametrize("url_fixture", ["refused", "html_page", "not_found"])
def test_a_metrics_url_that_gives_nothing_is_not_an_all_clear(url_fixture: str,
                                                             request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue(url_fixture)
    base = ("--metrics", url, "--metrics-interval", "0.2", "--duration", "0.8")
    run = _watch(*base, "--format", "json")
    assert run.returncode == 4, (run.stdout[-2000:], run.stderr)
    doc = json.loads(run.stdout)
    assert doc["verdict"]["kind"] == "nothing_recognised"
    assert f"no engine metrics were read from {url}" in doc["verdict"]["text"]
    assert any(url in error for error in doc["errors"])  # why: refused, HTTP 404, not a metrics page
    assert doc["summary"]["ok"] == 0  # "Memory (12 ok)" for a page that said nothing was hollow
    text = _watch(*base, "--format", "text")
    assert text.returncode == 4 and "No problems found" not in text.stdout and "Nothing to judge" in text.stdout


def test_a_real_metrics_page_is_evidence(llama_server_metrics: str) -> None:
    run = _watch("--metrics", llama_server_metrics, "--metrics-interval", "0.2", "--duration", "0.8",
                 "--format", "json")
    doc = json.loads(run.stdout)
    assert doc["verdict"]["kind"] != "nothing_recognised" and run.returncode in (0, 1)
    # a metrics page reports no OOM or crash lines: those checks stay unknown, not ok
    oom = next(c for c in doc["checks"] if c["id"] == "LD302")
    assert oom["outcome"] == "unknown"


# -- wrapped commands ----------------------------------------------------------------------------

def test_a_command_that_exits_3_is_a_finding_with_its_last_line() -> None:
    run = _watch("--format", "json", "--", "sh", "-c", "echo hi; echo 'cannot bind port 8080' >&2; exit 3")
    assert run.returncode == 1, run.stdout[-2000:]
    doc = json.loads(run.stdout)
    finding = next(f for f in doc["findings"] if f["id"] == "LD961")
    assert "status 3" in finding["message"] and "cannot bind port 8080" in finding["message"]
    assert any(e.get("fact") == "run.last_line" and e["value"] == "cannot bind port 8080" for e in finding["evidence"])
    assert doc["verdict"]["kind"] == "problems"
    assert "Nothing else recognised" in doc["verdict"]["text"]  # sh's own lines are no engine's
    text = _watch("--format", "text", "--", "sh", "-c", "echo hi; exit 3")
    assert "No problems found" not in text.stdout and "LD961" in text.stdout


def test_exit_1_does_not_read_as_a_healthy_engine_process() -> None:
    run = _watch("--format", "text", "--", "sh", "-c", "echo hi; exit 1")
    assert run.returncode == 1
    assert "Engine process  (1 ok)" not in run.stdout
    assert "[✗] Engine process" in run.stdout or "[x] Engine process" in run.stdout


def test_a_command_that_printed_nothing_known_is_nothing_to_judge() -> None:
    run = _watch("--format", "markdown", "--", "sh", "-c", "echo hello world")
    assert run.returncode == 4
    assert "No problems found" not in run.stdout
    assert "none of the 1 line(s) of sh's output is an engine's log line" in run.stdout


def test_sigterm_ends_watch_with_the_report_as_ctrl_c_does() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "doctor", "watch", "--format", "text", "--", "sh", "-c",
                             "echo started; exec sleep 60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env=ENV)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"  # the command runs (its output is passed through)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode not in (-signal.SIGTERM, 128 + signal.SIGTERM), err
    assert "llm-doctor 0.1.0 · watch · sh" in out  # the report was printed
    assert "interrupted" in err  # and the run ended as a stop, not as a failure of the command


# -- live findings wait for the end of loading ---------------------------------------------------

def test_a_startup_fact_does_not_fire_and_then_resolve(rules: RuleBase) -> None:
    """llama-server's system line lists only CPU features (line 3); the CUDA device comes at line 7.
    Fed as a follower reads it, LD505 "CPU only" must not fire on the first block and resolve later."""
    lines = LLAMA_SERVER_LOG.read_bytes().splitlines(keepends=True)
    events: list[LiveEvent] = []
    session = TraceSession("server.log", source="log", settings={"log": "server.log"}, on_event=events.append,
                           judge=LiveJudge(rules), keep_events=False)
    session.emit(SettingsEvent(settings={"log": "server.log"}, stage="source"))
    number = 1
    for block in (lines[:3], lines[3:8], lines[8:40], lines[40:46], lines[46:]):
        number += session.emit_log_block(b"".join(block), number, "file")
        session.evaluate(force=True)
    session.finish(EndEvent(reason="finished"))
    changes = [(e.state, e.finding["id"]) for e in events if isinstance(e, FindingEvent)]
    assert ("fired", "LD505") not in changes
    assert not [c for c in changes if c[0] == "resolved"], changes
    # what the finished load shows is still announced live, before the end
    assert ("fired", "LD202") in changes


def test_an_event_during_loading_is_announced_at_once(rules: RuleBase) -> None:
    oom = (ROOT / "fixtures" / "logs" / "llama.cpp" / "cuda-oom-kv.log").read_bytes()
    events: list[LiveEvent] = []
    session = TraceSession("x.log", source="log", on_event=events.append, judge=LiveJudge(rules), keep_events=False)
    session.emit_log_block(oom, 1, "file")
    session.evaluate(force=True)
    assert session.report is not None and session.report.facts.value("run.loaded") is False
    fired = {e.finding["id"] for e in events if isinstance(e, FindingEvent) and e.state == "fired"}
    assert "LD302" in fired  # an OOM line is settled evidence: no need to wait


# -- crash evidence ------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["whole", "cut"])
def test_a_crash_keeps_its_fatal_line_and_the_lines_around_it(mode: str, rules: RuleBase, tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")  # the child never opens it
    run = run_embedded(RunSettings(model_path=str(model)), judge=LiveJudge(rules), host=False, timeout_s=60,
                       command=[sys.executable, "-m", "tests.watch.fatal_child", mode])
    assert run.reason == "crashed" and run.exit_status == -signal.SIGSEGV
    assert run.report is not None
    crash = next(f for f in run.report.findings if f.id == "LD950")
    assert crash.confidence == "high"  # the fatal line was recognised, not only the signal
    assert "Fatal Python error: Segmentation fault" in crash.message
    assert "in decode" in crash.message and "Using chat bos_token" in crash.message
    assert any(e.line is not None and e.text == "Fatal Python error: Segmentation fault" for e in crash.evidence)
    assert "Fatal Python error: Segmentation fault" in run.errors[0]

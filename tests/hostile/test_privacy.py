"""--redact: reports and watch recordings a user can paste into a public issue.

Home paths, user and host names, IP and e-mail addresses, UUIDs, the prompt and the generated text
go; the diagnosis stays. A redacted recording replays to the same findings as the live run: its
tokens become stable pseudonyms (not a length note, which would read as a loop of "characters
removed"), and text quoting the output (a loop's span) goes with it.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.core.events import EndEvent, FindingEvent
from doctor.core.redact import Redactor
from doctor.judge.evaluate import diagnose
from doctor.judge.live_judge import LiveJudge
from doctor.sources.live.recording import facts_from_recording, read_recording
from doctor.sources.live.session import TraceSession

from .fuzz_targets import rulebase

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "fixtures" / "traces"
LOOP_SPAN = "I like apples."
SECRETS = ("/home/ana", "gpu-box", "10.20.30.40", "ana@example.org", "fe80::1ff:fe23:4567:890a",
           "GPU-5f4e3d2c-1b0a-4c9d-8e7f-6a5b4c3d2e1f")


def doctor(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, cwd=ROOT, check=False,
                          env={**os.environ, "NO_COLOR": "1"}, timeout=300)


# -- reports ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_a_redacted_report_keeps_the_loop_and_loses_its_text(fmt: str) -> None:
    log = ROOT / "fixtures/logs/llama-cpp-python/greedy-loop.log"
    plain = doctor("analyze", str(log), "--format", fmt, "-v")
    red = doctor("analyze", str(log), "--format", fmt, "-v", "--redact")
    assert LOOP_SPAN.encode() in plain.stdout  # what --redact has to take out
    assert LOOP_SPAN.encode() not in red.stdout and b"apples" not in red.stdout
    assert b"LD401" in red.stdout and b"characters of prompt or output removed" in red.stdout
    assert red.returncode == plain.returncode


# -- recordings -------------------------------------------------------------------------------------

def replay_live(name: str, tmp: Path, redactor: Redactor | None) -> tuple[list[str], Path]:
    """Run a recorded session's events through a live TraceSession (judge, recorder) again."""
    with (TRACES / f"{name}.jsonl").open("rb") as handle:
        head, events, _ = read_recording(handle)
    settings = {k: v for k, v in head.items() if k not in ("llm_doctor", "version", "source")}
    settings["prompt"] = "my secret plan for gpu-box at 10.20.30.40"
    out = tmp / f"{name}.jsonl"
    session = TraceSession(name, source="embedded", settings=settings, record=str(out), judge=LiveJudge(rulebase()),
                           redactor=redactor)
    end = None
    for event in events:
        if isinstance(event, FindingEvent):
            continue  # the rules' output: the live judge makes them again
        if isinstance(event, EndEvent):
            end = event
            continue
        session.emit(event)
    assert end is not None
    session.finish(EndEvent(reason=end.reason, exit_status=end.exit_status, finish_reason=end.finish_reason,
                            error_lines=end.error_lines))
    assert session.report is not None
    return sorted(f.id for f in session.report.findings), out


@pytest.mark.parametrize("name", ["healthy", "greedy-loop", "crash", "context-cut"])
def test_a_redacted_recording_replays_to_the_live_findings(name: str, tmp_path: Path) -> None:
    live, recording = replay_live(name, tmp_path, Redactor(users=["ana"], hosts=["gpu-box"]))
    (tmp_path / "plain").mkdir()
    plain_live, _ = replay_live(name, tmp_path / "plain", None)
    assert live == plain_live  # redacting changes nothing the rules see live
    replayed = diagnose(facts_from_recording(io.BytesIO(recording.read_bytes()), name), rulebase(),
                        command="analyze", mode="analyze")
    assert sorted(f.id for f in replayed.findings) == live
    text = recording.read_text(encoding="utf-8")
    for secret in ("/home/ana", "my secret plan", "gpu-box", "10.20.30.40"):
        assert secret not in text, secret
    if name == "greedy-loop":
        assert "LD401" in live and LOOP_SPAN not in text and "apples" not in text
    if name == "healthy":
        assert "LD401" not in live  # a length note per token would have read as a loop


def test_pseudonyms_keep_repetition_and_cannot_be_read_back() -> None:
    a, b = Redactor(), Redactor()
    assert a.pseudonym(" apples") == a.pseudonym(" apples") != a.pseudonym(" pears")
    assert a.pseudonym(" apples").startswith(" t") and "apple" not in a.pseudonym(" apples")
    assert a.pseudonym(" apples") != b.pseudonym(" apples")  # a random key per redactor
    assert a.pseudonym("\n") == "\n"  # layout is not text


def test_watch_log_record_redact(tmp_path: Path) -> None:
    """watch --log ... --record FILE --redact: the recording, the ndjson stream and the report."""
    host = socket.gethostname()
    base = (ROOT / "fixtures/logs/llama-server/session-slowdown-then-full.log").read_text(encoding="utf-8")
    extra = (f"llama_model_load_from_file_impl: loading /home/ana/models/qwen.gguf on {host}\n"
             f"main: HTTP server is listening, hostname: 10.20.30.40, port: 8080 (ana@example.org)\n"
             "ggml_cuda_init: device GPU-5f4e3d2c-1b0a-4c9d-8e7f-6a5b4c3d2e1f at fe80::1ff:fe23:4567:890a\n")
    log = tmp_path / "server.log"
    log.write_text(extra + base, encoding="utf-8")
    record = tmp_path / "run.jsonl"
    proc = doctor("watch", "--log", str(log), "--duration", "1", "--format", "ndjson", "--record", str(record),
                  "--redact")
    assert proc.returncode in (0, 1), proc.stderr
    recorded = record.read_text(encoding="utf-8")
    for text in (recorded, proc.stdout.decode()):
        for secret in (*SECRETS, host) if len(host) >= 2 else SECRETS:
            assert secret not in text, secret
    assert "~/models/qwen.gguf" in recorded and "<ip>" in recorded
    lines = [json.loads(line) for line in recorded.splitlines()]
    assert lines[0]["llm_doctor"] == "trace" and lines[-1]["kind"] == "end"
    live = sorted(f["id"] for f in lines[-1]["report"]["findings"])
    replayed = doctor("analyze", str(record), "--format", "json")
    assert sorted(f["id"] for f in json.loads(replayed.stdout)["findings"]) == live
    assert {"LD202", "LD802"} <= set(live)


@pytest.mark.engine
def test_embedded_run_record_redact(tmp_path: Path) -> None:
    """The real engine on SmolLM2: the prompt and every generated token stay off the disk."""
    record = tmp_path / "run.jsonl"
    secret = "Zebulon Quartermaine's private launch codes"
    proc = doctor("watch", "--prompt", secret, "-n", "24", "--temperature", "0", "--seed", "3", "--format", "json",
                  "--record", str(record), "--redact")
    assert proc.returncode in (0, 1), proc.stderr
    recorded = record.read_text(encoding="utf-8")
    assert "Zebulon" not in recorded and "Quartermaine" not in recorded
    with record.open("rb") as handle:
        _, events, damaged = read_recording(handle)
    assert damaged == 0
    tokens = [e.token for e in events if e.kind == "step" and e.token.strip()]
    assert len(tokens) >= 10 and all(t.strip().startswith("t") and len(t.strip()) == 9 for t in tokens)
    report = json.loads(proc.stdout)
    replayed = json.loads(doctor("analyze", str(record), "--format", "json").stdout)
    assert sorted(f["id"] for f in replayed["findings"]) == sorted(f["id"] for f in report["findings"])

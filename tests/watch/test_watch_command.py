"""`llm-doctor watch` from the command line: formats, recording and replay, following, wrapping, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import crash_reported, worked_around

ROOT = Path(__file__).resolve().parents[2]
SERVER_LOG = ROOT / "fixtures" / "logs" / "llama-server" / "session-slowdown-then-full.log"


def doctor(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=None if env is None else {**os.environ, **env})


CRASHING_CHILD = {"LLM_DOCTOR_ENGINE_CHILD": f"{sys.executable} -m tests.watch.crashing_child"}


@pytest.mark.engine
def test_json_prints_only_the_report(tmp_path: Path) -> None:
    proc = doctor("watch", "--format", "json", "-n", "16", "--seed", "3")
    report = json.loads(proc.stdout)
    assert proc.returncode == (1 if worked_around(report) else 0), proc.stderr
    assert report["command"] == "watch" and report["engine"] == "llama-cpp-python"
    facts = report["facts"]["facts"]
    assert len(facts["run.decode_ms"]["value"]) >= 1
    assert "Traceback" not in proc.stderr


@pytest.mark.engine
def test_ndjson_streams_events_and_record_replays(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    proc = doctor("watch", "--format", "ndjson", "--record", str(record), "-n", "40", "--temperature", "0",
                  "-p", "Write a list of fruits. Write a list of fruits. Write a list of fruits.")
    streamed = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == (1 if worked_around(streamed[-1]["report"]) else 0), proc.stderr
    kinds = [e["kind"] for e in streamed]
    assert kinds[0] == "settings" and kinds[-1] == "end"
    assert kinds.count("step") >= 30 and "phase" in kinds and "finding" in kinds
    recorded = [json.loads(line) for line in record.read_text().splitlines()]
    assert recorded[0]["llm_doctor"] == "trace"
    assert [e["kind"] for e in recorded[1:]] == kinds  # the recording is the stream
    live_ids = [f["id"] for f in streamed[-1]["report"]["findings"]]
    replay = doctor("analyze", str(record), "--format", "json")
    assert [f["id"] for f in json.loads(replay.stdout)["findings"]] == live_ids
    assert "LD401" in live_ids


@pytest.mark.engine
def test_text_shows_the_run_on_stderr_and_the_report_on_stdout() -> None:
    proc = doctor("watch", "--format", "text", "--color", "never", "-c", "256", "-n", "600", "--temperature", "0",
                  "-p", "Write a list of fruits. Write a list of fruits. Write a list of fruits.")
    assert proc.returncode == 1  # an error finding: LD211
    assert "prefill" in proc.stderr and "decode" in proc.stderr
    assert "LD211 Prompt plus max tokens do not fit in the context" in proc.stderr
    assert "context full" in proc.stderr
    assert "Likely root cause: Prompt plus max tokens do not fit in the context" in proc.stdout \
        or "triage: crashed" in proc.stderr  # an AMX Xeon: the crash triage worked around leads
    assert "\x1b" not in proc.stdout + proc.stderr


def test_follow_a_log_for_a_while(tmp_path: Path) -> None:
    proc = doctor("watch", "--log", str(SERVER_LOG), "--duration", "1", "--format", "json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert {"LD202", "LD802"} <= {f["id"] for f in report["findings"]}
    assert report["command"] == "watch"


def test_wrap_a_command_in_json_mode_keeps_stdout_clean(tmp_path: Path) -> None:
    code = f"import sys; sys.stdout.write(open({str(SERVER_LOG)!r}).read())"
    proc = doctor("watch", "--format", "json", "--", sys.executable, "-c", code)
    report = json.loads(proc.stdout)  # the command's own stdout went to stderr
    assert "session" not in proc.stdout.split("\n", 1)[0]
    assert "llama_context: n_ctx" in proc.stderr
    assert "LD202" in {f["id"] for f in report["findings"]}


def test_hostile_log_lines_reach_the_terminal_inert(tmp_path: Path) -> None:
    log = tmp_path / "evil.log"
    lines = SERVER_LOG.read_bytes().splitlines(keepends=True)
    evil = b"\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZWNobyBoaQ==\x07"
    log.write_bytes(b"".join(evil + line if b"Context size" in line else line for line in lines))
    proc = doctor("watch", "--log", str(log), "--duration", "0.5", "--format", "text", "--color", "never", "-v")
    assert "LD202" in proc.stderr + proc.stdout
    assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--log", "x.log", "--", "llama-server"], "not both"),
    (["--log", "x.log", "--temperature", "0"], "--temperature apply to the embedded engine only"),
    (["--from-end"], "--from-end goes with --log"),
    (["--metrics", "ftp://host/metrics"], "http:// or https://"),
    (["-m", "/nonexistent/model.gguf"], "no such model file"),
    (["--record", "/nonexistent-dir/run.jsonl", "--log", "x.log"], "does not exist"),
    (["--duration", "soon"], "not a duration"),
    (["--top-p", "2"], "--top-p must be between 0 and 1"),
])
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    proc = doctor("watch", "--format", "json", *args, timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_a_missing_command_is_exit_2() -> None:
    proc = doctor("watch", "--format", "json", "--", "no-such-engine-binary", timeout=60)
    assert proc.returncode == 2
    assert "no-such-engine-binary: command not found" in proc.stderr


def test_help_does_not_import_the_engine_or_textual() -> None:
    code = ("import sys; from doctor.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('llama_cpp', 'textual', 'psutil', 'prometheus_client') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.stdout.strip() == "[]"


def test_a_tampered_recording_is_replayed_inert(tmp_path: Path) -> None:
    lines = (ROOT / "fixtures" / "traces" / "greedy-loop.jsonl").read_text().splitlines()
    evil = []
    for line in lines:
        event = json.loads(line)
        if event.get("kind") == "step":
            event["token"] = event["token"] + "\x1b]52;c;ZWNobyBoaQ==\x07\x1b[2J"
        evil.append(json.dumps(event))
    path = tmp_path / "evil.jsonl"
    path.write_text("\n".join(evil) + "\n")
    proc = doctor("analyze", str(path), "--format", "text", "--color", "never", "-v", timeout=60)
    assert "LD401" in proc.stdout
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout


@pytest.mark.engine
def test_an_engine_that_crashes_with_repacking_is_triaged_and_the_run_finished(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    proc = doctor("watch", "--format", "json", "-n", "6", "--seed", "3", "-p", "Tell me about paint", "--record",
                  str(record), env=CRASHING_CHILD)
    assert proc.returncode == 1, proc.stderr  # LD951 is an error: these settings crash the engine
    report = json.loads(proc.stdout)
    facts = report["facts"]["facts"]
    assert len(facts["run.decode_ms"]["value"]) == 5 and facts["run.prefill_ms"]["value"] > 0  # a full trace
    assert facts["config.use_extra_bufts"]["value"] is False and facts["run.triage_change"]["value"] == "repack_off"
    assert report["assessment"]["id"] == "LD951" and "weight repacking off" in report["assessment"]["message"]
    assert report["errors"] == []
    assert "llm-doctor: triage: the engine crashed (SIGSEGV in the warm-up)" in proc.stderr
    assert "completed with weight repacking off" in proc.stderr and "Traceback" not in proc.stderr
    replay = doctor("analyze", str(record), "--format", "json")
    assert [f["id"] for f in json.loads(replay.stdout)["findings"]] == [f["id"] for f in report["findings"]]


@pytest.mark.engine
def test_no_triage_reports_the_crash_as_it_came() -> None:
    proc = doctor("watch", "--format", "json", "-n", "6", "--seed", "3", "--no-triage", env=CRASHING_CHILD)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert crash_reported([f["id"] for f in report["findings"]]) and "triage" not in proc.stderr
    assert "run.triage_status" not in report["facts"]["facts"]

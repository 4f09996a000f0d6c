"""`watch -- COMMAND`: output passed through unchanged, parsed live, the process sampled, its end reported.

The commands here are real processes that write a real llama-server log (the fixture) the way the
server does — to stderr, line by line — or that exit, abort or run on until stopped.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from doctor.core.errors import EngineError
from doctor.core.events import EndEvent, LiveEvent, LogEvent, SampleEvent
from doctor.judge.live_judge import LiveJudge
from doctor.judge.rulebase import RuleBase
from doctor.sources.live.follow.wrapper import wrap_command
from doctor.sources.live.session import TraceSession

SERVER_LOG = (Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "llama-server"
              / "session-slowdown-then-full.log")

REPLAY = r"""
import sys, time
data = open(sys.argv[1], "rb").read().splitlines(keepends=True)
for i, line in enumerate(data):
    sys.stderr.buffer.write(line); sys.stderr.flush()
    if i % 10 == 0:
        sys.stdout.buffer.write(b"stdout line %d\n" % i); sys.stdout.flush()
    time.sleep(0.002)
time.sleep(1.0)  # still running a while after its output: sampled whatever the machine's load
"""


def _session(rulebase: RuleBase, events: list[LiveEvent], record: str | None = None) -> TraceSession:
    return TraceSession("cmd", source="command", judge=LiveJudge(rulebase), on_event=events.append,
                        keep_events=False, record=record)


def test_output_passes_through_unchanged_and_is_parsed(tmp_path: Path, rulebase: RuleBase) -> None:
    out_path, err_path = tmp_path / "out", tmp_path / "err"
    events: list[LiveEvent] = []
    with out_path.open("wb") as out, err_path.open("wb") as err:
        end = wrap_command([sys.executable, "-c", REPLAY, str(SERVER_LOG)], _session(rulebase, events),
                           stop=lambda: False, stdout_fd=out.fileno(), stderr_fd=err.fileno(), sample_interval_s=0.05)
    assert err_path.read_bytes() == SERVER_LOG.read_bytes()  # byte for byte
    assert out_path.read_bytes().startswith(b"stdout line 0\n")
    assert end.reason == "exited" and end.exit_status == 0
    ids = {f["id"] for f in end.report["findings"]}
    assert {"LD202", "LD802"} <= ids
    logs = [e for e in events if isinstance(e, LogEvent)]
    assert {e.stream for e in logs} == {"stdout", "stderr"}
    samples = [e for e in events if isinstance(e, SampleEvent)]
    assert samples and any(s.rss_bytes for s in samples)  # the process was sampled while it ran


def test_a_non_zero_exit_is_reported_with_the_last_line(rulebase: RuleBase) -> None:
    events: list[LiveEvent] = []
    code = "import sys; print('srv    load_model: failed to load model, \\'/x.gguf\\'', file=sys.stderr); sys.exit(1)"
    end = wrap_command([sys.executable, "-c", code], _session(rulebase, events), stop=lambda: False,
                       stdout_fd=_null(), stderr_fd=_null())
    assert end.reason == "exited" and end.exit_status == 1
    assert any("exited with status 1" in e and "failed to load model" in e for e in end.report["errors"])


def test_an_abort_is_reported_as_a_crash(rulebase: RuleBase) -> None:
    events: list[LiveEvent] = []
    code = ("import os, sys; sys.stderr.write('/src/ggml/src/ggml-cuda/ggml-cuda.cu:88: CUDA error\\n'); "
            "sys.stderr.flush(); os.abort()")
    end = wrap_command([sys.executable, "-c", code], _session(rulebase, events), stop=lambda: False,
                       stdout_fd=_null(), stderr_fd=_null())
    assert end.reason == "crashed" and end.exit_status == -6
    assert "SIGABRT" in end.report["errors"][0]
    assert end.report["facts"]["facts"]["run.crashed"]["value"] is True


def test_duration_stops_the_command_and_the_report_still_comes(rulebase: RuleBase) -> None:
    events: list[LiveEvent] = []
    code = ("import signal, sys, time\n"
            "def bye(*a):\n"
            "    print('srv    operator(): operator(): cleaning up before exit...', file=sys.stderr)\n"
            "    sys.exit(0)\n"
            "signal.signal(signal.SIGINT, bye)\n"
            "while True:\n    time.sleep(0.05)\n")
    t = time.monotonic()
    end = wrap_command([sys.executable, "-c", code], _session(rulebase, events), stop=lambda: False, duration_s=1.0,
                       stdout_fd=_null(), stderr_fd=_null())
    assert time.monotonic() - t < 10
    assert end.reason == "finished" and end.exit_status == 0
    # it shut down its own way
    assert any(isinstance(e, LogEvent) and "cleaning up before exit" in e.text for e in events)
    assert isinstance(events[-1], EndEvent)


def test_a_missing_command_is_a_clear_error(rulebase: RuleBase) -> None:
    with pytest.raises(EngineError, match="no-such-engine-binary: command not found"):
        wrap_command(["no-such-engine-binary", "--port", "8080"], _session(rulebase, []), stop=lambda: False)


_NULLS: list[int] = []


def _null() -> int:
    fd = os.open(os.devnull, os.O_WRONLY)
    _NULLS.append(fd)
    return fd


def teardown_module() -> None:
    for fd in _NULLS:
        os.close(fd)

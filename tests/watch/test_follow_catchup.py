"""`watch --log` far behind its writer reads on with worker processes (doctor/sources/live/follow/catchup.py), and
its facts are the serial follow's and analyze's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doctor.core.events import LiveEvent, LogEvent
from doctor.sources.live.follow import catchup, follower
from doctor.sources.live.follow.follower import follow_log
from doctor.sources.live.session import TraceSession
from doctor.sources.logs import parallel
from doctor.sources.logs.entry import analyze_stream
from tests.logs.test_parallel import LOGS

REGION = 100_000  # small regions: a few MB of log is read in tens of them


def _follow(path: Path, workers: str, monkeypatch: pytest.MonkeyPatch, taken: list[int] | None = None,
            **session: Any) -> TraceSession:
    """Follow `path` to its end (`workers`: LLM_DOCTOR_WORKERS); `taken`: the lines each catch-up read."""
    monkeypatch.setenv(parallel.ENV, workers)
    monkeypatch.setattr(catchup, "BEHIND_MIN", 1)
    monkeypatch.setattr(catchup, "BEHIND_LOW", 0)
    monkeypatch.setattr(catchup, "REGION", REGION)
    original = catchup.catch_up

    def spy(*args: Any, **kwargs: Any) -> int:
        read = original(*args, **kwargs)
        if taken is not None and read:
            taken.append(read)
        return read

    monkeypatch.setattr(follower, "catch_up", spy)
    follower_session = TraceSession(path.name, source="log", keep_events=False, **session)
    follow_log(str(path), follower_session, stop=lambda: False, until_idle_s=0.0, poll_s=0.01)
    follower_session.builder.drain_log()
    return follower_session


def _facts(session: TraceSession) -> str:
    return json.dumps(session.builder.analyzer.snapshot().to_json(), sort_keys=True)


def _analyze(path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(parallel.ENV, "0")
    with path.open("rb") as f:
        return json.dumps(analyze_stream(f, path.name).to_json(), sort_keys=True)


@pytest.mark.parametrize("name", ["queue", "ollama", "vllm", "sglang"])
def test_a_server_log_far_behind_reads_as_analyze(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each engine's folded request lines (bench/analyze_real.py's server logs), 3 MB: the first read (1 MB) the
    serial way, the rest with a worker process in regions of 100 kB; the facts are analyze's, byte for byte."""
    from bench.analyze_real import BUILDERS

    path = tmp_path / f"{name}.log"
    BUILDERS[name](path, 3_000_000)
    taken: list[int] = []
    followed = _follow(path, "1", monkeypatch, taken)
    assert taken and sum(taken) > path.read_bytes().count(b"\n") // 2  # most of it read with the worker
    assert followed.builder.log_lines == path.read_bytes().count(b"\n")
    assert _facts(followed) == _analyze(path, monkeypatch)


def test_the_mixed_log_far_behind_reads_as_analyze(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fixture and corpus log concatenated (hundreds of engine sessions, speculated across regions): the same
    facts with a worker, without one and by analyze, the sessions closed on the way included."""
    path = tmp_path / "mixed.log"
    with path.open("wb") as out:
        for log in LOGS:
            data = log.read_bytes()
            out.write(data if data.endswith(b"\n") else data + b"\n")
    taken: list[int] = []
    with_worker = _facts(_follow(path, "1", monkeypatch, taken))
    assert taken
    serial = _facts(_follow(path, "0", monkeypatch))
    assert with_worker == serial == _analyze(path, monkeypatch)


def test_the_newest_lines_still_reach_a_tail_consumer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The TUI's log pane (line_events "tail") gets the last lines of each region, numbered as in the file."""
    from bench.analyze_real import BUILDERS

    path = tmp_path / "vllm.log"
    BUILDERS["vllm"](path, 3_000_000)
    lines = path.read_bytes().split(b"\n")
    seen: list[LiveEvent] = []
    taken: list[int] = []
    _follow(path, "1", monkeypatch, taken, on_event=seen.append, line_events="tail")
    shown = [e for e in seen if isinstance(e, LogEvent)]
    assert taken and shown
    for event in shown:
        assert event.text == lines[event.line - 1].decode("utf-8", "replace")[:len(event.text)]
    assert shown[-1].line == len(lines) - 1


def test_a_recording_gets_every_line_the_serial_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.analyze_real import BUILDERS

    path = tmp_path / "vllm.log"
    BUILDERS["vllm"](path, 2_000_000)
    taken: list[int] = []
    session = _follow(path, "1", monkeypatch, taken, record=str(tmp_path / "run.jsonl"))
    assert not taken and session.builder.log_lines == path.read_bytes().count(b"\n")

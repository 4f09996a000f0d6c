"""Recordings: `watch --record FILE` writes one, `analyze FILE` reads it back into the same facts.

A recording is NDJSON: a header object `{"llm_doctor": "trace", "version": 1, "source": ..., ...settings}`
then one LiveEvent (doctor/core/events.py) per line, as the session emitted it. `Recorder` writes it
(redacted line by line when asked, flushed after every batch so a crash of the engine - or of
llm-doctor - leaves everything up to that point on disk); `read_recording` reads it back, skipping
damaged lines; `facts_from_recording` runs its events through the same TraceBuilder the live run used
(doctor/sources/live/trace.py), which is why a replay gives the same facts, hence the same findings.

Reads and writes only the given stream or path.
"""

from __future__ import annotations

import contextlib
import json
from typing import IO, Any, BinaryIO

from doctor.core.errors import InputError
from doctor.core.events import LiveEvent, event_from_json
from doctor.core.facts import Facts, Source
from doctor.sources.live.trace import TraceBuilder

TRACE_KIND = "trace"
TRACE_VERSION = 1
MAX_RECORD_LINE = 8 << 20  # a recording line longer than this is damaged


class Recorder:
    """Writes a recording: the header line, then one event per line (redacted line by line when a
    doctor.core.redact.Redactor is given: `watch --record FILE --redact`)."""

    def __init__(self, path: str, head: dict[str, Any], redactor: Any = None) -> None:
        self.path = path
        self.redactor = redactor
        try:
            self.handle: IO[str] | None = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
            self._write(head)
            self.handle.flush()
        except OSError as exc:
            raise InputError(f"{path}: cannot write the recording ({exc.strerror or exc})") from None
        self.failed: str | None = None

    def _write(self, data: dict[str, Any]) -> None:
        assert self.handle is not None
        if self.redactor is not None:
            data = self.redactor.event(data)
        self.handle.write(json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str) + "\n")

    def write(self, event: LiveEvent) -> None:
        if self.handle is None:
            return
        try:
            self._write(event.to_json())
        except OSError as exc:  # disk full mid-run: stop recording, keep watching
            self.failed = f"{self.path}: recording stopped ({exc.strerror or exc})"
            self.close()

    def flush(self) -> None:
        if self.handle is not None:
            try:
                self.handle.flush()
            except OSError as exc:
                self.failed = f"{self.path}: recording stopped ({exc.strerror or exc})"
                self.close()

    def close(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.close()
            self.handle = None


def header(source: str, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The first line of a recording."""
    out: dict[str, Any] = {"llm_doctor": TRACE_KIND, "version": TRACE_VERSION, "source": source}
    for key, value in (settings or {}).items():
        if key not in out:
            out[key] = value
    return out


def read_recording(stream: BinaryIO, name: str = "recording") -> tuple[dict[str, Any], list[LiveEvent], int]:
    """(header, events, damaged lines). A damaged line (a crash mid-write) is skipped, not fatal."""
    head_line = stream.readline(MAX_RECORD_LINE)
    try:
        head = json.loads(head_line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InputError(f"{name}: not a watch recording (the first line is not JSON)") from None
    if not isinstance(head, dict) or head.get("llm_doctor") != TRACE_KIND:
        raise InputError(f"{name}: not a watch recording (no \"llm_doctor\": \"trace\" header)")
    version = head.get("version")
    if not isinstance(version, int) or version > TRACE_VERSION:
        raise InputError(f"{name}: recording version {version!r} is newer than this llm-doctor reads ({TRACE_VERSION})")
    events: list[LiveEvent] = []
    damaged = 0
    for raw in iter(lambda: stream.readline(MAX_RECORD_LINE), b""):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            damaged += 1
            continue
        event = event_from_json(data) if isinstance(data, dict) else None
        if event is None:
            damaged += 1
            continue
        events.append(event)
    return head, events, damaged


def facts_from_recording(stream: BinaryIO, name: str = "recording") -> Facts:
    """Replay a `watch --record` file into Facts (analyze FILE)."""
    head, events, damaged = read_recording(stream, name)
    builder = TraceBuilder(name)
    for event in events:
        builder.add(event)
    facts = builder.snapshot()
    def src(text: str) -> Source:
        return Source("trace", "trace.recording", text=text)

    if damaged:
        facts.set("run.recording_damaged_lines", damaged,
                  src(f"{damaged} damaged line(s) skipped (a crash mid-write?)"))
    if builder.ended is None:
        facts.set("run.recording_complete", False,
                  src("the recording has no end event: the run (or watch) stopped early"))
    else:
        facts.set("run.recording_complete", True, src(f"ended: {builder.ended.reason}"))
    del head
    return facts

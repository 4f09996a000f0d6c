"""What `analyze` can read: a log, a saved scan (`scan --save`), a JSON report, or a watch recording.

The first bytes decide. A saved scan or a report carries its facts, which are re-judged by the
current rules; a recording (NDJSON whose first object says `"llm_doctor": "trace"`) is replayed
through the trace reader; anything else is a log. Unreadable input is an InputError: one line,
exit code 2.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from doctor.core.errors import InputError
from doctor.core.facts import Facts
from doctor.sources.logs.entry import analyze_stream
from doctor.sources.logs.stream import open_input, rewindable

FACTS_KIND = "facts"
TRACE_KIND = "trace"
MAX_JSON_DOC = 256 << 20


@dataclass(slots=True)
class LoadedInput:
    """What analyze read: the facts, and the command that saved them when the input is a saved
    document (`scan` for `scan --save`), so a saved scan is judged and shown as a scan."""

    facts: Facts
    saved_by: str | None = None


def read_input(path: str) -> Facts:
    """Read FILE or `-` (stdin) into Facts."""
    return load_input(path).facts


def load_input(path: str) -> LoadedInput:
    """Read FILE or `-` (stdin): its facts, and which command saved it (if a saved document)."""
    if path == "-":
        stream = rewindable(sys.stdin.buffer)
        return _dispatch(stream, "stdin")
    p = Path(path)
    try:
        if p.is_dir():
            raise InputError(f"{path} is a directory; give a log file")
        handle = p.open("rb", buffering=1 << 20)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None
    with handle:
        return _dispatch(handle, os.path.basename(path) or path)


def _dispatch(stream: BinaryIO, name: str) -> LoadedInput:
    stream = open_input(stream)
    head = _peek(stream)
    kind = _json_kind(head)
    try:
        if kind == FACTS_KIND:
            return _load_facts_document(stream, name)
        if kind == TRACE_KIND:
            from doctor.sources.live.recording import facts_from_recording

            return LoadedInput(facts_from_recording(stream, name))
        return LoadedInput(analyze_stream(stream, name))
    except OSError as exc:
        raise InputError(f"{name}: read failed ({exc.strerror or exc})") from None


def _peek(stream: BinaryIO) -> bytes:
    peek = getattr(stream, "peek", None)
    if callable(peek):
        return bytes(peek(4096))[:4096]
    peek_bytes = getattr(stream, "peek_bytes", None)
    return bytes(peek_bytes(4096)) if callable(peek_bytes) else b""


def _json_kind(head: bytes) -> str | None:
    text = head.lstrip()
    if not text.startswith(b"{"):
        return None
    first = text.split(b"\n", 1)[0]
    if first.strip() == b"{":  # a pretty-printed document (save_facts): its keys follow on the next lines
        first = text[:400]
    if b'"llm_doctor"' in first[:400]:
        if b'"trace"' in first[:400]:
            return TRACE_KIND
        return FACTS_KIND
    if b'"schema_version"' in text[:400] and b'"llm-doctor"' in text:
        return FACTS_KIND
    return None


def _load_facts_document(stream: BinaryIO, name: str) -> LoadedInput:
    data = stream.read(MAX_JSON_DOC + 1)
    if len(data) > MAX_JSON_DOC:
        raise InputError(f"{name}: saved facts larger than {MAX_JSON_DOC >> 20} MiB")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError(f"{name}: not a valid llm-doctor JSON document ({type(exc).__name__})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{name}: not a valid llm-doctor JSON document")
    body = doc.get("facts")
    if isinstance(body, dict) and "facts" in body:  # a report: {"facts": {"facts": ..., "events": ...}}
        body = body
    elif isinstance(doc.get("facts"), dict):
        body = doc
    else:
        raise InputError(f"{name}: JSON document has no facts")
    try:
        facts = Facts.from_json(body)
    except ValueError as exc:
        raise InputError(f"{name}: {exc}") from None
    facts.inputs = [*facts.inputs, name] if name not in facts.inputs else facts.inputs
    saved_by = doc.get("mode") or doc.get("command")  # a JSON report has its mode; a saved scan, its command
    return LoadedInput(facts, saved_by if saved_by in ("scan", "watch", "analyze") else None)


def save_facts(facts: Facts, path: str, command: str) -> None:
    """Write a snapshot that `analyze FILE` can re-judge later (scan --save)."""
    from doctor import __version__

    doc = {"llm_doctor": FACTS_KIND, "version": __version__, "command": command, **facts.to_json()}
    try:
        Path(path).write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from None


__all__ = ["LoadedInput", "load_input", "open_input", "read_input", "save_facts"]

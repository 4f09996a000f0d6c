"""One candidate log line, decoded and made inert, with what a parser needs to read it.

Normalisation strips what wraps a message without being part of it: ANSI colour and other escape
sequences, CR, markdown quote markers (`> `) and list bullets from pasted issues, and JSON framing
(docker json-file `{"log": ...}`, journald `{"MESSAGE": ...}`, llama-server's JSON log mode with
its `msg` plus key/value fields). A JSON message that holds another program's escaped string (an
error body inside an application's log) is decoded once more (doctor/core/paste_escapes.py), and one
of several lines becomes its lines: the first is the line, the others follow it (`more`), all with
the line's number. Timestamps, levels and function prefixes are left in place: parsers match on
message text with unanchored patterns, so any prefix is tolerated. (A whole paste is normalised
before it is scanned: doctor/core/paste.py.)

Pure.
"""

from __future__ import annotations

import json
import re
from typing import Any

from doctor.core.lines import decode
from doctor.core.paste import JSON_MESSAGE_KEYS
from doctor.core.paste_escapes import decode_spans
from doctor.core.sanitize import strip_controls

_QUOTE = re.compile(r"^\s*(?:>\s?)+")
# the start of a log record (a line that begins so is not the wrapped tail of the one before)
_RECORD_START = re.compile(r"^\s*(?:time=|level=|\[GIN\]|\[?\d{4}[-/]\d\d[-/]\d\d|\d\d-\d\d \d\d:|"
                           r"[A-Z][a-z]{2} +\d+ \d\d:\d\d|(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)\b|"
                           r"Traceback|File \"|\S+\s+\| |\(\w+ pid=|[\w.\[\]-]{3,}: |\{|\d+\.\d+\.\d+\.\d+ [IWED] )")
_JSON_MSG_KEYS = JSON_MESSAGE_KEYS
MAX_JSON = 1 << 16


class LogLine:
    """A candidate line. `next_text` (the following physical line, for wrapped lines) is decoded
    only when a parser asks for it."""

    __slots__ = ("_next", "_next_raw", "fields", "more", "number", "raw", "text")

    def __init__(self, number: int, text: str, raw: str, next_text: str | None = None,
                 fields: dict[str, Any] | None = None, next_raw: bytes | None = None) -> None:
        self.number = number
        self.text = text  # the normalised message text
        self.raw = raw  # the line as decoded and made inert (for evidence)
        self.fields = fields or {}  # key/values from a JSON log line
        self._next = next_text
        self._next_raw = next_raw
        self.more: list[LogLine] | None = None  # a JSON message's further lines

    @property
    def next_text(self) -> str | None:
        if self._next is None and self._next_raw:
            self._next = normalise(decode(self._next_raw))[0]
            self._next_raw = None
        return self._next

    def continuations(self) -> list[LogLine]:
        """This line read with the next physical one, when the next looks like its tail (wrapped by a
        terminal at its width, mid-word, or by a web page at a space): both joins, the cut one first."""
        nxt = self.next_text
        if not nxt or len(self.text) < 40 or _RECORD_START.match(nxt):
            return []
        head = self.text
        texts = dict.fromkeys((head + nxt.rstrip(), head.rstrip() + " " + nxt.strip()))
        return [LogLine(self.number, text, self.raw, None, self.fields) for text in texts]

    def joined(self) -> str:
        """This line with the next one appended (a line hard-wrapped by a terminal or a quote)."""
        nxt = self.next_text
        if not nxt:
            return self.text
        return self.text.rstrip() + " " + nxt.strip()


def normalise(text: str) -> tuple[str, dict[str, Any]]:
    """Return (message text, JSON fields) for one decoded line (a JSON message's further lines
    dropped: `message_lines` keeps them)."""
    text, fields, _ = message_lines(text)
    return text, fields


def message_lines(text: str) -> tuple[str, dict[str, Any], list[str]]:
    """(message text, JSON fields, the message's further lines) for one decoded line."""
    if not text.isprintable():
        text = strip_controls(text)
    if text.startswith((">", " ")):
        text = _QUOTE.sub("", text)
    stripped = text.strip()
    fields: dict[str, Any] = {}
    if stripped.startswith("{") and stripped.endswith("}") and len(stripped) <= MAX_JSON:
        fields = _json_fields(stripped)
        if fields:
            msg = next((fields[k] for k in _JSON_MSG_KEYS if isinstance(fields.get(k), str)), None)
            if msg is not None:
                extras = " ".join(f"{k}={v}" for k, v in fields.items()
                                  if k not in _JSON_MSG_KEYS and isinstance(v, int | float | str)
                                  and not isinstance(v, bool) and len(str(v)) < 200)
                fn = fields.get("function")
                prefix = f"{fn}: " if isinstance(fn, str) else ""
                if "\\" in msg:  # another program's string inside the message: decoded too
                    msg = decode_spans(msg) or msg
                first, *rest = msg.rstrip("\n").split("\n")
                text = strip_controls(prefix + first) + (f" | {extras}" if extras else "")
                return text, fields, [strip_controls(line) for line in rest if line.strip()]
    return text.rstrip(), fields, []


def _json_fields(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def make_line(number: int, raw: bytes, next_raw: bytes | None = None) -> LogLine:
    decoded = decode(raw)
    text, fields, rest = message_lines(decoded)
    inert = text if not fields and decoded.isprintable() else strip_controls(decoded).rstrip()
    line = LogLine(number, text, inert, None, fields, next_raw)
    if rest:
        line.more = [LogLine(number, more, inert) for more in rest]
    return line


def unescape(line: LogLine) -> None:
    """A line that holds another program's escaped string (an input whose head showed escaped quotes:
    an application's log quoting an engine's error body): its quoted messages decoded
    (doctor/core/paste_escapes.py), the first of their lines its text, the others in `more`."""
    decoded = decode_spans(line.text)
    if decoded is None:
        return
    first, *rest = decoded.split("\n")
    line.text = strip_controls(first).rstrip()
    extra = [LogLine(line.number, strip_controls(more).rstrip(), line.raw) for more in rest if more.strip()]
    if extra:
        line.more = (line.more or []) + extra

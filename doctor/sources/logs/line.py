"""One candidate log line, decoded and made inert, with what a parser needs to read it.

Normalisation strips what wraps a message without being part of it: ANSI colour and other escape
sequences, CR, markdown quote markers (`> `) and list bullets from pasted issues, and JSON framing
(docker json-file `{"log": ...}`, journald `{"MESSAGE": ...}`, llama-server's JSON log mode with
its `msg` plus key/value fields). Timestamps, levels and function prefixes are left in place:
parsers match on message text with unanchored patterns, so any prefix is tolerated.

Pure.
"""

from __future__ import annotations

import json
import re
from typing import Any

from doctor.core.lines import decode
from doctor.core.sanitize import strip_controls

_QUOTE = re.compile(r"^\s*(?:>\s?)+")
# the start of a log record (a line that begins so is not the wrapped tail of the one before)
_RECORD_START = re.compile(r"^\s*(?:time=|level=|\[GIN\]|\[?\d{4}[-/]\d\d[-/]\d\d|\d\d-\d\d \d\d:|"
                           r"[A-Z][a-z]{2} +\d+ \d\d:\d\d|(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)\b|"
                           r"Traceback|File \"|\S+\s+\| |\(\w+ pid=|[\w.\[\]-]{3,}: |\{|\d+\.\d+\.\d+\.\d+ [IWED] )")
_JSON_MSG_KEYS = ("msg", "message", "MESSAGE", "log", "text")
MAX_JSON = 1 << 16


class LogLine:
    """A candidate line. `next_text` (the following physical line, for wrapped lines) is decoded
    only when a parser asks for it."""

    __slots__ = ("_next", "_next_raw", "fields", "number", "raw", "text")

    def __init__(self, number: int, text: str, raw: str, next_text: str | None = None,
                 fields: dict[str, Any] | None = None, next_raw: bytes | None = None) -> None:
        self.number = number
        self.text = text  # the normalised message text
        self.raw = raw  # the line as decoded and made inert (for evidence)
        self.fields = fields or {}  # key/values from a JSON log line
        self._next = next_text
        self._next_raw = next_raw

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
    """Return (message text, JSON fields) for one decoded line."""
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
                text = strip_controls(prefix + msg.rstrip("\n")) + (f" | {extras}" if extras else "")
                return text, fields
    return text.rstrip(), fields


def _json_fields(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def make_line(number: int, raw: bytes, next_raw: bytes | None = None) -> LogLine:
    decoded = decode(raw)
    text, fields = normalise(decoded)
    inert = text if not fields and decoded.isprintable() else strip_controls(decoded).rstrip()
    return LogLine(number, text, inert, None, fields, next_raw)

"""Normalise what was pasted, before anything matches: the log as the engine wrote it, from the text
a user pasted, with each of its lines still pointing at the user's own line.

On its way to an issue or a chat a log gains framing and loses its shape: a markdown quote (`> `),
a code fence, list bullets, docker compose's `service-1  | ` or `kubectl logs --prefix`'s
`[pod/NAME/CONTAINER] ` before every line; a terminal's or a notification's hard wrap
(doctor/core/paste_wrap.py); a quoted string holding the whole message (a JSON error body, an
application's JSON log, a Python repr: doctor/core/paste_escapes.py). (Encodings other than UTF-8
are undone earlier, on the stream: doctor/core/encoding.py.) `normalise_paste` undoes these in that
order — framing, wraps, escapes — and returns the logical lines with, for each, the number of the
physical line it begins on (a line made of physical lines 12-14 is line 12; the lines of a message
decoded out of line 3 are all line 3), so a finding's evidence cites what the user pasted.

A framing is stripped only where most non-empty lines carry it (one `> ` in prose is not a quoted
log); journald and syslog prefixes are left to the parsers, which read them. A JSON record whose
message is at its top and is one line without quotes is left whole for the JSON reader
(doctor/sources/logs/line.py, which keeps its fields); any other (an error body's nested message,
a message of several lines) becomes the record with "…" for its messages, then their lines.

Cost: `looks_pasted` decides on the head of the input (its first 64 KiB) with byte searches, one
regex pass and the line lengths; a log that shows none of the marks (every server log) is never
touched. An escaped string inside a server's own record (vLLM's logged prompts, an application's
log line quoting a body) is no mark: such lines are decoded where the scan selects them
(doctor/sources/logs/line.py). A paste that does is read whole (up to `PASTE_MAX`: pastes are small; a larger input is
analysed as it is) and normalised in one pass.

Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.core.lines import decode, split_lines
from doctor.core.paste_escapes import decode_spans, has_escapes
from doctor.core.paste_wrap import char_width, rejoin, word_width

PASTE_MAX = 4 << 20  # a larger input is not a paste: it is analysed as it is
HEAD = 64 << 10
MOST = 0.5  # the share of non-empty lines that must carry a framing for it to be stripped

# framings, each stripped where most lines carry it (order: the outermost first)
FRAMES = (
    ("quote", re.compile(r"^[ \t]*>(?:[ \t]*>)*[ \t]?")),
    ("bullet", re.compile(r"^[ \t]*[-*+•][ \t]+(?=\S)")),
    ("compose", re.compile(r"^[A-Za-z0-9][\w.-]*[ \t]+\|(?: |$)")),
    ("kubectl", re.compile(r"^\[pod/[^\]\s/]+/[^\]\s]+\] ?")),
)
JSON_MESSAGE_KEYS = ("msg", "message", "MESSAGE", "log", "text")  # doctor/sources/logs/line.py reads these
FENCE = re.compile(r"^[ \t]*(?:```|~~~)[\w+.-]*[ \t]*$")
# the head's marks that a paste may need work: escapes, framing, fences
_ESCAPE_MARKS = (b"\\n", b'\\"', b"\\'", b"\\u00", b"\\t")
# vLLM's process prefix (v0.10+, on every line of a process: "(APIServer pid=1187) ", "(VllmWorker TP0 pid=12) ":
# vllm/utils decorate_logs -> _add_prefix(file, process_name, pid)); the pasted-settings reader uses it too
PROCESS_PREFIX = r"\([^()\n]{1,60}pid=\d+\)"
# a server's log record: its escaped strings (vLLM's logged prompts) are fields, not a pasted message
LOG_RECORD = re.compile(rb"^\s*(?:\[?\d{4}[-/]\d\d[-/]\d\d|\d\d-\d\d \d\d:|[A-Z][a-z]{2} +\d+ \d\d:\d\d|"
                        rb"[IWEDF]\d{4} |(?:time|level|ts)=|(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\b|"
                        + PROCESS_PREFIX.encode() + rb")")
_FRAME_MARK = re.compile(rb"^(?:[ \t]*>|[ \t]*[-*+][ \t]|[A-Za-z0-9][\w.-]*[ \t]+\| |\[pod/|[ \t]*```|[ \t]*~~~)",
                         re.MULTILINE)


@dataclass(slots=True)
class Pasted:
    """The normalised text (`data`, UTF-8 lines each ending in LF), the physical line (1-based) each
    of its lines begins on, and how many physical lines the input had."""

    data: bytes
    physical: list[int]
    lines: int

    def line_of(self, logical: int) -> int:
        """The physical line of logical line `logical` (1-based)."""
        if 1 <= logical <= len(self.physical):
            return self.physical[logical - 1]
        return self.lines + max(0, logical - len(self.physical))


def looks_pasted(head: bytes) -> bool:
    """Whether the input whose first bytes are `head` may need normalising (cheap; see the module)."""
    head = head[:HEAD]
    if _FRAME_MARK.search(head):
        return True
    if any(mark in head for mark in _ESCAPE_MARKS) and any(
            b"\\" in line and not LOG_RECORD.match(line) and has_escapes(decode(line)) for line in head.split(b"\n")):
        return True
    lines = [decode(line) for line in head.split(b"\n")[:-1] or [head]]
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return char_width(lines) is not None or word_width(lines) is not None


def normalise_paste(data: bytes) -> Pasted | None:
    """The logical lines of a pasted input (UTF-8 already), or None when it needs nothing."""
    physical = [decode(line) for line in split_lines(data, max_line=PASTE_MAX)]
    lines = list(zip(physical, range(1, len(physical) + 1), strict=True))
    lines, framed = _shape(lines)
    lines, decoded = _decode(lines)
    if not (framed or decoded):
        return None
    return Pasted("".join(text + "\n" for text, _ in lines).encode("utf-8", "replace"),
                  [where for _, where in lines], len(physical))


Numbered = list[tuple[str, int]]  # logical lines, each with the physical line it begins on


def _shape(lines: Numbered) -> tuple[Numbered, bool]:
    """Framing stripped, then wraps rejoined; whether anything changed."""
    texts, changed = _strip_frames([text for text, _ in lines])
    joined = rejoin(texts)
    if joined is None:
        return [(text, where) for text, (_, where) in zip(texts, lines, strict=True)], changed
    return [(text, lines[first][1]) for text, first in joined], True


def _decode(lines: Numbered) -> tuple[Numbered, bool]:
    """Quoted messages decoded into their lines, each message's lines framed or wrapped in their
    turn shaped (`_shape`) apart; whether any was decoded."""
    out: Numbered = []
    changed = False
    for text, where in lines:
        decoded = _decoded_lines(text)
        if decoded is None:
            out.append((text, where))
            continue
        changed = True
        for group in decoded:
            out += _shape([(line, where) for line in group])[0] if len(group) > 1 else [(group[0], where)]
    return out, changed


def _strip_frames(lines: list[str]) -> tuple[list[str], bool]:
    """Fences blanked, and each framing most non-empty lines carry stripped, outermost first."""
    changed = False
    if any(FENCE.match(line) for line in lines):
        lines = ["" if FENCE.match(line) else line for line in lines]
        changed = True
    for _name, frame in FRAMES:
        filled = [line for line in lines if line.strip()]
        if not filled:
            break
        carrying = sum(1 for line in filled if frame.match(line))
        if carrying and carrying >= MOST * len(filled):
            lines = [frame.sub("", line, count=1) for line in lines]
            changed = True
    return lines, changed


def _decoded_lines(text: str) -> list[list[str]] | None:
    """The lines of `text` once its quoted messages are decoded, in groups (a JSON record's line,
    then each message's lines), or None when it holds none."""
    if "\\" not in text:
        return None
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        is_json, record = _json_record(stripped)
        if is_json:
            return record
    decoded = decode_spans(text)
    if decoded is None:
        return None
    return [_split(decoded)]


def _split(text: str) -> list[str]:
    """A decoded message's lines (the line end that closes it is no further line)."""
    return [line.rstrip("\r") for line in text.removesuffix("\n").split("\n")]


def _json_record(text: str) -> tuple[bool, list[list[str]] | None]:
    """(whether `text` is a JSON record, its lines): None for a record the JSON reader reads whole
    (its message at the top, one line without quotes), else the record with its messages lifted
    out (strings that hold a line break, a quote, or 32 characters or more; "…" in their place),
    then their lines."""
    import json

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False, None
    if not isinstance(data, dict | list):
        return False, None
    if isinstance(data, dict):
        msg = next((data[k] for k in JSON_MESSAGE_KEYS if isinstance(data.get(k), str)), None)
        if msg is not None and "\n" not in msg.rstrip("\n") and '"' not in msg:
            return True, None
    lifted: list[str] = []

    def lift(value: object, depth: int = 0) -> object:
        if isinstance(value, str) and ("\n" in value or '"' in value or len(value) >= 32):
            lifted.append(value)
            return "…"
        if depth < 8 and isinstance(value, dict):
            return {k: lift(v, depth + 1) for k, v in value.items()}
        if depth < 8 and isinstance(value, list):
            return [lift(v, depth + 1) for v in value]
        return value

    rest = lift(data)
    if not lifted:
        return True, None
    out = [[json.dumps(rest, ensure_ascii=False)]]
    for value in lifted:
        nested = decode_spans(value)
        out.append(_split(nested if nested is not None else value))
    return True, out

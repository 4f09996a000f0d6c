"""Random access to the lines of a log of any size, for the log pane beside the findings.

Logs can be gigabytes, so nothing here loads a whole file: `read(first, count)` seeks to the
nearest checkpoint (a line number and the byte offset where it starts, one remembered per chunk
read) and walks forward in fixed-size chunks, keeping only the lines asked for. Lines are cut and
numbered by the line policy the analyzer uses (doctor/core/lines.py: LF, CRLF as one end, CR-only
files told by their head, long lines cut), so a finding's line N is the line shown as N (a pasted
log the analyzer normalised, doctor/core/paste.py, cites its physical lines, the ones shown here).
Gzip logs are read through `gzip` (seeking there re-reads, but memory stays flat); a UTF-16/32 log
(doctor/core/encoding.py) is shown from its UTF-8 text in memory (its first `MAX_TRANSCODED` bytes). Every line is made
inert before it is returned, so a log cannot reach the terminal.

Only I/O of the given file or bytes; no Textual.
"""

from __future__ import annotations

import bisect
import gzip
import io
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from doctor.core.encoding import SAMPLE, sniff_encoding, to_utf8
from doctor.core.lines import MAX_LINE, SNIFF, Ends, clean, decode, sniff, to_lf
from doctor.core.sanitize import inert

CHUNK = 1 << 20
MAX_TRANSCODED = 256 << 20  # a UTF-16 log is shown from memory, this much of it
KEEP = MAX_LINE + 1  # the head of a line kept while reading (lines.clean: the CR of a CRLF at the cut)
MAX_COLUMNS = 2000
TAB = 4


@dataclass(frozen=True, slots=True)
class SourceLine:
    number: int  # 1-based, as in the analyzer's evidence
    text: str  # inert, tabs expanded, cut to MAX_COLUMNS
    cut: bool = False  # the line was longer than what is shown


class LogSource:
    """Lines of one log, read on demand. Safe to call from worker threads."""

    def __init__(self, opener: Callable[[], BinaryIO], name: str, total_lines: int | None = None,
                 redact: Callable[[str], str] | None = None) -> None:
        self.name = name
        self._redact = redact  # `--redact`: each line shown as the report's evidence is (Redactor.text)
        self._opener = opener
        self._handle: BinaryIO | None = None
        self._lock = threading.Lock()
        self._checkpoints_line = [1]
        self._checkpoints_offset = [0]
        self._ends: Ends | None = None
        self.total_lines = total_lines  # known once a read reached the end (or given as a hint)
        self._end_seen = False

    @classmethod
    def from_path(cls, path: str | Path, total_lines: int | None = None,
                  redact: Callable[[str], str] | None = None) -> LogSource:
        p = Path(path)
        return cls(lambda: _open_file(p), p.name if redact is None else redact(p.name), total_lines, redact)

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "pasted log", total_lines: int | None = None,
                   redact: Callable[[str], str] | None = None) -> LogSource:
        return cls(lambda: io.BytesIO(data), name, total_lines, redact)

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    def read(self, first: int, count: int) -> list[SourceLine]:
        """Lines `first` .. `first + count - 1` (fewer at the end of the log)."""
        if count <= 0:
            return []
        first = max(1, first)
        with self._lock:
            handle = self._open()
            ends = self._line_ends(handle)
            lines = self._read_locked(handle, ends, first, count)
        if self._redact is not None:
            lines = [SourceLine(x.number, *shown(self._redact(x.text), x.cut)) for x in lines]
        return lines

    def read_around(self, line: int, count: int) -> list[SourceLine]:
        """About `count` lines with `line` in the middle (shifted at the start of the log)."""
        return self.read(max(1, line - count // 2), count)

    def read_tail(self, count: int) -> list[SourceLine]:
        """The last `count` lines (reads to the end once to learn the line count)."""
        if self.total_lines is None or not self._end_seen:
            self.read(1 << 62, 1)  # walks to the end, leaving checkpoints on the way
        total = self.total_lines or 0
        return self.read(max(1, total - count + 1), count)

    # -- internals ---------------------------------------------------------------------------
    def _open(self) -> BinaryIO:
        if self._handle is None:
            self._handle = self._opener()
        return self._handle

    def _line_ends(self, handle: BinaryIO) -> Ends:
        if self._ends is None:
            handle.seek(0)
            head = b""
            while len(head) < SNIFF:
                more = handle.read(SNIFF - len(head))
                if not more:
                    break
                head += more
            self._ends = sniff(head, complete=len(head) < SNIFF)
        return self._ends

    def _checkpoint(self, line: int, offset: int) -> None:
        if line > self._checkpoints_line[-1]:
            self._checkpoints_line.append(line)
            self._checkpoints_offset.append(offset)

    def _read_locked(self, handle: BinaryIO, ends: Ends, first: int, count: int) -> list[SourceLine]:
        sep = b"\n"  # every line end is an LF once a chunk went through to_lf (same length)
        i = bisect.bisect_right(self._checkpoints_line, first) - 1
        line, pos = self._checkpoints_line[i], self._checkpoints_offset[i]
        handle.seek(pos)
        out: list[SourceLine] = []
        last = first + count - 1
        carry = bytearray()  # head of the current line when it spans chunks
        carry_cut = False
        while True:
            chunk = to_lf(handle.read(CHUNK), ends)
            if not chunk:
                if carry or carry_cut:
                    if first <= line <= last:
                        out.append(_make_line(line, bytes(carry), carry_cut))
                    self._set_total(line)
                else:
                    self._set_total(line - 1)
                return out
            start = 0
            if not carry and not carry_cut and line < first:
                n = chunk.count(sep)
                if line + n < first:  # every line ending in this chunk is before `first`
                    cut = chunk.rfind(sep)
                    if cut >= 0:
                        line += n
                        self._checkpoint(line, pos + cut + 1)
                        carry_cut = len(chunk) - cut - 1 > KEEP
                        carry = bytearray(chunk[cut + 1:cut + 1 + KEEP])
                    else:
                        _extend_capped(carry, chunk)
                        carry_cut = carry_cut or len(chunk) > KEEP
                    pos += len(chunk)
                    continue
            while True:
                end = chunk.find(sep, start)
                if end < 0:
                    piece = chunk[start:]
                    if first <= line <= last:
                        room = KEEP - len(carry)
                        if room > 0:
                            carry.extend(piece[:room])
                        carry_cut = carry_cut or len(piece) > room
                    elif piece:
                        carry_cut = True  # not wanted; only mark that a line is open
                    break
                if first <= line <= last:
                    piece = chunk[start:end]
                    room = KEEP - len(carry)
                    carry.extend(piece[:max(room, 0)])
                    out.append(_make_line(line, bytes(carry), carry_cut or len(piece) > room))
                carry = bytearray()
                carry_cut = False
                line += 1
                start = end + 1
                if line > last:
                    self._checkpoint(line, pos + start)
                    return out
            self._checkpoint_at_chunk_end(chunk, line, pos, sep)
            pos += len(chunk)

    def _checkpoint_at_chunk_end(self, chunk: bytes, line: int, pos: int, sep: bytes) -> None:
        cut = chunk.rfind(sep)
        if cut >= 0:
            self._checkpoint(line, pos + cut + 1)

    def _set_total(self, total: int) -> None:
        self.total_lines = max(total, 0)
        self._end_seen = True


def _extend_capped(buf: bytearray, data: bytes) -> None:
    room = KEEP - len(buf)
    if room > 0:
        buf.extend(data[:room])


def _make_line(number: int, raw: bytes, cut: bool) -> SourceLine:
    """`raw`: the line's first KEEP bytes; `cut`: it had more."""
    line = clean(raw)
    return SourceLine(number, *shown(decode(line), cut or len(line) < len(raw.removesuffix(b"\r"))))


def shown(text: str, cut: bool = False) -> tuple[str, bool]:
    """What the pane shows of a line's text: inert, tabs expanded, at most MAX_COLUMNS."""
    text = inert(text).expandtabs(TAB)
    if len(text) > MAX_COLUMNS:
        text, cut = text[:MAX_COLUMNS], True
    return text, cut


def _open_file(path: Path) -> BinaryIO:
    handle = path.open("rb")
    head = handle.read(SAMPLE)
    handle.seek(0)
    if head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=handle)
    if sniff_encoding(head) is not None:  # UTF-16/32 (PowerShell's `>`): shown as the analyzer read it
        with handle:
            return io.BytesIO(to_utf8(handle.read(MAX_TRANSCODED)))
    return handle


def is_plain_log(path: str | Path) -> bool:
    """False for inputs `analyze` reads that are not logs (saved scans, reports, recordings)."""
    try:
        with Path(path).open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    if head.startswith(b"\x1f\x8b"):
        return True
    text = head.lstrip()
    if not text.startswith(b"{"):
        return True
    first = text.split(b"\n", 1)[0][:400]
    return not (b'"llm_doctor"' in first or b'"schema_version"' in text[:400])

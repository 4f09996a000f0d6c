"""Random access to the lines of a log of any size, for the log pane beside the findings.

Logs can be gigabytes, so nothing here loads a whole file: `read(first, count)` seeks to the
nearest checkpoint (a line number and the byte offset where it starts, one remembered per chunk
read) and walks forward in fixed-size chunks, keeping only the lines asked for, each cut to
`MAX_LINE_BYTES`. Lines are numbered as the analyzer numbers them (`doctor.logs.stream`): by LF,
CRLF taken as one end, and CR alone when the head of the file has no LF. Gzip logs are read
through `gzip` (seeking there re-reads, but memory stays flat). Every line is made inert before it
is returned, so a log cannot reach the terminal.

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

from doctor.sanitize import inert

CHUNK = 1 << 20
SNIFF = 64 << 10
MAX_LINE_BYTES = 4096
MAX_COLUMNS = 2000
TAB = 4


@dataclass(frozen=True, slots=True)
class SourceLine:
    number: int  # 1-based, as in the analyzer's evidence
    text: str  # inert, tabs expanded, cut to MAX_COLUMNS
    cut: bool = False  # the line was longer than what is shown


class LogSource:
    """Lines of one log, read on demand. Safe to call from worker threads."""

    def __init__(self, opener: Callable[[], BinaryIO], name: str, total_lines: int | None = None) -> None:
        self.name = name
        self._opener = opener
        self._handle: BinaryIO | None = None
        self._lock = threading.Lock()
        self._checkpoints_line = [1]
        self._checkpoints_offset = [0]
        self._sep: bytes | None = None
        self.total_lines = total_lines  # known once a read reached the end (or given as a hint)
        self._end_seen = False

    @classmethod
    def from_path(cls, path: str | Path, total_lines: int | None = None) -> LogSource:
        p = Path(path)
        return cls(lambda: _open_file(p), p.name, total_lines)

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "pasted log", total_lines: int | None = None) -> LogSource:
        return cls(lambda: io.BytesIO(data), name, total_lines)

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
            sep = self._separator(handle)
            return self._read_locked(handle, sep, first, count)

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

    def _separator(self, handle: BinaryIO) -> bytes:
        if self._sep is None:
            handle.seek(0)
            head = handle.read(SNIFF)
            self._sep = b"\r" if (b"\n" not in head and b"\r" in head) else b"\n"
        return self._sep

    def _checkpoint(self, line: int, offset: int) -> None:
        if line > self._checkpoints_line[-1]:
            self._checkpoints_line.append(line)
            self._checkpoints_offset.append(offset)

    def _read_locked(self, handle: BinaryIO, sep: bytes, first: int, count: int) -> list[SourceLine]:
        i = bisect.bisect_right(self._checkpoints_line, first) - 1
        line, pos = self._checkpoints_line[i], self._checkpoints_offset[i]
        handle.seek(pos)
        out: list[SourceLine] = []
        last = first + count - 1
        carry = bytearray()  # head of the current line when it spans chunks
        carry_cut = False
        while True:
            chunk = handle.read(CHUNK)
            if not chunk:
                if carry or carry_cut:
                    if first <= line <= last:
                        out.append(_make_line(line, bytes(carry), carry_cut, sep))
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
                        carry_cut = len(chunk) - cut - 1 > MAX_LINE_BYTES
                        carry = bytearray(chunk[cut + 1:cut + 1 + MAX_LINE_BYTES])
                    else:
                        _extend_capped(carry, chunk)
                        carry_cut = carry_cut or len(chunk) > MAX_LINE_BYTES
                    pos += len(chunk)
                    continue
            while True:
                end = chunk.find(sep, start)
                if end < 0:
                    piece = chunk[start:]
                    if first <= line <= last:
                        room = MAX_LINE_BYTES - len(carry)
                        if room > 0:
                            carry.extend(piece[:room])
                        carry_cut = carry_cut or len(piece) > room
                    elif piece:
                        carry_cut = True  # not wanted; only mark that a line is open
                    break
                if first <= line <= last:
                    piece = chunk[start:end]
                    room = MAX_LINE_BYTES - len(carry)
                    carry.extend(piece[:max(room, 0)])
                    out.append(_make_line(line, bytes(carry), carry_cut or len(piece) > room, sep))
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
    room = MAX_LINE_BYTES - len(buf)
    if room > 0:
        buf.extend(data[:room])


def _make_line(number: int, raw: bytes, cut: bool, sep: bytes) -> SourceLine:
    if sep == b"\n" and raw.endswith(b"\r"):
        raw = raw[:-1]
    text = inert(raw.decode("utf-8", errors="replace")).expandtabs(TAB)
    if len(text) > MAX_COLUMNS:
        text, cut = text[:MAX_COLUMNS], True
    return SourceLine(number, text, cut)


def _open_file(path: Path) -> BinaryIO:
    handle = path.open("rb")
    head = handle.read(2)
    handle.seek(0)
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=handle)
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

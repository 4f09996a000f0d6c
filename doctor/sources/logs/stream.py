"""Streaming line scanner: bytes in, numbered candidate lines out, in constant memory.

Logs can be gigabytes. Instead of decoding and testing every line in Python, the scanner runs one
compiled trigger pattern over raw byte chunks and hands on only the lines that contain a trigger,
with their 1-based line numbers. Lines are what doctor/core/lines.py says they are (LF or CRLF
ends, CR-only files told by their head, lines longer than `max_line` cut: a 100 MB line costs no
more memory than the cut); the scan applies that policy inline, on the raw chunk. Between
triggers, a consumer can ask for the text in between (`capture = True`): that is how the generated
output of a llama-cli transcript is picked up without reading every line.

Only I/O of the given file object; no decoding here.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from doctor.core.encoding import utf8_stream
from doctor.core.errors import InputError
from doctor.core.lines import MAX_LINE, SNIFF, EndSniffer
from doctor.sources.logs.matcher import BytesPattern, span_finder

CHUNK = 1 << 20  # a read: its buffers (it, and it joined with the partial line before it) are the memory that grows
# with a read's size (doctor/sources/logs/memory.py); 1 MiB reads cost no more CPU than 4 MiB ones (issue 38)
MAX_GAP = 64 << 10


@dataclass(slots=True)
class RawLine:
    """A candidate line (`text` set) or the text between two candidates (`gap` set)."""

    number: int
    text: bytes | None = None
    gap: bytes | None = None
    next: bytes | None = None  # the following physical line, for lines wrapped by a terminal
    stop: int = 0  # where in its region the scan goes on after it (doctor/sources/logs/parallel.py)
    start: int = 0  # where in its region it begins


class LineScanner:
    def __init__(self, trigger: BytesPattern, max_line: int = MAX_LINE) -> None:
        self.trigger = trigger
        self._find = span_finder(trigger)
        self.max_line = max_line
        self.capture = False
        self.lines = 0  # complete lines seen so far
        self.bytes = 0
        self._tail = b""
        self._ends = EndSniffer()
        self._skipping = False  # inside an over-long line whose head was already handled
        # whole-input reads (not a followed log) keep the last complete line back until more comes, so
        # the line before a final line without a newline still sees it as its next (a wrapped message)
        self.hold_last = False
        # folding (doctor/sources/logs/fold.py): `fold(region, start, end, number)` takes a run of hot
        # lines at a candidate line: (the position after it, its number of lines), (0, 0) for none
        self.fold: Callable[[bytes, int, int, int], tuple[int, int]] | None = None
        # its cheap first test, run here inline: `probe(region, start, start + probe_within)` (None: none)
        self.probe: Callable[[bytes, int, int], object] | None = None
        self.probe_within = 0
        self.folded = 0  # lines folded

    def feed(self, data: bytes) -> Iterator[RawLine]:
        self.bytes += len(data)
        if self._ends.ends != "lf":  # CR-only (to LF here), or the head is still being sniffed
            data = self._ends.feed(data)
        return self._feed(data) if data else iter(())

    def _feed(self, data: bytes) -> Iterator[RawLine]:
        buf = self._tail + data if self._tail else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            self._tail = buf
            if len(self._tail) > 4 * self.max_line:
                yield from self._overlong()
            return
        if self.hold_last and not self._skipping and cut - buf.rfind(b"\n", 0, cut) <= self.max_line:
            cut = buf.rfind(b"\n", 0, cut)
            if cut < 0:  # one complete line so far: it waits with the rest
                self._tail = buf
                return
        # the complete lines are scanned in place (no copy of the chunk); the partial last line waits
        self._tail = buf[cut + 1:]
        begin = 0
        if self._skipping:
            begin = buf.find(b"\n") + 1
            self._skipping = False
            self.lines += 1
        yield from self._scan(buf, begin, cut + 1)
        if len(self._tail) > 4 * self.max_line:
            yield from self._overlong()

    def finish(self) -> Iterator[RawLine]:
        held = self._ends.finish()  # a short input whose head told nothing until its end
        if held:
            yield from self._feed(held)
        if self._tail and not self._skipping:
            tail, self._tail = self._tail, b""
            data = tail if tail.endswith(b"\n") else tail + b"\n"  # a held-back last line has its newline
            yield from self._scan(data, 0, len(data))
        elif self._skipping:
            self._skipping = False
            self.lines += 1
        self._tail = b""

    def _overlong(self) -> Iterator[RawLine]:
        """The current line is huge: judge it by its head, then skip to its end."""
        head = self._tail[: self.max_line]
        self._tail = b""
        if not self._skipping:
            if self.trigger.search(head):
                yield RawLine(self.lines + 1, text=head)
            self._skipping = True

    def _scan(self, region: bytes, begin: int, end_region: int, line_base: int | None = None) -> Iterator[RawLine]:
        """Candidates in region[begin:end_region], which holds complete lines only; `line_base`: the lines before
        `begin` (`lines`, the lines before the region, when not given: they stay so until its end)."""
        find = self._find
        rfind, nfind, count = region.rfind, region.find, region.count
        max_line = self.max_line
        pos = begin
        if line_base is None:
            line_base = self.lines  # lines before `begin`
        counted_to = begin
        counted = 0
        gap_start = begin
        fold, probe, within = self.fold, self.probe, self.probe_within
        while pos < end_region:
            span = find(region, pos, end_region)
            if span is None:
                break
            start = rfind(b"\n", begin, span[0]) + 1 or begin
            end = nfind(b"\n", span[1])
            if end < 0:
                end = end_region
            counted += count(b"\n", counted_to, start)
            counted_to = start
            number = line_base + counted + 1
            if fold is not None and not self.capture and (probe is None or probe(region, start, start + within)):
                taken, folded = fold(region, start, end_region, number)
                if folded:  # a run of hot lines, read by its parser: go on after it
                    self.folded += folded
                    counted += folded
                    counted_to = pos = gap_start = taken
                    continue
            if self.capture and start > gap_start:
                yield RawLine(number, None, region[gap_start:start][-MAX_GAP:])
            if end - start <= max_line:  # lines.clean, inline
                line = region[start:end]
                if line.endswith(b"\r"):
                    line = line[:-1]
            else:  # cut: the first max_line bytes (a CR at the very end is beyond the cut)
                line = region[start:start + max_line]
            nxt = None
            pos = end + 1
            if pos < len(region):  # the next line may lie past the region: a held-back or partial last line
                nxt_end = nfind(b"\n", pos, pos + max_line)
                nxt = region[pos: nxt_end if nxt_end >= 0 else pos + max_line].rstrip(b"\r")
            yield RawLine(number, line, None, nxt, pos, start)
            gap_start = pos
        if self.capture and gap_start < end_region:
            counted += region.count(b"\n", counted_to, gap_start)
            counted_to = gap_start
            yield RawLine(line_base + counted + 1, gap=region[gap_start:end_region][-MAX_GAP:])
        self.lines = line_base + counted + region.count(b"\n", counted_to, end_region)


def cut_line(region: bytes, begin: int, stop: int, max_line: int = MAX_LINE) -> tuple[bytes, bytes | None]:
    """The line region[begin:stop] (`stop`: its line end) and its next line as `_scan` hands them: cut to
    max_line, a CR dropped (where the scan was not made: doctor/sources/logs/hot.py, parallel.py)."""
    if stop - begin <= max_line:
        line = region[begin:stop]
        if line.endswith(b"\r"):
            line = line[:-1]
    else:
        line = region[begin:begin + max_line]
    pos = stop + 1
    if pos >= len(region):
        return line, None
    nxt_end = region.find(b"\n", pos, pos + max_line)
    return line, region[pos: nxt_end if nxt_end >= 0 else pos + max_line].rstrip(b"\r")


def looks_binary(head: bytes) -> str | None:
    """Say why `head` is not a text log, or None when it looks like text."""
    if head.startswith(b"GGUF"):
        return "this is a GGUF model file, not a log (use `llm-doctor scan --model FILE`)"
    for magic, what in ((b"\x7fELF", "an executable"), (b"PK\x03\x04", "a zip archive"),
                        (b"\x89PNG", "a PNG image"), (b"%PDF", "a PDF"), (b"\xfd7zXZ", "an xz archive"),
                        (b"BZh", "a bzip2 archive"), (b"\x28\xb5\x2f\xfd", "a zstd archive")):
        if head.startswith(magic):
            return f"this is {what}, not a log"
    if not head:
        return None
    sample = head[:SNIFF]
    nul = sample.count(b"\x00")
    controls = sum(sample.count(bytes([c])) for c in range(0, 32) if c not in (9, 10, 13, 27))
    if nul > len(sample) // 100 + 2 or controls > len(sample) // 10 + 8:
        return f"this looks binary ({nul} NUL and {controls} control bytes in the first {len(sample)}), not a log"
    return None


def open_input(stream: BinaryIO) -> BinaryIO:
    """Wrap a byte stream: transparently gunzip, read UTF-16/32 as UTF-8 (doctor/core/encoding.py),
    refuse binary input with a clear reason."""
    peek = _peek(stream)
    if peek.startswith(b"\x1f\x8b"):
        stream = io.BufferedReader(gzip.GzipFile(fileobj=stream), 1 << 20)
        try:
            peek = _peek(stream)
        except (OSError, EOFError) as exc:
            raise InputError(f"cannot read gzip input: {exc}") from None
    text = utf8_stream(stream, peek)
    if text is not None:
        stream = text
        try:
            peek = _peek(stream)
        except (OSError, EOFError) as exc:
            raise InputError(f"cannot read the input: {exc}") from None
    reason = looks_binary(peek)
    if reason:
        raise InputError(reason)
    return stream


def peek_head(stream: BinaryIO) -> bytes:
    """The first bytes of a stream `open_input` returned, left unread."""
    return _peek(stream)


def read_upto(stream: BinaryIO, size: int) -> bytes:
    """`size` bytes of `stream`, fewer only at its end (a pipe or a rewound head may give less per read)."""
    parts: list[bytes] = []
    got = 0
    while got < size:
        data = stream.read(size - got)
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def _peek(stream: BinaryIO) -> bytes:
    peek = getattr(stream, "peek", None)
    if callable(peek):
        return bytes(peek(SNIFF))[:SNIFF]
    peek_bytes = getattr(stream, "peek_bytes", None)
    if callable(peek_bytes):
        return bytes(peek_bytes(SNIFF))
    raise TypeError("wrap the stream with rewindable() first")


class _Rewound(io.RawIOBase):
    """A read-only stream with its first bytes read ahead, so we can sniff pipes and gzip."""

    def __init__(self, inner: BinaryIO) -> None:
        self._inner = inner
        self._head = b""
        self._pos = 0

    def peek_bytes(self, n: int) -> bytes:
        while len(self._head) < n:
            more = self._inner.read(n - len(self._head))
            if not more:
                break
            self._head += more
        return self._head[self._pos:self._pos + n] if self._pos == 0 else b""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._pos < len(self._head):
            if size is None or size < 0:
                out = self._head[self._pos:] + self._inner.read()
                self._pos = len(self._head)
                return out
            out = self._head[self._pos:self._pos + size]
            self._pos += len(out)
            return out
        return self._inner.read(size)

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def rewindable(stream: BinaryIO) -> BinaryIO:
    if isinstance(stream, io.BufferedReader):
        return stream
    return _Rewound(stream)  # type: ignore[return-value]

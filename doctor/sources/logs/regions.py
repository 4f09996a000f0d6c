"""The regions a whole input is scanned in: where the serial path's reads cut it, found without reading it all.

`analyze_stream` (doctor/sources/logs/entry.py) reads an input in reads of `CHUNK` bytes and hands each to the
scanner (doctor/sources/logs/stream.py `LineScanner._feed`), which scans the complete lines the read finishes,
less the last one (held back so the line before it sees it as its next: `hold_last`); the rest waits for the
next read. A report depends on these cuts (a closed session's line count is the scanner's count at the start
of the region it closes in; a folded run ends at a region's end), so the parallel path
(doctor/sources/logs/parallel.py) scans exactly these regions: region k holds the complete lines from the end
of region k - 1 to the cut in read k, its buffer runs on to the end of read k (the lines a region's last line
may look at as its next).

A cut is found from the bytes just before the end of its read. Inputs the parallel path leaves to the serial
one (`None`): a head without an LF in its first read (CR-only line ends, or a head that does not tell yet), and
a read that ends in a line too long for the scanner's usual path (its over-long rest: stream.py `_overlong`).

Pure apart from reading the given file descriptor.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from doctor.core.lines import MAX_LINE, SNIFF

Read = Callable[[int, int], bytes]  # read(offset, size): the input's bytes there (fewer at its end)


@dataclass(frozen=True, slots=True)
class Region:
    """Region `index` of an input: its complete lines are [start, end), its buffer [start, buf_end)."""

    index: int
    start: int
    end: int
    buf_end: int


def cut(buf: bytes, max_line: int = MAX_LINE) -> int | None:
    """Where the scanner cuts a buffer that begins a region (`hold_last`): the end of its complete lines, less
    the last one when that is short; None where the serial path takes its other ways (no region in this read,
    an over-long rest)."""
    last = buf.rfind(b"\n")
    if last < 0:
        return None
    before = buf.rfind(b"\n", 0, last)
    if last - before <= max_line:
        last = before
        if last < 0:
            return None
    if len(buf) - (last + 1) > 4 * max_line:
        return None
    return last + 1


def file_regions(read: Read, size: int, chunk: int, max_line: int = MAX_LINE,
                 first: int = 0, start: int = 0) -> Iterator[Region] | None:
    """The regions of an input of `size` bytes read in reads of `chunk` (`first`: the size of the first read
    where it is another: analyze_stream reads a head that may be a paste whole), each read's cut found from the
    bytes just before its end; None where the input's head leaves it to the serial path. `start`: a line start
    to begin at (a followed file read on: doctor/sources/live/follow/catchup.py), as if the input began there."""
    first = first or chunk
    if size <= start or b"\n" not in read(start, min(first, SNIFF, size - start)):
        return None
    return _regions(read, size, chunk, max_line, first, start)


def _regions(read: Read, size: int, chunk: int, max_line: int, first: int, start: int = 0) -> Iterator[Region]:
    """Regions until the input ends, or until a read the parallel path cannot cut (then it stops: the caller
    finds the last region's end short of the input's and reads the rest the serial way)."""
    window = 6 * max_line  # enough to find a cut whose rest is no longer than 4 * max_line, and the line before
    index = 0
    read_end = start
    while read_end < size:
        read_end = min(read_end + (chunk if index else first), size)
        low = max(start, read_end - window)
        tail = read(low, read_end - low)
        found = cut(tail, max_line) if low == start else _cut_in_window(tail, max_line)
        if found is None:
            return
        end = low + found
        yield Region(index, start, end, read_end)
        index += 1
        start = end


def _cut_in_window(tail: bytes, max_line: int) -> int | None:
    """`cut` on the last bytes of a longer buffer: a line before the last one that starts before the window is
    longer than max_line (the window holds more than 4 * max_line + 2 * max_line bytes), so it is not held."""
    last = tail.rfind(b"\n")
    if last < 0 or len(tail) - (last + 1) > 4 * max_line:
        return None
    before = tail.rfind(b"\n", 0, last)
    if before >= 0 and last - before <= max_line:
        return before + 1
    return last + 1


def pread(fd: int) -> Read:
    """`read` over a file descriptor (positional reads: the file's own position is not moved)."""
    def read(offset: int, size: int) -> bytes:
        parts: list[bytes] = []
        while size > 0:
            data = os.pread(fd, size, offset)
            if not data:
                break
            parts.append(data)
            offset += len(data)
            size -= len(data)
        return b"".join(parts) if len(parts) != 1 else parts[0]

    return read

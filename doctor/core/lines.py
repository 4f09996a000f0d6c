"""The line policy: what a line of a log is, and its number, for every reader of log bytes.

The analyzer (doctor/sources/logs/stream.py), the follower and the wrapper of `watch` (doctor/sources/live/) and
the TUI's log pane (doctor/views/tui/log_source.py) all number lines by these rules, so a finding's line N
is the line the log pane shows as N, whatever sizes the bytes arrived in.

- Line ends. A file is read with LF ends, a CRLF counting as one end (its CR is dropped from the
  line). A file whose first `SNIFF` bytes hold a CR and no LF is a CR-only file (progress output
  saved to a file, old Mac logs): there every CR ends a line, and so does any LF (a CRLF in such a
  file counts as two ends: the head said CR, and the file is read the way its head says). The
  decision is taken on the first `SNIFF` bytes of the input, not of the first read: until an LF
  shows or `SNIFF` bytes are in (or the input ends), nothing is let out, so the numbering is the
  same however the bytes are cut into reads. A pipe (`watch -- cmd`) is never sniffed: it is read
  with LF ends, as its first bytes may well be a progress bar.
- Lone CRs in an LF file (progress bars that redraw one terminal line) are not line ends: they stay
  in the line's bytes. Parsing strips them with the other controls (doctor/core/sanitize.py
  `strip_controls`); the log pane shows them as `\\x0d` (`inert`).
- Long lines. A line longer than `MAX_LINE` bytes (after its CRLF's CR is dropped) is cut to its
  first `MAX_LINE` bytes; the rest of it is dropped, and it stays one line: the next line's number
  is not moved. (What a view shows of a line, its columns, is the view's business.)
- The last line. Bytes after the last line end (no newline at the end of the input) are a line,
  numbered after the others, once the input ends; an empty rest is no line.
- Text. A line is decoded as UTF-8 after it is cut, any byte that is not UTF-8 (or a character cut
  in half) becoming U+FFFD. Escape sequences are not parsed here: they are bytes of the line (an LF
  or a CR-only file's CR inside one still ends the line); parsing strips them (`strip_controls`,
  doctor/sources/logs/line.py) and views make them inert (`inert`).

Pure: bytes in, lines out; no I/O.
"""

from __future__ import annotations

from typing import Literal

SNIFF = 64 << 10  # the head of the input that tells LF from CR-only line ends
MAX_LINE = 16 << 10  # a longer line is cut to this many bytes

Ends = Literal["lf", "cr"]


def sniff(head: bytes, complete: bool) -> Ends | None:
    """The line ends of an input whose first bytes are `head` (`complete`: the input ends there),
    or None while `head` cannot tell yet (no LF, fewer than SNIFF bytes, more to come)."""
    window = head[:SNIFF]
    if b"\n" in window:
        return "lf"
    if len(window) < SNIFF and not complete:
        return None
    return "cr" if b"\r" in window else "lf"


def to_lf(data: bytes, ends: Ends) -> bytes:
    """`data` with every line end an LF (same length: byte offsets keep their meaning)."""
    return data.replace(b"\r", b"\n") if ends == "cr" else data


def clean(raw: bytes, max_line: int = MAX_LINE) -> bytes:
    """A line's bytes (its LF already gone): the CR of a CRLF dropped, cut to `max_line`. A reader
    that keeps only the head of a long line keeps `max_line + 1` bytes, so that CR is told apart."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw[:max_line]


def decode(raw: bytes) -> str:
    """A line's text: UTF-8, anything else replaced."""
    return raw.decode("utf-8", errors="replace")


class EndSniffer:
    """Incremental `sniff`: bytes in, the same bytes out with LF line ends, held back (b"" out) while
    the head cannot tell yet. `sniff_cr=False` (a pipe): LF ends from the first byte."""

    __slots__ = ("_head", "ends")

    def __init__(self, sniff_cr: bool = True) -> None:
        self.ends: Ends | None = None if sniff_cr else "lf"
        self._head = bytearray()

    def feed(self, data: bytes) -> bytes:
        if self.ends is None:
            seen = len(self._head)
            self._head += data
            if b"\n" in data[: max(0, SNIFF - seen)]:
                self.ends = "lf"
            elif len(self._head) >= SNIFF:
                self.ends = sniff(bytes(self._head[:SNIFF]), True)
            else:
                return b""
            data, self._head = bytes(self._head), bytearray()
        return data.replace(b"\r", b"\n") if self.ends == "cr" else data

    def finish(self) -> bytes:
        """What was held back, once the input ended (its ends decided on what came)."""
        if self.ends is not None:
            return b""
        data, self._head = bytes(self._head), bytearray()
        ends = sniff(data, True) or "lf"  # complete: always decided
        self.ends = ends
        return to_lf(data, ends)


class LineSplitter:
    """Bytes in, complete lines out as one block (each line ending in LF, a CRLF's CR still in it);
    a partial last line waits for the rest. Bounded: a line that grows past `max_line` without a
    newline is let out as its first `max_line` bytes, and the rest of it is dropped. `sniff_cr`:
    files are sniffed for CR-only line ends; pipes are not."""

    def __init__(self, max_line: int = MAX_LINE, sniff_cr: bool = False) -> None:
        self.max_line = max_line
        self.partial = b""
        self.skipping = False  # inside a line already cut at max_line
        self.ends = EndSniffer(sniff_cr)

    def feed_block(self, data: bytes) -> bytes:
        """The complete lines `data` finishes, as one block: no per-line work, so the parsers can
        take it as `analyze` takes a chunk."""
        return self._split(self.ends.feed(data)) if data else b""

    def _split(self, data: bytes) -> bytes:
        if not data:
            return b""
        buf = self.partial + data if self.partial else data
        if self.skipping:
            nl = buf.find(b"\n")
            if nl < 0:
                self.partial = b""
                return b""
            buf = buf[nl + 1:]
            self.skipping = False
        cut = buf.rfind(b"\n")
        block, rest = buf[:cut + 1], buf[cut + 1:]
        if len(rest) > self.max_line:
            block += rest[: self.max_line] + b"\n"
            self.skipping = True
            rest = b""
        self.partial = rest
        return block

    def finish_block(self) -> bytes:
        """The lines still held: what a sniff held back, and a last line without its newline."""
        block = self._split(self.ends.finish())
        rest, self.partial = self.partial, b""
        skipping, self.skipping = self.skipping, False
        return block + rest + b"\n" if rest and not skipping else block

    def feed(self, data: bytes) -> list[bytes]:
        return block_lines(self.feed_block(data), self.max_line)

    def finish(self) -> list[bytes]:
        return block_lines(self.finish_block(), self.max_line)


def block_lines(block: bytes, max_line: int = MAX_LINE, last: int | None = None) -> list[bytes]:
    """The lines of a block of LF-ended lines, each `clean`ed; only the `last` ones when given,
    without splitting the rest."""
    count = block.count(b"\n")
    parts = block.split(b"\n")[:-1] if last is None or last >= count else \
        block.rsplit(b"\n", last + 1)[1:-1] if last > 0 else []
    return [(line[:-1] if line.endswith(b"\r") else line)[:max_line] for line in parts]


def split_lines(data: bytes, sniff_cr: bool = True, max_line: int = MAX_LINE) -> list[bytes]:
    """All the lines of a whole input (line N is item N - 1), each `clean`ed."""
    splitter = LineSplitter(max_line, sniff_cr)
    return block_lines(splitter.feed_block(data) + splitter.finish_block(), max_line)

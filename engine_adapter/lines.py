"""Cutting the bytes of a followed file or a wrapped command's output into lines, bounded.

`LineSplitter` hands complete lines out as one LF-ended block per read, so the parsers take them as
`analyze` takes a chunk and no per-line work is done unless someone needs each line
(`block_lines`: the recording, the ndjson stream, the TUI's log pane). Pure: bytes in, bytes out.
"""

from __future__ import annotations

MAX_LINE = 16 << 10  # a longer line is cut to this (the rest of it dropped)
SNIFF = 64 << 10  # the first bytes that tell LF from CR-only line ends


class LineSplitter:
    """Bytes in, complete lines out as one block (each line ending in LF); a partial last line waits
    for the rest. Bounded: a line that grows past `max_line` without a newline is let out as its
    first `max_line` bytes, and the rest of it is dropped."""

    def __init__(self, max_line: int = MAX_LINE, sniff_cr: bool = False) -> None:
        self.max_line = max_line
        self.partial = b""
        self.skipping = False  # inside a line already cut at max_line
        # sniff_cr (files): when the first data has a CR and no LF, lines end in a lone CR (progress
        # output saved to a file, old Mac logs), as `analyze` reads them; pipes never guess
        self.cr_mode: bool | None = None if sniff_cr else False

    def feed_block(self, data: bytes) -> bytes:
        """The complete lines `data` finishes, as one block: no per-line work, so the parsers can
        take it as `analyze` takes a chunk."""
        if self.cr_mode is None and data:
            self.cr_mode = b"\n" not in data[:SNIFF] and b"\r" in data[:SNIFF]
        if self.cr_mode:
            data = data.replace(b"\r", b"\n")
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
        rest, self.partial = self.partial, b""
        skipping, self.skipping = self.skipping, False
        return rest + b"\n" if rest and not skipping else b""

    def feed(self, data: bytes) -> list[bytes]:
        return block_lines(self.feed_block(data), self.max_line)

    def finish(self) -> list[bytes]:
        return block_lines(self.finish_block(), self.max_line)


def block_lines(block: bytes, max_line: int = MAX_LINE, last: int | None = None) -> list[bytes]:
    """The lines of a block (each cut at `max_line`, CR of a CRLF dropped); only the `last` ones when
    given, without splitting the rest."""
    count = block.count(b"\n")
    parts = block.split(b"\n")[:-1] if last is None or last >= count else \
        block.rsplit(b"\n", last + 1)[1:-1] if last > 0 else []
    return [line[:max_line].rstrip(b"\r") for line in parts]

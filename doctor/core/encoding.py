"""The text encodings a log may arrive in besides UTF-8, told from its first bytes, and a stream that
hands on any of them as UTF-8.

Windows PowerShell 5's `>` and `Out-File` write UTF-16 LE with a byte-order mark; some tools write
UTF-16 without one (every ASCII character followed by a NUL), or UTF-32. Read as UTF-8 such a file
looks binary (half its bytes are NUL). `sniff_encoding` looks at the head only: a byte-order mark
(UTF-8's is dropped too), else the NUL pattern of ASCII text in UTF-16 or UTF-32 on its first
`SAMPLE` bytes (the low byte of each code unit never NUL, the high byte mostly; the sample, decoded,
has next to no controls and is mostly letters, digits and spaces). Plain UTF-8 (every server log)
costs one `startswith` and one `count` of NULs on the head. `Transcoded` decodes incrementally (a
character cut between two reads is kept for the next), anything undecodable becoming U+FFFD, so line
ends and lines are those of the text.

Pure apart from reading the given stream.
"""

from __future__ import annotations

import codecs
import io
from typing import BinaryIO

SAMPLE = 4096  # bytes of the head whose NUL pattern tells UTF-16/32 without a byte-order mark
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it begins with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF8, "utf-8"),
)


def sniff_encoding(head: bytes) -> tuple[str, int] | None:
    """(codec, bytes of byte-order mark to skip) when `head` is not plain UTF-8, else None."""
    for bom, name in BOMS:
        if head.startswith(bom):
            return name, len(bom)
    sample = head[:SAMPLE]
    if len(sample) < 8 or sample.count(0) < len(sample) // 4:
        return None
    for width, codec in ((4, "utf-32"), (2, "utf-16")):
        usable = len(sample) - len(sample) % width
        units = usable // width
        zero = [sample[i:usable:width].count(0) / units for i in range(width)]  # byte i of every code unit
        for order, columns in (("le", list(range(width))), ("be", list(range(width - 1, -1, -1)))):
            low, *high = (zero[i] for i in columns)  # the character's low byte, then the higher ones
            # ASCII text: the low byte never NUL, the high ones nearly always (less where the text
            # has other scripts or box-drawing characters); UTF-32's top bytes always
            if low <= 0.05 and high[0] >= 0.6 and all(z >= 0.95 for z in high[1:]):
                name = f"{codec}-{order}"
                return (name, 0) if _reads_as_text(sample[:usable].decode(name, errors="replace")) else None
    return None


def _reads_as_text(text: str) -> bool:
    """Whether a sample decoded without a byte-order mark is text: controls rare (binary data whose
    every other byte is NUL, an array of small numbers, is not), letters, digits and spaces most."""
    controls = sum(1 for c in text if (c < " " and c not in "\t\n\r") or "\x7f" <= c <= "\x9f")
    plain = sum(1 for c in text if c.isascii() and (c.isalnum() or c.isspace()))
    return controls * 100 <= len(text) and plain * 2 >= len(text)


class Transcoded(io.RawIOBase):
    """A read-only stream of `inner`'s text (in `codec`) as UTF-8, its first `skip` bytes (a
    byte-order mark) left out."""

    def __init__(self, inner: BinaryIO, codec: str, skip: int = 0) -> None:
        self._inner = inner
        self._decoder = codecs.getincrementaldecoder(codec)(errors="replace")
        self._skip = skip
        self._out = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def _fill(self, want: int) -> None:
        while len(self._out) < want and not self._done:
            data = self._inner.read(max(want, 1 << 16))
            if self._skip:
                cut = min(self._skip, len(data))
                data, self._skip = data[cut:], self._skip - cut
            final = not data
            self._out += self._decoder.decode(data, final).encode("utf-8")
            self._done = final

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        self._fill(len(b))
        n = min(len(b), len(self._out))
        b[:n] = self._out[:n]
        self._out = self._out[n:]
        return n


def utf8_stream(stream: BinaryIO, head: bytes) -> BinaryIO | None:
    """`stream` (whose first bytes are `head`) as UTF-8, buffered, when it is in another encoding;
    None when it is UTF-8 already."""
    found = sniff_encoding(head)
    if found is None:
        return None
    if found[0] == "utf-8":  # UTF-8 already: only its byte-order mark goes
        stream.read(found[1])
        return stream
    raw: io.RawIOBase = Transcoded(stream, *found)
    return io.BufferedReader(raw, 1 << 20)


def to_utf8(data: bytes) -> bytes:
    """A whole input as UTF-8 (the same bytes when it is UTF-8 already)."""
    found = sniff_encoding(data[:SAMPLE])
    if found is None:
        return data
    codec, skip = found
    return data[skip:].decode(codec, errors="replace").encode("utf-8")

"""The trigger matcher: one pattern made of every parser's trigger fragments, run over raw bytes.

Python's `re` tries each alternative at each position, which crawls on a pattern of a hundred
alternatives. RE2 (google-re2) compiles the alternation to an automaton and scans at hundreds of
MB/s; it is used when installed, with `re` as the fallback so the tool still works without it.
Fragments must use the syntax both engines share (no look-around, no backreferences).
"""

from __future__ import annotations

import re
from typing import Protocol


class BytesPattern(Protocol):
    def search(self, data: bytes, pos: int = ...) -> re.Match[bytes] | None: ...


def compile_triggers(fragments: list[str]) -> BytesPattern:
    source = "|".join(f"(?:{f})" for f in fragments).encode()
    try:
        import re2
    except ImportError:
        return re.compile(source)
    try:
        options = re2.Options()
        options.max_mem = 64 << 20
        return re2.compile(source, options)  # type: ignore[no-any-return]
    except Exception:
        return re.compile(source)

"""Make untrusted text inert before it is parsed or shown.

Logs are hostile input: they carry colour codes, but can also carry cursor movement, title changes,
OSC 52 clipboard writes, C1 controls and bidi overrides. `strip_controls` removes every escape
sequence and control character except tab; `inert` additionally makes any leftover control visible
as `\\xNN` (used on text that reaches a terminal or widget).

Pure.
"""

from __future__ import annotations

import re

# ESC [ ... final byte (CSI), ESC ] ... BEL/ST (OSC), ESC P/X/^/_ ... ST (DCS, SOS, PM, APC),
# two-byte ESC sequences, and 8-bit C1 CSI/OSC forms.
_ESCAPES = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]            # CSI
  | \x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?   # OSC (title, clipboard, hyperlinks)
  | \x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?        # DCS / SOS / PM / APC
  | \x1b[ -/]*[0-~]                   # other ESC sequences (charset, keypad, RIS, ...)
  | \x1b                              # a lone ESC
  | \x9b[0-?]*[ -/]*[@-~]             # 8-bit CSI
  | \x9d[^\x07\x9c]*(?:\x07|\x9c)?    # 8-bit OSC
  | [\x90\x98\x9e\x9f][^\x9c]*\x9c?   # 8-bit DCS / SOS / PM / APC
    """,
    re.VERBOSE,
)
# C0 except tab, DEL, C1, and the Unicode formatting characters that reorder or hide text.
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_C1 = re.compile("[\x80-\x9f]")
_ANSI_SGR = re.compile(r"\x1b\[[0-9;]*m")


def strip_controls(text: str) -> str:
    """Remove escape sequences and control characters (tab kept)."""
    if text.isprintable():
        return text
    if "\x1b" in text or _C1.search(text):
        text = _ESCAPES.sub("", text)
    return _CONTROLS.sub("", text)


def inert(text: str, limit: int | None = None) -> str:
    """Text safe to write to a terminal: escapes removed, other controls shown as \\xNN."""
    text = _ESCAPES.sub("", text) if ("\x1b" in text or "\x9b" in text or "\x9d" in text) else text
    text = _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else "", text)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def strip_sgr(text: str) -> str:
    """Remove only colour codes (fast path for parsing)."""
    return _ANSI_SGR.sub("", text) if "\x1b" in text else text

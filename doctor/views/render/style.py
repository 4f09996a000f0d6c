"""Marks and colours shared by the text views; colour only for terminals and never under NO_COLOR."""

from __future__ import annotations

import os
from dataclasses import dataclass

RESET = "\x1b[0m"
COLOURS = {"error": "\x1b[31m", "warning": "\x1b[33m", "ok": "\x1b[32m", "unknown": "\x1b[36m",
           "info": "\x1b[34m", "dim": "\x1b[2m", "bold": "\x1b[1m"}
UNICODE_MARKS = {"ok": "✓", "warning": "!", "error": "✗", "unknown": "?", "info": "•", "arrow": "→"}
ASCII_MARKS = {"ok": "+", "warning": "!", "error": "x", "unknown": "?", "info": "*", "arrow": "->"}


@dataclass(frozen=True, slots=True)
class Style:
    colour: bool
    unicode: bool

    def mark(self, kind: str) -> str:
        return (UNICODE_MARKS if self.unicode else ASCII_MARKS)[kind]

    def paint(self, kind: str, text: str) -> str:
        if not self.colour or kind not in COLOURS:
            return text
        return f"{COLOURS[kind]}{text}{RESET}"


def choose_style(is_tty: bool, encoding: str | None, colour: str = "auto", env: dict[str, str] | None = None) -> Style:
    env = dict(os.environ) if env is None else env
    if colour == "always":
        use = True
    elif colour == "never" or "NO_COLOR" in env or env.get("TERM") == "dumb":
        use = False
    else:
        use = is_tty
    enc = (encoding or "").lower().replace("-", "")
    return Style(colour=use, unicode=enc in ("utf8", "utf16", "utf32"))

"""llama-cpp-python's handlers: its signature votes and its completion output, read by the llama.cpp
family's parser (../llamacpp/parser.py inherits them), whose state holds the output. Lines:
patterns.py.

Pure.
"""

from __future__ import annotations

import re
from typing import Protocol

from doctor.sources.engines.llama_cpp_python.engine import ENGINE
from doctor.sources.engines.llama_cpp_python.patterns import FINISH, OUTPUT_KIND, SIGNATURE, SIGNATURE_KIND, TEXT
from doctor.sources.logs.base import LogParser, reads
from doctor.sources.logs.line import LogLine

OUTPUT_MAX = 64 * 1024  # bytes of generated text kept


class Completion(Protocol):
    """The part of the reading parser's state these handlers write: the text generated and why it stopped."""

    output: list[str]
    output_bytes: int
    output_line: int | None
    finish_reason: str | None
    finish_line: LogLine | None


class LlamaCppPythonLines(LogParser):
    """The handlers of llama-cpp-python's lines, for a parser whose state holds a Completion."""

    @property
    def completion(self) -> Completion:
        """Where the generated text goes (the reading parser's state)."""
        raise NotImplementedError

    def vote_binding(self, weight: int = 1) -> None:
        """A line only the binding prints (its signature, its exception texts)."""
        self.votes[ENGINE.name] += weight

    @reads(SIGNATURE_KIND)
    def _vote_lcp(self, line: LogLine) -> bool:
        if SIGNATURE.search(line.text):
            self.vote_binding()
        return False

    @reads(OUTPUT_KIND)
    def _lcp_output(self, line: LogLine) -> bool:
        """llama-cpp-python's completion dicts: the text the model wrote and why it stopped."""
        t = line.text
        s = self.completion
        m = TEXT.search(t)
        if m:
            text = unescape(m.group(2))
            if text and s.output_bytes < OUTPUT_MAX:
                s.output.append(text)
                s.output_bytes += len(text)
                s.output_line = s.output_line or line.number
        m = FINISH.search(t)
        if m:
            s.finish_reason = m.group(1)
            s.finish_line = line
        return False


_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)")
_SIMPLE = {"n": "\n", "t": "\t", "r": "", "\\": "\\", "'": "'", '"': '"'}


def unescape(text: str) -> str:
    """Undo the escapes of a Python repr or JSON string (\\n, \\t, \\', \\uXXXX)."""
    if "\\" not in text:
        return text

    def repl(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc[0] in "ux" and len(esc) > 1:
            return chr(int(esc[1:], 16))
        return _SIMPLE.get(esc, esc)

    return _ESCAPE.sub(repl, text)

"""Hard-wrapped lines rejoined: a log copied out of a terminal, a notification or an e-mail whose
long lines were cut at a fixed width.

Two families, told from the lengths of the lines themselves:

- A character wrap (a terminal, `fold -w`, a notification that breaks anywhere): every long line is
  cut every W characters, wherever the cut falls: inside a word, inside a number (`32768` becoming
  `327` and `68`). Its mark is a width W (40 or more) that no line passes and several lines have
  exactly (a terminal pads lines to its width too), one at least followed by a line that does not
  begin a record. Such a line is joined to the next as it is.
- A word wrap (an e-mail, `fmt`, a notification that breaks at spaces): no line is longer than W,
  the break eats the space, and a line breaks where the next word would not have fitted. Its mark:
  W, the longest line, at most `MAX_WORD_WIDTH`; several lines, half those near W at least, that do
  not end a sentence and are followed by a line that does not begin a record and whose first word
  would have overflowed W. (A character wrap fits that too:
  it is told by nearly all those lines being exactly W long, or by a break beside a space.) Such a
  line is joined to the next with a space, or as it is after a word's hyphen and where a full line
  ends inside a word longer than W (a word too long for a line is cut at the width: a JSON body
  without spaces, a path, a number at its end).

Never joined: a line to one that begins a record (a timestamp, a level, a known engine prefix,
`time=`, a traceback's line, a table row, a fence), an empty line, a line to an empty one. A width
seen once is no evidence. The decision costs one pass over the line lengths.

Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

MIN_WIDTH = 40
MAX_WORD_WIDTH = 200  # a word-wrapping tool's width; a longer longest line is a log's own
MIN_EVIDENCE = 2  # lines that must end at the width (a width seen once is no evidence)
MIN_WORD_EVIDENCE = 2  # lines a word wrap must have broken
# the start of a record: what a wrapped continuation almost never begins with
RECORD_START = re.compile(
    r"""^(?:\s*$|\s*[\w.-]+:\s*$|\[?\d{4}[-/]\d\d[-/]\d\d|\[?\d\d:\d\d:\d\d|\d\d-\d\d \d\d:|"""
    r"""[A-Z][a-z]{2} +\d+ \d\d:\d\d|"""
    r"""[IWEDF]\d{4} |\d+\.\d\d\.\d{3}\.\d{3} [IWEDT] |(?:time|level|ts)=|\[GIN\]|"""
    r"""\[?(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\b|"""
    r"""\(\w+ pid=\d+|Traceback \(|(?:\s{2,}|\t)\S|[A-Za-z]{2}\w*(?:[._-][A-Za-z]\w*)+: |\s*[|+]|"""
    r"""\s*(?:```|~~~|[-=*#]{3})|[a-z][a-z0-9]*_[\w.]*: |"""
    r"""(?:main|system_info|build|model|print_info|load|llm|srv|slot|que|init|common_init_from_params)\b[\w ]*:|"""
    r"""[\w.-]+\s+\| |\{"|\$ |>>> |(?:\w+\.)*[A-Z]\w*(?:Error|Exception|Warning)\b)""")
# a command typed at a shell prompt: it ends where Enter was pressed, not at a wrap
PROMPT = re.compile(r"^(?:[$%#] |PS [A-Z]:\\[^>]*> |\S+@\S+[:~][^$#]*[$#] )")
_DIGITS = re.compile(r"\d+")
BARE_PREFIX = re.compile(r"^(?:[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT[\d:.]+\S*) \S+ [^\s:]+:$")
_HYPHEN_END = re.compile(r"\w-$")
_WORD = re.compile(r"\S+")


def begins_record(line: str) -> bool:
    """Whether `line` begins a record (after one space too: ` llama_print_timings:`)."""
    return RECORD_START.match(line) is not None or (line[:1] == " " and RECORD_START.match(line[1:]) is not None)


def char_width(lines: Sequence[str]) -> tuple[int, int] | None:
    """The width W of a character wrap (see the module's docstring) and how many lines end at it
    followed by their rest, or None."""
    width = max((len(line) for line in lines), default=0)
    if width < MIN_WIDTH:
        return None
    # lines of one format repeated (the same message, its numbers apart) are no width seen twice
    shapes = {_DIGITS.sub("0", line) for line in lines if len(line) == width}
    count = sum(1 for line, nxt in pairwise(lines) if len(line) == width and _continues(line, nxt, True))
    return (width, count) if len(shapes) >= MIN_EVIDENCE and count else None


def _cuts_anywhere(lines: Sequence[str], width: int, at_width: int, word_breaks: int) -> bool:
    """Both wraps fit: whether it is a character wrap. A word wrap never breaks beside a space (it
    eats it), a character wrap does now and then; a character wrap breaks (nearly) every line at
    exactly W, a word wrap's lines end where words did, at lengths that only now and then coincide."""
    if any(len(line) == width and (line.endswith(" ") or nxt.startswith(" ")) and _continues(line, nxt, True)
           for line, nxt in pairwise(lines)):
        return True
    return at_width * 10 >= word_breaks * 9


def _continues(line: str, nxt: str, cut: bool = False) -> bool:
    """Whether `nxt` may be the rest of `line`: it begins no record, nor the way `line` does (lines
    of one format, each a record, are siblings, not pieces; in a word wrap, only at about the same
    length: `key=value` text may begin two lines alike; numbers aside, as an index); a line that is only a
    record's prefix (journald's `Mon DD HH:MM:SS host unit[pid]:`) goes on in any case. `cut`: a character wrap."""
    if not nxt.strip():
        return False
    if BARE_PREFIX.match(line):
        return True
    if _DIGITS.sub("0", nxt[:12]) == _DIGITS.sub("0", line[:12]) and (cut or abs(len(nxt) - len(line)) <= 8):
        return False  # the same beginning but for its numbers (`GPU 0: …`, `GPU 1: …`): siblings
    return not begins_record(nxt)


def word_width(lines: Sequence[str]) -> tuple[int, int] | None:
    """The width W of a word wrap (see the module's docstring) and how many lines break before a
    word that would not have fitted, or None."""
    width = max((len(line) for line in lines), default=0)
    if not MIN_WIDTH <= width <= MAX_WORD_WIDTH:
        return None
    count = sum(1 for line, nxt in pairwise(lines) if _word_break(line, nxt, width))
    # most lines that come near the width break there; a log whose longest lines happen to precede
    # a long first word does not
    near = sum(1 for line in lines if len(line) * 4 >= width * 3)
    return (width, count) if count >= MIN_WORD_EVIDENCE and count * 2 >= near else None


def _first_word(line: str) -> str:
    m = _WORD.search(line)
    return m.group() if m else ""


def _word_break(line: str, nxt: str, width: int, evidence: bool = True) -> bool:
    """Whether a word wrap at `width` broke `line` before `nxt` (as `evidence` of the wrap: only a
    line that reaches half the width)."""
    if _HYPHEN_END.search(line) and nxt[:1].isalnum():  # a break after a word's hyphen
        return _continues(line, nxt)
    return ((len(line) * 2 >= width or not evidence) and not line.endswith((" ", ".", "!", "?"))
            and not PROMPT.match(line) and _continues(line, nxt) and len(line) + 1 + len(_first_word(nxt)) > width)


def _glued(line: str, nxt: str, width: int) -> bool:
    """A word wrap's break that ate no space: after a word's hyphen, or inside a word longer than a
    line (the line is full, and its last word and the next line's first are longer than W)."""
    if _HYPHEN_END.search(line):
        return True
    last = line.rsplit(" ", 1)[-1]
    return len(line) >= width - 2 and len(last) + len(_first_word(nxt)) > width


def rejoin(lines: Sequence[str]) -> list[tuple[str, int]] | None:
    """The logical lines of `lines` with their wraps undone, each with the index of its first
    physical line; None when `lines` shows no wrap."""
    char, words = char_width(lines), word_width(lines)
    if char is None and words is None:
        return None
    word = char is None or (words is not None and not _cuts_anywhere(lines, *char, words[1]))
    width = words[0] if word and words is not None else char[0] if char is not None else 0
    out: list[tuple[str, int]] = []
    i = 0
    n = len(lines)
    while i < n:
        text, first = lines[i], i
        while i + 1 < n and _joins(lines[i], lines[i + 1], width, word):
            nxt = lines[i + 1]
            if not word:
                text += nxt
            else:
                text = text + nxt if _glued(lines[i], nxt, width) else text + " " + nxt.lstrip()
            i += 1
        out.append((text, first))
        i += 1
    return out


def _joins(line: str, nxt: str, width: int, word: bool) -> bool:
    if word:
        return _word_break(line, nxt, width, evidence=False)
    return len(line) == width and _continues(line, nxt, True)

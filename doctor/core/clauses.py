"""Dropping the clause of a value nobody knows: a message template whose placeholder has no value
loses the words that only made sense with it, never shows a hole ("needed  tokens"), a stand-in
("(unknown)") or punctuation left dangling. doctor/core/format.py marks each such placeholder with
MARK and hands the template here before it fills the rest.

The template is cut into sentences (a `.`, `!` or `?` followed by a space and a capital or a quote),
each sentence into clauses at `;`, `,`, `:` and ` — ` outside parentheses. A placeholder inside
parentheses takes its parenthetical with it ("Lower the context (it was {config.n_ctx})" -> "Lower
the context"); elsewhere it takes its clause, and the delimiter between that clause and the next
("The prompt needed {x} tokens; the engine rejected it." -> "The engine rejected it."); a sentence
of one clause goes whole. What is left may be empty: the caller says something else then (a
finding's title stands for its message).

Core; pure text. The delimiters are this module's; the words are the templates'.
"""

from __future__ import annotations

import re

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`(\[])")
DELIMITERS = ("; ", ", ", ": ", " — ")
MARK = "\ue000"  # stands for a placeholder with no value while its clause is found
_WORD = re.compile(r"[a-z]+\b")
_JOINED = re.compile(r"(?:or|and|but|then|so)\s+(?=\S)")  # what joined a dropped first clause to the next


def drop(text: str) -> str:
    """The text without the clauses that hold a MARK."""
    if MARK not in text:
        return text
    out: list[str] = []
    pos = 0
    for end in [m.start() for m in SENTENCE_END.finditer(text)] + [len(text)]:
        sentence = text[pos:end].strip()
        kept = _sentence(sentence) if MARK in sentence else sentence
        if kept:
            out.append(kept)
        pos = end
    return " ".join(out)


def _sentence(text: str) -> str:
    while MARK in text:
        start = text.index(MARK)
        a, b = _parenthetical(text, start, start + 1) or _clause(text, start, start + 1)
        text = (text[:a] + text[b:]).strip()
        if not text.strip(".!? "):
            return ""
    text = re.sub(r"\s{2,}", " ", text)
    text = re.sub(r"\s+([,;:.!?)])", r"\1", text)
    return _capital(_JOINED.sub("", text, count=1) if _JOINED.match(text) else text)


def _parenthetical(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The innermost ( ... ) around start..end, with the space before it; None outside parentheses."""
    depth = 0
    for i in range(start - 1, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            if depth == 0:
                close = _closing(text, i)
                if close is None or close < end:
                    return None
                left = i - 1 if i > 0 and text[i - 1] == " " else i
                return left, close + 1
            depth -= 1
    return None


def _closing(text: str, open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


def _clause(text: str, start: int, end: int) -> tuple[int, int]:
    """The clause around start..end with the delimiter that joins it to the rest (the one before it,
    or, for the first clause, the one after it); the whole sentence when it has one clause."""
    cuts = _delimiters(text)
    body_end = len(text.rstrip(".!?")) if text.rstrip().endswith((".", "!", "?")) else len(text)
    before = [(a, b) for a, b in cuts if b <= start]
    after = [(a, b) for a, b in cuts if a >= end]
    if before:
        left = before[-1][0]
        right = after[0][0] if after else body_end
        return left, right
    if after:
        return 0, after[0][1]
    return 0, len(text)


def _delimiters(text: str) -> list[tuple[int, int]]:
    """(start, end) of each clause delimiter outside parentheses."""
    out: list[tuple[int, int]] = []
    depth = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            for d in DELIMITERS:
                if text.startswith(d, i):
                    out.append((i, i + len(d)))
                    i += len(d) - 1
                    break
        i += 1
    return out


def _capital(text: str) -> str:
    """A sentence that now starts with a plain lower-case word starts with a capital (not `n_ctx`)."""
    m = _WORD.match(text)
    if m and (len(text) == m.end() or text[m.end()] in " ,;:"):
        return text[0].upper() + text[1:]
    return text

"""String escapes in pasted text: a message that travelled inside a quoted string, decoded back.

An engine's error reaches users inside other programs' strings: a JSON error body
(`{"error": {"message": "This model's ...\\n..."}}`), an application's JSON log holding that body
(`\\"message\\": ...`, escaped twice), a Python repr of an exception or of the output
(`'...\\n...'`, `model\\'s`, `b'...'`), a JavaScript string. `decode_spans` finds the quoted
literals of a line (`"..."` and `'...'`, a `b` prefix making it bytes; a literal the line cuts off
runs to its end) and decodes those that hold escapes: the escapes of JSON, Python and JavaScript
(`\\n \\t \\r \\" \\' \\\\ \\/ \\uXXXX \\UXXXXXXXX \\xNN`, octal), then again inside what came
out (nested bodies), a few levels deep. A literal is decoded only when every backslash in it begins
a valid escape and one of them is one a writer of strings makes (`\\n`, `\\t`, a quote, a
backslash, `\\u`): so a Windows path in a log line (`C:\\Users\\me\\model.gguf`, `\\U` and `\\m`
being no escapes) is left as it is. A line with no quoted literal but two or more `\\n` and only
valid escapes (an escaped message printed without its quotes) is decoded whole.

Pure.
"""

from __future__ import annotations

import re

MAX_DEPTH = 4  # a body inside a body inside a log line...
# one escape sequence, or a backslash that begins none (group "bad")
_ESCAPE = re.compile(r"""\\(?:(?P<simple>[\\'"/abfnrtv])|x(?P<x>[0-9a-fA-F]{2})|u(?P<u>[0-9a-fA-F]{4})|"""
                     r"""U(?P<U>[0-9a-fA-F]{8})|(?P<oct>[0-7]{1,3})|(?P<bad>.|$))""", re.DOTALL)
_WRITER = re.compile(r"""\\(?:[ntr"'\\]|u[0-9a-fA-F]{4})""")  # escapes a string writer makes
_SIMPLE = {"\\": "\\", "'": "'", '"': '"', "/": "/", "a": "\a", "b": "\b", "f": "\f", "n": "\n",
           "r": "\r", "t": "\t", "v": "\v"}
_LITERAL = {'"': re.compile(r'"((?:[^"\\]|\\.)*)("|$)', re.DOTALL),
            "'": re.compile(r"'((?:[^'\\]|\\.)*)('|$)", re.DOTALL)}
_QUOTE = re.compile(r"""["']""")
_BARE_LINES = re.compile(r"\\n")


def has_escapes(text: str) -> bool:
    """Whether `text` holds an escape a string writer makes (cheap test before `decode_spans`)."""
    return "\\" in text and _WRITER.search(text) is not None


def decode_body(body: str, as_bytes: bool = False) -> str | None:
    """The text a literal's body (between its quotes) stands for, or None when a backslash in it
    begins no valid escape. `as_bytes`: a `b'...'` literal, whose `\\xNN` are the bytes of UTF-8."""
    out: list[str] = []
    pos = 0
    for m in _ESCAPE.finditer(body):
        if m.group("bad") is not None:
            return None
        out.append(body[pos:m.start()])
        pos = m.end()
        simple, hexa, uni, wide, octal = m.group("simple", "x", "u", "U", "oct")
        if simple is not None:
            out.append(_SIMPLE[simple])
        elif octal is not None:
            out.append(chr(int(octal, 8)))
        else:
            code = int(hexa or uni or wide, 16)
            if code > 0x10FFFF:
                return None
            out.append(chr(code))
    out.append(body[pos:])
    text = "".join(out)
    if as_bytes or _surrogates(text):
        text = _repair(text, as_bytes)
    return text


def _surrogates(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def _repair(text: str, as_bytes: bool) -> str:
    """UTF-16 surrogate pairs (JSON's `\\ud83d\\ude00`) joined; a bytes literal's text read as UTF-8."""
    if _surrogates(text):
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if as_bytes and all(ord(c) < 256 for c in text):
        text = text.encode("latin-1").decode("utf-8", "replace")
    return text


def decode_spans(text: str, depth: int = 0) -> str | None:
    """`text` with its quoted literals that hold escapes decoded (see the module's docstring), or
    None when none did."""
    if depth >= MAX_DEPTH or not has_escapes(text):
        return None
    out: list[str] = []
    pos = 0
    changed = False
    for q in _QUOTE.finditer(text):
        start = q.start()
        if start < pos:
            continue
        m = _LITERAL[q.group()].match(text, start)
        if m is None:
            continue
        body = m.group(1)
        if not has_escapes(body):
            continue
        as_bytes = start > 0 and text[start - 1] in "bB" and (start < 2 or not text[start - 2].isalnum())
        decoded = decode_body(body, as_bytes)
        if decoded is None:
            continue
        inner = decode_spans(decoded, depth + 1)
        out.append(text[pos:start - 1 if as_bytes else start])
        out.append(q.group() + (inner if inner is not None else decoded) + m.group(2))
        pos = m.end()
        changed = True
    if not changed:
        if len(_BARE_LINES.findall(text)) < 2:
            return None
        decoded = decode_body(text)
        if decoded is None:
            return None
        inner = decode_spans(decoded, depth + 1)
        return inner if inner is not None else decoded
    out.append(text[pos:])
    return "".join(out)

"""Whether a pattern can match inside a line of a known shape: the patterns a folded run need be searched for.

`block_pattern(pattern)`: the pattern to search a block of lines for, where `pattern` is matched against
each line's text (the raw line stripped: its anchors dropped). `shape_finder(patterns, shape)`: one search
of a run of lines of `shape` for those of `patterns` that can match inside such a line. `free_text(shape)`:
whether its lines can hold text it does not spell out.

A run of hot lines (doctor/sources/logs/fold.py) holds only lines of its spec's shape (HotLines.line, an
RE2 source of exact line shapes). A parser that absorbs the runs and looks for other patterns in them (the
message catalogue's) need search a run only for those patterns that can match somewhere in such a line.
`can_occur(shape)` answers that soundly, from the characters and adjacent pairs of characters the shape
can produce (one pass over each regex's syntax tree): a pattern whose every match would need a character
or a pair the shape never produces matches inside no such line. It answers True (search for it) wherever
it cannot tell: a syntax it does not follow (look-around, back-references, case folding, negated classes
in the shape), a pattern that matches the empty string. Anchors are ignored (a superset of matches).

Pure.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable
from typing import Any

from doctor.sources.logs.matcher import class_end

try:  # the parser `re` itself uses; any surprise means "cannot tell", never a wrong answer
    from re import _constants as _K  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _K
    import sre_parse as _sre_parse

_CATEGORIES = {"CATEGORY_DIGIT": frozenset(string.digits), "CATEGORY_SPACE": frozenset(" \t\n\r\f\v"),
               "CATEGORY_WORD": frozenset(string.ascii_letters + string.digits + "_")}


class _CannotTell(Exception):
    pass


def _chars(op: Any, av: Any, anything: frozenset[str] | None) -> frozenset[str]:
    """The characters one item matches (`anything`: what `.` stands for; None: cannot tell)."""
    if op is _K.LITERAL:
        return frozenset(chr(av))
    if op is _K.ANY and anything is not None:
        return anything
    if op is not _K.IN:
        raise _CannotTell
    out: set[str] = set()
    for o, a in av:
        if o is _K.LITERAL:
            out.add(chr(a))
        elif o is _K.RANGE:
            out.update(chr(c) for c in range(a[0], a[1] + 1))
        elif o is _K.CATEGORY and str(a) in _CATEGORIES:
            out |= _CATEGORIES[str(a)]
        elif o is _K.NEGATE and anything is not None:  # within the shape's characters: a superset
            return anything
        else:
            raise _CannotTell
    return frozenset(out)


def _shape(items: Any) -> tuple[set[str], set[str], bool, set[str]]:
    """(first characters, last characters, matches the empty string, adjacent pairs) of a shape's matches."""
    first: set[str] = set()
    last: set[str] = set()
    pairs: set[str] = set()
    nullable = True
    for op, av in items:
        if op in (_K.LITERAL, _K.IN):
            c = set(_chars(op, av, None))
            f, e, n, p = c, c, False, set[str]()
        elif op is _K.SUBPATTERN:
            if av[1] & re.IGNORECASE:
                raise _CannotTell
            f, e, n, p = _shape(av[3])
        elif op is _K.BRANCH:
            f, e, n, p = set(), set(), False, set()
            for sub in av[1]:
                f2, e2, n2, p2 = _shape(sub)
                f, e, n, p = f | f2, e | e2, n or n2, p | p2
        elif op in (_K.MAX_REPEAT, _K.MIN_REPEAT):
            low, high, sub = av
            f, e, n, p = _shape(sub)
            if high is _K.MAXREPEAT or high > 1:
                p = p | {x + y for x in e for y in f}
            n = n or low == 0
        elif op is _K.AT:
            continue
        else:
            raise _CannotTell
        pairs |= p | {x + y for x in last for y in f}
        if nullable:
            first |= f
        last = (last | e) if n else e
        nullable = nullable and n
    return first, last, nullable, pairs


_START = ""  # "nothing matched before": any character may come first


def _after(items: Any, before: frozenset[str], chars: frozenset[str], pairs: frozenset[str]) -> frozenset[str]:
    """The last characters a match of `items` can end in, going on from a match that ended in one of
    `before` (_START among them: from the match's start), made only of `chars` with every adjacent pair in
    `pairs` (a superset); _START stays in when `items` can match nothing at all."""
    current = before
    for op, av in items:
        if not current:
            break
        if op in (_K.LITERAL, _K.IN, _K.ANY):
            allowed = _chars(op, av, chars) & chars
            current = frozenset(c for c in allowed if _START in current or any(p + c in pairs for p in current))
        elif op is _K.SUBPATTERN:
            if av[1] & re.IGNORECASE:
                raise _CannotTell
            current = _after(av[3], current, chars, pairs)
        elif op is _K.BRANCH:
            current = frozenset().union(*(_after(sub, current, chars, pairs) for sub in av[1]))
        elif op in (_K.MAX_REPEAT, _K.MIN_REPEAT):
            low, _, sub = av
            reached: frozenset[str] = frozenset()
            step = current
            while True:  # one repeat or more, any number (a superset of between `low` and `high`)
                step = _after(sub, step, chars, pairs)
                if step <= reached:
                    break
                reached |= step
            current = reached | current if low == 0 else reached
        elif op is not _K.AT:
            raise _CannotTell
    return current


@functools.lru_cache(maxsize=8)
def _alphabet(shape: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """The characters and adjacent pairs the lines of `shape` can hold; None where it cannot tell (parsed once
    per shape: the parse of a long alternation costs milliseconds)."""
    try:
        first, last, _, pairs = _shape(_sre_parse.parse(shape))
    except Exception:
        return None
    return frozenset(first | last | {c for p in pairs for c in p}), frozenset(pairs)


def free_text(shape: str) -> bool:
    """Whether lines of `shape` can hold text it does not spell out (a negated class, `.`, anything this
    analysis cannot follow): a path, a message. Such a shape's lines are not told apart by its samples."""
    return _alphabet(shape) is None


@functools.lru_cache(maxsize=64)
def can_occur(shape: str) -> Callable[[str], bool]:
    """`occurs(pattern)`: False only when `pattern` matches inside no line `shape` produces (see above)."""
    alphabet = _alphabet(shape)
    if alphabet is None:
        return lambda pattern: True
    chars, frozen = alphabet

    def occurs(pattern: str) -> bool:
        try:
            parsed = _sre_parse.parse(pattern)
            if parsed.state.flags & re.IGNORECASE:
                return True
            return bool(_after(parsed, frozenset({_START}), chars, frozen))
        except Exception:
            return True

    return occurs


@functools.lru_cache(maxsize=512)  # every fold's searches (guards, each parser's lines: fold.py) for every shape
def shape_finder(patterns: tuple[str, ...], shape: str) -> Callable[[bytes, int, int], tuple[int, int] | None] | None:
    """`find(region, start, end)`: a place in region[start:end] (a run of lines of `shape`, HotRun.shape) where one
    of `patterns` (each matched against a line's text) may match a line (block_pattern), one RE2 search: a run with
    no such place holds no line any of them matches. None: none of them can match inside a line of that shape at
    all (can_occur), so no run of it need be searched."""
    from doctor.sources.logs.matcher import compile_triggers, span_finder

    occurs = can_occur(shape) if shape else None
    kept = [p for p in map(block_pattern, patterns) if occurs is None or occurs(p)]
    return span_finder(compile_triggers(kept)) if kept else None


def block_pattern(pattern: str) -> str:
    """A pattern found in a block of raw lines wherever `pattern` matches one of its lines' text (a line's
    text is its raw bytes stripped, doctor/sources/logs/line.py, so a text's ends need be no raw line's
    ends): the pattern without its anchors (^, $, \\A, \\Z, \\z: assertions, so it matches wherever the
    pattern does; a `$` that ends the pattern stands for the raw line's end after its trailing blanks, every
    line of a block ending in a line end), or any character where the anchors cannot be told apart (every block
    is read line by line)."""
    if "^" not in pattern and "$" not in pattern and not any(f"\\{c}" in pattern for c in "AZz"):
        return pattern  # no anchor (nearly every pattern: nothing to parse)
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            if pattern[i + 1] not in "AZz":
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[":  # a class: copied whole (a ^ or $ in it is no anchor)
            end = class_end(pattern, i)
            out.append(pattern[i:end])
            i = end
            continue
        if c == "$" and not pattern[i + 1:].strip(")"):
            out.append(_LINE_END)  # the text's end, at the pattern's own end: a raw line's end (blocks of lines)
        elif c not in "^$":
            out.append(c)
        i += 1
    plain = "".join(out)
    try:
        if _anchored(list(_sre_parse.parse(plain))) or re.compile(plain).groups != re.compile(pattern).groups:
            return _ANY
    except re.error:
        return _ANY
    return plain


_ANY = "(?s:.)"
_LINE_END = r"[ \t\r\f\v]*\n"  # where a line's text ends in its raw bytes (its trailing blanks stripped)


def _anchored(items: Any) -> bool:
    """Whether a parsed pattern holds an anchor (^, $, \\A, \\Z) anywhere."""
    for op, av in items:
        if str(op) == "AT" and str(av) not in ("AT_BOUNDARY", "AT_NON_BOUNDARY"):
            return True
        for sub in av if isinstance(av, list | tuple) else ():
            if isinstance(sub, _sre_parse.SubPattern) and _anchored(list(sub)):
                return True
            if isinstance(sub, list | tuple) and any(isinstance(x, _sre_parse.SubPattern) and _anchored(list(x))
                                                     for x in sub):
                return True
    return False

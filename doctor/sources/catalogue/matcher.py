"""Matching the catalogue: every pattern of a group of entries in one RE2 set, matched once per line.

Sources floor; the patterns are the catalogue's (messages/*.yaml). A `MessageSet` compiles its
entries' patterns into one RE2 set (doctor/sources/logs/matcher.py, set_matcher): one match over a
line's bytes says which entries it is, and only those entries' own patterns then run, to read their
numbers. `literals` are, for each entry, the substrings every line it matches must hold (read from
the pattern's syntax): the analyzer's scan selects candidate lines with them, so a line no entry
can match costs nothing here. Without RE2 each entry's pattern is tried behind its literal gate
(same matches, slower). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from doctor.sources.catalogue.loader import Entry

try:
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # Python < 3.11
    import sre_parse as _sre_parse
from doctor.sources.logs.matcher import LiteralIndex, required_literals, set_matcher

STRONG = 9  # a literal shorter than this is held by too many lines to select candidates with


@dataclass(frozen=True, slots=True)
class Hit:
    """An entry matched on a line, with the numbers it read (in the fact catalogue's units)."""

    entry: Entry
    numbers: dict[str, float | str]


def _fragment(literal: str) -> str:
    """A literal as a fragment that matches exactly it, in the syntax RE2 and grep -E share."""
    return "".join(f"\\{c}" if c in _META else c for c in literal)


_META = frozenset("\\.^$|?*+()[]{}")


def entry_literals(entry: Entry) -> tuple[str, ...]:
    """Substrings one of which every line the entry matches holds; the pattern itself (its groups made
    plain) when its syntax names none."""
    return required_literals(entry.pattern) or ()


def set_pattern(entry: Entry) -> str:
    """What stands for `entry` in the analyzer's RE2 set: its own scan fragments (its rare literals, or its
    pattern made plain), so that a hit there is exactly "the catalogue's triggers selected this line"
    (doctor/sources/logs/router.py reads it so) and a small automaton (the whole patterns, with their `.*`
    and number groups, made the set build its states 2-3x slower on a new log); the entry's own pattern
    decides."""
    return "|".join(f"(?:{f})" for f in dict.fromkeys(_fragments((entry,))))


def block_pattern(pattern: str) -> str:
    """A pattern found in a block of raw lines wherever `pattern` matches one of its lines' text (a line's
    text is its raw bytes stripped, doctor/sources/logs/line.py, so a text's ends need be no raw line's
    ends): the pattern without its anchors (^, $, \\A, \\Z, \\z: assertions, so it matches wherever the
    pattern does), or any character where the anchors cannot be told apart (every block is read line by line)."""
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
            end = i + 1 + (pattern.startswith("^", i + 1))
            end += pattern.startswith("]", end)
            while end < n and pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            out.append(pattern[i:end + 1])
            i = end + 1
            continue
        if c not in "^$":
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


def _anchored(items: list[tuple[Any, Any]]) -> bool:
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


class PatternIndex(LiteralIndex):
    """A LiteralIndex whose members are whole patterns (the catalogue's), not literals: which entries a
    line is, as a bit set, from one RE2 set match. A reader that matched these patterns already may
    prime the bits (`prime_bits`), as for a LiteralIndex. Without RE2 each pattern is tried behind its
    literal gate. `patterns`: what stands for each entry in the set, when not its pattern (`set_pattern`:
    its rare literals, so a bit says the line may be the entry's and its own pattern decides)."""

    def __init__(self, entries: tuple[Entry, ...], patterns: tuple[str, ...] | None = None) -> None:
        self.literals = [e.id for e in entries]  # names for mask(); never searched for
        self.patterns = list(patterns) if patterns is not None else [e.pattern for e in entries]
        self._entries = entries
        self._primed = (None, 0)
        self._compiled = False  # its own set is compiled on the first text nobody primed (the router's holds them)
        self._fallback: list[tuple[tuple[str, ...], re.Pattern[str]]] = []

    @property
    def compiled(self) -> bool:
        """Whether every pattern is in one RE2 set (False: RE2 missing or refusing one)."""
        if not self._compiled:
            self._compiled = True
            self._match = set_matcher(self.patterns)
            if self._match is None:
                self._fallback = [(entry_literals(e), e.regex) for e in self._entries]
        return self._match is not None

    def bits(self, text: str) -> int:
        primed = self._primed
        if primed[0] is text:
            return primed[1]
        bits = 0
        if self.compiled and self._match is not None:
            for i in self._match(text.encode("utf-8", "surrogatepass")):
                bits |= 1 << i
            return bits
        for i, (literals, regex) in enumerate(self._fallback):
            if (not literals or any(lit in text for lit in literals)) and regex.search(text):
                bits |= 1 << i
        return bits


def scan_fragments(entries: Iterable[Entry]) -> tuple[str, ...]:
    """The fragments the analyzer's scan selects the entries' lines with (each once, in order)."""
    return tuple(dict.fromkeys(_fragments(entries)))


def _fragments(entries: Iterable[Entry]) -> Iterable[str]:
    for entry in entries:
        literals = entry_literals(entry)
        if literals and min(map(len, literals)) >= STRONG:
            yield from (_fragment(lit) for lit in literals)
            continue
        # no literal, or one most lines hold (": "): the pattern itself, its named groups plain and lazy
        # repeats greedy (same lines selected; the syntax grep -E shares); an anchored one in multi-line
        # mode, so that its ^ and $ are a line's ends in the scan's chunk (its literal alone made every
        # line of a log a candidate: llama_cpp.ggml_abort's ": ")
        plain = re.sub(r"([+*])\?", r"\1", re.sub(r"\(\?P<\w+>", "(?:", entry.pattern))
        yield f"(?m:{plain})" if "^" in entry.pattern or "$" in entry.pattern else plain


class MessageSet:
    """A group of entries (one engine's, or every engine's) matched in one pass per line."""

    def __init__(self, entries: Iterable[Entry], fragments: tuple[str, ...] | None = None,
                 set_patterns: tuple[str, ...] | None = None) -> None:
        self.entries = tuple(entries)
        self.fragments = scan_fragments(self.entries) if fragments is None else fragments
        self.index = PatternIndex(self.entries, set_patterns)

    @property
    def compiled(self) -> bool:
        """Whether every pattern is in the one RE2 set (False: RE2 missing or refusing one)."""
        return self.index.compiled

    def indices(self, text: str) -> list[int]:
        """The positions of the entries whose patterns match somewhere in `text`, in catalogue order."""
        bits = self.index.bits(text)
        found: list[int] = []
        while bits:
            low = bits & -bits
            found.append(low.bit_length() - 1)
            bits ^= low
        return found

    def entries_in(self, text: str) -> list[Entry]:
        """The entries whose patterns match somewhere in `text`, in catalogue order (no numbers read)."""
        entries = self.entries
        return [entries[i] for i in self.indices(text)]

    def match(self, text: str) -> list[Hit]:
        """The entries `text` is, each with its numbers, in catalogue order."""
        hits: list[Hit] = []
        for entry in self.entries_in(text):
            numbers = read_numbers(entry, text)
            if numbers is not None:
                hits.append(Hit(entry, numbers))
        return hits


def read_numbers(entry: Entry, text: str) -> dict[str, float | str] | None:
    """The numbers `entry` reads in `text` (fact units); None when its pattern does not match there
    (RE2 and re disagreeing on a text: re decides)."""
    m = entry.regex.search(text)
    if m is None:
        return None
    numbers: dict[str, float | str] = {}
    for group, raw in m.groupdict().items():
        if raw is not None and group in entry.numbers:
            value = entry.value(group, raw)
            if value is not None:
                numbers[group] = value
    return numbers


_SETS: dict[tuple[str, ...], MessageSet] = {}


def message_set(entries: tuple[Entry, ...], key: tuple[str, ...], fragments: tuple[str, ...] | None = None,
                set_patterns: tuple[str, ...] | None = None) -> MessageSet:
    """The set of these entries, compiled once per process under `key` (the engines it holds)."""
    found = _SETS.get(key)
    if found is None:
        found = _SETS[key] = MessageSet(entries, fragments, set_patterns)
    return found


def engine_sets(entries: Iterable[Entry]) -> dict[str, MessageSet]:
    """One set per engine: what a reader that knows the engine (a followed log) matches with."""
    by_engine: dict[str, list[Entry]] = {}
    for entry in entries:
        by_engine.setdefault(entry.engine, []).append(entry)
    return {engine: message_set(tuple(group), (engine,)) for engine, group in by_engine.items()}


Matcher = Callable[[str], list[Hit]]

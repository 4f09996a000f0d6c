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

from doctor.sources.catalogue.loader import Entry
from doctor.sources.logs.matcher import required_literals, set_matcher

STRONG = 9  # a literal shorter than this is held by too many lines to select candidates with


@dataclass(frozen=True, slots=True)
class Hit:
    """An entry matched on a line, with the numbers it read (in the fact catalogue's units)."""

    entry: Entry
    numbers: dict[str, float | str]


def _fragment(literal: str) -> str:
    """A literal as an RE2 fragment that matches exactly it."""
    return "".join(c if c.isalnum() or c == "_" else f"\\x{ord(c):02x}" if c.isascii() else re.escape(c)
                   for c in literal)


def entry_literals(entry: Entry) -> tuple[str, ...]:
    """Substrings one of which every line the entry matches holds; the pattern itself (its groups made
    plain) when its syntax names none."""
    return required_literals(entry.pattern) or ()


class MessageSet:
    """A group of entries (one engine's, or every engine's) matched in one pass per line."""

    def __init__(self, entries: Iterable[Entry]) -> None:
        self.entries = tuple(entries)
        self.fragments: tuple[str, ...] = tuple(dict.fromkeys(self._fragments()))
        self._set = set_matcher([e.pattern for e in self.entries])
        self._fallback: list[tuple[tuple[str, ...], re.Pattern[str]]] = []
        if self._set is None:
            self._fallback = [(entry_literals(e), e.regex) for e in self.entries]

    def _fragments(self) -> Iterable[str]:
        for entry in self.entries:
            literals = entry_literals(entry)
            anchored = "^" in entry.pattern or "$" in entry.pattern  # meaningful on a line, not in a block
            if literals and min(map(len, literals)) >= STRONG:
                yield from (_fragment(lit) for lit in literals)
            else:  # no literal, or one most lines hold (": "): the pattern itself, its named groups plain
                plain = re.sub(r"\(\?P<\w+>", "(?:", entry.pattern)
                yield f"(?m:{plain})" if anchored else plain

    def indices(self, text: str) -> list[int]:
        """The entries (their positions) whose patterns match somewhere in `text`."""
        if self._set is not None:
            return self._set(text.encode("utf-8", "surrogatepass"))
        found: list[int] = []
        for i, (literals, regex) in enumerate(self._fallback):
            if (not literals or any(lit in text for lit in literals)) and regex.search(text):
                found.append(i)
        return found

    def match(self, text: str) -> list[Hit]:
        """The entries `text` is, each with its numbers, in catalogue order."""
        hits: list[Hit] = []
        for i in sorted(self.indices(text)):
            entry = self.entries[i]
            m = entry.regex.search(text)
            if m is None:  # RE2 and re disagree on this text (non-ASCII classes): re decides
                continue
            numbers: dict[str, float | str] = {}
            for group, raw in m.groupdict().items():
                if raw is not None and group in entry.numbers:
                    value = entry.value(group, raw)
                    if value is not None:
                        numbers[group] = value
            hits.append(Hit(entry, numbers))
        return hits


_SETS: dict[tuple[str, ...], MessageSet] = {}


def message_set(entries: tuple[Entry, ...], key: tuple[str, ...]) -> MessageSet:
    """The set of these entries, compiled once per process under `key` (the engines it holds)."""
    found = _SETS.get(key)
    if found is None:
        found = _SETS[key] = MessageSet(entries)
    return found


def engine_sets(entries: Iterable[Entry]) -> dict[str, MessageSet]:
    """One set per engine: what a reader that knows the engine (a followed log) matches with."""
    by_engine: dict[str, list[Entry]] = {}
    for entry in entries:
        by_engine.setdefault(entry.engine, []).append(entry)
    return {engine: message_set(tuple(group), (engine,)) for engine, group in by_engine.items()}


Matcher = Callable[[str], list[Hit]]

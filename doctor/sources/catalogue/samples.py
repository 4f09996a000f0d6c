"""Lines built from a catalogue entry itself: its sample, and the same line with other values.

Sources floor; the lines are the entries' own (messages/*.yaml). `variant(entry)` rewrites each
number the entry's pattern reads in its sample (digits stay digits, a decimal keeps its places), so
a test checks the pattern on values nobody typed in, in the engine's own format; an entry without
numbers gets its sample behind another prefix (pattern are unanchored and prefixes differ by
engine and logger). Used by tests/logs/test_catalogue.py and scripts/catalogue_coverage.py. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.sources.catalogue.loader import NUMERIC_LABELS, UNITS, Entry

_NUMBER = re.compile(r"^(\d+)(?:\.(\d+))?$")


@dataclass(frozen=True, slots=True)
class Built:
    """A line made from an entry, and numbers the entry must read from it (fact units)."""

    text: str
    numbers: dict[str, float | str]


def _other(raw: str) -> str | None:
    """Another number of the same shape: 17 -> 24, 3820.94 -> 3828.45 (never the same digits)."""
    m = _NUMBER.match(raw)
    if m is None:
        return None
    whole, places = m.group(1), m.group(2)
    bumped = str(int(whole) + 7) if len(whole) < 2 or int(whole) + 7 < 10 ** len(whole) else str(int(whole) - 7)
    if int(bumped) < 0:
        bumped = str(int(whole) + 1)
    if places is None:
        return bumped
    frac = str((int(places) + 51) % (10 ** len(places))).zfill(len(places))
    return f"{bumped}.{frac}"


def sample(entry: Entry) -> Built:
    """The entry's own sample line, with the numbers its pattern reads there."""
    return Built(entry.sample, _read(entry, entry.sample))


def variant(entry: Entry) -> Built:
    """The sample with every number the pattern reads changed (or, with no number, another prefix)."""
    m = entry.regex.search(entry.sample)
    assert m is not None, entry.id  # the loader checked that the pattern matches its sample
    text = entry.sample
    spans: list[tuple[int, int, str]] = []
    for group, unit in entry.numbers.items():
        raw = m.group(group)
        if raw is None or (UNITS[unit][0] is None and unit not in NUMERIC_LABELS):
            continue
        other = _other(raw)
        if other is not None:
            spans.append((*m.span(group), other))
    if not spans:
        anchored = entry.pattern.startswith("^")
        return Built(text if anchored else "worker-7: " + text, _read(entry, entry.sample))
    expected: dict[str, float | str] = {}
    for group, _unit in entry.numbers.items():
        for start, end, other in spans:
            if (start, end) == m.span(group):
                value = entry.value(group, other)
                if value is not None:
                    expected[group] = value
    for start, end, other in sorted(set(spans), reverse=True):
        text = text[:start] + other + text[end:]
    return Built(text, expected)


def _read(entry: Entry, text: str) -> dict[str, float | str]:
    m = entry.regex.search(text)
    if m is None:
        return {}
    out: dict[str, float | str] = {}
    for group in entry.numbers:
        raw = m.group(group)
        if raw is not None:
            value = entry.value(group, raw)
            if value is not None:
                out[group] = value
    return out

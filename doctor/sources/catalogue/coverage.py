"""What the analyzer makes of each catalogue entry: recognised, tested with lines built from it, read
by an engine parser too. Sources floor; the lines are the entries' own (samples.py).

`check(entry, built)` runs one built line through `analyze` as a one-line log and says what is wrong
(None: recognised, its numbers read, and a warning or error with a class made a `message` event). A
benign entry without facts is not read by `analyze` (loader.Entry.active): the whole catalogue's set
must recognise it, and `analyze` must make no event of it.
tests/logs/test_catalogue.py asserts it for every entry; scripts/catalogue_coverage.py counts it per
engine for docs/catalogue.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.core.facts import Facts
from doctor.sources.catalogue import samples
from doctor.sources.catalogue.loader import Entry
from doctor.sources.catalogue.parser import CatalogueParser, catalogue_set
from doctor.sources.logs.analyze import LogAnalyzer


def analyze_line(text: str) -> tuple[Facts, CatalogueParser]:
    """A one-line log through the analyzer: its snapshot and the catalogue's parser."""
    analyzer = LogAnalyzer("line")
    analyzer.feed(text.encode() + b"\n")
    facts = analyzer.finish()
    parser = next(p for p in analyzer.parsers if isinstance(p, CatalogueParser))
    return facts, parser


def check(entry: Entry, built: samples.Built) -> str | None:
    """What is wrong with how `analyze` reads `built` (a line of `entry`); None when nothing is."""
    facts, parser = analyze_line(built.text)
    hit = next((h for h in catalogue_set().match(built.text) if h.entry is entry), None)
    if entry.active and parser.seen[entry.id] != 1:
        return f"{entry.id}: the analyzer did not recognise {built.text!r}"
    if not entry.active and hit is None:  # benign, no facts: catalogued (the whole set), not read by analyze
        return f"{entry.id}: the catalogue did not recognise {built.text!r}"
    if hit is None or any(hit.numbers.get(g) != v for g, v in built.numbers.items()):
        return f"{entry.id}: read {hit.numbers if hit else None}, the line holds {built.numbers}"
    events = [e for e in facts.events("message") if e.data.get("id") == entry.id]
    if not entry.diagnostic:
        return f"{entry.id}: an info entry made an event" if events else None
    if not events:
        return f"{entry.id}: no message event for {built.text!r}"
    data = events[0].data
    if (data.get("class"), data.get("level"), events[0].line) != (entry.meaning, entry.level, 1):
        return f"{entry.id}: event {data} at line {events[0].line}"
    wrong = {g: data.get(g) for g, v in built.numbers.items() if data.get(g, v) != v}
    return f"{entry.id}: event numbers {wrong}, the line holds {built.numbers}" if wrong else None


@dataclass(frozen=True, slots=True)
class Coverage:
    """One entry's standing."""

    entry: Entry
    recognised: bool  # its sample is recognised by the analyzer
    tested: bool  # its sample and a line with other values both pass `check`
    parser_too: bool  # an engine parser reads its sample as well (an event or a fact from the line)


def coverage(entry: Entry) -> Coverage:
    sample_problem = check(entry, samples.sample(entry))
    variant_problem = check(entry, samples.variant(entry))
    facts, parser = analyze_line(entry.sample)
    read = any(e.line == 1 and e.kind != "message" for e in facts.events()) or any(
        f.source.kind == "log" and f.source.line == 1 and f.source.name != parser.name for f in facts)
    recognised = parser.seen[entry.id] > 0 if entry.active else any(
        h.entry is entry for h in catalogue_set().match(entry.sample))
    return Coverage(entry, recognised, sample_problem is None and variant_problem is None, read)

"""The catalogue's reader in `analyze` and `watch --log`: every catalogued message of every engine.

Sources floor; the messages are the catalogue's (messages/*.yaml, loader.py). The parser's
triggers and gate are the catalogue's literals (matcher.py), so the analyzer's one scan selects its
lines and the router hands it only those; on each it makes one RE2 set match over every engine's
patterns (the engine is known only once the whole log is read) and runs the patterns of the entries
that matched, to read their numbers. A matched entry:
  - sets its numbers as facts where the entry names them (`facts:`) and no parser set them already;
  - counts as recognised (`seen`, by entry id);
  - when it is a warning or error with a diagnosis class, becomes a `message` event (data: id, class,
    level, engine, fix, known and its numbers) in the snapshot. `known` is true when a parser of the
    engine already read that line, or another line of the same entry (an event or a fact from it):
    the rules that judge `message` events
    (rules/LD*-catalogue.yaml) take only the others, so a line is never reported twice.
It casts no engine vote: engine identity stays with the engines' parsers.
"""

from __future__ import annotations

from collections import Counter

from doctor.core.facts import Event, Facts
from doctor.sources.catalogue import loader
from doctor.sources.catalogue.matcher import MessageSet, message_set
from doctor.sources.logs.base import LogParser
from doctor.sources.logs.line import LogLine

KEPT_PER_ENTRY = 3  # occurrences of one message kept as events (the count goes on)
KEPT_TOTAL = 200


def catalogue_set() -> MessageSet:
    """Every engine's entries in one set, compiled once per process."""
    return message_set(loader.builtin(), ("*",))


class CatalogueParser(LogParser):
    name = "catalogue"

    def __init__(self) -> None:
        self.messages = catalogue_set()
        self.triggers = self.messages.fragments
        self.gate = self.messages.fragments
        super().__init__()
        self.seen: Counter[str] = Counter()  # entry id -> lines it matched
        self._pending: list[tuple[loader.Entry, dict[str, float | str], LogLine]] = []

    def feed(self, line: LogLine) -> None:
        hits = self.messages.match(line.text)
        if not hits:
            return
        facts = self.facts
        for hit in hits:
            entry = hit.entry
            count = self.seen[entry.id] = self.seen[entry.id] + 1
            for group, name in entry.facts.items():
                value = hit.numbers.get(group)
                if value is not None and not facts.has(name):
                    self.set(name, value, line)
            if entry.diagnostic and count <= KEPT_PER_ENTRY and len(self._pending) < KEPT_TOTAL:
                self._pending.append((entry, hit.numbers, line))

    def summarize(self, facts: Facts) -> None:
        if not self._pending:
            return
        read = _lines_read(facts)
        # an entry a parser read on one line is known on all of them (a traceback repeats its error)
        known = {entry.id for entry, _, line in self._pending if line.number in read}
        for entry, numbers, line in self._pending:
            data: dict[str, object] = {k: v for k, v in numbers.items() if k not in _DATA_KEYS}
            data.update({"id": entry.id, "class": entry.meaning, "level": entry.level, "engine": entry.engine,
                         "fix": entry.fix, "known": entry.id in known})
            facts.add_event(Event(kind="message", line=line.number, text=line.raw[:400], source=self.name,
                                  data={k: v for k, v in data.items() if isinstance(v, int | float | str | bool)}))


_DATA_KEYS = frozenset({"id", "class", "level", "engine", "fix", "known"})


def _lines_read(facts: Facts) -> set[int]:
    """The log lines some parser made an event or a fact from (the catalogue's own events aside)."""
    read = {e.line for e in facts.events() if e.kind != "message" and e.line is not None}
    read.update(f.source.line for f in facts if f.source.kind == "log" and f.source.line is not None
                and f.source.name != CatalogueParser.name)
    return read

"""The catalogue's reader in `analyze` and `watch --log`: every engine's catalogued messages that change a report.

Sources floor; the messages are the catalogue's (messages/*.yaml, loader.py). The entries read here are
the active ones (loader.Entry.active: a warning or error with a diagnosis class, or numbers set as facts);
benign and informational lines are catalogued (coverage, scripts/extract_messages.py) but not matched.
The parser's triggers are the active entries' literals (matcher.py), so the analyzer's one scan selects
its lines. It reads its lines alone and has no gate (doctor/sources/logs/router.py): the router's one RE2
set holds each entry's rare literals (or its pattern, where it has none: matcher.set_pattern) and hands
over which entries a plain line may be; a line that only the catalogue's triggers selected goes to this
parser and no other. Each candidate entry's own pattern then decides and reads its numbers. A matched
entry:
  - sets its numbers as facts where the entry names them (`facts:`) and no parser set them already;
  - counts as recognised (`seen`, by entry id);
  - when it is a warning or error with a diagnosis class, becomes a `message` event (data: id, class,
    level, engine, fix, known and its numbers) in the snapshot. `known` is true when a parser of the
    engine already read that line, or another line of the same entry (an event or a fact from it):
    the rules that judge `message` events
    (rules/LD*-catalogue.yaml) take only the others, so a line is never reported twice.
It casts no engine vote: engine identity stays with the engines' parsers.

Runs of an engine's hot lines that the analyzer folds (doctor/sources/logs/fold.py: llama-server's
per-request lines) come here whole (`absorbs`, `fold`): one search of the run for those of the catalogue's
triggers that can match inside a line of the run's shape (none, for llama-server's: no search), and only
where one is found its lines are read one by one, as the per-line path reads them.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

from doctor.core.facts import Event, Facts
from doctor.sources.catalogue import loader, store
from doctor.sources.catalogue.matcher import MessageSet, message_set, read_numbers
from doctor.sources.logs.base import AnalysisState, LogParser, lines_read
from doctor.sources.logs.hot import FedLine, HotRun
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.shapes import shape_finder

KEPT_PER_ENTRY = 3  # occurrences of one message kept as events (the count goes on)
KEPT_TOTAL = 200


@functools.lru_cache(maxsize=1)
def catalogue_set() -> MessageSet:
    """Every engine's entries in one set of their whole patterns, compiled once per process."""
    return message_set(store.builtin().entries, ("*",))


@functools.lru_cache(maxsize=1)
def active_set() -> MessageSet:
    """The entries `analyze` reads (loader.Entry.active), their rare literals standing for them in the set
    (matcher.set_pattern: each hit is confirmed by the entry's own pattern), compiled once per process."""
    stored = store.builtin()
    return message_set(stored.active, ("active",), stored.fragments, stored.set_patterns)


class _Fragments:
    """The catalogue's fragments as a class attribute read on first use (the scan's triggers and the gate are
    asked of the class too, bench/analyze_throughput.py), so importing the parser loads no YAML."""

    def __get__(self, obj: object, owner: type | None = None) -> tuple[str, ...]:
        return active_set().fragments


class _AloneIndexes:
    """The index patterns of every alone reader of one analysis, so that a folded run is searched once for all
    of them: a run none of them is found in (nearly every run) costs one search, not one per reader."""

    __slots__ = ("_last", "patterns")

    def __init__(self) -> None:
        self.patterns: tuple[str, ...] = ()
        self._last: tuple[HotRun | None, bool] = (None, True)

    def __getstate__(self) -> dict[str, Any]:
        return {"patterns": self.patterns}  # between processes (parallel.py): the last run's answer stays behind

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.patterns = state["patterns"]
        self._last = (None, True)

    def add(self, patterns: tuple[str, ...]) -> None:
        self.patterns = tuple(dict.fromkeys((*self.patterns, *patterns)))

    def may_hold(self, run: HotRun) -> bool:
        """Whether one of the patterns may be in a line of `run` (searched once per run, whoever asks first)."""
        last, found = self._last
        if last is run:
            return found
        find = shape_finder(self.patterns, run.shape) if self.patterns else None
        found = find is not None and find(run.region, run.start, run.end) is not None
        self._last = (run, found)
        return found


class AloneReader(LogParser):
    """A parser that reads its lines alone, its index's patterns being its triggers (the catalogue's messages,
    the vocabulary's relation words: meaning_parser.py): it has no gate, so it reads the runs of hot lines the
    analyzer folds too (`absorbs`), and reads one line by line only where its index finds something in it."""

    alone = True  # a line only its triggers select is its alone; it has no gate: its index says which are its own
    # the kinds of the hot-line runs the analyzer folds (doctor/sources/engines/llamacpp/fold.py HOT.kinds):
    # this parser reads those runs through `fold`; a kind missing here turns folding off (tests/logs/test_fold.py)
    absorbs = frozenset({"server_signature", "timings", "context", "gin_access", "sglang_batch", "vllm_request"})

    def bind(self, facts: Facts, state: AnalysisState | None = None) -> None:
        super().bind(facts, state)
        if self.literal_index is not None:
            self.state.part(_AloneIndexes).add(tuple(self.literal_index.patterns))

    def fold_ready(self, kinds: tuple[str, ...]) -> bool:
        return True  # nothing waits for a next line: any run may be read at once

    def read_run(self, run: HotRun) -> bool | list[FedLine]:
        """Whether a run of hot lines may hold a line it reads: a line the index finds nothing in records nothing,
        and the index's patterns are a line's only way in (the router's hits, or the index's own set on a line
        it does not route), so a run none of them is found in records nothing. The run is searched once for every
        alone reader's patterns together, then for this one's only where that found something. In a run of free
        text of any length (a server's logged prompts: HotLines.unbounded), the lines it may read."""
        index = self.literal_index
        if index is None:
            return False
        if "vllm_request" in run.kinds:
            return run.wanted_lines(shape_finder(self.fold_patterns(run.kinds), run.shape))
        if not self.state.part(_AloneIndexes).may_hold(run):
            return False
        find = shape_finder(tuple(index.patterns), run.shape)
        return find is not None and find(run.region, run.start, run.end) is not None

    def take_run(self, read: bool | list[FedLine], run: HotRun) -> None:
        """Where something may be, the run's lines fed one by one (a line that would not reach this parser has no
        hit), or the lines found."""
        if isinstance(read, list):
            run.feed(self, read, run.kinds)
        elif read:
            for line in run.each_line():
                self.feed(line)

    def fold_patterns(self, kinds: tuple[str, ...]) -> tuple[str, ...]:
        index = self.literal_index
        return tuple(index.patterns) if index is not None and "vllm_request" in kinds else ()


class CatalogueParser(AloneReader):
    name = "catalogue"
    triggers = _Fragments()

    def __init__(self) -> None:
        self.messages = active_set()
        super().__init__()
        self.literal_index = self.messages.index  # the router matches its patterns in its own set and primes it
        self._counts = [0] * len(self.messages.entries)  # lines matched, by entry position
        self._pending: list[tuple[loader.Entry, dict[str, float | str], LogLine]] = []

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        del state["messages"], state["literal_index"]  # this process's compiled set, made again where it goes
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.messages = active_set()
        self.literal_index = self.messages.index

    @property
    def seen(self) -> Counter[str]:
        """Entry id -> the lines it matched (entries that matched none left out)."""
        entries = self.messages.entries
        return Counter({entries[i].id: n for i, n in enumerate(self._counts) if n})

    def feed(self, line: LogLine) -> None:
        messages = self.messages
        counts = self._counts
        for i in messages.indices(line.text):
            entry = messages.entries[i]
            numbers = read_numbers(entry, line.text)
            if numbers is None:  # its rare literal without its pattern (or RE2 and re disagreeing): not it
                continue
            counts[i] += 1
            keep = entry.diagnostic and counts[i] <= KEPT_PER_ENTRY and len(self._pending) < KEPT_TOTAL
            for group, name in entry.facts.items():
                value = numbers.get(group)
                if value is not None and not self.facts.has(name):
                    self.set(name, value, line)
            if keep:
                self._pending.append((entry, numbers, line))

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
    return lines_read(facts, ("message",), (CatalogueParser.name,))

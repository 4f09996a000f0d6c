"""The meaning layer in `analyze` and `watch --log`: a failure said in words no engine parser or catalogued
message knows becomes the typed event an engine parser would have made, so the same rules judge it.

Sources floor; the words are the vocabulary's (vocabulary.yaml, read by vocabulary.py, a line read by
meaning.py). Its triggers are the vocabulary's relation words: the analyzer's one scan selects the lines that
hold one, and the parser reads its lines alone (no gate; doctor/sources/logs/router.py): the router's RE2 set
holds the same words as its index, so a line is handed to it only where one is, and a line only its words
selected goes to it and to no other parser. It casts no engine vote.

Each line it reads keeps its reading (bounded); at each summary:
  - a line an engine parser made an event or a fact from, or any catalogued message matches (the whole
    catalogue, its benign and informational entries too: a sentence the catalogue knows is its), is not news;
  - nor is a reading whose story the log already tells: an out-of-memory event (or a catalogued message of an
    `oom.*` class) already there for an out-of-memory reading, a rejected or truncated request for a context
    one, a preemption for a preemption;
  - a context reading whose request the run's own context holds (`config.n_ctx_seq`, `max_model_len`, `n_ctx`)
    is not an overflow of that window: when the words call the limit a capacity ("the maximum allowed
    length") it is the KV pool's (`kv_capacity`), otherwise another component's view (a tokenizer's) and left;
  - the rest becomes the vocabulary's event, its out-of-memory phase the step the line names, else where the
    run's timeline had got to (doctor/sources/logs/timeline.py), with the line that placed it.
"""

from __future__ import annotations

import functools
from typing import Any

from doctor.core.facts import Event, Facts
from doctor.sources.catalogue import meaning, vocabulary
from doctor.sources.catalogue.meaning import Reading
from doctor.sources.catalogue.parser import AloneReader
from doctor.sources.logs.base import lines_read
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import FragmentIndex

KEPT = 200  # readings kept per session
KEPT_PER_KIND = 5  # events of one kind made
# the story a reading would tell, and the events (or catalogued classes) that tell it already
COVERED: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "oom": (frozenset({"oom", "alloc_failed", "kv_capacity"}), ("oom.",)),
    "kv_capacity": (frozenset({"oom", "alloc_failed", "kv_capacity"}), ("oom.",)),
    "prompt_too_long": (frozenset({"prompt_too_long", "truncation", "ctx_full"}), ("context.overflow",)),
    "truncation": (frozenset({"prompt_too_long", "truncation", "ctx_full"}), ("context.overflow",)),
    "preempted": (frozenset({"preempted"}), ("kv.preemption",)),
}
CONTEXT_FACTS = ("config.n_ctx_seq", "config.max_model_len", "config.n_ctx")


@functools.lru_cache(maxsize=1)
def _index() -> FragmentIndex:
    return FragmentIndex(vocabulary.builtin().triggers)


class _Triggers:
    """The vocabulary's relation words as a class attribute read on first use (importing loads no YAML)."""

    def __get__(self, obj: object, owner: type | None = None) -> tuple[str, ...]:
        return vocabulary.builtin().triggers


class MeaningParser(AloneReader):
    name = "meaning"
    triggers = _Triggers()

    def __init__(self) -> None:
        self.vocabulary = vocabulary.builtin()
        super().__init__()
        self.literal_index = _index()
        self._pending: list[tuple[LogLine, Reading]] = []

    def feed(self, line: LogLine) -> None:
        if not self.literal_index.bits(line.text):  # type: ignore[union-attr]
            return
        if self.vocabulary.launch_re.search(line.text):
            self.mark("load", line)  # an engine launched with a model: loading it is what comes first
            return
        reading = meaning.read(self.vocabulary, line.text)
        if reading is None or len(self._pending) >= KEPT:
            return
        self._pending.append((line, reading))
        if reading.step is not None and reading.resource in _MEMORY:
            self.mark(reading.step, line)  # the line names where the run was: later failures are placed by it

    def summarize(self, facts: Facts) -> None:
        if not self._pending:
            return
        read = _lines_read(facts)
        kinds = set(facts.event_counts)
        classes = {str(e.data.get("class", "")) for e in facts.events("message")}
        made: dict[str, int] = {}
        for line, reading in self._pending:
            if line.number in read or _catalogued(line.text):
                continue
            found = meaning.meaning_of(self.vocabulary, reading)
            if found is None:
                continue
            if found.kind is None:  # facts (threads against cores): set where no parser set them
                for name, value in found.data.items():
                    if not facts.has(name):
                        facts.set(name, value, self.src(line))
                continue
            kind, data = self._in_context(found, reading, facts)
            if kind is None:
                continue
            covered_kinds, covered_classes = COVERED.get(kind, (frozenset({kind}), ()))
            if covered_kinds & kinds or any(c.startswith(covered_classes) for c in classes if covered_classes):
                continue
            if made.get(kind, 0) >= KEPT_PER_KIND:
                continue
            made[kind] = made.get(kind, 0) + 1
            facts.add_event(self._placed(kind, line, found.phase, data))

    def _in_context(self, found: meaning.Meaning, reading: Reading,
                    facts: Facts) -> tuple[str | None, dict[str, Any]]:
        """The event kind and data a meaning becomes in this log: its own, unless the run's own context says
        otherwise (a request the context holds, refused at a capacity below it, is the KV pool's)."""
        data: dict[str, Any] = {**found.data, "words": "meaning"}
        kind = found.kind
        if kind in ("prompt_too_long", "truncation"):
            unit = found.rule.unit
            needed, limit = reading.quantity("needed", unit), reading.quantity("limit", unit)
            context = max((v for v in map(facts.value, CONTEXT_FACTS) if isinstance(v, int)), default=None)
            if context is not None and needed is not None and context >= needed.value:
                if limit is None or not limit.capacity:
                    return None, data  # the run's window holds it: another component's limit, not an overflow
                return "kv_capacity", {"reason": "prompt", "n_tokens": int(needed.value),
                                       "kv_tokens": int(limit.value), "n_ctx": context, "words": "meaning"}
        return kind, data

    def _placed(self, kind: str, line: LogLine, phase: str | None, data: dict[str, Any]) -> Event:
        """The event; an out-of-memory one the line's own step did not place is placed by the run's timeline
        (unknown where no step was marked before it)."""
        placed_by: tuple[tuple[int, str], ...] = ()
        if phase == "timeline":
            placed = self.placed(line)
            if placed is not None:
                phase = placed.phase
                data.update(placed.data())
                placed_by = placed.lines()
            else:
                phase = "unknown"
        return Event(kind=kind, line=line.number, text=line.raw[:400], source=self.name, phase=phase,
                     data={k: v for k, v in data.items() if isinstance(v, int | float | str | bool)},
                     placed_by=placed_by)


_MEMORY = frozenset({"device_memory", "host_memory", "memory"})


def _lines_read(facts: Facts) -> set[int]:
    """The log lines another parser made an event or a fact from (the catalogue's messages included)."""
    return lines_read(facts, skip_sources=(MeaningParser.name,))


def _catalogued(text: str) -> bool:
    """Whether a catalogued message (any engine's, any level) is in `text`: a sentence the catalogue knows."""
    from doctor.sources.catalogue.parser import catalogue_set

    return bool(catalogue_set().match(text))

"""Which parsers a candidate line goes to, and whether it may start an engine run, in one RE2 set match.

The set holds every parser's gate, each parser's LiteralIndex literals (doctor/sources/logs/base.py,
LineKinds) and the engine table's start lines (doctor/sources/logs/sessions.py). One native pass over a
plain line's raw bytes answers all three: the gated parsers the line can concern, the literal bits each
index would find (handed to it, so the parser does not match the line again) and whether the line holds
a start fragment at all (only then is the start-line pattern, whose alternation order names the marker,
run in Python). Lines of a log fall into few hit sets: what a hit set means is worked out once and kept
(bounded), so the per-line Python is a dictionary look-up and the hand-over.

A parser may read its lines alone (`alone`, the message catalogue: doctor/sources/catalogue/parser.py):
the scan selects lines with its triggers too, but a line that none of the other parsers' triggers nor a
start fragment selects goes to the alone parsers only, so the other parsers see exactly the lines they
saw without it. An alone parser's index patterns are its triggers, so whether another trigger is in the
line is read from the same match: a passing gate made of exactly its parser's triggers, a start fragment,
or no hit of an alone index (then another trigger selected the line). Only a line an alone index hits and
nothing else tells is searched once more, for the triggers of the parsers without such a gate (`others`).
An alone parser has no gate: its index says whether a plain line is one of its own; it gets it only then.

Only plain lines are routed to gates and indexes: a line whose parsed text is not its raw bytes (JSON,
quotes, controls, non-ASCII rewriting) goes to every parser, which asks its own gate, unless only an alone
parser's triggers selected it (then to the alone parsers, which match the text themselves). Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from doctor.sources.logs.base import LogParser
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import LiteralIndex, Verdict, compile_triggers, set_matcher, span_finder, verdict

ROUTES_MAX = 4096  # distinct hit sets kept; a hostile log cannot grow the cache past this


@dataclass(frozen=True, slots=True)
class Route:
    """What one hit set means: the gates that pass (their slots), the literal bits of each index,
    whether a start fragment is in the line, whether a trigger of a parser that is not alone is
    (`others`; always, without alone parsers; None: the hits do not tell, the line is searched) and the
    alone parsers (their positions) whose index found something; `primed`: the bits are the line's text's
    own (a plain line)."""

    passed: tuple[int, ...]
    bits: tuple[int, ...]
    start: bool
    others: bool | None = True
    alone: tuple[int, ...] = ()
    primed: bool = True
    key: tuple[tuple[int, ...], tuple[int, ...], bool] = ((), (), True)  # what decides the parsers: set by make()

    @classmethod
    def make(cls, passed: tuple[int, ...], bits: tuple[int, ...], start: bool, others: bool | None = True,
             alone: tuple[int, ...] = (), primed: bool = True) -> Route:
        return cls(passed, bits, start, others, alone, primed, (passed, alone, bool(others)))

    def told(self, others: bool) -> Route:
        """This route once the line's search said whether another parser's trigger is in it."""
        return Route.make(self.passed, self.bits, self.start, others, self.alone, self.primed)


def _gate_is_triggers(parser: LogParser) -> bool:
    return bool(parser.gate) and set(parser.gate or ()) == set(parser.triggers)


class Router:
    """The set matcher of one analysis; kept across sessions (`rebind`), only the parsers change."""

    def __init__(self, parsers: list[LogParser], gated: list[int], indexes: list[tuple[LiteralIndex, int, int]],
                 n_starts: int, matcher: Callable[[bytes], list[int]], alone: tuple[int, ...] = ()) -> None:
        self.parsers = parsers
        self.gated = gated  # indices (into the parser list) of the parsers with a gate
        self.verdicts: list[Verdict] = [verdict(parsers[i].gate or ()) for i in gated]
        self.indexes = indexes  # (index, first set pattern, end): its literals' place in the set
        self.index_objects = tuple(index for index, _, _ in indexes)
        self.first_start = indexes[-1][2] if indexes else len(gated)  # start fragments: the set's tail
        self.n_starts = n_starts
        self.matcher = matcher
        self.alone = alone  # indices of the alone parsers
        # the triggers of the parsers that are not alone and have no gate made of exactly their triggers
        others = [f for i, p in enumerate(parsers) if i not in alone and not _gate_is_triggers(p) for f in p.triggers]
        self._others = span_finder(compile_triggers(others)) if alone and others else None
        self._told: dict[tuple[tuple[int, ...], bool], Route] = {}
        # the gates (their slots) made of exactly their parser's triggers: one passing means a trigger is there
        self.trigger_gates = frozenset(k for k, i in enumerate(gated) if _gate_is_triggers(parsers[i]))
        # an alone parser's index slot (its lines are those its index finds something in)
        self.alone_slots = tuple(next(slot for slot, (index, _, _) in enumerate(indexes)
                                      if index is parsers[i].literal_index) for i in alone)
        self._unplain = Route.make((), (0,) * len(indexes), False, others=False, alone=alone, primed=False)
        self._routes: dict[tuple[int, ...], Route] = {}
        # per route key (Route.key): the parsers fed, and the slots of the literal indexes they read
        self._targets: dict[tuple[tuple[int, ...], tuple[int, ...], bool],
                            tuple[list[LogParser], tuple[int, ...]]] = {}

    @classmethod
    def build(cls, parsers: list[LogParser], start_fragments: tuple[str, ...] = ()) -> Router | None:
        """None without RE2, or when it refuses a pattern (every parser then sees every line, and the
        start-line pattern runs on each: as before), or when no parser has a gate."""
        gated = [i for i, p in enumerate(parsers) if p.gate]
        alone = tuple(i for i, p in enumerate(parsers) if p.alone and p.gate is None
                      and isinstance(p.literal_index, LiteralIndex))
        if not gated:
            return None
        patterns = ["|".join(f"(?:{f})" for f in parsers[i].gate or ()) for i in gated]
        indexes: list[tuple[LiteralIndex, int, int]] = []
        for parser in parsers:
            index = getattr(parser, "literal_index", None)
            if isinstance(index, LiteralIndex) and all(index is not x for x, _, _ in indexes):
                indexes.append((index, len(patterns), len(patterns) + len(index.patterns)))
                patterns += index.patterns
        patterns += start_fragments
        matcher = set_matcher(patterns)
        return cls(parsers, gated, indexes, len(start_fragments), matcher, alone) if matcher is not None else None

    def rebind(self, parsers: list[LogParser]) -> Router:
        """The same router for fresh parsers of the same classes (a new session): the RE2 set is kept."""
        self.parsers = parsers
        self._targets = {}
        return self

    @staticmethod
    def plain(line: LogLine, raw: bytes) -> bool:
        """Whether the parsers see `raw` itself (no JSON, quote, control or non-ASCII rewriting)."""
        return not line.fields and len(line.text) == len(raw) and raw.isascii()

    def route(self, raw: bytes, plain: bool = True) -> Route | None:
        """The route of a candidate line's raw bytes. A line that is not `plain` has none (None: every
        parser, as before), unless only the alone parsers' triggers selected it: then to them, unprimed."""
        hits = tuple(self.matcher(raw))
        found = self._routes.get(hits)
        if found is None:
            if len(self._routes) >= ROUTES_MAX:
                self._routes.clear()
            found = self._routes[hits] = self._make(hits)
        if found.others is None:  # an alone index hit, nothing else said whether another trigger is there
            found = self._tell(hits, found, raw)
        if plain:
            return found
        return None if found.others else self._unplain

    def _tell(self, hits: tuple[int, ...], found: Route, raw: bytes) -> Route:
        others = self._others is not None and self._others(raw, 0, len(raw)) is not None
        told = self._told.get((hits, others))
        if told is None:
            if len(self._told) >= ROUTES_MAX:
                self._told.clear()
            told = self._told[hits, others] = found.told(others)
        return told

    def _make(self, hits: tuple[int, ...]) -> Route:
        n_gates = len(self.gated)
        bits = [0] * len(self.indexes)
        passed: list[int] = []
        start = False
        others = not self.alone
        for k in hits:
            if k < n_gates:
                passed.append(k)
                others = others or k in self.trigger_gates
            elif k >= self.first_start:
                start = others = True
            else:
                for slot, (_, first, end) in enumerate(self.indexes):
                    if first <= k < end:
                        bits[slot] |= 1 << (k - first)
        alone = tuple(i for i, slot in zip(self.alone, self.alone_slots, strict=True) if bits[slot])
        # no alone index hit: another parser's trigger selected the line (an alone index is its triggers)
        return Route.make(tuple(sorted(passed)), tuple(bits), start, others or not alone or None, alone)

    def targets(self, found: Route, text: str) -> list[LogParser]:
        """Hand the route's answers for the line `text` to the gates and indexes; the parsers to feed:
        all of them, less the gated ones whose gate the line fails and the alone ones whose index found
        nothing; only the alone ones where no other parser's trigger selected the line. Only the indexes
        of the parsers fed are primed (another parser's is never asked about this line)."""
        key = found.key
        known = self._targets.get(key)
        if known is None:
            if found.others:
                dropped = {self.gated[k] for k in range(len(self.gated)) if k not in found.passed}
                dropped.update(i for i in self.alone if i not in found.alone)
                parsers = [p for i, p in enumerate(self.parsers) if i not in dropped]
            else:
                parsers = [self.parsers[i] for i in found.alone]
            read = tuple(slot for slot, index in enumerate(self.index_objects)
                         if any(getattr(p, "literal_index", None) is index for p in parsers))
            known = self._targets[key] = (parsers, read)
        if found.primed:
            verdicts = self.verdicts
            for k in found.passed:
                verdicts[k].passed = text  # this gate passes: the parser's own check need not search
            objects, bits = self.index_objects, found.bits
            for slot in known[1]:
                objects[slot].prime_bits(text, bits[slot])
        return known[0]

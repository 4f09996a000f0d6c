"""Which parsers a candidate line goes to, and whether it may start an engine run, in one RE2 set match.

The set holds every parser's gate, each parser's LiteralIndex literals (doctor/sources/logs/base.py,
LineKinds) and the engine table's start lines (doctor/sources/logs/sessions.py). One native pass over a
plain line's raw bytes answers all three: the gated parsers the line can concern, the literal bits each
index would find (handed to it, so the parser does not match the line again) and whether the line holds
a start fragment at all (only then is the start-line pattern, whose alternation order names the marker,
run in Python). Lines of a log fall into few hit sets: what a hit set means is worked out once and kept
(bounded), so the per-line Python is a dictionary look-up and the hand-over.

Only plain lines are routed: a line whose parsed text is not its raw bytes (JSON, quotes, controls,
non-ASCII rewriting) goes to every parser, which asks its own gate. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from doctor.sources.logs.base import LogParser
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import LiteralIndex, Verdict, set_matcher, verdict

ROUTES_MAX = 4096  # distinct hit sets kept; a hostile log cannot grow the cache past this


@dataclass(frozen=True, slots=True)
class Route:
    """What one hit set means: the gates that pass (their slots), the literal bits of each index, and
    whether a start fragment is in the line."""

    passed: tuple[int, ...]
    bits: tuple[int, ...]
    start: bool


class Router:
    """The set matcher of one analysis; kept across sessions (`rebind`), only the parsers change."""

    def __init__(self, parsers: list[LogParser], gated: list[int], indexes: list[tuple[LiteralIndex, int, int]],
                 n_starts: int, matcher: Callable[[bytes], list[int]]) -> None:
        self.parsers = parsers
        self.gated = gated  # indices (into the parser list) of the parsers with a gate
        self.verdicts: list[Verdict] = [verdict(parsers[i].gate or ()) for i in gated]
        self.indexes = indexes  # (index, first set pattern, end): its literals' place in the set
        self.index_objects = tuple(index for index, _, _ in indexes)
        self.first_start = indexes[-1][2] if indexes else len(gated)  # start fragments: the set's tail
        self.n_starts = n_starts
        self.matcher = matcher
        self._routes: dict[tuple[int, ...], Route] = {}
        # per set of passed gates: the parsers fed, and the slots of the literal indexes they read
        self._targets: dict[tuple[int, ...], tuple[list[LogParser], tuple[int, ...]]] = {}

    @classmethod
    def build(cls, parsers: list[LogParser], start_fragments: tuple[str, ...] = ()) -> Router | None:
        """None without RE2, or when it refuses a pattern (every parser then sees every line, and the
        start-line pattern runs on each: as before), or when no parser has a gate."""
        gated = [i for i, p in enumerate(parsers) if p.gate]
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
        return cls(parsers, gated, indexes, len(start_fragments), matcher) if matcher is not None else None

    def rebind(self, parsers: list[LogParser]) -> Router:
        """The same router for fresh parsers of the same classes (a new session): the RE2 set is kept."""
        self.parsers = parsers
        self._targets = {}
        return self

    @staticmethod
    def plain(line: LogLine, raw: bytes) -> bool:
        """Whether the parsers see `raw` itself (no JSON, quote, control or non-ASCII rewriting)."""
        return not line.fields and len(line.text) == len(raw) and raw.isascii()

    def route(self, raw: bytes) -> Route:
        """The route of a plain line's raw bytes."""
        hits = tuple(self.matcher(raw))
        found = self._routes.get(hits)
        if found is None:
            if len(self._routes) >= ROUTES_MAX:
                self._routes.clear()
            found = self._routes[hits] = self._make(hits)
        return found

    def _make(self, hits: tuple[int, ...]) -> Route:
        n_gates = len(self.gated)
        bits = [0] * len(self.indexes)
        passed: list[int] = []
        start = False
        for k in hits:
            if k < n_gates:
                passed.append(k)
            elif k >= self.first_start:
                start = True
            else:
                for slot, (_, first, end) in enumerate(self.indexes):
                    if first <= k < end:
                        bits[slot] |= 1 << (k - first)
        return Route(tuple(sorted(passed)), tuple(bits), start)

    def targets(self, found: Route, text: str) -> list[LogParser]:
        """Hand the route's answers for the line `text` to the gates and indexes; the parsers to feed:
        all of them, less the gated ones whose gate the line fails."""
        verdicts = self.verdicts
        for k in found.passed:
            verdicts[k].passed = text  # this gate passes: the parser's own check need not search
        key = found.passed
        known = self._targets.get(key)
        if known is None:
            dropped = {self.gated[k] for k in range(len(self.gated)) if k not in key}
            parsers = [p for i, p in enumerate(self.parsers) if i not in dropped]
            read = tuple(slot for slot, index in enumerate(self.index_objects)
                         if any(getattr(p, "literal_index", None) is index for p in parsers))
            known = self._targets[key] = (parsers, read)
        # the indexes of the parsers fed only (another parser's is never asked about this line)
        objects, bits = self.index_objects, found.bits
        for slot in known[1]:
            objects[slot].prime_bits(text, bits[slot])
        return known[0]

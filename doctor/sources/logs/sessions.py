"""Engine start lines: where one engine run ends and the next begins inside one input.

journalctl across a restart, `cat a.log b.log`, a log that a server appends to run after run: each
engine start (its banner, or the model load that begins it) opens a new session, so that facts of
two runs are not mixed. A marker belongs to a family (the engine) and has an order inside one start
(vLLM prints its API server version, then initialises the engine: one start, two markers).

The lines are the engines' own, kept in each engine's row of the engine table (`Engine.starts`,
doctor/sources/engines/<engine>/engine.py); this module reads them from the table, as it stands when
they are asked for (an engine registered later brings its start lines).

Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from doctor.core import engines
from doctor.sources.logs.matcher import set_matcher


@dataclass(frozen=True, slots=True)
class StartMarker:
    family: str
    order: int


@dataclass(frozen=True, slots=True)
class StartLines:
    """The engine table's start lines at one generation of the table, compiled into one pattern."""

    generation: int
    markers: tuple[tuple[str, int, str], ...]  # (family, order within one start, pattern fragment)
    pattern: re.Pattern[bytes] | None
    # one RE2 set over the same fragments: a line none of them is in (nearly every line) is told so
    # in native code; `pattern` (whose alternation order decides which marker) runs only on the others
    prefilter: Callable[[bytes], list[int]] | None = None

    @property
    def fragments(self) -> tuple[str, ...]:
        """The pattern fragments (every one must be a candidate line of the scan)."""
        return tuple(f for _, _, f in self.markers)

    def marker(self, raw: bytes) -> StartMarker | None:
        """The engine start this line marks, or None."""
        if self.prefilter is not None and not self.prefilter(raw):
            return None
        m = self.pattern.search(raw) if self.pattern is not None else None
        if m is None or m.lastindex is None:
            return None
        family, order, _ = self.markers[m.lastindex - 1]
        return StartMarker(family, order)


_CACHE: list[StartLines] = []


def start_lines() -> StartLines:
    """Every engine's start lines, in table order (made again when the table changes)."""
    generation = engines.generation()
    if _CACHE and _CACHE[0].generation == generation:
        return _CACHE[0]
    markers = tuple((e.name, order, fragment) for e in engines.table() for order, fragment in enumerate(e.starts.lines))
    pattern = re.compile("|".join(f"({f})" for _, _, f in markers).encode()) if markers else None
    prefilter = set_matcher([f for _, _, f in markers]) if markers else None
    _CACHE[:] = [StartLines(generation, markers, pattern, prefilter)]
    return _CACHE[0]


def start_marker(raw: bytes) -> StartMarker | None:
    """The engine start this line marks, or None."""
    return start_lines().marker(raw)


@dataclass(slots=True)
class OpenSession:
    """The session being read: where it began, and the start markers it has seen (family → order)."""

    first_line: int = 1
    started_by: str = "input"
    text: str | None = None
    markers: dict[str, int] | None = None

    def begins_new(self, marker: StartMarker, has_run: bool, voted: Iterable[str] = ()) -> bool:
        """Whether `marker` starts another engine run rather than continuing this one; `voted`: the
        engines whose signature lines the session has shown so far.

        - the same engine starting again (a marker of a family already seen, at the same or an
          earlier step of its start) is a new run — for an engine whose row says `again_after_run`
          (llama.cpp) only once the first run did something (a draft model loads right after the
          main one, in the same process);
        - a first marker after the session already logged a run (events, run facts) is a restart;
        - an engine that loads what it wraps per request (`wrapped_per_request`: Ollama loads a model,
          llama.cpp's loader lines, in a runner per request): not a restart.
        """
        seen = self.markers or {}
        if any(w is not None and w.wraps == marker.family and w.starts.wrapped_per_request
               for w in map(engines.get, voted)):
            return False
        if marker.family in seen and marker.order <= seen[marker.family]:
            row = engines.get(marker.family)
            return has_run or row is None or not row.starts.again_after_run
        return marker.family not in seen and has_run

    def note(self, marker: StartMarker) -> None:
        if self.markers is None:
            self.markers = {}
        self.markers[marker.family] = marker.order

"""The interface every engine's log parser implements.

A parser declares trigger patterns (regular-expression fragments); the scanner hands it only the
lines that match one of the triggers of any parser. `feed` reads a line and writes facts and events
into the shared snapshot as it goes (last value wins, so memory stays flat); `summarize` writes the
facts that need the whole input (aggregates, pending OOM phases) and must leave the parser able to
go on (watch --log asks for summaries while the log grows). Parsers vote for the engines whose
signature lines they saw; the analyzer turns the votes into `engine.name`.

What the parsers of one analysis share besides the snapshot (the PyTorch OOM board the vLLM and TGI
parsers both write to) lives in an `AnalysisState` that the analyzer makes for each session and
hands to every parser in `bind`; nothing is kept in module globals.

Pure: text in, facts out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from doctor.facts import Event, Facts, Source
from doctor.logs.line import LogLine
from doctor.logs.matcher import text_filter


@dataclass(slots=True)
class Extremes:
    """The smallest and largest value of a series, each with the source of the line it was read from.

    A derived min/max fact must cite the line that holds that value, not the last line of the
    series (evidence "58.4 tokens/s (log line 58)" while 58.45 is on line 50); keeping the extremes
    as the values arrive also keeps them right when a bounded history drops its oldest entries."""

    low: float | None = None
    low_source: Source | None = None
    high: float | None = None
    high_source: Source | None = None
    count: int = 0

    def add(self, value: float | None, source: Source) -> None:
        if value is None:
            return
        self.count += 1
        if self.low is None or value < self.low:
            self.low, self.low_source = value, source
        if self.high is None or value > self.high:
            self.high, self.high_source = value, source

    def emit(self, facts: Facts, low_name: str | None, high_name: str | None, unit: str | None,
             at_least: int = 1) -> None:
        """Set the min fact and/or the max fact, each sourced from its own line."""
        if self.count < at_least:
            return
        if low_name and self.low is not None and self.low_source is not None:
            facts.set(low_name, self.low, self.low_source, unit)
        if high_name and self.high is not None and self.high_source is not None:
            facts.set(high_name, self.high, self.high_source, unit)


T = TypeVar("T")


class AnalysisState:
    """The per-analysis state that several parsers share, one object of each kind: made by the
    analyzer for each session (so a new session starts clean) and handed to every parser in `bind`.
    A part is made on first use, `state.part(TorchOomBoard)`, from its class called without arguments."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: dict[type, Any] = {}

    def part(self, kind: type[T]) -> T:
        found = self._parts.get(kind)
        if found is None:
            found = self._parts[kind] = kind()
        return found  # type: ignore[no-any-return]


_GATE_TESTS: dict[tuple[str, ...], Callable[[str], object]] = {}


def _gate_test(gate: tuple[str, ...]) -> Callable[[str], object]:
    """One compiled gate per fragment list, shared by every parser instance (a log with many engine
    sessions makes fresh parsers for each)."""
    test = _GATE_TESTS.get(gate)
    if test is None:
        test = _GATE_TESTS[gate] = text_filter(gate)
    return test


class LogParser:
    name = "base"
    triggers: tuple[str, ...] = ()
    # when set, feed() ignores every line whose text matches none of these fragments, so the
    # analyzer may leave such lines out (it checks them all at once on the raw bytes)
    gate: tuple[str, ...] | None = None

    def __init__(self) -> None:
        self.votes: Counter[str] = Counter()
        self.facts = Facts()  # replaced by the analyzer with the shared snapshot
        self.state = AnalysisState()  # replaced by the analyzer with the one of its analysis
        self._gate_test = _gate_test(self.gate) if self.gate else None

    def passes_gate(self, text: str) -> bool:
        """Whether `text` is one of this parser's lines (always, for a parser without a gate). Cheap
        when the analyzer's grouped scan has already said so (doctor/logs/matcher.py, Verdict)."""
        return self._gate_test is None or bool(self._gate_test(text))

    def bind(self, facts: Facts, state: AnalysisState | None = None) -> None:
        """Write into `facts` and share `state` with the other parsers of the same analysis."""
        self.facts = facts
        if state is not None:
            self.state = state

    # -- called by the analyzer ------------------------------------------------------------
    def feed(self, line: LogLine) -> None:
        raise NotImplementedError

    def feed_gap(self, number: int, text: str) -> None:
        """Text between candidate lines, delivered only while `wants_capture()` is true."""

    def wants_capture(self) -> bool:
        return False

    def summarize(self, facts: Facts) -> None:
        """Write whole-input facts into `facts` (a copy of the shared snapshot)."""

    # -- helpers for subclasses ------------------------------------------------------------
    def src(self, line: LogLine) -> Source:
        return Source("log", self.name, line.number, line.raw[:300])

    def set(self, name: str, value: object, line: LogLine, unit: str | None = None) -> None:
        self.facts.set(name, value, self.src(line), unit)  # type: ignore[arg-type]

    def event(self, kind: str, line: LogLine, phase: str | None = None, **data: object) -> Event:
        event = Event(kind=kind, line=line.number, text=line.raw[:400], source=self.name, phase=phase,
                      data={k: v for k, v in data.items() if isinstance(v, int | float | str | bool)})
        self.facts.add_event(event)
        return event

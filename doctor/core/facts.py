"""Facts: the one snapshot every source fills and every rule reads.

A fact has a dotted name (`config.n_ctx`, `host.gpu[0].vram_total`), a value with a unit, and the
source it came from (a log line, a probe, a trace, an estimate) so each finding can show evidence.
A fact that could not be read is *unknown* and carries the reason; it is never a silent default.
Events (OOM, context shift, truncation, load failure, ...) are facts too, with line numbers.

A fact's unit comes from the fact catalogue (doctor/catalog), never from the caller: `set` looks the
name up. A name the catalogue does not know is kept without a unit in a user's run; under the strict
switch (`STRICT`, on in the test suite, or LLM_DOCTOR_STRICT_FACTS=1 for child processes) it is a
`FactNameError`, and so is a unit passed by a caller that disagrees with the catalogue.

Pure: no machine access, no clock.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from doctor.core import catalog
from doctor.core.errors import FactNameError

Scalar = int | float | str | bool
Value = Scalar | list[Any] | None

# How many events of one kind are kept with their text; the count goes on past this.
EVENTS_KEPT_PER_KIND = 50
TEXT_LIMIT = 400

# Unknown fact names and units that disagree with the catalogue are errors (tests, child processes of
# tests); off in a user's run, where such a fact is kept rather than crashing the run.
STRICT_ENV = "LLM_DOCTOR_STRICT_FACTS"
STRICT = os.environ.get(STRICT_ENV) == "1"

_UNITS: dict[str, tuple[bool, str | None]] = {}  # name -> (catalogued, unit); names repeat a lot


def catalog_unit(name: str) -> tuple[bool, str | None]:
    """(whether the catalogue knows `name`, its unit). Indexed names resolve to their `[]` spec."""
    found = _UNITS.get(name)
    if found is None:
        spec = catalog.spec(name)
        found = (spec is not None, spec.unit if spec is not None else None)
        if len(_UNITS) < 100_000:  # names come from inputs too (indexed GPUs, sessions): stay bounded
            _UNITS[name] = found
    return found


def unit_of(name: str, given: str | None = None) -> str | None:
    """The unit a fact named `name` carries: the catalogue's. `given` is what a caller passed (the
    log parsers still do); under STRICT a name the catalogue lacks, or a `given` unit that is not
    the catalogue's, raises FactNameError."""
    known, unit = catalog_unit(name)
    if not known:
        if STRICT:
            raise FactNameError(f"fact {name!r} is not in the fact catalogue (doctor/catalog)")
        return None  # units come from the catalogue only
    if given is not None and given != unit and STRICT:
        raise FactNameError(f"fact {name!r}: unit {given!r} passed, the catalogue says {unit!r}")
    return unit


@dataclass(frozen=True, slots=True)
class Source:
    """Where a fact or event came from.

    kind: log | probe | trace | estimate | config | test
    name: the parser, probe or estimator that produced it (an engine's log parser, "probe.storage", ...)
    line: 1-based line number in the input log or recording, when there is one
    text: the (sanitised, shortened) input line, for evidence
    """

    kind: str
    name: str
    line: int | None = None
    text: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "name": self.name}
        if self.line is not None:
            out["line"] = self.line
        if self.text is not None:
            out["text"] = self.text
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Source:
        return cls(
            kind=str(data.get("kind", "unknown")),
            name=str(data.get("name", "unknown")),
            line=_opt_int(data.get("line")),
            text=_opt_str(data.get("text")),
        )

    def describe(self) -> str:
        if self.kind == "log" and self.line is not None:
            return f"log line {self.line}"
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True, slots=True)
class Fact:
    """One named value. `value is None` means unknown, and `unknown` says why."""

    name: str
    value: Value
    unit: str | None
    source: Source
    unknown: str | None = None

    @property
    def known(self) -> bool:
        return self.value is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": _json_value(self.value), "source": self.source.to_json()}
        if self.unit:
            out["unit"] = self.unit
        if self.unknown:
            out["unknown"] = self.unknown
        return out

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> Fact:
        """A fact read back from a saved scan or recording: a catalogued name takes the catalogue's
        unit (files written before units came from the catalogue); another keeps the stored one."""
        src = data.get("source")
        known, unit = catalog_unit(name)
        return cls(
            name=name,
            value=data.get("value"),
            unit=unit if known else _opt_str(data.get("unit")),
            source=Source.from_json(src) if isinstance(src, dict) else Source("unknown", "unknown"),
            unknown=_opt_str(data.get("unknown")),
        )


@dataclass(slots=True)
class Event:
    """Something that happened at a point in a log or trace.

    kind: oom, ctx_full, context_shift, truncation, prompt_too_long, decode_failed, load_failed,
          context_failed, no_gpu, crash, preempted, kv_capacity, repetition, ... (see catalog.EVENT_KINDS)
    phase: for OOMs the phase (weights, kv_cache, compute, runtime, concurrency, host); else optional
    data: numbers and names read from the line (n_ctx, n_tokens, bytes, device, ...)
    placed_by: the other lines that place it (line number, text): where the run's timeline had got to
        when it happened (doctor/sources/logs/timeline.py); a finding cites them after the event's own line
    """

    kind: str
    line: int | None
    text: str
    source: str
    phase: str | None = None
    data: dict[str, Scalar] = field(default_factory=dict)
    placed_by: tuple[tuple[int, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "phase": self.phase, "line": self.line,
                               "text": self.text, "source": self.source}
        if self.data:
            out["data"] = {k: _json_value(v) for k, v in self.data.items()}
        if self.placed_by:
            out["placed_by"] = [{"line": n, "text": t} for n, t in self.placed_by]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        raw = data.get("data")
        return cls(
            kind=str(data.get("kind", "unknown")),
            line=_opt_int(data.get("line")),
            text=str(data.get("text", ""))[:TEXT_LIMIT],
            source=str(data.get("source", "unknown")),
            phase=_opt_str(data.get("phase")),
            data={str(k): v for k, v in raw.items() if isinstance(v, int | float | str | bool)}
            if isinstance(raw, dict)
            else {},
            placed_by=_placed_by(data.get("placed_by")),
        )


def _placed_by(raw: object) -> tuple[tuple[int, str], ...]:
    """Event.placed_by read back: the well-formed entries of a saved list, the rest left out."""
    if not isinstance(raw, list):
        return ()
    return tuple((n, str(item.get("text", ""))[:TEXT_LIMIT]) for item in raw[:8] if isinstance(item, dict)
                 for n in (_opt_int(item.get("line")),) if n is not None)


@dataclass(slots=True)
class Session:
    """One engine run inside an input: from an engine start (its banner or model load), a truncation,
    a rotation or a restart, to the next. Two runs in one input (journalctl across a restart,
    `cat a.log b.log`, a followed log that was truncated) keep their facts apart: the snapshot's own
    facts are the latest session's, and every earlier session keeps its own snapshot in `facts`.

    number: 1-based, in input order
    input: the file (or stream) the session's lines are in; line numbers count within it
    first_line, last_line: the session's lines in that input (after a truncation or rotation the new
        file is numbered from 1 again)
    started_by: "input" (the start of the input) | "engine start" | "truncated" | "rotated"
    text: the line that began it (an engine's start banner), or the notice
    facts: an earlier session's own snapshot; None for the latest (its facts are the snapshot's)
    ran: the session got past starting (it logged a run or an end: a request, a load, an OOM, a crash); a
        latest session that did not (a restart whose start-up lines end the input) shows nothing of its own
        about the failure before it
    """

    number: int
    input: str
    first_line: int
    last_line: int
    started_by: str = "input"
    text: str | None = None
    engine: str | None = None
    facts: Facts | None = None
    ran: bool = True

    def describe(self) -> str:
        lines = (f"line {self.first_line}" if self.last_line <= self.first_line
                 else f"lines {self.first_line}-{self.last_line}")
        how = {"input": "", "engine start": ", an engine start", "truncated": ", after the file was truncated",
               "rotated": ", after the file was rotated"}.get(self.started_by, f", {self.started_by}")
        return f"session {self.number}: {lines} of {self.input}{how}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"number": self.number, "input": self.input, "first_line": self.first_line,
                               "last_line": self.last_line, "started_by": self.started_by}
        if self.text is not None:
            out["text"] = self.text
        if self.engine is not None:
            out["engine"] = self.engine
        if self.facts is not None:
            out["facts"] = self.facts.to_json()
        if not self.ran:
            out["ran"] = False
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Session:
        raw = data.get("facts")
        return cls(
            number=_opt_int(data.get("number")) or 0,
            input=str(data.get("input", "input")),
            first_line=_opt_int(data.get("first_line")) or 1,
            last_line=_opt_int(data.get("last_line")) or 1,
            started_by=str(data.get("started_by", "input")),
            text=_opt_str(data.get("text")),
            engine=_opt_str(data.get("engine")),
            facts=Facts.from_json(raw) if isinstance(raw, dict) and "sessions" not in raw else None,
            ran=data.get("ran") is not False,
        )


class Facts:
    """The snapshot: facts by name (the last value set wins) plus the events seen.

    `events_observed` says whether any source that can report events (a log, a trace) was read;
    when none was, event predicates are unknown rather than false.
    """

    def __init__(self) -> None:
        self._facts: dict[str, Fact] = {}
        self._events: list[Event] = []
        self._event_counts: dict[str, int] = {}
        self._kept_per_kind: dict[str, int] = {}
        self.events_observed = False
        self.inputs: list[str] = []  # human names of what was read (files, probes, traces)
        # the engine runs in the input when there was more than one (see Session); empty otherwise
        self.sessions: list[Session] = []

    # -- facts -------------------------------------------------------------------------------
    def set(self, name: str, value: Value, source: Source, unit: str | None = None) -> None:
        """Set a fact; its unit is the catalogue's (`unit`, when given, is only checked)."""
        found = _UNITS.get(name)  # inline, the common case: a catalogued name seen before (parsers set per line)
        if found is not None and found[0] and (unit is None or unit == found[1]):
            unit = found[1]
        else:
            unit = unit_of(name, unit)
        problem = _out_of_range(value)
        if problem:
            self._unknown(name, problem, source, unit)
            return
        self._facts[name] = Fact(name, value, unit, source)

    def set_default(self, name: str, value: Value, source: Source, unit: str | None = None) -> None:
        """Set only if no known value is there yet (used for engine defaults and derived facts)."""
        current = self._facts.get(name)
        if current is None or not current.known:
            self.set(name, value, source, unit)
        else:
            unit_of(name, unit)  # the check holds whether or not the value lands

    def unknown(self, name: str, reason: str, source: Source, unit: str | None = None) -> None:
        """Mark a fact unknown with the reason (never replacing a known value)."""
        self._unknown(name, reason, source, unit_of(name, unit))

    def _unknown(self, name: str, reason: str, source: Source, unit: str | None) -> None:
        current = self._facts.get(name)
        if current is not None and current.known:
            return  # a known value is never replaced by an unknown one
        self._facts[name] = Fact(name, None, unit, source, unknown=reason)

    def add(self, fact: Fact) -> None:
        if fact.known and not _out_of_range(fact.value):
            self._facts[fact.name] = fact
        elif fact.known:
            self._unknown(fact.name, _out_of_range(fact.value) or "unknown", fact.source, fact.unit)
        else:
            self._unknown(fact.name, fact.unknown or "unknown", fact.source, fact.unit)

    def get(self, name: str) -> Fact | None:
        return self._facts.get(name)

    def value(self, name: str, default: Any = None) -> Any:
        fact = self._facts.get(name)
        return default if fact is None or fact.value is None else fact.value

    def has(self, name: str) -> bool:
        fact = self._facts.get(name)
        return fact is not None and fact.known

    def names(self) -> list[str]:
        return sorted(self._facts)

    def __iter__(self) -> Iterator[Fact]:
        return iter(self._facts[n] for n in sorted(self._facts))

    def __len__(self) -> int:
        return len(self._facts)

    def has_prefix(self, prefix: str) -> bool:
        """Whether any fact's name starts with `prefix` (known or not); no sorting."""
        return any(n.startswith(prefix) for n in self._facts)

    def with_prefix(self, prefix: str) -> list[Fact]:
        return [f for n, f in sorted(self._facts.items()) if n.startswith(prefix)]

    # -- events ------------------------------------------------------------------------------
    def add_event(self, event: Event) -> None:
        self.events_observed = True
        self._event_counts[event.kind] = self._event_counts.get(event.kind, 0) + 1
        kept = self._kept_per_kind.get(event.kind, 0)
        if kept < EVENTS_KEPT_PER_KIND:
            if len(event.text) > TEXT_LIMIT:
                event.text = event.text[: TEXT_LIMIT - 1] + "…"
            if any(_out_of_range(v) for v in event.data.values()):  # as for facts: no number past 64 bits
                event.data = {k: v for k, v in event.data.items() if not _out_of_range(v)}
            self._events.append(event)
            self._kept_per_kind[event.kind] = kept + 1

    def events(self, kind: str | None = None, phase: str | None = None) -> list[Event]:
        return [e for e in self._events
                if (kind is None or e.kind == kind) and (phase is None or e.phase == phase)]

    def event_count(self, kind: str) -> int:
        return self._event_counts.get(kind, 0)

    @property
    def event_counts(self) -> dict[str, int]:
        return dict(self._event_counts)

    # -- combining and serialising ----------------------------------------------------------
    def merge(self, other: Facts) -> None:
        """Add another snapshot's facts and events; its known values win over ours."""
        for fact in other:
            self.add(fact)
        for event in other._events:
            self.add_event(event)
        for kind, count in other._event_counts.items():
            kept = sum(1 for e in other._events if e.kind == kind)
            extra = max(0, count - kept)
            if extra:
                self._event_counts[kind] = self._event_counts.get(kind, 0) + extra
        self.events_observed = self.events_observed or other.events_observed
        self.inputs.extend(other.inputs)
        if other.sessions and not self.sessions:
            self.sessions = list(other.sessions)

    def to_json(self) -> dict[str, Any]:
        return {
            "facts": {f.name: f.to_json() for f in self},
            "events": [e.to_json() for e in self._events],
            "event_counts": dict(sorted(self._event_counts.items())),
            "events_observed": self.events_observed,
            "inputs": list(self.inputs),
            **({"sessions": [s.to_json() for s in self.sessions]} if self.sessions else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Facts:
        facts = cls()
        raw_facts = data.get("facts", {})
        if not isinstance(raw_facts, dict):
            raise ValueError("'facts' must be an object")
        for name, raw in raw_facts.items():
            if isinstance(raw, dict):
                facts.add(Fact.from_json(str(name), raw))
        raw_events = data.get("events", [])
        if not isinstance(raw_events, list):
            raise ValueError("'events' must be a list")
        for raw in raw_events:
            if isinstance(raw, dict):
                facts.add_event(Event.from_json(raw))
        counts = data.get("event_counts")
        if isinstance(counts, dict):
            for kind, count in counts.items():
                if isinstance(count, int) and count > facts._event_counts.get(str(kind), 0):
                    facts._event_counts[str(kind)] = count
        facts.events_observed = bool(data.get("events_observed", facts.events_observed))
        inputs = data.get("inputs")
        if isinstance(inputs, list):
            facts.inputs = [str(i) for i in inputs]
        sessions = data.get("sessions")
        if isinstance(sessions, list):
            facts.sessions = [Session.from_json(s) for s in sessions[:MAX_SESSIONS] if isinstance(s, dict)]
        return facts

    @classmethod
    def from_values(cls, values: dict[str, Value], events: Iterable[dict[str, Any]] = (),
                    source: Source | None = None, events_observed: bool | None = None) -> Facts:
        """Build a snapshot by hand (rule test cases, unit tests)."""
        src = source or Source("test", "test")
        facts = cls()
        for name, value in values.items():
            facts.set(name, value, src)
        event_list = list(events)
        for raw in event_list:
            facts.add_event(Event.from_json({"source": src.name, **raw}))
        if events_observed is not None:
            facts.events_observed = events_observed
        return facts


MAX_SESSIONS = 100  # earlier sessions kept with their facts; beyond that only the latest ones are
MAX_MAGNITUDE = 1 << 64  # no engine, probe or file field holds a larger number (size_t / uint64 at most)


def _out_of_range(value: Any) -> str | None:
    """Why a value cannot be a fact (a number no engine prints: infinite, NaN, or past 64 bits, as a
    damaged or hostile input can carry), or None. Such values would overflow the float arithmetic
    of every consumer; they become unknown instead."""
    if isinstance(value, float):
        return None if math.isfinite(value) else f"not a finite number ({value})"
    if isinstance(value, int) and not isinstance(value, bool):
        return None if -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE else "a number beyond 64 bits"
    if isinstance(value, list):
        for item in value:
            problem = _out_of_range(item)
            if problem:
                return problem
    return None


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None

"""Live events: what `watch` emits while a run goes on, and what the TUI and `--format ndjson` show.

A source (the embedded runner, a followed log, a wrapped command) produces these in order; the
watch command turns them into NDJSON lines or hands them to the TUI's watch screen, and `--record`
writes them one per line after a header (doctor/sources/live/recording.py); doctor/sources/live/trace.py
turns them into Facts. Each event is a small dataclass with `to_json()`; `kind` says which;
`event_from_json` reads one back.

Order of an embedded run: SettingsEvent(stage="requested"), FactsEvent (host and model file),
PhaseEvent("load"), SettingsEvent(stage="engine") (what the engine reports, plus the tokenized
prompt), PhaseEvent("warmup"), PhaseEvent("prefill") (carries the first generated token), then
StepEvent 1..N (decode steps: eval of the previous token + sampling), SampleEvents every fraction of
a second, LogEvents as the engine logs, IncidentEvents (context full, decode failure, crash...),
PerfEvent (llama.cpp's own counters), FindingEvents as rules fire or resolve, NoticeEvents (a followed
log truncated or rotated: a new session, numbered from line 1), and one EndEvent.

Pure data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(slots=True)
class LiveEvent:
    kind: str = "event"
    t_ms: float = 0.0  # milliseconds since the watch started

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class SettingsEvent(LiveEvent):
    """The settings in force (model, n_ctx, threads, sampling...).

    stage "requested": what was asked for, before the engine starts; stage "engine": what the
    engine reports after loading (n_ctx as padded, threads, batch sizes, prompt tokens, versions).
    """

    kind: str = "settings"
    settings: dict[str, Any] = field(default_factory=dict)
    stage: str = "requested"  # requested | engine | source


@dataclass(slots=True)
class PhaseEvent(LiveEvent):
    """A phase that finished: load, warmup, prefill. A prefill carries the first generated token."""

    kind: str = "phase"
    phase: str = ""
    ms: float = 0.0
    tokens: int | None = None
    token: str = ""  # prefill: the first generated token's text
    kv_used: int | None = None


@dataclass(slots=True)
class StepEvent(LiveEvent):
    """One decode step (1..N): its time, the token, KV cells used out of n_ctx, memory sampled.

    `token` is the generated text piece: escape sequences and controls removed, except line breaks
    (and tabs), which are part of the output; views make it inert line by line.

    The decode spikes as they stand after this step, marked by the trace builder
    (doctor/sources/live/trace.py) with the rule that counts run.decode_spikes: `p50_ms` the median
    of the steady steps, `spike_ms` the bar above which a steady step is a spike, and the steps
    (numbered from 0 in the run) that became spikes or stopped being spikes with this one - the bar
    moves with the median. A view adds and removes them; it never judges a step itself."""

    kind: str = "step"
    step: int = 0
    ms: float = 0.0
    token: str = ""
    kv_used: int | None = None
    n_ctx: int | None = None
    rss_bytes: int | None = None
    vram_bytes: int | None = None
    p50_ms: float | None = None
    spike_ms: float | None = None
    spikes_added: list[int] = field(default_factory=list)
    spikes_removed: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("spikes_added", "spikes_removed"):  # most steps change no spike: keep recordings lean
            if not data[key]:
                del data[key]
        return data


@dataclass(slots=True)
class SampleEvent(LiveEvent):
    """A periodic resource sample of the engine process (CPU %, RSS, VRAM) and of the machine.

    others_load: runnable threads of *other* processes per usable core (1.0 = they want every core);
    swap_in_bytes: bytes swapped in since the watch started.
    """

    kind: str = "sample"
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    vram_bytes: int | None = None
    load_1m: float | None = None
    others_load: float | None = None
    swap_used_bytes: int | None = None
    swap_in_bytes: int | None = None


@dataclass(slots=True)
class LogEvent(LiveEvent):
    """A line of engine output (escape sequences and controls stripped), with its line number."""

    kind: str = "log"
    line: int = 0
    text: str = ""
    stream: str = "stderr"  # stderr | stdout | log (the engine's log callback) | file
    level: str | None = None  # debug | info | warn | error (log callback lines)


@dataclass(slots=True)
class IncidentEvent(LiveEvent):
    """Something the tracer itself observed (not a log line): the context filled, decode failed,
    the process died, the output started looping. `event` is a doctor.core.facts.Event kind."""

    kind: str = "incident"
    event: str = ""
    text: str = ""
    phase: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class FactsEvent(LiveEvent):
    """Facts read by a probe or a metrics scrape: {name: {"value", "unit", "source"}} (Fact JSON)."""

    kind: str = "facts"
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PerfEvent(LiveEvent):
    """llama.cpp's own performance counters (llama_perf_context) at the end of the run."""

    kind: str = "perf"
    load_ms: float | None = None
    prefill_ms: float | None = None
    prompt_tokens: int | None = None
    decode_ms: float | None = None
    decode_tokens: int | None = None
    graphs_reused: int | None = None
    tracer_ms: float | None = None  # time the tracer itself spent between decode steps, in the engine process


@dataclass(slots=True)
class FindingEvent(LiveEvent):
    """A finding that fired, changed or resolved since the last evaluation (the finding's JSON).

    "updated": the same finding with a new message or confidence (a loop that grew, a median that
    moved); announced at most every couple of seconds, and once more at the end if it changed."""

    kind: str = "finding"
    state: str = "fired"  # fired | updated | resolved
    finding: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class NoticeEvent(LiveEvent):
    """Something about the input itself, not the engine: a followed log was truncated or rotated.
    `session` "truncated" / "rotated" begins a new engine session whose lines count from 1 again."""

    kind: str = "notice"
    text: str = ""
    session: str | None = None  # truncated | rotated: a new session begins here


@dataclass(slots=True)
class EndEvent(LiveEvent):
    """The run ended: how, and the final report's JSON."""

    kind: str = "end"
    reason: str = "finished"  # finished | crashed | interrupted | timeout | exited | error
    exit_status: int | None = None
    report: dict[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None  # stop | length | error | interrupted (embedded runs)
    error_lines: list[str] = field(default_factory=list)  # the engine's last error lines (crash)


EVENT_TYPES: dict[str, type[LiveEvent]] = {
    cls().kind: cls
    for cls in (SettingsEvent, PhaseEvent, StepEvent, SampleEvent, LogEvent, IncidentEvent, FactsEvent,
                PerfEvent, FindingEvent, NoticeEvent, EndEvent)
}


def event_from_json(data: dict[str, Any]) -> LiveEvent | None:
    """Read one event back from its JSON; None for an unknown kind. Fields of the wrong type are
    dropped to their defaults rather than trusted."""
    cls = EVENT_TYPES.get(str(data.get("kind", "")))
    if cls is None:
        return None
    event = cls()
    for f in fields(cls):
        if f.name == "kind" or f.name not in data:
            continue
        value = data[f.name]
        if _fits(getattr(event, f.name), f.type, value):
            setattr(event, f.name, value)
    return event


def _fits(default: Any, annotation: Any, value: Any) -> bool:
    text = str(annotation)
    if value is None:
        return "None" in text
    if isinstance(value, bool):
        return "bool" in text
    if "dict" in text:
        return isinstance(value, dict)
    if "list" in text:
        return isinstance(value, list)
    if "float" in text:  # finite, within 64 bits: a recording is outside input (see Facts.set)
        return isinstance(value, int | float) and abs(value) <= 1 << 64  # False for inf and NaN too
    if "int" in text:
        return isinstance(value, int) and abs(value) <= 1 << 64
    if "str" in text:
        return isinstance(value, str)
    return isinstance(value, type(default))

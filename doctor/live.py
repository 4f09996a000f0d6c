"""Live events: what `watch` emits while a run goes on, and what the TUI and `--format ndjson` show.

A source (the embedded runner, a followed log, a wrapped command) produces these in order; the
watch command turns them into NDJSON lines or hands them to the TUI's watch screen. Each event is a
small dataclass with `to_json()`; `kind` says which.

Pure data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(slots=True)
class LiveEvent:
    kind: str = "event"
    t_ms: float = 0.0  # milliseconds since the watch started

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class SettingsEvent(LiveEvent):
    """The settings in force (model, n_ctx, threads, sampling...), once at the start."""

    kind: str = "settings"
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PhaseEvent(LiveEvent):
    """A phase that finished: load, warmup, prefill."""

    kind: str = "phase"
    phase: str = ""
    ms: float = 0.0
    tokens: int | None = None


@dataclass(slots=True)
class StepEvent(LiveEvent):
    """One decode step: its time, the token, KV cells used out of n_ctx, memory sampled."""

    kind: str = "step"
    step: int = 0
    ms: float = 0.0
    token: str = ""
    kv_used: int | None = None
    n_ctx: int | None = None
    rss_bytes: int | None = None
    vram_bytes: int | None = None


@dataclass(slots=True)
class SampleEvent(LiveEvent):
    """A periodic resource sample of a followed or wrapped process (CPU %, RSS, VRAM)."""

    kind: str = "sample"
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    vram_bytes: int | None = None
    load_1m: float | None = None


@dataclass(slots=True)
class LogEvent(LiveEvent):
    """A line of engine output (already made inert), with its line number."""

    kind: str = "log"
    line: int = 0
    text: str = ""
    stream: str = "stderr"


@dataclass(slots=True)
class FindingEvent(LiveEvent):
    """A finding that fired or resolved since the last evaluation (the finding's JSON)."""

    kind: str = "finding"
    state: str = "fired"  # fired | resolved
    finding: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class EndEvent(LiveEvent):
    """The run ended: how, and the final report's JSON."""

    kind: str = "end"
    reason: str = "finished"  # finished | crashed | interrupted | timeout | exited
    exit_status: int | None = None
    report: dict[str, Any] = field(default_factory=dict)

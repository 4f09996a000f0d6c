"""What the watch screen knows about the run so far, built from LiveEvents in order.

`WatchState.apply(event)` folds one event in; the screen reads the figures (load and prefill
times, decode steps and their spikes, tokens/s, KV fill, memory), the findings with their state
(fired or resolved, and when), the generated text and where it loops. The spikes, the steady median
and the spike bar are taken from the StepEvents: the trace builder (doctor/sources/live/trace.py)
marks them there with the rule that counts `run.decode_spikes`, so the screen shows what the rule
judges and judges nothing itself.

Pure: no clock, no Textual; time comes from the events' `t_ms`.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from doctor.core.events import (
    EndEvent,
    FactsEvent,
    FindingEvent,
    IncidentEvent,
    LiveEvent,
    LogEvent,
    NoticeEvent,
    PhaseEvent,
    SampleEvent,
    SettingsEvent,
    StepEvent,
)
from doctor.core.repetition import find_loop, tokens_of
from doctor.core.report import Finding, Report
from doctor.core.sanitize import inert

MAX_STEPS = 200_000
MAX_TEXT = 64 << 10
RATE_WINDOW = 32
LOG_KEPT = 500
LOOP_EVERY = 16  # tokens between looks for a loop in the output
MAX_INCIDENTS = 200


@dataclass(slots=True)
class FindingState:
    finding: Finding
    state: str  # fired | resolved
    fired_ms: float
    resolved_ms: float | None = None


@dataclass(slots=True)
class WatchState:
    settings: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)  # load / warmup / prefill → ms
    prefill_tokens: int | None = None
    steps: list[float] = field(default_factory=list)
    step_count: int = 0
    text_parts: list[str] = field(default_factory=list)
    text_len: int = 0
    kv_used: int | None = None
    n_ctx: int | None = None
    rss: int | None = None
    rss_peak: int | None = None
    vram: int | None = None
    vram_peak: int | None = None
    cpu_percent: float | None = None
    findings: dict[str, FindingState] = field(default_factory=dict)
    logs: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=LOG_KEPT))
    incidents: list[tuple[float, str, str]] = field(default_factory=list)  # (t_ms, kind, text)
    facts: dict[str, Any] = field(default_factory=dict)  # probe facts (FactsEvent): name → value
    end: EndEvent | None = None
    t_ms: float = 0.0
    events: int = 0
    _spikes: set[int] = field(default_factory=set)
    p50_ms: float | None = None  # the steady median, as the trace builder judged it
    spike_ms: float | None = None  # the bar above which a steady step is a spike
    _loop: tuple[str, list[tuple[int, int]]] | None = None
    _loop_at: int = -1

    # -- folding events ----------------------------------------------------------------------
    def apply(self, event: LiveEvent) -> str:
        """Fold in one event; returns its kind (what changed)."""
        self.events += 1
        if isinstance(event.t_ms, int | float):
            self.t_ms = max(self.t_ms, float(event.t_ms))
        if isinstance(event, SettingsEvent):
            self.settings.update(event.settings)
            n_ctx = event.settings.get("n_ctx")
            if isinstance(n_ctx, int) and self.n_ctx is None:
                self.n_ctx = n_ctx
        elif isinstance(event, PhaseEvent):
            self._phase(event)
        elif isinstance(event, StepEvent):
            self._step(event)
        elif isinstance(event, SampleEvent):
            self.cpu_percent = event.cpu_percent
            self._memory(event.rss_bytes, event.vram_bytes)
        elif isinstance(event, LogEvent):
            self.logs.append((event.line, inert(event.text, 500)))
        elif isinstance(event, FindingEvent):
            self._finding(event)
        elif isinstance(event, IncidentEvent):
            if event.event == "triage" and event.data.get("restart") is True:
                self._restart()
            if len(self.incidents) < MAX_INCIDENTS:
                self.incidents.append((event.t_ms, event.event, inert(event.text, 300)))
        elif isinstance(event, FactsEvent):
            for name, raw in event.facts.items():
                if isinstance(raw, dict) and raw.get("value") is not None:
                    self.facts[str(name)] = raw["value"]
        elif isinstance(event, NoticeEvent):  # a followed log truncated or rotated: shown with the incidents
            if len(self.incidents) < MAX_INCIDENTS:
                self.incidents.append((event.t_ms, "notice", inert(event.text, 300)))
        elif isinstance(event, EndEvent):
            self.end = event
        return event.kind

    def _restart(self) -> None:
        """Crash triage found a setting that works and the run starts again with it: the figures
        start afresh (settings, findings, incidents and probe facts stay)."""
        self.phases.clear()
        self.prefill_tokens = None
        self.steps.clear()
        self.step_count = 0
        self.text_parts, self.text_len = [], 0
        self.kv_used = None
        self._spikes, self.p50_ms, self.spike_ms, self._loop, self._loop_at = set(), None, None, None, -1

    def _phase(self, event: PhaseEvent) -> None:
        self.phases[event.phase] = float(event.ms)
        if event.phase == "prefill":
            if event.tokens is not None:
                self.prefill_tokens = event.tokens
            self._append_text(event.token)
        if event.kv_used is not None:
            self.kv_used = event.kv_used

    def _append_text(self, token: str) -> None:
        if not token:
            return
        self.text_parts.append(token)
        self.text_len += len(token)
        if self.text_len > 2 * MAX_TEXT:
            text = self.text[-MAX_TEXT:]
            self.text_parts, self.text_len = [text], len(text)
            self._loop_at = -1

    def _step(self, event: StepEvent) -> None:
        self.step_count += 1
        if len(self.steps) < MAX_STEPS:
            self.steps.append(float(event.ms))
        self.p50_ms, self.spike_ms = event.p50_ms, event.spike_ms
        self._spikes.difference_update(_step_numbers(event.spikes_removed))
        self._spikes.update(_step_numbers(event.spikes_added))
        self._append_text(event.token)
        if event.kv_used is not None:
            self.kv_used = event.kv_used
        if event.n_ctx is not None:
            self.n_ctx = event.n_ctx
        self._memory(event.rss_bytes, event.vram_bytes)

    def _memory(self, rss: int | None, vram: int | None) -> None:
        if rss is not None:
            self.rss = rss
            self.rss_peak = max(self.rss_peak or 0, rss)
        if vram is not None:
            self.vram = vram
            self.vram_peak = max(self.vram_peak or 0, vram)

    def _finding(self, event: FindingEvent) -> None:
        finding = Finding.from_json(event.finding)
        key = finding.key  # the same rule in a later engine session is another finding
        current = self.findings.get(key)
        if event.state == "resolved":
            if current is not None:
                current.state = "resolved"
                current.resolved_ms = event.t_ms
            else:
                self.findings[key] = FindingState(finding, "resolved", event.t_ms, event.t_ms)
        else:
            self.findings[key] = FindingState(finding, "fired", event.t_ms)

    # -- figures -----------------------------------------------------------------------------
    @property
    def text(self) -> str:
        if len(self.text_parts) > 1:
            self.text_parts = ["".join(self.text_parts)]
        return self.text_parts[0] if self.text_parts else ""

    @property
    def spikes(self) -> set[int]:
        return set(self._spikes)

    @property
    def median_ms(self) -> float | None:
        return self.p50_ms

    def tokens_per_s(self, window: int = RATE_WINDOW) -> float | None:
        recent = self.steps[-window:]
        total = sum(recent)
        return len(recent) / (total / 1000.0) if recent and total > 0 else None

    def overall_tokens_per_s(self) -> float | None:
        total = sum(self.steps)
        return len(self.steps) / (total / 1000.0) if self.steps and total > 0 else None

    def prefill_tps(self) -> float | None:
        ms = self.phases.get("prefill")
        if not ms or not self.prefill_tokens:
            return None
        return self.prefill_tokens / (ms / 1000.0)

    def kv_fill(self) -> float | None:
        if self.kv_used is None or not self.n_ctx:
            return None
        return min(1.0, self.kv_used / self.n_ctx)

    def active_findings(self) -> list[FindingState]:
        order = {"error": 0, "warning": 1, "info": 2}
        return sorted(self.findings.values(),
                      key=lambda s: (s.state != "fired", order.get(s.finding.severity, 3), s.fired_ms))

    def worst_active(self) -> FindingState | None:
        active = [s for s in self.active_findings() if s.state == "fired"]
        return active[0] if active else None

    def final_report(self) -> Report | None:
        if self.end is None or not self.end.report:
            return None
        return Report.from_json(self.end.report)

    def loop(self) -> tuple[str, list[tuple[int, int]]] | None:
        """The looping span of the output and where its copies are (character ranges), if any."""
        tokens = self.step_count
        if self._loop_at < 0 or tokens - self._loop_at >= LOOP_EVERY or self.end is not None:
            self._loop = loop_ranges(self.text)
            self._loop_at = tokens
        return self._loop


def _step_numbers(values: list[int]) -> list[int]:
    """Step numbers from an event (a recording is outside input: anything else is left out)."""
    return [n for n in values if isinstance(n, int) and not isinstance(n, bool)]


def loop_ranges(text: str) -> tuple[str, list[tuple[int, int]]] | None:
    """Find the loop (doctor.core.repetition) and the stretches of `text` its copies cover.

    Copies are matched with any whitespace between tokens, overlapping ones included (an n-gram
    loop repeats with a shift), and copies that touch are merged, so a loop shows as one stretch.
    """
    found = find_loop(text)
    if found is None:
        return None
    toks = tokens_of(found.span)
    if not toks:
        return None
    pattern = re.compile("(?=(" + r"\s*".join(re.escape(t) for t in toks) + "))")
    copies = [(m.start(), m.start() + len(m.group(1))) for m in pattern.finditer(text) if m.group(1)]
    if len(copies) < 2:
        return None
    merged: list[tuple[int, int]] = []
    for start, end in copies:
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return found.span, merged

"""One watch session: every live event goes through here, in order, exactly once.

`emit(event)` stamps the time, adds the event to the trace builder (doctor/sources/live/trace.py: the
one place a step becomes facts; it marks a decode step with the spikes as they stand), appends it to
the recording (doctor/sources/live/recording.py, `--record`: NDJSON after a header line, flushed after
every batch so a crash of the engine — or of llm-doctor — leaves everything up to that point on
disk), hands it to the consumer (`on_event`: the ndjson printer, the text ticker, the TUI) and keeps
it if asked. `evaluate()` re-runs the rules on the facts so far (at most every `eval_interval_s`, or
at once on phases and incidents) and emits the findings that fired or resolved. `finish()` writes
the end, with the final report. The embedded runner, the log follower and the command wrapper all
use it, which is why a recording replays to the same findings as the live run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from doctor.core.events import (
    EndEvent,
    FactsEvent,
    FindingEvent,
    IncidentEvent,
    LiveEvent,
    LogEvent,
    PhaseEvent,
    SettingsEvent,
)
from doctor.core.facts import Facts
from doctor.core.lines import block_lines
from doctor.core.report import Report
from doctor.core.sanitize import strip_controls
from doctor.sources.live.recording import Recorder, header
from doctor.sources.live.trace import TraceBuilder
from doctor.sources.probes.cpustat import CpuWindow, cores_facts

# with line_events="tail", a consumer that shows log lines (the TUI's log pane) gets at most this many of
# each batch, the newest: a flood of output cannot queue up behind a screen that shows a few dozen
TAIL_LINES_PER_BATCH = 200
EVAL_INTERVAL_S = 1.0  # a rules pass costs the watcher ~10 ms of CPU; the engine may need every core


class Judge(Protocol):
    """What a session needs to re-judge a run as it goes: the command hands one in (doctor/judge/live_judge.py's
    LiveJudge), so this source observes and never runs the rules itself."""

    def update(self, facts: Facts, t_ms: float = 0.0, errors: list[str] | None = None,
               final: bool = False) -> tuple[Report, list[FindingEvent]]: ...


class TraceSession:
    def __init__(self, name: str, *, source: str, settings: dict[str, Any] | None = None,
                 on_event: Callable[[LiveEvent], None] | None = None, record: str | None = None,
                 judge: Judge | None = None, keep_events: bool = True, t0: float | None = None,
                 eval_interval_s: float = EVAL_INTERVAL_S, redactor: Any = None, line_events: str = "all",
                 cores: CpuWindow | None = None, machine: Facts | None = None) -> None:
        self.t0 = time.monotonic() if t0 is None else t0
        self.builder = TraceBuilder(name)
        self.on_event = on_event
        # which log lines of a followed file or wrapped command reach on_event as LogEvents: "all"
        # (the ndjson stream), "tail" (the newest of each batch: the TUI) or "none" (the ticker and the
        # final-report formats ignore them); the parsers, the recording and kept events get every line
        self.line_events = line_events
        self.judge = judge
        self.keep_events = keep_events
        self.events: list[LiveEvent] = []
        self.redactor = redactor  # learns the prompt and output as the run goes, to redact quotes of them
        self.recorder = Recorder(record, header(source, settings), redactor) if record else None
        self.eval_interval_s = eval_interval_s
        self.last_eval = 0.0
        self.dirty = False
        self.report: Report | None = None
        self.consumer_error: str | None = None
        # a /proc/stat window started with the run (scan has one around its trace): at the end, the
        # other processes' share of the cores becomes facts, recorded like any other (a replay agrees)
        self.cores = cores
        # this machine's kept figures (the read bandwidth an earlier scan measured): they say something of
        # the run only where it ran here while traced, so they go out with the cores' share, not alone
        self.machine = machine

    def now_ms(self) -> float:
        return round((time.monotonic() - self.t0) * 1000.0, 3)

    def emit(self, event: LiveEvent, *, feed: bool = True) -> None:
        if not event.t_ms:
            event.t_ms = self.now_ms()
        if feed:
            self.builder.add(event)
            self.dirty = True
        if self.recorder is not None:
            self.recorder.write(event)
        if self.keep_events:
            self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)
        if isinstance(event, PhaseEvent | IncidentEvent | SettingsEvent):
            self.evaluate(force=True)

    def emit_log_block(self, block: bytes, first_line: int, stream: str) -> int:
        """Complete lines (a block of LF-ended lines, doctor/core/lines.py LineSplitter) read from
        a followed file or a wrapped command, numbered from `first_line`; returns how many. The parsers
        get the block in one piece; LogEvents are built only for whoever needs each line (the
        recording, kept events, a consumer per `line_events`)."""
        count = block.count(b"\n")
        if not count:
            return 0
        self.builder.feed_log_block(block, count)
        self.dirty = True
        show_from = count  # the first line on_event gets
        if self.on_event is not None and self.line_events == "all":
            show_from = 0
        elif self.on_event is not None and self.line_events == "tail":
            show_from = max(0, count - TAIL_LINES_PER_BATCH)
        first = 0 if self.recorder is not None or self.keep_events else show_from
        if first >= count:
            return count
        t_ms = self.now_ms()
        for i, raw in enumerate(block_lines(block, last=count - first), start=first):
            event = LogEvent(t_ms=t_ms, line=first_line + i, text=strip_controls(raw.decode("utf-8", "replace")),
                             stream=stream)
            if self.recorder is not None:
                self.recorder.write(event)
            if self.keep_events:
                self.events.append(event)
            if self.on_event is not None and i >= show_from:
                self.on_event(event)
        return count

    def log_read(self, count: int, first_line: int, tail: bytes = b"", stream: str = "file") -> None:
        """`count` lines from `first_line` on that the analyzer read itself (a followed file read on with
        workers: doctor/sources/live/follow/catchup.py, only where no one needs each line); a consumer of the
        newest lines (`line_events` "tail") gets the last of them, from `tail` (whole lines, the last of them)."""
        if not count:
            return
        self.builder.log_read(count)
        self.dirty = True
        if not tail or self.on_event is None or self.line_events != "tail":
            return
        lines = block_lines(tail, last=min(count, TAIL_LINES_PER_BATCH))
        t_ms = self.now_ms()
        last = first_line + count - 1
        for i, raw in enumerate(lines):
            self.on_event(LogEvent(t_ms=t_ms, line=last - len(lines) + 1 + i,
                                   text=strip_controls(raw.decode("utf-8", "replace")), stream=stream))

    def flush(self) -> None:
        if self.recorder is not None:
            self.recorder.flush()

    def snapshot(self) -> Facts:
        return self.builder.snapshot()

    def evaluate(self, force: bool = False, errors: list[str] | None = None) -> None:
        """Re-judge the facts so far; emit FindingEvents for what changed."""
        if self.judge is None or not self.dirty:
            return
        now = time.monotonic()
        if not force and now - self.last_eval < self.eval_interval_s:
            return
        self.last_eval = now
        self.dirty = False
        self.report, changes = self.judge.update(self.snapshot(), self.now_ms(), errors)
        if self.redactor is not None:
            self.redactor.learn(self.report.facts)
        for change in changes:
            self.emit(change, feed=False)

    def finish(self, end: EndEvent, errors: list[str] | None = None) -> EndEvent:
        """Close the run: feed the end, judge the final facts, emit the changes, then the end itself."""
        if not end.t_ms:
            end.t_ms = self.now_ms()
        if self.cores is not None:
            shared = cores_facts(self.cores.stop())
            self.cores = None
            if self.machine is not None:
                shared.merge(self.machine)
            if len(shared):
                self.emit(FactsEvent(t_ms=end.t_ms, facts=shared.to_json()["facts"]))
        self.builder.add(end)
        self.dirty = True
        if self.recording_problem:  # disk full mid-run: the report says so (the recording cannot)
            errors = [*(errors or []), self.recording_problem]
        if self.judge is not None:
            self.report, changes = self.judge.update(self.snapshot(), end.t_ms, errors, final=True)
            if self.redactor is not None:
                self.redactor.learn(self.report.facts)
            for change in changes:
                self.emit(change, feed=False)
            end.report = self.report.to_json()
        self.emit(end, feed=False)
        self.flush()
        if self.recorder is not None:
            self.recorder.close()
        return end

    @property
    def recording_problem(self) -> str | None:
        return self.recorder.failed if self.recorder is not None else None


def finding_events(events: list[LiveEvent]) -> list[FindingEvent]:
    return [e for e in events if isinstance(e, FindingEvent)]

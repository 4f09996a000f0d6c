"""The live text view of `watch` without the TUI: one compact line per phase, a decode status line
every few steps, findings as they fire or resolve, notes about the source. A view: it renders the
LiveEvents the sources emit and the judge's FindingEvents; it never judges.

It writes to stderr, so stdout keeps only the final report (`watch > report.txt` still shows the
run live, and `--format json` stays clean). Outside text is made inert before it is written.
"""

from __future__ import annotations

import sys
from typing import TextIO

from doctor.core.events import (
    EndEvent,
    FindingEvent,
    IncidentEvent,
    LiveEvent,
    PhaseEvent,
    SampleEvent,
    SettingsEvent,
    StepEvent,
)
from doctor.core.format import human_bytes, human_ms
from doctor.core.sanitize import inert
from doctor.core.stats import percentile
from doctor.views.render.style import Style

STATUS_EVERY_STEPS = 32
STATUS_EVERY_MS = 2000.0
WINDOW = 64
OUTPUT_SHOWN = 2000  # characters of the generated text the end of a run shows


class Ticker:
    def __init__(self, style: Style, out: TextIO | None = None, show_output: bool = True) -> None:
        self.style = style
        self.show_output = show_output  # the generated text at the end (not with --redact)
        self.output: list[str] = []  # the generated tokens, in order
        self.passed_through = False  # a wrapped command's output already went to the terminal
        self.out = out if out is not None else sys.stderr
        self.steps = 0
        self.window: list[float] = []
        self.last_status_step = 0
        self.last_status_ms = 0.0
        self.kv: int | None = None
        self.n_ctx: int | None = None
        self.rss: int | None = None
        self.decode_ms_total = 0.0
        self.prefill_ms: float | None = None

    def _write(self, text: str) -> None:
        try:
            self.out.write(text + "\n")
            self.out.flush()
        except (OSError, ValueError):
            pass

    def note(self, text: str) -> None:
        self._write(self.style.paint("dim", f"  · {inert(text, 300)}"))

    def __call__(self, event: LiveEvent) -> None:
        if isinstance(event, StepEvent):
            self._step(event)
        elif isinstance(event, SampleEvent):
            self.rss = event.rss_bytes if event.rss_bytes is not None else self.rss
        elif isinstance(event, PhaseEvent):
            self._phase(event)
        elif isinstance(event, SettingsEvent):
            self._settings(event)
        elif isinstance(event, FindingEvent):
            self._finding(event)
        elif isinstance(event, IncidentEvent):
            self._write(self.style.paint("warning", f"  {self.style.mark('warning')} {inert(event.text, 400)}"))
        elif isinstance(event, EndEvent):
            self._end(event)

    def _settings(self, event: SettingsEvent) -> None:
        s = event.settings
        if event.stage == "requested":
            model = str(s.get("model_path", "")).rsplit("/", 1)[-1]
            self._write(self.style.paint("bold", f"watch · {inert(model, 120)}")
                        + f" · n_ctx {s.get('n_ctx')} · max {s.get('max_tokens')} tokens"
                        + f" · temperature {s.get('temperature')} · repeat_penalty {s.get('repeat_penalty')}")
        elif event.stage == "engine":
            self.n_ctx = s.get("n_ctx") if isinstance(s.get("n_ctx"), int) else self.n_ctx
            effective, asked = s.get("max_tokens_effective"), s.get("max_tokens")
            cut = isinstance(effective, int) and isinstance(asked, int) and effective < asked
            self._write(f"  engine    {inert(str(s.get('engine_version', '')), 60)} · n_ctx {s.get('n_ctx')}"
                        f" · threads {s.get('n_threads')}/{s.get('n_threads_batch')}"
                        f" · prompt {s.get('prompt_tokens')} tokens"
                        + (f" · max_tokens cut to {effective}" if cut else ""))
        elif event.stage == "source":
            if "log" in s:
                self._write(self.style.paint("bold", f"watch · following {inert(str(s['log']), 200)}"))
            elif "command" in s:
                self.passed_through = True
                cmd = " ".join(str(a) for a in s.get("command", []))
                self._write(self.style.paint("bold", f"watch · {inert(cmd, 200)} (pid {s.get('pid')})"))

    def _phase(self, event: PhaseEvent) -> None:
        label = {"load": "load", "warmup": "warm-up", "prefill": "prefill"}.get(event.phase, event.phase)
        extra = ""
        if event.phase == "prefill" and event.token:
            self.output.append(event.token)  # the first generated token comes with the prefill
        if event.phase == "prefill" and event.tokens:
            rate = event.tokens / (event.ms / 1000) if event.ms > 0 else 0
            extra = f" · {event.tokens} tokens ({rate:.0f} tokens/s, first token included)"
            self.kv = event.kv_used
            self.last_status_ms = event.t_ms
            self.prefill_ms = event.ms
        elif event.phase == "warmup":
            extra = " · first call, not counted in prefill"
        self._write(f"  {label:<9} {human_ms(event.ms)}{extra}")

    def _step(self, event: StepEvent) -> None:
        self.steps += 1
        if event.token:
            self.output.append(event.token)
        self.decode_ms_total += event.ms
        self.window.append(event.ms)
        if len(self.window) > WINDOW:
            del self.window[: len(self.window) - WINDOW]
        self.kv = event.kv_used if event.kv_used is not None else self.kv
        self.n_ctx = event.n_ctx or self.n_ctx
        self.rss = event.rss_bytes if event.rss_bytes is not None else self.rss
        due_steps = self.steps - self.last_status_step >= STATUS_EVERY_STEPS
        if due_steps or event.t_ms - self.last_status_ms >= STATUS_EVERY_MS:
            self._status(event.t_ms)

    def _status(self, t_ms: float) -> None:
        if not self.window:
            return
        self.last_status_step = self.steps
        self.last_status_ms = t_ms
        p50 = percentile(self.window, 50)
        worst = max(self.window)
        tps = self.steps / (self.decode_ms_total / 1000) if self.decode_ms_total > 0 else 0.0
        parts = [f"  decode    {self.steps} steps", f"{human_ms(p50)}/token (p50 of last {len(self.window)})",
                 f"slowest {human_ms(worst)}", f"{tps:.1f} tokens/s"]
        if self.kv is not None and self.n_ctx:
            parts.append(f"KV {self.kv}/{self.n_ctx} ({self.kv / self.n_ctx:.0%})")
        if self.rss is not None:
            parts.append(f"RSS {human_bytes(self.rss)}")
        self._write(" · ".join(parts))

    def _finding(self, event: FindingEvent) -> None:
        f = event.finding
        fid = inert(str(f.get("id", "?")), 20)
        title = inert(str(f.get("title", "")), 200)
        if event.state == "updated":
            return  # the final report has the final word; the ticker announces changes of state only
        if event.state == "resolved":
            self._write(self.style.paint("ok", f"  [{self.style.mark('ok')}] {fid} resolved: {title}"))
            return
        severity = str(f.get("severity", "info"))
        kind = {"error": "error", "warning": "warning"}.get(severity, "info")
        mark = self.style.mark(kind)
        message = inert(str(f.get("message", "")), 300)
        self._write(self.style.paint(kind, f"  [{mark}] {fid} {title}") + (f": {message}" if message else ""))

    def _end(self, event: EndEvent) -> None:
        if self.steps and self.steps != self.last_status_step:
            self._status(event.t_ms)
        finish = event.finish_reason
        how = event.reason + (f" ({finish})" if finish and finish != event.reason else "")
        status = f", exit status {event.exit_status}" if event.exit_status not in (None, 0) else ""
        share = ""
        if self.prefill_ms is not None and self.prefill_ms + self.decode_ms_total > 0:
            part = self.prefill_ms / (self.prefill_ms + self.decode_ms_total)
            share = f" · prefill {part:.0%} / decode {1 - part:.0%} of the generation time"
        self._write(f"  end       {how}{status} after {human_ms(event.t_ms)}{share}")
        if event.reason in ("crashed", "exited", "error") and event.error_lines and not self.passed_through:
            for line in event.error_lines[-6:]:
                self._write(self.style.paint("error", f"    {inert(line, 300)}"))
        self._output()

    def _output(self) -> None:
        """The text the model generated (the embedded engine), its end when it is long."""
        if not self.output:
            return
        text = "".join(self.output)
        if not self.show_output:
            self._write(f"  output    {len(self.output)} tokens, {len(text)} characters (not shown: --redact)")
            return
        shown = text if len(text) <= OUTPUT_SHOWN else "…" + text[-OUTPUT_SHOWN:]
        more = "" if shown is text else f"; the last {OUTPUT_SHOWN} shown"
        self._write(f"  output    {len(self.output)} tokens, {len(text)} characters{more} (every token: "
                    "watch --record FILE)")
        for line in shown.strip("\n").splitlines() or [""]:
            self._write(self.style.paint("dim", "    │ ") + inert(line))

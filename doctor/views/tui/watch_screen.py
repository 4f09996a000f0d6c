"""The watch screen: the run as it happens. Load and prefill as bars, a sparkline of decode step
times with spikes marked, tokens/s, KV fill toward n_ctx, RSS and VRAM gauges, findings that fire
and resolve, and the generated text with its looping span highlighted. `p` pauses and resumes,
`s` stops the run and opens the final report, `r` opens it once the run has ended.

Events come from any iterable of LiveEvents (the embedded engine, a followed log, a recording).
A daemon thread drains the iterable into a queue, and a timer on the UI side folds what arrived
into `WatchState` ten times a second, so a fast run cannot flood the screen and a blocked source
cannot freeze it or hold the app open at exit.

Settings read from the SettingsEvent (any may be missing; it then shows as `?`): model or
model_path, engine, engine_version, n_ctx, n_threads, n_gpu_layers, ram_total, vram_total.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePath
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from doctor.core.events import FindingEvent, LiveEvent
from doctor.core.facts import Facts
from doctor.core.format import human_bytes, human_ms
from doctor.core.report import Report
from doctor.core.sanitize import inert
from doctor.views.tui.charts import bar, sparkline
from doctor.views.tui.finding_detail import MARK_STYLE
from doctor.views.tui.messages import FindingChanged, RunEnded, WatchPaused
from doctor.views.tui.view import MARKS, machine_text
from doctor.views.tui.watch_state import WatchState

TICK = 0.1
LABEL = 9
MAX_BAR = 100
OUTPUT_SHOWN = 16 << 10  # characters of generated text kept on screen


@dataclass(slots=True)
class WatchOutcome:
    """What `run_watch_app` returns: the final report (if the run sent one) and how it ended."""

    report: Report | None
    end_reason: str | None  # EndEvent.reason, or None when the source ran dry without one
    stopped: bool  # the user pressed stop or quit before the run ended on its own
    error: str | None = None  # the event source raised this


class Timeline(Widget):
    """Load, prefill and decode: bars on one time scale, then the decode step sparkline."""

    DEFAULT_CSS = "Timeline { height: 5; }"

    def __init__(self, state: WatchState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state

    def render(self) -> Content:
        return timeline_content(self.state, max(20, self.size.width))


def timeline_content(state: WatchState, width: int) -> Content:
    decode_total = sum(state.steps)
    load = state.phases.get("load")
    prefill = state.phases.get("prefill")
    scale = max([v for v in (load, prefill, decode_total) if v] or [1.0])
    figure_w = 30
    bar_w = max(8, min(MAX_BAR, width - LABEL - figure_w - 1))
    lines: list[Content] = []
    for name, ms, extra in (("load", load, ""), ("prefill", prefill, _prefill_extra(state))):
        if ms is None:
            lines.append(Content.assemble((name.ljust(LABEL), "bold"), ("waiting…", "$text-muted")))
        else:
            lines.append(Content.assemble((name.ljust(LABEL), "bold"), (bar(ms / scale, bar_w), "$accent"),
                                          f" {human_ms(ms):>8}{extra}"))
    cols = sparkline(state.steps, bar_w, state.spikes, log_scale=True)
    if cols:
        spark = Content.assemble(*[(c.char, "bold $error" if c.spike else "$success") for c in cols])
        median = state.median_ms
        peak = max(state.steps)
        figures = f" p50 {human_ms(median) if median else '?'} · max {human_ms(peak)}"
        lines.append(Content.assemble(("decode".ljust(LABEL), "bold"), spark, " " * (bar_w - len(cols)), figures))
        marks = "".join("^" if c.spike else " " for c in cols).ljust(bar_w)
        n_spikes = len(state.spikes)
        over = f" (>{state.spike_ms / median:.3g}× p50)" if state.spike_ms and median else ""
        note = f" {n_spikes} spike{'s' if n_spikes != 1 else ''}{over}" if n_spikes else " no spikes"
        lines.append(Content.assemble(" " * LABEL, (marks, "bold $error"), (note, "$text-muted")))
    else:
        lines.append(Content.assemble(("decode".ljust(LABEL), "bold"), ("no steps yet", "$text-muted")))
        lines.append(Content(""))
    now, overall = state.tokens_per_s(), state.overall_tokens_per_s()
    rate = (f"{now:.1f} tok/s now · {overall:.1f} overall" if now and overall else "—")
    lines.append(Content.assemble(("rate".ljust(LABEL), "bold"), rate, (f" · {state.step_count} steps", "$text-muted")))
    return Content("\n").join(lines)


def _prefill_extra(state: WatchState) -> str:
    tps = state.prefill_tps()
    if state.prefill_tokens is None:
        return ""
    return f" · {state.prefill_tokens} tok" + (f" · {tps:.0f} tok/s" if tps else "")


class Gauges(Widget):
    """KV cells used of n_ctx; resident memory; GPU memory."""

    DEFAULT_CSS = "Gauges { height: 3; }"

    def __init__(self, state: WatchState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state

    def render(self) -> Content:
        return gauges_content(self.state, max(20, self.size.width))


def gauges_content(state: WatchState, width: int) -> Content:
    bar_w = max(8, min(MAX_BAR, width - LABEL - 31))
    lines: list[Content] = []
    fill = state.kv_fill()
    if fill is None:
        lines.append(Content.assemble(("KV".ljust(LABEL), "bold"), ("? (no KV figures yet)", "$text-muted")))
    else:
        style = "$error" if fill >= 0.95 else "$warning" if fill >= 0.8 else "$success"
        lines.append(Content.assemble(("KV".ljust(LABEL), "bold"), (bar(fill, bar_w), style),
                                      f" {state.kv_used}/{state.n_ctx} ({fill * 100:.0f}%)"))
    ram_total = _int(state.settings.get("ram_total")) or _int(state.facts.get("host.ram.total"))
    vram_total = _int(state.settings.get("vram_total")) or _int(state.facts.get("host.gpu[0].vram_total"))
    lines.append(_memory_gauge("RSS", state.rss, state.rss_peak, ram_total, bar_w))
    if state.vram is None and state.facts.get("host.gpu.count") == 0:
        lines.append(Content.assemble(("VRAM".ljust(LABEL), "bold"), ("no GPU", "$text-muted")))
    else:
        lines.append(_memory_gauge("VRAM", state.vram, state.vram_peak, vram_total, bar_w))
    return Content("\n").join(lines)


def _memory_gauge(name: str, used: int | None, peak: int | None, total: int | None, bar_w: int) -> Content:
    if used is None:
        return Content.assemble((name.ljust(LABEL), "bold"), ("? (not sampled)", "$text-muted"))
    text = f" {human_bytes(used)}" + (f" of {human_bytes(total)}" if total else "")
    if peak and peak > used:
        text += f" · peak {human_bytes(peak)}"
    if total:
        fraction = used / total
        style = "$error" if fraction >= 0.95 else "$warning" if fraction >= 0.85 else "$success"
        return Content.assemble((name.ljust(LABEL), "bold"), (bar(fraction, bar_w), style), text)
    return Content.assemble((name.ljust(LABEL), "bold"), text.strip())


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class FindingsFeed(OptionList):
    """Findings as they fire and resolve; enter opens one."""


class OutputPane(VerticalScroll):
    """The generated text, newest at the bottom, the looping span highlighted; until there is any
    (a followed log, a wrapped command, the engine still loading), the newest log lines."""

    def compose(self) -> ComposeResult:
        yield Static(id="output-text")

    def on_mount(self) -> None:
        self.anchor()  # stay at the newest text as it grows, until the user scrolls up

    def show(self, state: WatchState) -> None:
        self.border_title = "Output" if state.text or not state.logs else "Log (newest lines)"
        self.query_one("#output-text", Static).update(output_content(state))


def output_content(state: WatchState, shown: int = OUTPUT_SHOWN) -> Content:
    """The last `shown` characters of the output, loop copies highlighted; the log tail before any."""
    full = state.text
    if not full:
        if state.logs:
            return log_tail_content(state)
        return Content.styled("(no output yet)", "$text-muted")
    cut = max(0, len(full) - shown)
    loop = state.loop()
    ranges = [(max(a, cut) - cut, b - cut) for a, b in loop[1] if b > cut] if loop else []
    text = full[cut:]
    parts: list[str | tuple[str, str]] = [("…", "$text-muted")] if cut else []
    pos = 0
    for start, end in ranges:
        if start < pos:
            continue
        parts.append(inert_text(text[pos:start]))
        parts.append((inert_text(text[start:end]), "reverse $warning"))
        pos = end
    parts.append(inert_text(text[pos:]))
    return Content.assemble(*parts)


def log_tail_content(state: WatchState) -> Content:
    """The newest log lines the state kept (already inert), each with its line number."""
    width = len(str(state.logs[-1][0])) if state.logs else 1
    parts: list[str | tuple[str, str]] = []
    for number, text in state.logs:
        if parts:
            parts.append("\n")
        parts.append((f"{number:>{width}} ", "$text-muted"))
        parts.append(text)
    return Content.assemble(*parts)


def inert_text(text: str) -> str:
    """Output text for display: controls shown as \\xNN, but newlines and tabs kept."""
    return "\n".join(inert(line).expandtabs(4) for line in text.split("\n"))


def engine_label(settings: dict[str, object]) -> str:
    name, version = settings.get("engine"), settings.get("engine_version")
    if version and name and str(version).startswith(str(name)):
        return str(version)
    return " ".join(str(x) for x in (name, version) if x) or "engine ?"


class WatchScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,ctrl+c", "quit_watch", "Quit", key_display="q"),
        Binding("question_mark", "app.help", "Keys"),
        Binding("p", "pause", "Pause"),
        Binding("s", "stop", "Stop"),
        Binding("r", "report", "Report"),
        Binding("f", "focus_findings", "Findings", show=False),
        Binding("t", "app.toggle_theme", "Theme", show=False),
    ]

    def __init__(self, events: Iterable[LiveEvent], *, on_stop: Callable[[], None] | None = None,
                 on_pause: Callable[[bool], None] | None = None, title: str = "watch",
                 redact: Callable[[Report], Report] | None = None) -> None:
        super().__init__()
        self.events = events
        self.redact = redact  # --redact: the report `r` opens (and exports) is redacted
        self.on_stop = on_stop
        self.on_pause = on_pause
        self.title_text = title
        self.state = WatchState()
        self.paused = False
        self.stopping = False
        self.outcome = WatchOutcome(None, None, False)
        self._inbox: deque[LiveEvent] = deque()
        self._pump_done = threading.Event()
        self._pump_error: str | None = None
        self._ended_handled = False
        self._feed_ids: list[str] = []

    # -- layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="watch-header")
        yield Static(id="watch-banner", classes="-ok")
        yield Timeline(self.state, id="timeline")
        yield Gauges(self.state, id="gauges")
        with Horizontal(id="watch-body"):
            yield FindingsFeed(id="feed")
            yield OutputPane(id="output")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(OutputPane).border_title = "Output"
        self._refresh_all()
        self.query_one(FindingsFeed).focus()
        threading.Thread(target=self._pump, name="llm-doctor-watch-events", daemon=True).start()
        self.set_interval(TICK, self.drain)

    # -- the event pump (worker thread) ------------------------------------------------------
    def _pump(self) -> None:
        try:
            for event in self.events:
                self._inbox.append(event)
        except Exception as exc:
            self._pump_error = f"{type(exc).__name__}: {exc}"
        finally:
            self._pump_done.set()

    @property
    def source_done(self) -> bool:
        """The source ran dry and every event it sent has been shown."""
        return self._pump_done.is_set() and not self._inbox and self._ended_handled

    # -- folding events in (UI thread) -------------------------------------------------------
    def drain(self) -> None:
        if self.paused:
            return
        changed = False
        findings_changed = False
        while self._inbox:
            event = self._inbox.popleft()
            self.state.apply(event)
            changed = True
            if isinstance(event, FindingEvent):
                findings_changed = True
                self.post_message(FindingChanged(str(event.finding.get("id", "?")), event.state))
        if changed:
            self._refresh_all(findings_changed)
        if self._pump_done.is_set() and not self._inbox and not self._ended_handled:
            self._ended_handled = True
            self._on_source_end()

    def _on_source_end(self) -> None:
        end = self.state.end
        report = self.state.final_report()
        self.outcome = WatchOutcome(report, end.reason if end else None, self.stopping or self.outcome.stopped,
                                    self._pump_error)
        if self._pump_error:
            self.notify(f"The event source failed: {self._pump_error}", severity="error", markup=False)
        self.post_message(RunEnded(end.reason if end else "source ended", report is not None))
        self._refresh_all()
        if self.stopping and report is not None:
            self.action_report()

    def _refresh_all(self, findings: bool = True) -> None:
        self.query_one("#watch-header", Static).update(self._header())
        banner = self.query_one("#watch-banner", Static)
        kind, content = self._banner()
        banner.set_classes(f"-{kind}")
        banner.update(content)
        self.query_one(Timeline).refresh()
        self.query_one(Gauges).refresh()
        self.query_one(OutputPane).show(self.state)
        if findings:
            self._refresh_feed()

    def _header(self) -> Content:
        s = self.state.settings
        model = s.get("model") or s.get("model_path")
        model_text = PurePath(str(model)).name if model else "model ?"
        engine = engine_label(s)
        bits = [f"{k} {s[k]}" for k in ("n_ctx", "n_threads", "n_gpu_layers") if s.get(k) is not None]
        machine = machine_text(Facts.from_values(self.state.facts), "watch") if self.state.facts else "?"
        return Content.assemble((f"llm-doctor {self.title_text}", "bold"), "  ", (inert(engine, 60), "$accent"),
                                " · ", inert(model_text, 60), (" · " + " · ".join(bits) if bits else "", "$text-muted"),
                                "\n", self._run_state(), ("  machine ", "$text-muted"), inert(machine, 160))

    def _run_state(self) -> Content:
        t = human_ms(self.state.t_ms)
        if self.state.end is not None:
            return Content.styled(f"■ ended ({self.state.end.reason}) at {t}", "bold")
        if self._ended_handled:
            return Content.styled(f"■ source ended at {t}", "bold")
        if self.paused:
            return Content.styled(f"‖ paused at {t}", "bold $warning")
        if self.stopping:
            return Content.styled(f"■ stopping… {t}", "bold $warning")
        return Content.styled(f"● running {t}", "bold $success")

    def _banner(self) -> tuple[str, Content]:
        worst = self.state.worst_active()
        if worst is not None:
            f = worst.finding
            kind = f.severity if f.severity in ("error", "warning") else "info"
            return kind, Content.assemble((f"{MARKS[kind]} {f.id} {inert(f.title)}", "bold"), "\n",
                                          inert(f.message, 300))
        if self.state.end is not None:
            hint = "press r for the report" if self.state.end.report else "the run sent no report"
            return "ok", Content.assemble((f"✓ Run ended ({self.state.end.reason}) with no open finding", "bold"),
                                          "\n", hint)
        return "ok", Content.assemble(("✓ No findings so far", "bold"), "\n",
                                      f"{self.state.events} events · {len(self.state.findings)} resolved or open")

    def _refresh_feed(self) -> None:
        feed = self.query_one(FindingsFeed)
        states = self.state.active_findings()
        highlighted = feed.highlighted_option.id if feed.highlighted_option else None
        options = []
        for st in states:
            f = st.finding
            if st.state == "fired":
                mark = f.severity if f.severity in MARKS else "info"
                prompt = Content.assemble((MARKS[mark], MARK_STYLE[mark]), f" {f.key} {f.slug}",
                                          (f"  {human_ms(st.fired_ms)}", "$text-muted"))
            else:
                prompt = Content.assemble((MARKS["ok"], MARK_STYLE["ok"]), (f" {f.key} {f.slug}", "$text-muted"),
                                          (f"  resolved {human_ms(st.resolved_ms or 0)}", "$text-muted"))
            options.append(Option(prompt, id=f.key))  # the session's number from the second session on
        for t_ms, kind, text in self.state.incidents[-20:]:
            options.append(Option(Content.assemble(("• ", "bold $warning"), (f"{kind} {human_ms(t_ms)}", "$text-muted"),
                                                   (f"  {text}" if text else "", "$text-muted")),
                                  disabled=True))
        self._feed_ids = [st.finding.key for st in states]
        feed.clear_options()
        if options:
            feed.add_options(options)
            if highlighted in self._feed_ids:
                feed.highlighted = self._feed_ids.index(highlighted)
        feed.border_title = f"Findings ({sum(1 for s in states if s.state == 'fired')} open)"

    # -- actions -----------------------------------------------------------------------------
    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_id and event.option_id in self.state.findings:
            from doctor.views.tui.modals import FindingScreen

            st = self.state.findings[event.option_id]
            self.app.push_screen(FindingScreen(st.finding, st.state))

    def action_pause(self) -> None:
        if self.state.end is not None or self._ended_handled:
            self.notify("The run has ended; nothing to pause.")
            return
        self.paused = not self.paused
        if self.on_pause is not None:
            self.on_pause(self.paused)
        if not self.paused:
            self.drain()
        self._refresh_all(findings=False)
        self.post_message(WatchPaused(self.paused))

    def action_stop(self) -> None:
        if self._ended_handled:
            self.action_report()
            return
        self.stopping = True
        self.outcome.stopped = True
        if self.paused:
            self.action_pause()
        if self.on_stop is not None:
            self.on_stop()
        self.notify("Stopping the run; the report opens when it ends.")
        self._refresh_all(findings=False)

    def action_report(self) -> None:
        report = self.state.final_report()
        if report is None:
            self.notify("No report yet: it comes when the run ends (s stops it).", severity="warning")
            return
        from doctor.views.tui.report_screen import ReportScreen

        self.app.push_screen(ReportScreen(report if self.redact is None else self.redact(report), back=True))

    def action_focus_findings(self) -> None:
        self.query_one(FindingsFeed).focus()

    def action_quit_watch(self) -> None:
        if not self._ended_handled:
            self.outcome.stopped = True
            if self.on_stop is not None:
                self.on_stop()
        if self.outcome.report is None:
            self.outcome.report = self.state.final_report()
        self.app.exit()

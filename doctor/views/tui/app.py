"""The Textual app and the three ways the commands open it.

- `run_report_app(report, log_path=None)`: analyze and scan. The report screen; with `log_path`
  (a plain or gzip log, read lazily in a bounded window) the log pane beside the findings.
- `run_paste_app(make_report) -> Report | None`: analyze with no file on a terminal. The paste
  screen; ctrl+r hands the pasted bytes to `make_report` (the command's: `analyze_bytes` +
  `diagnose`) and shows the report. Returns the last report, or None when nothing was diagnosed;
  the command decides the exit code (the TUI renders, it never judges).
- `run_watch_app(events, *, on_stop=None, on_pause=None, title="watch") -> WatchOutcome`: watch.
  `events` is any iterable of `doctor.core.events.LiveEvent` (it is drained in a daemon thread, so it may
  block); `on_stop()` is called when the user stops or quits before the run ends, and should make
  the source finish soon with an EndEvent carrying the final report JSON; `on_pause(paused)` is
  called on `p` (without it, pause only freezes the screen while events queue up). Returns the
  final report (from the EndEvent), how the run ended and whether the user stopped it. A recording
  is replayed with `doctor.views.tui.replay.Replay(path, speed)`, which has `stop` and `pause` to pass;
  a source that calls back (`run_embedded(..., on_event=...)`) goes through
  `doctor.views.tui.event_queue.EventQueue` (its docstring shows the few lines it takes).

Common keys: `?` (or F1) lists the keys of the current screen, `t` switches light and dark,
`q` quits (ctrl+q on the paste screen). NO_COLOR is honoured by Textual; marks stay distinct
(✓ ! ✗ ?) without colour. LLM_DOCTOR_THEME picks the starting theme (`light` or `dark`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.screen import Screen

from doctor.core.events import LiveEvent
from doctor.core.report import Report
from doctor.views.tui.log_source import LogSource, is_plain_log
from doctor.views.tui.watch_screen import WatchOutcome, WatchScreen

THEMES = {"dark": "textual-dark", "light": "textual-light"}


class DoctorApp(App[None]):
    """One app; what it shows first is the screen the entry point gives it."""

    CSS_PATH = "doctor.tcss"
    TITLE = "llm-doctor"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "help", "Keys", show=False),
        Binding("ctrl+c", "quit", "Quit", show=False),
    ]

    def __init__(self, make_screen: Callable[[], Screen[None]], *, theme: str | None = None) -> None:
        super().__init__()
        self._make_screen = make_screen
        self.main_screen: Screen[None] | None = None
        wanted = theme or os.environ.get("LLM_DOCTOR_THEME", "dark")
        self.theme = THEMES.get(wanted, THEMES["dark"])

    def get_default_screen(self) -> Screen[None]:
        self.main_screen = self._make_screen()
        return self.main_screen

    def action_toggle_theme(self) -> None:
        self.theme = THEMES["light"] if self.theme == THEMES["dark"] else THEMES["dark"]

    def action_help(self) -> None:
        from doctor.views.tui.modals import HelpScreen

        screen = self.screen
        if isinstance(screen, HelpScreen):
            screen.dismiss()
            return
        self.push_screen(HelpScreen(type(screen).__name__.replace("Screen", "").lower() or "screen",
                                    help_rows(self, screen)))


SKIPPED_ACTIONS = {"app.focus_next", "app.focus_previous", "screen.copy_text", "scroll_left", "scroll_right",
                   "page_left", "page_right", "scroll_home", "scroll_end", "help_quit"}


def help_rows(app: App[None], screen: Screen[None]) -> list[tuple[str, str]]:
    """(key, what) for the screen's own keys first, then the focused pane's, then the app's."""
    own: list[tuple[str, str]] = []
    pane: list[tuple[str, str]] = []
    seen: set[str] = set()
    for key, active in screen.active_bindings.items():
        binding = active.binding
        what = binding.description or binding.action
        if binding.action in SKIPPED_ACTIONS or what in seen or not active.enabled:
            continue
        seen.add(what)
        row = (binding.key_display or app.get_key_display(binding) or key, what)
        (own if active.node is screen or active.node is app else pane).append(row)
    pane = [(k, f"{w} (in the focused pane)") for k, w in pane]
    return [*own, ("tab", "next pane"), *pane, ("ctrl+q", "quit from anywhere")]


def run_report_app(report: Report, log_path: str | None = None,
                   redact_line: Callable[[str], str] | None = None, back: bool = False) -> bool:
    """The report screen for analyze and scan (blocks until the user quits). `redact_line` (--redact: the
    redactor that redacted `report`) is applied to every line the log pane shows. With `back` (a report
    opened from a list), Esc leaves too; returns True when it did (the caller shows the list again)."""
    from doctor.views.tui.report_screen import BACK, ReportScreen

    source = None
    if log_path is not None and is_plain_log(log_path):
        lines = report.facts.value("run.log_lines")
        known = lines if isinstance(lines, int) and not isinstance(lines, bool) else None
        source = LogSource.from_path(log_path, known, redact_line)
    app = DoctorApp(lambda: ReportScreen(report, source, back=back))
    try:
        app.run()
    finally:
        if source is not None:
            source.close()
    return bool(back and app.return_value == BACK)


def make_paste_app(make_report: Callable[[bytes], Report],
                   redact_line: Callable[[str], str] | None = None) -> DoctorApp:
    from doctor.views.tui.paste_screen import PasteScreen

    return DoctorApp(lambda: PasteScreen(make_report, redact_line))


def run_paste_app(make_report: Callable[[bytes], Report],
                  redact_line: Callable[[str], str] | None = None) -> Report | None:
    """The paste screen; returns the last report diagnosed (None if none was made)."""
    from doctor.views.tui.paste_screen import PasteScreen

    app = make_paste_app(make_report, redact_line)
    app.run()
    screen = app.main_screen
    return screen.report if isinstance(screen, PasteScreen) else None


def make_watch_app(events: Iterable[LiveEvent], *, on_stop: Callable[[], None] | None = None,
                   on_pause: Callable[[bool], None] | None = None, title: str = "watch",
                   redact: Callable[[Report], Report] | None = None) -> DoctorApp:
    return DoctorApp(lambda: WatchScreen(events, on_stop=on_stop, on_pause=on_pause, title=title, redact=redact))


def run_watch_app(events: Iterable[LiveEvent], *, on_stop: Callable[[], None] | None = None,
                  on_pause: Callable[[bool], None] | None = None, title: str = "watch",
                  redact: Callable[[Report], Report] | None = None) -> WatchOutcome:
    """The live watch screen; returns the final report and how the run ended. `redact` (--redact) is
    applied to the report the screen opens, and so to its exports."""
    app = make_watch_app(events, on_stop=on_stop, on_pause=on_pause, title=title, redact=redact)
    app.run()
    return watch_outcome(app)


def watch_outcome(app: DoctorApp) -> WatchOutcome:
    screen = app.main_screen
    if not isinstance(screen, WatchScreen):
        return WatchOutcome(None, None, True)
    outcome = screen.outcome
    if outcome.report is None:
        outcome.report = screen.state.final_report()
    if outcome.end_reason is None and screen.state.end is not None:
        outcome.end_reason = screen.state.end.reason
    return outcome


def replay_watch_app(path: str | Path, speed: float | None = None) -> WatchOutcome:
    """Replay a recording in the watch screen (paced by its timestamps when `speed` is given)."""
    from doctor.views.tui.replay import Replay

    replay = Replay(path, speed)
    return run_watch_app(replay, on_stop=replay.stop, on_pause=replay.pause, title="watch (replay)")
